"""The results dataset: one canonical Arrow schema, append-only atomic writes, and load().

Layout: `<root>/date=YYYY-MM-DD/<run_id>-<batch>.parquet`, hive-partitioned by the run's
start date (UTC). A batch is written to a hidden `_inflight-*` name in the same directory
and `os.replace`d into place, so a reader never sees half a file, and a crash loses at
most the batch in flight. Readers take only the folders and names sweeper writes (`files`):
anything else in the directory is ignored, and a corrupt file of its own is skipped with a
warning. Every writer and reader goes through `SCHEMA`, so columns added later read as
nulls in older files.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from sweeper.errors import CorruptResults

STATUSES = ("ok", "oom", "timeout", "error", "skipped")

SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("run_started_at", pa.timestamp("us", tz="UTC")),
        ("run_kind", pa.string()),
        ("cluster_name", pa.string()),
        ("sweeper_version", pa.string()),
        ("ray_version", pa.string()),
        ("torch_version", pa.string()),
        ("nccl_version", pa.string()),
        ("cuda_version", pa.string()),
        ("driver_version", pa.string()),
        ("gpu_model", pa.string()),
        ("nccl_env", pa.map_(pa.string(), pa.string())),
        ("backend", pa.string()),
        ("tier", pa.string()),
        ("variant", pa.string()),
        ("group_id", pa.string()),
        ("world_size", pa.int32()),
        ("n_nodes", pa.int32()),
        ("hosts", pa.list_(pa.string())),
        ("gpu_uuids", pa.list_(pa.string())),
        ("op", pa.string()),
        ("algorithm", pa.string()),
        ("dtype", pa.string()),
        ("in_place", pa.bool_()),
        ("size_bytes", pa.int64()),
        ("count_elems", pa.int64()),
        ("engine", pa.string()),  # torch (torch.distributed) or nccl (NCCL called directly)
        ("launch", pa.string()),  # graph (replays of a captured CUDA graph) or eager
        ("launch_note", pa.string()),  # why a point ran eagerly where a graph was asked for
        ("warmup_iters", pa.int32()),
        ("iters", pa.int32()),
        ("time_us", pa.float64()),
        ("time_us_min", pa.float64()),
        ("time_us_p50", pa.float64()),
        ("time_us_p99", pa.float64()),
        ("time_us_blocks", pa.list_(pa.float64())),  # each timed block's time; time_us: median
        ("algbw_gb_per_s", pa.float64()),
        ("busbw_gb_per_s", pa.float64()),
        ("busbw_factor", pa.float64()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("n_wrong", pa.int64()),
        ("max_size_bytes", pa.int64()),
        ("probe_s", pa.float64()),
        ("samples_us", pa.list_(pa.float32())),
        ("measured_at", pa.timestamp("us", tz="UTC")),
        # point-to-point rows (op p2p, copy): who sends to whom
        ("src_rank", pa.int32()),
        ("dst_rank", pa.int32()),
        ("src_gpu_uuid", pa.string()),
        ("dst_gpu_uuid", pa.string()),
        ("concurrent", pa.bool_()),  # measured while another group of its wave shared a node
        ("params", pa.map_(pa.string(), pa.string())),  # an experiment's knobs (MoE routing)
        # when: the schedule's wave, and the point's execution (its groups overlap in a wave)
        ("wave", pa.int32()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("ended_at", pa.timestamp("us", tz="UTC")),
    ]
)
# The columns every row of one run shares: what a run is, where and with which software.
RUN_COLUMNS = (
    "run_id",
    "run_started_at",
    "run_kind",
    "cluster_name",
    "backend",
    "gpu_model",
    "sweeper_version",
    "ray_version",
    "torch_version",
    "nccl_version",
    "cuda_version",
    "driver_version",
)
PARTITION = pa.schema([("date", pa.string())])
DATASET_SCHEMA = pa.unify_schemas([SCHEMA, PARTITION])
COLUMNS = tuple(SCHEMA.names)


def _file_name(run_id: str, batch: int) -> str:
    return f"{run_id}-{batch:05d}.parquet"


# What `ResultWriter` writes, and nothing else: hidden and in-flight names start with _ or .
_FILE = re.compile(r"[^._].*-[0-9]{5}\.parquet")
_PARTITION_DIR = re.compile(r"date=[0-9]{4}-[0-9]{2}-[0-9]{2}")


class ResultWriter:
    """Appends rows of one run; flushes a batch every `batch_rows` rows or `batch_s` seconds."""

    def __init__(
        self, root: Path, run_id: str, date: str, batch_rows: int = 256, batch_s: float = 30.0
    ) -> None:
        self.directory = Path(root) / f"date={date}"
        self.run_id = run_id
        self.batch_rows = batch_rows
        self.batch_s = batch_s
        self.rows: list[Mapping[str, Any]] = []
        self.batches = 0
        self.written = 0
        self._last_flush = time.monotonic()

    def append(self, row: Mapping[str, Any]) -> None:
        unknown = set(row) - set(COLUMNS)
        if unknown:
            raise KeyError(f"not in the schema: {sorted(unknown)}")
        self.rows.append(row)
        if len(self.rows) >= self.batch_rows or time.monotonic() - self._last_flush >= self.batch_s:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self.rows:
            return
        table = pa.Table.from_pylist(list(self.rows), schema=SCHEMA)
        self.directory.mkdir(parents=True, exist_ok=True)
        name = _file_name(self.run_id, self.batches)
        inflight = self.directory / f"_inflight-{name}"
        pq.write_table(table, inflight)
        os.replace(inflight, self.directory / name)
        self.batches += 1
        self.written += len(self.rows)
        self.rows = []


def files(root: str | os.PathLike[str]) -> list[str]:
    """The files sweeper wrote under `root`: its partition folders and its file names only,
    so a README, a stray folder or another tool's file beside them changes nothing. A file
    of sweeper's name whose Parquet footer cannot be read (a disk that filled, a copy cut
    short) is skipped with a CorruptResults warning that names it."""
    found = []
    for folder in sorted(Path(root).iterdir()):
        if not (folder.is_dir() and _PARTITION_DIR.fullmatch(folder.name)):
            continue
        for path in sorted(folder.iterdir()):
            if not (_FILE.fullmatch(path.name) and path.is_file()):
                continue
            try:
                pq.read_metadata(path)
            except (OSError, pa.ArrowException) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                warnings.warn(f"skipped {path}: {reason}", CorruptResults, stacklevel=3)
                continue
            found.append(str(path))
    return found


def dataset(root: str | os.PathLike[str]) -> ds.Dataset:
    """The results directory as a pyarrow dataset with the canonical schema (its `files`)."""
    return ds.dataset(
        files(root),
        format="parquet",
        schema=DATASET_SCHEMA,
        partitioning=ds.partitioning(PARTITION, flavor="hive"),
        partition_base_dir=str(root),
    )


def _pandas_type(arrow: pa.DataType) -> Any:
    if pa.types.is_integer(arrow):
        return pd.Int64Dtype() if arrow.bit_width == 64 else pd.Int32Dtype()
    if pa.types.is_boolean(arrow):
        return pd.BooleanDtype()
    if pa.types.is_string(arrow):
        return pd.StringDtype()
    return None


def _existing(root: str | os.PathLike[str]) -> ds.Dataset:
    if not Path(root).is_dir():
        raise FileNotFoundError(f"no results directory at {root}")
    return dataset(root)


def load(
    root: str | os.PathLike[str],
    run_id: str | Iterable[str] | None = None,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Every row under `root` (or one run's, or several runs') as a DataFrame with the
    canonical dtypes; `columns`: only these.

    Integers and booleans are pandas' nullable types (a failed point has no time, a CPU row
    no GPU), strings are `string`, timestamps UTC, lists and the NCCL map Python objects.
    """
    source = _existing(root)
    filter_ = None
    if isinstance(run_id, str):
        filter_ = ds.field("run_id") == run_id
    elif run_id is not None:
        filter_ = ds.field("run_id").isin(list(run_id))
    table = source.to_table(columns=list(columns) if columns else None, filter=filter_)
    frame: pd.DataFrame = table.to_pandas(types_mapper=_pandas_type)
    return frame


def runs(root: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per run under `root`, oldest first: the RUN_COLUMNS, its points, and how many
    of them failed (a skipped point could not run there, and did not fail). Grouped in
    Arrow, so only those columns of a large dataset are read."""
    table = _existing(root).to_table(columns=[*RUN_COLUMNS, "status"])
    done = pa.array(["ok", "skipped"])
    failed = pc.invert(pc.fill_null(pc.is_in(table["status"], value_set=done), False))
    table = table.append_column("failed", pc.cast(failed, pa.int64()))
    grouped = table.group_by(list(RUN_COLUMNS), use_threads=False).aggregate(
        [("status", "count", pc.CountOptions(mode="all")), ("failed", "sum")]
    )
    grouped = grouped.rename_columns([*RUN_COLUMNS, "points", "failed"])
    frame: pd.DataFrame = grouped.to_pandas(types_mapper=_pandas_type)
    ordered: pd.DataFrame = frame.sort_values(["run_started_at", "run_id"], ignore_index=True)
    return ordered
