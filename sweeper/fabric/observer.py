"""sweeper's observing tuner plugin (`tuner_observer.c` beside this file). It is built with the
system's C compiler into a private directory and loaded by the rank before NCCL is, so NCCL's
own dlopen of the same path shares its state. Read through ctypes, it gives each communicator's
calls, numbered, each with the cost table NCCL handed the tuner (`wire.Predicted`). The plugin
leaves the table unchanged, so what NCCL runs is its least-time pair (`chosen`)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sweeper.wire import Predicted

SOURCE = Path(__file__).with_name("tuner_observer.c")
# nccl_tuner.h's indices (NCCL 2.22-2.28): algorithms and protocols of the cost table
ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
PROTOCOLS = ("LL", "LL128", "SIMPLE")
FUNCTIONS = (
    "Broadcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AllReduce",
    "SendRecv",
    "Send",
    "Recv",
    "AlltoAll",
    "Scatter",
    "Gather",
)
_MAX_CELLS = 64
IGNORED = -1.0  # NCCL_ALGO_PROTO_IGNORE: a pair NCCL will not run


class _Call(ctypes.Structure):
    """`struct sweeper_call` of tuner_observer.c."""

    _fields_ = (
        ("seq", ctypes.c_uint64),
        ("func", ctypes.c_int32),
        ("num_pipe_ops", ctypes.c_int32),
        ("reg_buff", ctypes.c_int32),
        ("num_algo", ctypes.c_int32),
        ("num_proto", ctypes.c_int32),
        ("pad", ctypes.c_int32),
        ("n_bytes", ctypes.c_uint64),
        ("cost", ctypes.c_float * _MAX_CELLS),
    )


class BuildFailed(RuntimeError):
    """The C compiler is missing or refused the source."""


def _private(path: Path, directory: bool) -> bool:
    """Whether `path` is this user's alone: no link, the kind asked, owned by this user,
    writable by no one else (a library loaded from a directory others can write in could
    be anyone's code)."""
    status = path.lstat()
    kind = stat.S_ISDIR(status.st_mode) if directory else stat.S_ISREG(status.st_mode)
    return kind and status.st_uid == os.getuid() and not status.st_mode & 0o022


def build(directory: Path) -> Path:
    """The plugin's shared object in `directory` (made 0700 where missing; BuildFailed where it,
    or a library in it, is not this user's alone), built once per source (its hash names it)
    and put in place whole, so ranks building at once agree."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    target = directory / f"libsweeper-tuner-observer-{digest}.so"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _private(directory, directory=True):
        raise BuildFailed(f"{directory} is not this user's alone: no tuner observer built there")
    if target.exists():
        if not _private(target, directory=False):
            raise BuildFailed(f"{target} is not this user's alone: not loaded")
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise BuildFailed("no C compiler (cc) to build sweeper's tuner observer")
    fd, partial = tempfile.mkstemp(dir=directory, prefix=".observer-", suffix=".so")
    os.close(fd)
    flags = ["-O2", "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden"]
    done = subprocess.run(
        [compiler, *flags, "-o", partial, str(SOURCE)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        os.unlink(partial)
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise BuildFailed(f"{compiler} could not build sweeper's tuner observer: {first}")
    os.replace(partial, target)
    return target


def costs(call: _Call) -> tuple[tuple[str, float], ...]:
    """The pairs NCCL considered, `ALGO/PROTO` with its predicted microseconds."""
    found = []
    for a in range(min(call.num_algo, len(ALGORITHMS))):
        for p in range(min(call.num_proto, len(PROTOCOLS))):
            us = float(call.cost[a * call.num_proto + p])
            if us >= 0 and us != IGNORED:
                found.append((f"{ALGORITHMS[a]}/{PROTOCOLS[p]}", us))
    return tuple(found)


def predicted(call: _Call) -> Predicted:
    name = FUNCTIONS[call.func] if 0 <= call.func < len(FUNCTIONS) else f"function {call.func}"
    return Predicted(function=name, size_bytes=int(call.n_bytes), costs_us=costs(call))


def chosen(call: Predicted) -> tuple[str, str, float] | None:
    """What NCCL runs: the pair of least predicted time (as topoGetAlgoInfo picks from the
    table a tuner left alone), its algorithm, protocol and time; None where it considered none."""
    if not call.costs_us:
        return None
    name, us = min(call.costs_us, key=lambda cost: cost[1])
    algorithm, protocol = name.split("/")
    return algorithm, protocol, us


class TunerObserver:
    """The loaded plugin: its communicators in the order NCCL opened them, and their calls."""

    def __init__(self, library: Path) -> None:
        self.path = library
        self.lib = ctypes.CDLL(str(library))
        self.lib.sweeper_observer_opened.restype = ctypes.c_int32
        self.lib.sweeper_observer_calls.restype = ctypes.c_uint64
        self.lib.sweeper_observer_calls.argtypes = (ctypes.c_int32,)
        self.lib.sweeper_observer_call.restype = ctypes.c_int32
        self.lib.sweeper_observer_call.argtypes = (
            ctypes.c_int32,
            ctypes.c_uint64,
            ctypes.POINTER(_Call),
        )

    def opened(self) -> int:
        """How many communicators NCCL has opened with the plugin (their ids are 0..n-1)."""
        return int(self.lib.sweeper_observer_opened())

    def calls(self, comm: int) -> int:
        """How many calls the communicator has made (0: closed)."""
        return int(self.lib.sweeper_observer_calls(comm))

    def since(self, marks: Sequence[tuple[int, int]]) -> tuple[Predicted, ...]:
        """Every call after each (communicator, calls so far) mark that is still kept."""
        found = []
        for comm, seen in marks:
            for seq in range(seen + 1, self.calls(comm) + 1):
                call = _Call()
                if self.lib.sweeper_observer_call(comm, seq, ctypes.byref(call)) == 0:
                    found.append(predicted(call))
        return tuple(found)
