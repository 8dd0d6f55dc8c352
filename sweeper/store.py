"""The results dataset: one canonical Arrow schema, durable append-only writes, and load().

Layout: `<root>/date=YYYY-MM-DD/<run_id>-<batch>.parquet`, hive-partitioned by the run's
start date (UTC). Every row reaches disk when it is handed to the writer: it is appended to
the run's journal (`<root>/_journal/<run_id>.arrows`, an Arrow IPC stream, fsync'd per
point) and compacted into a Parquet batch every 256 rows or 30 s. A batch is written to a
hidden `_inflight-*` name and `os.replace`d into place, then the journal is removed, so a
reader never sees half a file, and a killed driver loses at most the point in flight: its
journal is left, and `recover` turns it into the batch it would have become. Readers take
only the folders and names sweeper writes (`files`): journals, run records and anything else
are ignored, and a corrupt file of its own is skipped with a warning. Every writer and reader
goes through `SCHEMA`, so columns added later read as nulls in older files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from sweeper.errors import CorruptResults, ResultsUnwritable

STATUSES = ("ok", "oom", "timeout", "error", "skipped")
# What a row measured, from its descriptor (`Collective.kind`) or the copy-engine matrix:
# collective (an operation on a group, any algorithm), composite (one performed with
# others), p2p (a pair, one way or both), copy (a peer copy inside a node, or between host
# and device), experiment (an
# operation with parameters of its own, MoE). The report and analyses select rows by it.
Kind = Literal["collective", "composite", "p2p", "copy", "experiment"]
KINDS: tuple[Kind, ...] = ("collective", "composite", "p2p", "copy", "experiment")

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
        ("kind", pa.string()),  # KINDS; `load` infers it for rows written before it existed
        ("op", pa.string()),
        ("algorithm", pa.string()),
        ("dtype", pa.string()),
        ("in_place", pa.bool_()),
        ("size_bytes", pa.int64()),
        ("count_elems", pa.int64()),
        ("engine", pa.string()),  # torch (torch.distributed) or nccl (NCCL called directly)
        ("launch", pa.string()),  # graph (replays of a captured CUDA graph) or eager
        ("launch_note", pa.string()),  # why a point ran eagerly where a graph was asked for
        ("registered", pa.bool_()),  # buffers from ncclMemAlloc, registered (--register-buffers)
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
        ("busbw_pct_of_link", pa.float64()),  # busbw / the tier's link peak (NVML, sysfs) x 100
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
        # a row of one rank where a point gives one per rank (copies of a node's GPUs at once)
        ("rank", pa.int32()),
        ("params", pa.map_(pa.string(), pa.string())),  # an experiment's knobs (MoE routing)
        # when: the schedule's wave, and the point's execution (its groups overlap in a wave)
        ("wave", pa.int32()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("ended_at", pa.timestamp("us", tz="UTC")),
        # GPU telemetry (sweeper.telemetry), one value per rank in group rank order, read
        # outside the timed blocks: the GPU's state after the point's last block, and what
        # its error counters gained over the point. Null where NVML cannot read it.
        ("sm_clock_mhz", pa.list_(pa.int32())),
        ("mem_clock_mhz", pa.list_(pa.int32())),
        ("power_w", pa.list_(pa.float64())),
        ("power_limit_w", pa.list_(pa.float64())),
        ("temperature_c", pa.list_(pa.int32())),
        ("throttle_reasons", pa.list_(pa.list_(pa.string()))),
        ("ecc_corrected_delta", pa.list_(pa.int64())),
        ("ecc_uncorrected_delta", pa.list_(pa.int64())),
        ("nvlink_replay_delta", pa.list_(pa.int64())),
        ("nvlink_crc_delta", pa.list_(pa.int64())),
        ("nvlink_recovery_delta", pa.list_(pa.int64())),
        ("xid_codes", pa.list_(pa.list_(pa.int32()))),
        ("pcie_gen", pa.list_(pa.int32())),  # the PCIe link as trained after the point
        ("pcie_width", pa.list_(pa.int32())),
        # host<->device copies: algbw as a share of the slowest GPU's PCIe peak (NVML's
        # largest generation x width, one direction)
        ("pcie_pct_of_peak", pa.float64()),
        # the most the GPU and its slot allow (NVML's max generation and width), per rank:
        # against pcie_gen/pcie_width it shows a link trained at x8 of x16
        ("pcie_max_gen", pa.list_(pa.int32())),
        ("pcie_max_width", pa.list_(pa.int32())),
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


JOURNAL_DIR = "_journal"
_JOURNAL_SUFFIX = ".arrows"


def journal_path(root: str | os.PathLike[str], run_id: str) -> Path:
    """Where the rows of `run_id` that are not yet in a Parquet batch are journaled."""
    return Path(root) / JOURNAL_DIR / f"{run_id}{_JOURNAL_SUFFIX}"


def _write_batch(directory: Path, run_id: str, batch: int, table: pa.Table) -> None:
    """Batch `batch` of the run, atomically; a write that fails leaves no half file behind."""
    directory.mkdir(parents=True, exist_ok=True)
    name = _file_name(run_id, batch)
    inflight = directory / f"_inflight-{name}"
    try:
        pq.write_table(table, inflight)
        os.replace(inflight, directory / name)
    except BaseException:
        inflight.unlink(missing_ok=True)
        raise


def _fsync_directory(directory: Path) -> None:
    """A new name in `directory` survives a power cut once the directory itself is synced."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Journal:
    """One batch's rows on disk before they are Parquet: an Arrow IPC stream whose schema
    says which batch and partition it becomes, fsync'd per write. Its writer holds an
    exclusive lock on it from birth (it is made under a hidden name and renamed), so
    `recover` can tell a live run's journal from one a killed driver left."""

    def __init__(self, path: Path, date: str, batch: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        hidden = path.with_name(f".{path.name}.new")
        self.path = path
        # unbuffered: a write the disk refused is not tried again when the file is closed
        self.file: BinaryIO = open(hidden, "wb", buffering=0)  # noqa: SIM115
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX)
            schema = SCHEMA.with_metadata({"batch": str(batch), "date": date})
            self.stream = pa.ipc.new_stream(self.file, schema)
            os.replace(hidden, path)
            _fsync_directory(path.parent)
        except BaseException:
            self.file.close()
            hidden.unlink(missing_ok=True)
            raise

    def write(self, table: pa.Table) -> None:
        self.stream.write_table(table)
        os.fsync(self.file.fileno())

    def close(self, remove: bool) -> None:
        """Release it; with `remove` (its rows are in their Parquet batch now), unlink it
        first, so a recovery waiting on the lock finds it gone. A journal that cannot be
        removed (a read-only disk) is harmless: its batch exists, and `recover` drops it."""
        try:
            if remove:
                with contextlib.suppress(OSError):
                    self.path.unlink(missing_ok=True)
        finally:
            self.file.close()


@dataclass(frozen=True)
class _Batch:
    """The batch being filled: swapped whole, so a signal that stops the driver between two
    statements never leaves a count and its rows out of step."""

    index: int
    rows: tuple[Mapping[str, Any], ...] = ()
    written: int = 0  # rows of the run already in Parquet batches


class ResultWriter:
    """Appends rows of one run: each point's rows journaled as they come, and a Parquet batch
    every `batch_rows` rows or `batch_s` seconds. A run id that already has batches (a
    resumed run) continues after them, its leftover journal recovered first. Raises
    ResultsUnwritable when the disk refuses a write (full, read-only)."""

    def __init__(
        self, root: Path, run_id: str, date: str, batch_rows: int = 256, batch_s: float = 30.0
    ) -> None:
        self.root = Path(root)
        self.directory = self.root / f"date={date}"
        self.run_id = run_id
        self.date = date
        self.batch_rows = batch_rows
        self.batch_s = batch_s
        recover(self.root, run_id)
        self._batch = _Batch(_next_batch(self.directory, run_id))
        self._journal: _Journal | None = None
        self._last_flush = time.monotonic()

    @property
    def rows(self) -> tuple[Mapping[str, Any], ...]:
        """Rows journaled, not yet in a Parquet batch."""
        return self._batch.rows

    @property
    def written(self) -> int:
        """Rows this writer put in Parquet batches."""
        return self._batch.written

    def append(self, row: Mapping[str, Any]) -> None:
        self.extend([row])

    def extend(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Journal the rows of one point (one fsync), then keep them for the next batch."""
        for row in rows:
            unknown = set(row) - set(COLUMNS)
            if unknown:
                raise KeyError(f"not in the schema: {sorted(unknown)}")
        batch = self._batch
        # a new journal (the batch's first point, or after a failed write) holds the whole batch
        journaled = rows if self._journal is not None else (*batch.rows, *rows)
        try:
            if self._journal is None:
                self._journal = _Journal(
                    journal_path(self.root, self.run_id), self.date, batch.index
                )
            self._journal.write(pa.Table.from_pylist(list(journaled), schema=SCHEMA))
        except OSError as exc:
            self._release(remove=False)  # torn: it takes no more writes; `recover` reads it
            raise ResultsUnwritable.of(self.root, exc) from None
        self._batch = _Batch(batch.index, (*batch.rows, *rows), batch.written)
        if len(self.rows) >= self.batch_rows or time.monotonic() - self._last_flush >= self.batch_s:
            self.flush()

    def flush(self) -> None:
        """The journaled rows as the next Parquet batch, and the journal gone. Safe to call
        again after it was interrupted: the batch is rewritten with the same rows."""
        self._last_flush = time.monotonic()
        batch = self._batch
        if not batch.rows:
            return
        table = pa.Table.from_pylist(list(batch.rows), schema=SCHEMA)
        try:
            _write_batch(self.directory, self.run_id, batch.index, table)
        except OSError as exc:
            self._release(remove=False)  # its rows stay in it, for `recover`, unlocked
            raise ResultsUnwritable.of(self.root, exc) from None
        self._release(remove=True)
        self._batch = _Batch(batch.index + 1, (), batch.written + len(batch.rows))

    def _release(self, remove: bool) -> None:
        if self._journal is not None:
            self._journal.close(remove)
            self._journal = None


def _next_batch(directory: Path, run_id: str) -> int:
    """The batch after the run's last one in `directory` (0 for a new run)."""
    pattern = re.compile(re.escape(run_id) + r"-([0-9]{5})\.parquet")
    taken = [
        int(match.group(1))
        for path in (directory.iterdir() if directory.is_dir() else ())
        if (match := pattern.fullmatch(path.name))
    ]
    return max(taken, default=-1) + 1


def _read_journal(file: BinaryIO) -> tuple[dict[bytes, bytes], list[pa.RecordBatch]]:
    """A journal's metadata and every complete write in it: reading stops at the write that
    was in flight when its driver died."""
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(file.read()))
    except (OSError, pa.ArrowException):
        return {}, []  # killed before its first write reached the disk
    batches = []
    with contextlib.suppress(OSError, pa.ArrowException):  # a torn last write: the point in flight
        for batch in reader:
            batches.append(batch)
    return dict(reader.schema.metadata or {}), batches


def live_journals(root: str | os.PathLike[str]) -> set[str]:
    """Run ids whose journal a running driver holds."""
    live = set()
    for path in sorted((Path(root) / JOURNAL_DIR).glob(f"[!.]*{_JOURNAL_SUFFIX}")):
        try:
            with open(path, "rb") as file:
                fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            live.add(path.name.removesuffix(_JOURNAL_SUFFIX))
        except FileNotFoundError:
            continue  # compacted while we looked
    return live


def recover(root: str | os.PathLike[str], run_id: str) -> int:
    """Turn the journal a killed or stopped driver left for `run_id` into the Parquet batch
    it would have become, and remove it; returns how many rows that saved (0: no journal,
    its rows already in their batch, or a live driver still writing it)."""
    path = journal_path(root, run_id)
    try:
        file = open(path, "rb")  # noqa: SIM115 (closed below, after the lock)
    except FileNotFoundError:
        return 0
    with file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # its driver is alive: the rows are its to write
        if os.fstat(file.fileno()).st_nlink == 0:
            return 0  # its driver compacted it while we waited for the lock
        metadata, batches = _read_journal(file)
        rows = sum(int(batch.num_rows) for batch in batches)
        if rows:
            directory = Path(root) / f"date={metadata[b'date'].decode()}"
            index = int(metadata[b"batch"])
            if (directory / _file_name(run_id, index)).exists():
                rows = 0  # compacted already: its driver died before removing the journal
            else:
                table = pa.Table.from_batches(batches, schema=SCHEMA)
                try:
                    _write_batch(directory, run_id, index, table)
                except OSError as exc:
                    raise ResultsUnwritable.of(root, exc) from None
        path.unlink()
    return rows


def leftover_journals(root: str | os.PathLike[str]) -> list[str]:
    """Run ids with a journal that no running driver holds: killed (or stopped on a full disk)."""
    found = (Path(root) / JOURNAL_DIR).glob(f"[!.]*{_JOURNAL_SUFFIX}")
    names = sorted(path.name.removesuffix(_JOURNAL_SUFFIX) for path in found)
    live = live_journals(root)
    return [name for name in names if name not in live]


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
    wanted = list(columns) if columns else list(DATASET_SCHEMA.names)
    legacy = [c for c in _KIND_SOURCES if c not in wanted] if "kind" in wanted else []
    table = source.to_table(columns=[*wanted, *legacy], filter=filter_)
    if "kind" in wanted:
        table = table.set_column(table.schema.get_field_index("kind"), "kind", _kinds(table))
    frame: pd.DataFrame = table.select(wanted).to_pandas(types_mapper=_pandas_type)
    return frame


_KIND_SOURCES = ("op", "algorithm", "params")


def _kinds(table: pa.Table) -> pa.ChunkedArray:
    """The `kind` column, with rows written before it existed given the kind their other
    columns imply, by the conventions of that time: op p2p or copy; `params` set for an
    experiment; a `+` in a composite's algorithm (`reduce_scatter+all_gather`)."""
    op, algorithm = table["op"], table["algorithm"]
    implied = pc.if_else(
        pc.fill_null(pc.equal(op, "copy"), False),
        "copy",
        pc.if_else(
            pc.fill_null(pc.equal(op, "p2p"), False),
            "p2p",
            pc.if_else(
                pc.is_valid(table["params"]),
                "experiment",
                pc.if_else(
                    pc.fill_null(pc.match_substring(algorithm, "+"), False),
                    "composite",
                    "collective",
                ),
            ),
        ),
    )
    filled: pa.ChunkedArray = pc.coalesce(table["kind"], implied)
    return filled


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
