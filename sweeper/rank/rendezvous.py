"""Where a node's rank template (rank/template.py) and its actors (driver/actor.py) meet, and
how each proves itself to the other before anything crosses.

The socket is a file in a directory only this user can enter, checked through the descriptor
then used. The actor checks the listener (its uid, its interpreter and digest) before it sends
a byte, and the template serves only its own uid; `DIGEST.lock` makes one template the
socket's owner. docs/RELIABILITY.md, "The rank template's socket", gives each step and why."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import struct
import sys
import tempfile
from pathlib import Path

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Python's safe-path mode (3.11+): `-m` puts no current directory first on the import path
_SAFE_PATH = ("-P",) if sys.version_info >= (3, 11) else ()
# The directory sweeper's code is imported from: the working directory of the Pythons sweeper
# starts, where `-m` on 3.10 puts it first on their import path.
CODE_ROOT = str(Path(__file__).resolve().parents[2])


def python(module: str, *args: str) -> list[str]:
    """The command line of a Python of sweeper's own running `module`: nothing of the
    directory it starts in is imported (run it with cwd=CODE_ROOT, for Python 3.10)."""
    return [sys.executable, *_SAFE_PATH, "-m", module, *args]


class Unusable(Exception):
    """Why this actor cannot use a template safely: its directory is not this user's alone,
    or what listens there is not this user's template. The actor's rank starts fresh."""


def directory() -> int:
    """A descriptor of this user's directory for templates' sockets, made where missing."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        try:
            base = os.open(runtime, _OPEN_DIR)
        except OSError:
            pass
        else:
            if _owned_alone(os.fstat(base)):
                return _made(base, runtime, "sweeper")
            os.close(base)
    try:
        temporary = tempfile.gettempdir()
        base = os.open(temporary, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:  # gettempdir's too: none of its candidates is writable
        raise Unusable(f"no temporary directory for the rank template: {exc}") from exc
    return _made(base, temporary, f"sweeper-{os.getuid()}")


def _made(base: int, base_path: str, name: str) -> int:
    """`name` in `base` (closed here), made 0700 where missing, opened without following a
    link and checked through that descriptor: a directory of this user's that no one else
    may enter."""
    path = os.path.join(base_path, name)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=base)
        found = os.open(name, _OPEN_DIR, dir_fd=base)
    except OSError as exc:  # ELOOP: a link; ENOTDIR: a file; EACCES: not ours to make
        raise Unusable(f"cannot use {path} for the rank template: {exc.strerror}") from exc
    finally:
        os.close(base)
    status = os.fstat(found)
    if not _owned_alone(status):
        os.close(found)
        raise Unusable(
            f"{path} is not this user's alone (owner uid {status.st_uid}, mode "
            f"{stat.S_IMODE(status.st_mode):04o}; uid {os.getuid()} and 0700 expected)"
        )
    return found


def _owned_alone(status: os.stat_result) -> bool:
    return status.st_uid == os.getuid() and stat.S_IMODE(status.st_mode) == 0o700


def address(directory: int, digest: str) -> str:
    return f"/proc/self/fd/{directory}/{digest}"


def connect(directory: int, digest: str) -> socket.socket | None:
    """A connection to this user's template for `digest`, proven before anything is sent or
    read; None where none listens (no socket file, or a dead template's)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(address(directory, digest))
    except OSError:
        sock.close()
        return None
    try:
        _prove(sock, digest)
    except Unusable:
        sock.close()
        raise
    return sock


def peer(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end, as the kernel took them: a client's
    as it connected, a listener's as it called listen()."""
    pid, uid, _ = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    )
    return pid, uid


def _prove(sock: socket.socket, digest: str) -> None:
    """The listener is this user's, and a rank template of this interpreter for this digest:
    its uid as the kernel gives it, its command line and executable as /proc gives them."""
    pid, uid = peer(sock)
    if uid != os.getuid():
        raise Unusable(f"the rank template's socket is held by uid {uid}'s process {pid}")
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        executable = os.stat(f"/proc/{pid}/exe")
        ours = os.stat(sys.executable)
    except OSError as exc:
        raise Unusable(f"cannot tell what holds the rank template's socket (pid {pid})") from exc
    template = [arg.encode() for arg in python("sweeper.rank.template", digest)[1:]]
    same = (executable.st_dev, executable.st_ino) == (ours.st_dev, ours.st_ino)
    if argv[1 : 1 + len(template)] != template or not same:
        command = b" ".join(argv).decode(errors="replace")[:120]
        raise Unusable(f"the rank template's socket is held by process {pid}, {command!r}")


def claim(directory: int, digest: str) -> tuple[socket.socket, int] | None:
    """The template's socket, bound (its listen() is the caller's, in the process actors will
    check), and the lock that keeps it this process's while it lives; None where another
    template holds it, or has just left it (the lock taken is a file it has removed)."""
    lock = os.open(
        _lock(digest),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=directory,
    )
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        linked = os.stat(_lock(digest), dir_fd=directory, follow_symlinks=False)
    except OSError:
        os.close(lock)
        return None
    if os.fstat(lock).st_ino != linked.st_ino:
        os.close(lock)
        return None
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):  # a killed template's
            os.unlink(digest, dir_fd=directory)
        listener.bind(address(directory, digest))
    except OSError:
        listener.close()
        os.close(lock)
        return None
    return listener, lock


def release(directory: int, digest: str) -> None:
    """Removes the template's socket and lock files; only the lock's holder calls this, as
    it leaves (one killed leaves them, which the next one to claim them replaces)."""
    for name in (digest, _lock(digest)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=directory)


def _lock(digest: str) -> str:
    return f"{digest}.lock"
