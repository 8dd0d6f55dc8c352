"""`sweeper history`: the runs in a results directory, oldest first, with their status.

How a run ended (`ended`, from its run record): `complete`, `interrupted` (a signal or an
error stopped it), `incomplete` (its driver was killed: a record with no end) or `running`
(a live driver holds its journal). A partial run's status is how it ended; a complete run's:
`condemned` (a nightly scan that condemned a node, GPU or link), `regression` (a nightly run
whose summary found one), `failed` (some of its points failed), `unjudged` (a nightly run
with no summary), else `ok`.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping, Set
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
import pyarrow as pa
from rich.console import Console
from rich.table import Table

from sweeper.commands.nightly_run import json_value
from sweeper.results import summaries
from sweeper.results.journal import journaled, live_runs
from sweeper.results.load import RUN_ROWS, per_run, read
from sweeper.results.records import load as run_record


def _ended(results: Path, run_id: str, live: Set[str]) -> str:
    kept = run_record(results, run_id)
    if kept is None:
        return "complete"  # rows another tool wrote, or a run older than run records
    if kept.ended is not None:
        return kept.ended
    return "running" if run_id in live else "incomplete"


def runs(results: Path, reports_dir: Path) -> pd.DataFrame:
    """`results.load.runs` with `regressions` (nightly runs, from their summaries in
    `reports_dir`), `ended` and `status`. A live run counts the rows its driver journaled,
    before any is Parquet: it shows as `running` from its first point."""
    kept = read(results, RUN_ROWS)
    # after the Parquet: rows compacted in between are then counted in neither, not twice
    live = live_runs(results)
    pending = [journaled(results, run_id).select(RUN_ROWS).cast(kept.schema) for run_id in live]
    frame = per_run(pa.concat_tables([kept, *pending]))
    frame["ended"] = [_ended(results, run_id, live) for run_id in frame["run_id"]]
    nightly = frame["run_kind"].isin(["nightly"])
    found = [
        summaries.judged(reports_dir, run_id) if is_nightly else None
        for run_id, is_nightly in zip(frame["run_id"], nightly, strict=True)
    ]
    for count in ("regressions", "condemned"):
        frame[count] = pd.array([getattr(j, count) if j else None for j in found], dtype="Int64")
    status = pd.Series("ok", index=frame.index)
    status[frame["failed"] > 0] = "failed"
    status[nightly & frame["regressions"].isna()] = "unjudged"
    status[frame["regressions"].fillna(0) > 0] = "regression"
    status[frame["condemned"].fillna(0) > 0] = "condemned"
    partial = frame["ended"] != "complete"
    status[partial] = frame["ended"][partial]
    frame["status"] = status
    return frame


def _count(run: Mapping[Hashable, Any]) -> str:
    """' (3)': how many regressions or condemned a judged status stands for."""
    counted = {"regression": "regressions", "condemned": "condemned"}.get(run["status"])
    return f" ({run[counted]})" if counted else ""


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The runs as JSON-ready objects."""
    return [{str(k): json_value(v) for k, v in run.items()} for run in frame.to_dict("records")]


def print_runs(frame: pd.DataFrame, out: TextIO | None = None) -> None:
    console = Console(file=out or sys.stdout, highlight=False, width=160)
    table = Table(title=f"{len(frame)} runs")
    columns = (
        "run_id",
        "started (UTC)",
        "kind",
        "cluster",
        "gpu",
        "points",
        "failed",
        "ended",
        "status",
    )
    for column in columns:
        table.add_column(column, justify="right" if column in ("points", "failed") else "left")
    for run in frame.to_dict("records"):
        gpu = run["gpu_model"] if not pd.isna(run["gpu_model"]) else f"({run['backend']})"
        table.add_row(
            run["run_id"],
            f"{run['run_started_at']:%Y-%m-%d %H:%M}",
            run["run_kind"],
            run["cluster_name"],
            gpu,
            str(run["points"]),
            str(run["failed"]),
            run["ended"],
            run["status"] + _count(run),
        )
    console.print(table)
