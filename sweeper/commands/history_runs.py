"""`sweeper history`: the runs in a results directory, oldest first, with their status.

How a run ended (`ended`, from its run record): `complete`, `interrupted` (a signal or an
error stopped it), `incomplete` (its driver was killed: a record with no end) or `running`
(a live driver holds its journal). A partial run's status is how it ended; a complete run's:
`condemned` (a nightly scan that condemned a node, GPU or link), `regression` (a nightly run
whose summary found one), `failed` (some of its points failed), `unjudged` (a nightly run
with no summary), else `ok`.
"""

from __future__ import annotations

import shlex
import sys
import warnings
from collections.abc import Hashable, Mapping, Set
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from rich import box
from rich.console import Console
from rich.table import Table

from sweeper.analysis.nightly import json_value
from sweeper.errors import CorruptResults
from sweeper.results import records as run_records
from sweeper.results import summaries
from sweeper.results.files import NEW_RUN_ID, RUN_ID
from sweeper.results.journal import journaled, live_runs
from sweeper.results.load import RUN_ROWS, per_run, read
from sweeper.results.schema import DATASET_SCHEMA


def _ended(results: Path, run_id: str, live: Set[str]) -> str:
    kept = run_records.load(results, run_id)
    if kept is None:
        return "complete"  # rows another tool wrote, or a run older than run records
    if kept.ended is not None:
        return kept.ended
    return "running" if run_id in live else "incomplete"


def _unmeasured(results: Path, measured: Set[str]) -> pa.Table:
    """A row for each run with a record and no row (stopped, or still running, while its
    actors started): its start is in its id, its kind in its command, and it has no points."""
    found = []
    for run_id in run_records.run_ids(results):
        record = None if run_id in measured else run_records.load(results, run_id)
        if record is None or not NEW_RUN_ID.fullmatch(run_id):
            continue
        words = shlex.split(record.command)
        gpus = [gpu.name for node in record.nodes for gpu in node.gpus]
        backend = record.options.get("backend")
        found.append(
            {
                "run_id": run_id,
                "run_started_at": datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ").replace(
                    tzinfo=timezone.utc
                ),
                "run_kind": words[1] if words[1:2] in (["nightly"], ["scan"]) else "run",
                "cluster_name": record.options.get("cluster_name")
                or next((node.host for node in record.nodes), None),
                "backend": None if backend == "auto" else backend,
                "gpu_model": gpus[0] if gpus else None,
                "status": None,
            }
        )
    schema = pa.schema([DATASET_SCHEMA.field(column) for column in RUN_ROWS])
    return pa.Table.from_pylist(found, schema=schema)


def _named(table: pa.Table) -> pa.Table:
    """The rows of runs whose id can name their files; the others' runs skipped, one
    warning line each (a Parquet file anyone dropped in, its run_id a path)."""
    ids = set(table["run_id"].to_pylist())
    bad = sorted(str(r) for r in ids if r is None or not RUN_ID.fullmatch(str(r)))
    for run_id in bad:
        warnings.warn(
            f"skipped run {run_id!r}: not a run id (a file name of letters, digits, _ . + -)",
            CorruptResults,
            stacklevel=3,
        )
    if not bad:
        return table
    return table.filter(pc.is_in(table["run_id"], value_set=pa.array(ids - set(bad))))


def runs(results: Path, reports_dir: Path) -> pd.DataFrame:
    """`results.load.runs` with `regressions` (nightly runs, from their summaries in
    `reports_dir`), `ended` and `status`. A live run counts the rows its driver journaled,
    before any is Parquet: it shows as `running` from its first point; a run with a record
    and no row yet (stopped, or running, while its actors started) shows with 0 points."""
    kept = _named(read(results, RUN_ROWS))
    # after the Parquet: rows compacted in between are then counted in neither, not twice
    live = live_runs(results)
    pending = [journaled(results, run_id).select(RUN_ROWS).cast(kept.schema) for run_id in live]
    rows = pa.concat_tables([kept, *pending])
    frame = per_run(rows)
    unmeasured = _unmeasured(results, set(rows["run_id"].to_pylist())).cast(kept.schema)
    if unmeasured.num_rows:
        started = per_run(unmeasured)
        started[["points", "failed"]] = 0
        ordered = pd.concat([frame, started]).sort_values(["run_started_at", "run_id"])
        frame = ordered.reset_index(drop=True)
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
    """' (3)': how many regressions, condemned or failed points a status stands for."""
    counted = {"regression": "regressions", "condemned": "condemned", "failed": "failed"}
    column = counted.get(run["status"])
    return f" ({run[column]})" if column else ""


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The runs as JSON-ready objects."""
    return [{str(k): json_value(v) for k, v in run.items()} for run in frame.to_dict("records")]


def print_runs(frame: pd.DataFrame, out: TextIO | None = None) -> None:
    """A row a run, at the terminal's width and made to read at 80 columns: its start is
    said by its id where every id is sweeper's (20261202T061723Z-f43af4), how it ended by
    its status (a partial run's status is how it ended), its failed points there too."""
    console = Console(file=out or sys.stdout, highlight=False)
    table = Table(
        title=f"{len(frame)} run{'' if len(frame) == 1 else 's'}",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),
    )
    dated = not all(NEW_RUN_ID.fullmatch(str(run_id)) for run_id in frame["run_id"])
    table.add_column("run_id", no_wrap=True)
    if dated:
        table.add_column("started (UTC)", no_wrap=True)
    for column in ("kind", "cluster", "gpu"):
        table.add_column(column, overflow="fold")
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)  # the column a reader looks for: whole
    for run in frame.to_dict("records"):
        gpu = run["gpu_model"] if not pd.isna(run["gpu_model"]) else f"({run['backend']})"
        started = [f"{run['run_started_at']:%Y-%m-%d %H:%M}"] if dated else []
        table.add_row(
            run["run_id"],
            *started,
            run["run_kind"],
            run["cluster_name"],
            gpu,
            str(run["points"]),
            run["status"] + _count(run),
        )
    console.print(table)
