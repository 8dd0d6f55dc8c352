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

from sweeper.results.schema import SCHEMA

# What `ResultWriter` writes, and nothing else: hidden and in-flight names start with _ or .
BATCH = re.compile(r"[^._].*-[0-9]{5}\.parquet")
PARTITION_DIR = re.compile(r"date=[0-9]{4}-[0-9]{2}-[0-9]{2}")


def partition(root: str | os.PathLike[str], date: str) -> Path:
    """The folder of a date's batches."""
    return Path(root) / f"date={date}"


def batch_name(run_id: str, batch: int) -> str:
    return f"{run_id}-{batch:05d}.parquet"


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
    read-only disk allows: readers skip it either way) and the error raised."""
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
