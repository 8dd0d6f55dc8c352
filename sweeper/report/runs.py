"""Which run a report is about: `latest` or a run id, looked up in a results directory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweeper import store
from sweeper.errors import BadInput

LATEST = "latest"


def run_ids(results: Path) -> list[str]:
    """The runs of a results directory, oldest first (by start time)."""
    if not Path(results).is_dir():
        raise BadInput(f"no results directory at {results}", hint="give it with --results DIR")
    table = store.dataset(results).to_table(columns=["run_id", "run_started_at"])
    if not table.num_rows:
        return []
    frame = table.to_pandas().drop_duplicates("run_id")
    return [str(r) for r in frame.sort_values(["run_started_at", "run_id"])["run_id"]]


def resolve(results: Path, run_id: str) -> str:
    """The run id that `run_id` names: itself when the directory has it, or the newest run
    for `latest`; BadInput otherwise."""
    known = run_ids(results)
    if run_id == LATEST:
        if not known:
            raise BadInput(f"no runs in {results}")
        return known[-1]
    if run_id not in known:
        recent = ", ".join(known[-3:]) or "none"
        raise BadInput(f"no run {run_id!r} in {results}", hint=f"latest runs there: {recent}")
    return run_id


def rows(results: Path, run_id: str) -> pd.DataFrame:
    """One run's rows, in the order they were measured, with rows of older schemas filled in
    (no variant column yet: the default variant)."""
    frame = store.load(results, run_id=run_id)
    frame["variant"] = frame["variant"].fillna("default")
    ordered: pd.DataFrame = frame.sort_values("measured_at", kind="stable").reset_index(drop=True)
    return ordered
