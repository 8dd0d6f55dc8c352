"""A rank's Ray actor: it starts the rank (worker.Rank) in a process of its own and relays
every call to it.

Why a process apart: torch.distributed's Python-heavy calls (batch_isend_irecv above all) run
9-16% slower in a Ray worker's process than in a plain one, with the calling thread alone on
its core and no thread waiting on another, while a plain process the actor starts runs them at
a plain process's speed (benchmarks/actor_cost.py; docs/PERFORMANCE.md). The rank's process
is killed with the actor (PR_SET_PDEATHSIG), so killing a hung actor frees its GPU as before;
and the actor ends when its rank's process dies, so the driver sees a dead actor either way.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from sweeper.plan import Point
from sweeper.topology import RankInfo, Versions
from sweeper.worker import Copied, Measured, Prepared, RayFacts

_PR_SET_PDEATHSIG = 1  # prctl(2)


def _die_with(parent: int) -> None:
    """SIGKILL for this process when its parent dies; at once if it already has."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _serve(conn: Connection, parent: int, args: tuple[Any, ...], facts: RayFacts) -> None:
    """The rank's process: the rank, then each call the actor relays, until the actor goes."""
    _die_with(parent)
    from sweeper.worker import Rank

    try:
        rank = Rank(*args, facts=facts)
    except BaseException as exc:
        conn.send((False, exc))
        return
    conn.send((True, None))
    while True:
        try:
            name, call_args = conn.recv()
        except EOFError:  # the actor is gone
            return
        try:
            reply = (True, getattr(rank, name)(*call_args))
        except BaseException as exc:
            reply = (False, exc)
        try:
            conn.send(reply)
        except Exception as unsent:  # a result or an exception that does not pickle
            conn.send((False, RuntimeError(f"{type(unsent).__name__}: {unsent}")))


class RankHost:
    """The actor: `args` are worker.Rank's, given to it with what Ray told this actor."""

    def __init__(self, *args: Any) -> None:
        context = mp.get_context("spawn")  # no fork of a process with Ray's threads in it
        self._conn, theirs = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(theirs, os.getpid(), args, RayFacts.here()), daemon=True
        )
        self._process.start()
        theirs.close()
        self._reply()

    def _reply(self) -> Any:
        try:
            ok, value = self._conn.recv()
        except EOFError:  # the rank's process died (a crash inside NCCL, a kill): so does this
            os._exit(1)
        if not ok:
            raise value
        return value

    def _call(self, name: str, *args: Any) -> Any:
        self._conn.send((name, args))
        return self._reply()

    def info(self) -> RankInfo:
        return self._call("info")  # type: ignore[no-any-return]

    def versions(self) -> Versions:
        return self._call("versions")  # type: ignore[no-any-return]

    def listen(self) -> int:
        return self._call("listen")  # type: ignore[no-any-return]

    def join(self, rank: int, host: str, port: int, timeout_s: float) -> None:
        self._call("join", rank, host, port, timeout_s)

    def open_group(self, group_id: str, ranks: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        self._call("open_group", group_id, ranks, nodes)

    def close_group(self, group_id: str) -> None:
        self._call("close_group", group_id)

    def leave(self) -> None:
        self._call("leave")

    def budget(self) -> int:
        return self._call("budget")  # type: ignore[no-any-return]

    def prepare(self, point: Point) -> Prepared:
        return self._call("prepare", point)  # type: ignore[no-any-return]

    def execute(self) -> Measured:
        return self._call("execute")  # type: ignore[no-any-return]

    def copy_matrix(self, sizes: Sequence[int], iters: int, warmup: int) -> list[Copied]:
        return self._call("copy_matrix", sizes, iters, warmup)  # type: ignore[no-any-return]

    def release(self) -> None:
        self._call("release")
