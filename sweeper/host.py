"""A rank's Ray actor: it starts the rank (worker.Rank) in a process of its own and relays
every call to it.

Why a process apart: torch.distributed's Python-heavy calls (batch_isend_irecv above all) run
9-16% slower in a Ray worker's process than in a plain one, with the calling thread alone on
its core and no thread waiting on another, while a plain process the actor starts runs them at
a plain process's speed (benchmarks/actor_cost.py; docs/PERFORMANCE.md). The rank's process
is killed with the actor (PR_SET_PDEATHSIG), so killing a hung actor frees its GPU as before;
and the actor ends when its rank's process dies, so the driver sees a dead actor either way.

The two keep out of each other's imports. The rank's process is a fresh interpreter
(`python -m sweeper.host`) with the actor's import path and environment, so no Ray is loaded
in it. The actor never opens what it relays: the rank's results travel pickled through it and
become objects again where Ray delivers them, so the actor imports no torch beside the rank's
own (a second or more of start-up and 0.2-0.4 GB per GPU).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sweeper.topology import RayFacts
from sweeper.wire import Point

if TYPE_CHECKING:
    from sweeper.topology import RankInfo, Versions
    from sweeper.wire import Copied, Prepared, RankTimings

T = TypeVar("T")

_PR_SET_PDEATHSIG = 1  # prctl(2)


def _die_with(parent: int) -> None:
    """SIGKILL for this process when its parent dies; at once if it already has."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _serve(fd: int, parent: int) -> None:
    """The rank's process (`python -m sweeper.host FD PARENT`): the rank, from the arguments
    its actor sends first, then each call the actor relays, until the actor goes."""
    _die_with(parent)
    conn = Connection(fd)
    args, facts = conn.recv()
    from sweeper.rank.worker import Rank

    try:
        rank = Rank(*args, facts=facts)
    except BaseException as exc:
        conn.send((False, exc))
        return
    conn.send((True, pickle.dumps(None)))
    while True:
        try:
            name, call_args = conn.recv()
        except EOFError:  # the actor is gone
            return
        reply: tuple[bool, bytes | BaseException]
        try:
            reply = (True, pickle.dumps(getattr(rank, name)(*call_args)))
        except BaseException as exc:
            reply = (False, exc)
        try:
            conn.send(reply)
        except Exception as unsent:  # an exception that does not pickle
            conn.send((False, RuntimeError(f"{type(unsent).__name__}: {unsent}")))


class Relayed(Generic[T]):
    """A rank's result as its process pickled it: the actor hands it on unopened, and Ray's
    unpickling of it where it is delivered (the driver) gives the result itself."""

    def __init__(self, pickled: bytes) -> None:
        self.pickled = pickled

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return pickle.loads, (self.pickled,)


class RankHost:
    """The actor: `args` are worker.Rank's, given to it with what Ray told this actor. Each
    method is Rank's, its result Relayed."""

    def __init__(self, *args: Any) -> None:
        ours, theirs = socket.socketpair()
        # A fresh interpreter, not multiprocessing's spawn, which would run Ray's worker
        # script again as the child's main module and so load Ray into the rank's process.
        self._process = subprocess.Popen(
            [sys.executable, "-m", "sweeper.host", str(theirs.fileno()), str(os.getpid())],
            pass_fds=(theirs.fileno(),),
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},  # the actor's imports
        )
        theirs.close()
        self._conn = Connection(ours.detach())
        self._conn.send((args, RayFacts.here()))
        self._reply()

    def _reply(self) -> Relayed[Any]:
        try:
            ok, value = self._conn.recv()
        except EOFError:  # the rank's process died (a crash inside NCCL, a kill): so does this
            os._exit(1)
        if not ok:
            raise value
        return Relayed(value)

    def _call(self, name: str, *args: Any) -> Relayed[Any]:
        self._conn.send((name, args))
        return self._reply()

    def info(self) -> Relayed[RankInfo]:
        return self._call("info")

    def versions(self) -> Relayed[Versions]:
        return self._call("versions")

    def listen(self) -> Relayed[int]:
        return self._call("listen")

    def join(self, rank: int, host: str, port: int, timeout_s: float) -> Relayed[None]:
        return self._call("join", rank, host, port, timeout_s)

    def open_group(
        self, group_id: str, ranks: tuple[int, ...], nodes: tuple[int, ...]
    ) -> Relayed[None]:
        return self._call("open_group", group_id, ranks, nodes)

    def close_group(self, group_id: str) -> Relayed[None]:
        return self._call("close_group", group_id)

    def leave(self) -> Relayed[None]:
        return self._call("leave")

    def budget(self) -> Relayed[int]:
        return self._call("budget")

    def prepare(self, point: Point) -> Relayed[Prepared]:
        return self._call("prepare", point)

    def execute(self) -> Relayed[RankTimings]:
        return self._call("execute")

    def copy_matrix(self, sizes: Sequence[int], iters: int, warmup: int) -> Relayed[list[Copied]]:
        return self._call("copy_matrix", sizes, iters, warmup)

    def release(self) -> Relayed[None]:
        return self._call("release")


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
