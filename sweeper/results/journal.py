"""A run's rows on disk before they are Parquet: `<root>/_journal/<run_id>.arrows`, an Arrow
IPC stream fsync'd per point. A killed driver loses at most the point in flight: its journal
is left, and `recover` turns it into the batch it would have become. A live driver holds an
exclusive lock on its journal, so a reader tells a live run's journal from a dead one's, and
on the run's lock file (`<run_id>.lock` beside it) from its writer's first row to its last,
between batches too, so a run has one live writer at every moment.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from sweeper.errors import BadInput, CorruptResults, ResultsUnwritable, SweeperWarning
from sweeper.results.files import (
    PARTITION_DIR,
    RUN_ID,
    NotAFile,
    batch_name,
    create,
    open_directory,
    open_regular,
    partition,
    run_name,
    write_batch,
)
from sweeper.results.schema import SCHEMA
from sweeper.results.upgrade import UNVERSIONED, complete, upgrade, version

JOURNAL_DIR = "_journal"
_SUFFIX = ".arrows"
_LOCK = ".lock"


def journal_path(root: str | os.PathLike[str], run_id: str) -> Path:
    """Where the rows of `run_id` that are not yet in a Parquet batch are journaled."""
    return Path(root) / JOURNAL_DIR / f"{run_name(run_id)}{_SUFFIX}"


class Journal:
    """One batch's rows on disk before they are Parquet: an Arrow IPC stream whose schema
    says which batch and partition it becomes, fsync'd per write. Its writer holds an
    exclusive lock on it from birth (it is made under a hidden name and renamed), so
    `recover` can tell a live run's journal from one a killed driver left."""

    def __init__(self, path: Path, date: str, batch: int) -> None:
        directory = open_directory(path.parent)
        hidden = f".{path.name}.new"
        self.path = path
        try:
            # a killed writer's (the run's lock is ours), or a link planted there: made anew
            with contextlib.suppress(FileNotFoundError):
                os.unlink(hidden, dir_fd=directory)
            # unbuffered: a write the disk refused is not tried again when the file is closed
            self.file: BinaryIO = os.fdopen(create(directory, hidden), "wb", buffering=0)
            try:
                fcntl.flock(self.file, fcntl.LOCK_EX)
                metadata = {**SCHEMA.metadata, b"batch": str(batch), b"date": date}
                self.stream = pa.ipc.new_stream(self.file, SCHEMA.with_metadata(metadata))
                if _held(path):  # another process's journal: a run has one live writer
                    raise _in_use(path.name.removesuffix(_SUFFIX))
                os.replace(hidden, path.name, src_dir_fd=directory, dst_dir_fd=directory)
                os.fsync(directory)  # the new name survives a power cut
            except BaseException:
                self.file.close()
                with contextlib.suppress(OSError):
                    os.unlink(hidden, dir_fd=directory)
                raise
        finally:
            os.close(directory)

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


# Where every message of an Arrow IPC stream starts: a reader that meets a damaged one looks
# for the next from there.
_MESSAGE = b"\xff\xff\xff\xff"


@dataclass(frozen=True)
class _Contents:
    """What a journal holds: its schema (None: killed before its first write reached the
    disk, or its start damaged), every whole write in it, and the offset of the first damage
    that whole writes follow (None where there is none: a torn last write is the point in
    flight when its driver died, not damage)."""

    schema: pa.Schema | None
    batches: list[pa.RecordBatch]
    damaged_at: int | None = None


def _read(file: BinaryIO) -> _Contents:
    """A journal's schema and every whole write in it. A write that cannot be read (a torn
    last write, or bytes overwritten in its middle) is stepped over to the next message that
    reads as one of the journal's writes, so the rows after damage are kept too."""
    data = file.read()
    source = pa.BufferReader(pa.py_buffer(data))
    try:
        schema = pa.ipc.read_schema(pa.ipc.read_message(source))
    except (EOFError, OSError, pa.ArrowException):
        # torn as its first write reached the disk, or damaged with writes after it
        return _Contents(None, [], 0 if data.find(_MESSAGE, 1) >= 0 else None)
    batches: list[pa.RecordBatch] = []
    at, damaged_at, failed = source.tell(), None, None
    while at < len(data):
        source.seek(at)
        try:
            batch = pa.ipc.read_record_batch(pa.ipc.read_message(source), schema)
            batch.validate(full=True)
        except EOFError:
            break  # the stream's end
        except (OSError, pa.ArrowException):
            failed = at if failed is None else failed
            at = data.find(_MESSAGE, at + 1)
            if at < 0:
                break
            continue
        if failed is not None and damaged_at is None:
            damaged_at = failed  # whole writes after it: damage, not a torn end
        batches.append(batch)
        at = source.tell()
    return _Contents(schema, batches, damaged_at)


class RunLock:
    """The run's one writer, for the writer's whole life: an exclusive `flock` on
    `_journal/<run_id>.lock`, which the kernel lets go when its process dies however it dies,
    and which a writer dropped without `release` lets go when it is collected. BadInput where
    another live driver holds it. Lock files dead writers left are removed as it is taken."""

    def __init__(self, root: str | os.PathLike[str], run_id: str) -> None:
        path = Path(root) / JOURNAL_DIR / f"{run_name(run_id)}{_LOCK}"
        os.close(open_directory(path.parent))
        while True:
            file = _lock_file(path)
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                file.close()
                raise _in_use(run_id) from None
            # a lock file its holder removed while we waited is not the run's lock: take anew
            if os.fstat(file.fileno()).st_ino == _inode(path):
                break
            file.close()
        self.release = weakref.finalize(self, _unlock, path, file)
        _clear_stale_locks(path.parent, path.name)


def _clear_stale_locks(directory: Path, own: str) -> None:
    """Remove the lock files of runs whose writers died (kill -9 leaves them): those no live
    writer holds, each removed under its lock as its holder removes it (`_unlock`), so a
    writer that opened it meanwhile takes a new one."""
    for path in directory.glob(f"*{_LOCK}"):
        if path.name == own or not RUN_ID.fullmatch(path.name.removesuffix(_LOCK)):
            continue
        try:
            with open_regular(path) as file:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(file.fileno()).st_ino == _inode(path):
                    path.unlink()
        except OSError:  # a live writer's (held), gone meanwhile, or not a file: left
            continue


def _lock_file(path: Path) -> BinaryIO:
    """The run's lock file, made where missing: never a link followed, nor a FIFO waited on
    (BadInput: something not sweeper's has its name)."""
    flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    planted = BadInput(f"{path} is not a regular file: not sweeper's lock, remove it")
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise planted from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise planted
    return os.fdopen(fd, "rb")


def _unlock(path: Path, file: BinaryIO) -> None:
    """Removed while held, so a writer that opened it meanwhile takes a new one."""
    try:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    finally:
        file.close()


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _held(path: Path) -> bool:
    """Whether a running driver (this process's included) holds the journal at `path`."""
    try:
        with open_regular(path) as file:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except (FileNotFoundError, NotAFile):
        return False  # none, compacted while we looked, or not sweeper's
    return False


def _in_use(run_id: str) -> BadInput:
    return BadInput(
        f"run {run_id} is being written by a live driver",
        hint="wait for it to end, or stop it first",
    )


def journaled(root: str | os.PathLike[str], run_id: str) -> pa.Table:
    """The rows in the journal of `run_id` as today's (a live driver's: read, not taken);
    none where it has no journal, or a newer sweeper's (with a warning)."""
    path = journal_path(root, run_id)
    try:
        with open_regular(path) as file:
            schema, batches = (found := _read(file)).schema, found.batches
        since = version(schema, path) if schema is not None else UNVERSIONED
    except (FileNotFoundError, NotAFile):
        schema = None  # compacted since its driver was seen, or not sweeper's
    except BadInput as exc:  # a newer sweeper's live run: its rows are not this one's to read
        warnings.warn(f"skipped {exc}", CorruptResults, stacklevel=2)
        schema = None
    if schema is None:
        return SCHEMA.empty_table()
    return upgrade(complete(pa.Table.from_batches(batches, schema=schema)), since)


def _journals(root: str | os.PathLike[str]) -> dict[str, Path]:
    """The journals under `root`, by run id: names that are not a run id's are not sweeper's."""
    found = (Path(root) / JOURNAL_DIR).glob(f"*{_SUFFIX}")
    named = {path.name.removesuffix(_SUFFIX): path for path in found}
    return {run_id: named[run_id] for run_id in sorted(named) if RUN_ID.fullmatch(run_id)}


def live_runs(root: str | os.PathLike[str]) -> set[str]:
    """Run ids a running driver is writing: it holds their lock (or, written by a driver
    from before run locks, their journal)."""
    locks = (Path(root) / JOURNAL_DIR).glob(f"*{_LOCK}")
    named = {path.name.removesuffix(_LOCK): path for path in locks}
    held = {run_id for run_id, path in named.items() if RUN_ID.fullmatch(run_id) and _held(path)}
    return held | {run_id for run_id, path in _journals(root).items() if _held(path)}


def refuse_live(root: str | os.PathLike[str], run_id: str) -> None:
    """BadInput where a live driver is writing `run_id`: a run has one writer."""
    lock = Path(root) / JOURNAL_DIR / f"{run_name(run_id)}{_LOCK}"
    if _held(lock) or _held(journal_path(root, run_id)):
        raise _in_use(run_id)


def recover(root: str | os.PathLike[str], run_id: str) -> int:
    """Turn the journal a killed or stopped driver left for `run_id` into the Parquet batch
    it would have become, and remove it (a damaged one: set aside, with a warning); returns
    how many rows that saved (0: no journal, its rows already in their batch, or a live
    driver still writing it)."""
    path = journal_path(root, run_id)
    try:
        file = open_regular(path)
    except FileNotFoundError:
        return 0
    except NotAFile as exc:  # a FIFO there would hang every reader
        warnings.warn(f"skipped {path}: {exc}", CorruptResults, stacklevel=2)
        return 0
    with file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # its driver is alive: the rows are its to write
        if os.fstat(file.fileno()).st_nlink == 0:
            return 0  # its driver compacted it while we waited for the lock
        found = _read(file)
        schema, batches = found.schema, found.batches
        rows = sum(int(batch.num_rows) for batch in batches)
        metadata = (schema.metadata if schema else None) or {}
        date, number = (metadata.get(k, b"").decode(errors="replace") for k in (b"date", b"batch"))
        try:
            since = version(schema, path) if schema is not None else UNVERSIONED
        except BadInput as exc:  # a newer sweeper's: recovered here, it would lose what it says
            warnings.warn(f"skipped {exc}; it is kept", CorruptResults, stacklevel=2)
            return 0
        if schema is not None and rows:
            directory = partition(root, date)
            if not (PARTITION_DIR.fullmatch(directory.name) and number.isdigit()):
                # not a journal sweeper wrote: its partition would be a path of its choosing
                reason = "not sweeper's journal"
                warnings.warn(f"skipped {path}: {reason}", CorruptResults, stacklevel=2)
                return 0
            index = int(number)
            if (directory / batch_name(run_id, index)).exists():
                rows = 0  # compacted already: its driver died before removing the journal
            else:
                table = complete(pa.Table.from_batches(batches, schema=schema))
                try:
                    write_batch(directory, run_id, index, upgrade(table, since))
                except OSError as exc:
                    raise ResultsUnwritable.of(root, exc) from None
        if found.damaged_at is None:
            path.unlink()
        else:
            _set_aside(path, found.damaged_at, rows)
    return rows


def _set_aside(path: Path, damaged_at: int, rows: int) -> None:
    """Keep a damaged journal, whose whole writes are in their batch now, where no reader
    recovers it again (`*.arrows` only) and whoever looks into the damage finds it."""
    aside = path.with_name(f"{path.name}.damaged-{secrets.token_hex(4)}")
    os.rename(path, aside)
    warnings.warn(
        f"{path} is damaged at byte {damaged_at}: {rows} whole rows before and after the "
        f"damage are recovered, the write there is lost; the journal is kept as {aside.name}",
        CorruptResults,
        stacklevel=3,
    )


def leftover_journals(root: str | os.PathLike[str]) -> list[str]:
    """Run ids with a journal that no running driver holds: killed (or stopped on a full disk)."""
    return [run_id for run_id, path in _journals(root).items() if not _held(path)]


def recover_all(root: Path) -> None:
    """The rows that killed drivers left in their journals become Parquet first (as a
    database recovers its log when it is opened), so a killed run's points count; a disk
    that refuses leaves them in their journal, with a warning."""
    for run_id in leftover_journals(root):
        try:
            recover(root, run_id)
        except ResultsUnwritable as exc:
            warnings.warn(
                f"{exc}: run {run_id}'s last rows stay in its journal", SweeperWarning, stacklevel=3
            )
