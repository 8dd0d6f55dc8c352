"""Where sweeper's files live under a results directory, and the one way it writes and opens them.

Layout: `<root>/date=YYYY-MM-DD/<run_id>-<batch>.parquet`, hive-partitioned by the run's start
date (UTC). `atomic_write` makes every file new under a hidden `_inflight-` name and renames it
into place, so a reader never sees half a file and no planted link redirects a write. A file
read there is opened without waiting or following a link, and read only where it is a regular
file (`open_regular`). docs/RELIABILITY.md, "Files sweeper writes and reads", gives each step."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import secrets
import shutil
import stat
import time
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from sweeper.errors import BadInput, SweeperWarning
from sweeper.results.schema import SCHEMA

# What `ResultWriter` writes, and nothing else: hidden and in-flight names start with _ or .
BATCH = re.compile(r"[^._].*-[0-9]{5}\.parquet")
PARTITION_DIR = re.compile(r"date=[0-9]{4}-[0-9]{2}-[0-9]{2}")
# The ids sweeper makes: the run's start (UTC, to the second) and 6 random hex digits.
NEW_RUN_ID = re.compile(r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}")
# Any run id a file is named by (older runs' and other tools' included): one file name, no
# path, not hidden from readers (`_`, `.`), within every file system's name limit.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
# The most sweeper reads of a JSON file of its own (a run record, a scan's or a nightly
# summary): a run record of 8,192 nodes of 8 GPUs is about 40 MiB.
JSON_LIMIT_BYTES = 64 * 2**20
# Room for a run's first batches, its record and a report; less is a disk about to fill.
MIN_FREE_BYTES = 16 * 2**20


class NotAFile(OSError):
    """What sweeper would read in a results or reports directory is not a regular file it
    wrote: a link, a FIFO, a device, a folder, or more bytes than such a file holds."""


def new_run_id(now: datetime) -> str:
    """A new run's id (`NEW_RUN_ID`): its start, `now` in UTC, and 6 random hex digits."""
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


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


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _judge(path: Path, directory: os.stat_result) -> None:
    """BadInput where another user owns `path` and every user may write in it without the
    sticky bit: anyone may rename its entries (a subdirectory sweeper enters among them), so
    where its files land would be theirs to say. Where it is ours (or root's), a warning
    (once a directory): no link is followed there, but anyone may remove or replace
    sweeper's files in it."""
    shared = directory.st_mode & stat.S_IWOTH and not directory.st_mode & stat.S_ISVTX
    if not shared:
        return
    if not _trusted(directory.st_uid):
        raise BadInput(
            f"{path} is owned by uid {directory.st_uid} and any user may write in it "
            "(no sticky bit): sweeper writes nothing there",
            hint=f"chmod +t {path}, or use a directory of your own",
        )
    _warn_shared(path)


@functools.cache  # once a directory, however many files are written there
def _warn_shared(path: Path) -> None:
    warnings.warn(
        f"{path} may be written by any user (no sticky bit): they may remove or replace "
        f"sweeper's files there (chmod +t {path})",
        SweeperWarning,
        stacklevel=5,
    )


def _open_directory(path: Path) -> int:
    """A descriptor of the directory `path`, following a link there only where it is ours
    (or root's), as Linux's fs.protected_symlinks follows one in a sticky directory; BadInput
    for another user's."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    try:
        return os.open(path, flags | os.O_NOFOLLOW)
    except OSError as exc:
        link = os.lstat(path)
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not stat.S_ISLNK(link.st_mode):
            raise
        if not _trusted(link.st_uid):
            raise BadInput(
                f"{path} is a link owned by uid {link.st_uid}: sweeper writes through no "
                "other user's link"
            ) from None
    return os.open(path, flags)


def _checked(path: Path) -> int:
    fd = _open_directory(path)
    try:
        _judge(path, os.fstat(fd))
        _judge(path.parent, os.stat(path.parent))  # where `path` itself may be swapped
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_directory(path: Path) -> None:
    """BadInput, before anything is written, where sweeper must not write in the existing
    directory `path` (`open_directory`); a warning where others may remove its files."""
    os.close(_checked(path))


def require_directory(path: Path, named: str) -> None:
    """BadInput, before anything is written, where directory `path` cannot be made or written:
    it, or the nearest of its parents that exists, is a file or is not writable (a read-only
    file system; permissions, except for root), a name in it is longer than its file system
    takes, that file system has less than MIN_FREE_BYTES free, a link on the way leads
    nowhere (dangling, or a loop), or sweeper must not write there (`check_directory`:
    another user's link or shared directory). `named` (the option and its value) starts the
    message."""
    # os.path.exists: False for a name too long to look up, where Path.exists raises
    chain = (path, *path.parents)
    found = next((i for i, p in enumerate(chain) if os.path.exists(p)), None)
    if found is None:
        return
    existing = chain[found]
    if found and os.path.islink(chain[found - 1]):  # it is there, and leads nowhere
        raise BadInput(f"{named}: {chain[found - 1]} is a link to nothing (dangling, or a loop)")
    if not existing.is_dir():
        raise BadInput(f"{named}: {existing} is not a directory")
    longest = os.pathconf(existing, "PC_NAME_MAX")
    too_long = next((part for part in path.parts if len(os.fsencode(part)) > longest), None)
    if too_long is not None:
        raise BadInput(f"{named}: a name over {longest} bytes ({too_long[:16]}...)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"{named}: {existing} is not writable")
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise BadInput(f"{named}: only {free // 1024} KiB free on {existing}'s file system")
    try:
        check_directory(existing)
    except BadInput as exc:
        raise BadInput(f"{named}: {exc}", hint=exc.hint) from None


def open_directory(path: Path) -> int:
    """A descriptor of directory `path` (made, with its parents, where missing) to make and
    rename files through (`dir_fd=`): they are then made in that directory, whatever is
    renamed into its path meanwhile. BadInput where `path` is a link another user owns, or
    it or the directory it is in is another user's and any user may write there without the
    sticky bit (`_judge`), or where the directory it is made in is."""
    existing = next((p for p in (path, *path.parents) if os.path.lexists(p)), path)
    if existing != path:  # the folders made in it are as safe as it is
        check_directory(existing)
    path.mkdir(parents=True, exist_ok=True)
    return _checked(path)


def create(directory: int, name: str) -> int:
    """A new file `name` in the directory open at `directory`, for writing: made by this
    call (FileExistsError where anything, a link included, has the name)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(name, flags, 0o666, dir_fd=directory)


_INFLIGHT = "_inflight-"
# How old an unlocked in-flight file must be to be a killed writer's: a live one locks its
# file as soon as it has made it, so any age is safe; a minute leaves room for a slow disk.
_INFLIGHT_STALE_S = 60.0
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def _inflight(name: str) -> str:
    """A hidden name of its own for a file being written as `name`: readers skip `_`, and
    its end is no file type (node_exporter reads every `*.prom`)."""
    token = secrets.token_hex(8)
    hidden = f"{_INFLIGHT}{name}.{token}"
    return hidden if len(os.fsencode(hidden)) <= 255 else f"{_INFLIGHT}{token}"


def _clear_inflight(directory: int) -> None:
    """Remove the in-flight files that writers killed mid-write (kill -9, a power cut) left in
    the directory open at `directory`: those no live writer locks, made over a minute ago (a
    writer locks its own as soon as it has made it). Never a link or anything not a file."""
    now = time.time()
    with os.scandir(directory) as entries:
        names = [e.name for e in entries if e.name.startswith(_INFLIGHT)]
    for name in names:
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=directory)
        except OSError:
            continue  # gone meanwhile, or a link planted under the name
        try:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode) or now - found.st_mtime < _INFLIGHT_STALE_S:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.stat(name, dir_fd=directory, follow_symlinks=False).st_ino == found.st_ino:
                os.unlink(name, dir_fd=directory)
        except OSError:
            continue  # a live writer's (locked), or gone meanwhile
        finally:
            os.close(fd)


def atomic_write(target: Path, write: Callable[[BinaryIO], object]) -> Path:
    """`write(file)` into a new hidden file beside `target`, renamed to `target` once written
    whole. Whatever fails (a full disk, a signal), the hidden file is removed (as far as a
    read-only disk allows: readers skip it either way) and the error raised; one a killed
    writer left is removed by the next write there (`_clear_inflight`). A `target` that
    is not a regular file, or a directory sweeper must not write in (`open_directory`), is
    BadInput, nothing written. A link at `target` is replaced, never written through."""
    require_file(target, str(target))
    directory = open_directory(target.parent)
    try:
        _clear_inflight(directory)
        hidden = _inflight(target.name)
        try:
            with os.fdopen(create(directory, hidden), "wb") as file:
                fcntl.flock(file, fcntl.LOCK_EX)  # alive: not a killed writer's leftover
                write(file)
            os.replace(hidden, target.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(hidden, dir_fd=directory)
            raise
    finally:
        os.close(directory)
    return target


def _regular(path: Path, access: int) -> int:
    """A descriptor of `path` opened with `access`, where it is a regular file: opened without
    waiting (a FIFO opens at once) and without following a link, then checked.
    FileNotFoundError where there is none; NotAFile where it is anything else."""
    try:
        fd = os.open(path, access | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAFile("a symbolic link, not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotAFile("not a regular file")
    return fd


def open_regular(path: Path) -> BinaryIO:
    """`path` open for reading, where it is a regular file (`_regular`)."""
    return os.fdopen(_regular(path, os.O_RDONLY), "rb")


def append_bytes(path: Path, data: bytes) -> None:
    """`data` at the end of the regular file at `path` (`_regular`), fsync'd."""
    fd = _regular(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_bounded(path: Path, limit: int = JSON_LIMIT_BYTES) -> bytes:
    """The bytes of the regular file at `path` (`open_regular`); NotAFile where it holds
    more than `limit`, read no further than a byte past it."""
    too_large = NotAFile(f"larger than {limit // 2**20} MiB, more than sweeper writes there")
    with open_regular(path) as file:
        if os.fstat(file.fileno()).st_size > limit:
            raise too_large  # refused unread
        data = file.read(limit + 1)  # grown since: a byte past the bound
    if len(data) > limit:
        raise too_large
    return data


def write_text(target: Path, text: str) -> Path:
    return atomic_write(target, lambda file: file.write(text.encode()))


def write_batch(directory: Path, run_id: str, batch: int, table: pa.Table) -> None:
    """Batch `batch` of the run, its schema version in the file's metadata."""
    rows = table.replace_schema_metadata(SCHEMA.metadata)
    atomic_write(directory / batch_name(run_id, batch), lambda file: pq.write_table(rows, file))
