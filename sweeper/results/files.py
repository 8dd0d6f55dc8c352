"""Where sweeper's files live under a results directory, and the one way it writes them.

Layout: `<root>/date=YYYY-MM-DD/<run_id>-<batch>.parquet`, hive-partitioned by the run's
start date (UTC). Every file is written by `atomic_write`: to a hidden `_inflight-` name
beside it (readers skip `_` and `.` names), then renamed into place, so a reader never sees
half a file, and a write that fails leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sweeper.errors import BadInput
from sweeper.results.schema import SCHEMA

# What `ResultWriter` writes, and nothing else: hidden and in-flight names start with _ or .
BATCH = re.compile(r"[^._].*-[0-9]{5}\.parquet")
PARTITION_DIR = re.compile(r"date=[0-9]{4}-[0-9]{2}-[0-9]{2}")
# The ids sweeper makes: the run's start (UTC, to the second) and 6 random hex digits.
NEW_RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}")
# Any run id a file is named by (older runs' and other tools' included): one file name, no
# path, not hidden from readers (`_`, `.`), within every file system's name limit.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")


def run_name(run_id: str) -> str:
    """`run_id`, where it names a file; BadInput where it would be a path (from the command
    line, or from the rows of a results directory anyone can drop a file in)."""
    if not RUN_ID.fullmatch(run_id):
        raise BadInput(f"{run_id!r} is not a run id: a file name of letters, digits, _ . + -")
    return run_id


def require_file(path: Path, named: str) -> None:
    """BadInput where `path` is there and is not a regular file (a device, a FIFO, a folder):
    sweeper replaces files, never other nodes. `named` (the option and its value) starts the
    message."""
    try:
        is_file = path.is_file() or not os.path.lexists(path)
    except OSError as exc:  # a name too long, a component that is a file
        raise BadInput(f"{named}: {exc.strerror or exc}") from None
    if not is_file:
        raise BadInput(f"{named}: {path} is not a regular file")


def partition(root: str | os.PathLike[str], date: str) -> Path:
    """The folder of a date's batches."""
    return Path(root) / f"date={date}"


def batch_name(run_id: str, batch: int) -> str:
    return f"{run_name(run_id)}-{batch:05d}.parquet"


def next_batch(directory: Path, run_id: str) -> int:
    """The batch after the run's last one in `directory` (0 for a new run)."""
    pattern = re.compile(re.escape(run_id) + r"-([0-9]{5})\.parquet")
    taken = [
        int(match.group(1))
        for path in (directory.iterdir() if directory.is_dir() else ())
        if (match := pattern.fullmatch(path.name))
    ]
    return max(taken, default=-1) + 1


def atomic_write(target: Path, write: Callable[[Path], object]) -> Path:
    """`write(path)` to a hidden name beside `target`, renamed to `target` once written
    whole. Whatever fails (a full disk, a signal), the hidden file is removed (as far as a
    read-only disk allows: readers skip it either way) and the error raised. A `target` that
    is not a regular file is BadInput, nothing written."""
    require_file(target, str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    inflight = target.with_name(f"_inflight-{target.name}")
    try:
        write(inflight)
        os.replace(inflight, target)
    except BaseException:
        with contextlib.suppress(OSError):
            inflight.unlink(missing_ok=True)
        raise
    return target


def write_text(target: Path, text: str) -> Path:
    return atomic_write(target, lambda path: path.write_text(text, encoding="utf-8"))


def write_batch(directory: Path, run_id: str, batch: int, table: pa.Table) -> None:
    """Batch `batch` of the run, its schema version in the file's metadata."""
    rows = table.replace_schema_metadata(SCHEMA.metadata)
    atomic_write(directory / batch_name(run_id, batch), lambda path: pq.write_table(rows, path))


def fsync_directory(directory: Path) -> None:
    """A new name in `directory` survives a power cut once the directory itself is synced."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
