"""A rank's Ray actor: it gets its rank (worker.Rank) a process of its own, forked by the node's
template (rank/template.py) or else a fresh interpreter, and relays every call to it.

The actor and its rank's process die together and keep out of each other's imports. The
actor never opens what it relays, so it loads no torch; the rank's process loads no Ray.
docs/ARCHITECTURE.md, "Inside the rooms", says why a rank runs in a process apart."""

from __future__ import annotations

import os
import pickle
import socket
import stat
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

import ray

from sweeper.rank import rendezvous
from sweeper.rank.rendezvous import Unusable
from sweeper.rank.template import IDLE_S, Setting, digest, shared
from sweeper.wire import (
    Copied,
    Point,
    Prepared,
    RankCall,
    RankInfo,
    RankTimings,
    RayFacts,
    Versions,
)

T = TypeVar("T")


def ray_facts() -> RayFacts:
    """What Ray told this actor (in a Ray worker process), for its rank."""
    return RayFacts(
        gpu_ids=tuple(str(i) for i in ray.get_gpu_ids()),
        node_id=ray.get_runtime_context().get_node_id(),
        ip=ray.util.get_node_ip_address(),
    )


class Relayed(Generic[T]):
    """A rank's result as its process pickled it: the actor hands it on unopened, and Ray's
    unpickling of it where it is delivered (the driver) gives the result itself."""

    def __init__(self, pickled: bytes) -> None:
        self.pickled = pickled

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return pickle.loads, (self.pickled,)


def rank_process() -> tuple[Connection, subprocess.Popen[bytes] | None]:
    """A connection to this actor's own rank process, which has sent its pid: forked by the
    node's template (started here where there is none yet), else a fresh interpreter (then
    returned too, for the actor to hold). A template that cannot be used safely costs one
    line on this actor's stderr."""
    path = import_path(sys.path)
    # the actor's imports, and safe-path mode for any Python the rank starts in turn
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PYTHONSAFEPATH": "1"}
    setting = Setting(env=env, path=path, cwd=os.getcwd())
    raylet = int(os.environ.get("RAY_RAYLET_PID", os.getppid()))
    try:
        conn = _forked(setting, raylet)
    except Unusable as why:
        print(f"sweeper: {why}; this rank starts in a fresh interpreter", file=sys.stderr)
        conn = None
    if conn is not None:
        return conn, None
    return _fresh(env)


def import_path(entries: Sequence[str]) -> list[str]:
    """An import path less what another user could plant a module in: the current directory
    (an empty or relative entry), a directory anyone may write into (/tmp), or one that is
    missing (anyone who may write its parent could make it)."""
    kept = []
    for entry in entries:
        try:
            mode = os.stat(entry).st_mode
        except OSError:
            continue
        if os.path.isabs(entry) and not (stat.S_ISDIR(mode) and mode & stat.S_IWOTH):
            kept.append(entry)
    return kept


def _forked(setting: Setting, raylet: int) -> Connection | None:
    """The rank forked for this actor by its node's template; None where there is none."""
    name = digest(setting, raylet)
    directory = rendezvous.directory()
    try:
        for _ in range(2):  # once more where the template idled out as this connected
            sock = rendezvous.connect(directory, name)
            if sock is None and _started(name, raylet, setting):
                sock = rendezvous.connect(directory, name)
            if sock is None:
                return None
            conn = _handed(sock, setting)
            if conn is not None:
                return conn
        return None
    finally:
        os.close(directory)


def _started(name: str, raylet: int, setting: Setting) -> bool:
    """Starts the template; returns once it listens (or another one holds its socket)."""
    try:
        subprocess.run(
            rendezvous.python("sweeper.rank.template", name, str(raylet), str(IDLE_S)),
            check=False,
            cwd=rendezvous.CODE_ROOT,
            env=shared(setting.env),  # no actor's own: each rank takes its own after the fork
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return False
    return True


def _handed(sock: socket.socket, setting: Setting) -> Connection | None:
    """The rank forked for this actor by the template `sock` reaches (proven: rendezvous),
    given its stdout, stderr and setting; None where the template went before it forked."""
    try:
        socket.send_fds(sock, [b"\0"], [1, 2])
        conn = Connection(sock.detach())
        conn.send(setting)
        conn.recv()  # the rank's pid: it is forked
    except (OSError, EOFError):
        sock.close()
        return None
    return conn


def _fresh(env: dict[str, str]) -> tuple[Connection, subprocess.Popen[bytes]]:
    ours, theirs = socket.socketpair()
    # A fresh interpreter, not multiprocessing's spawn, which would run Ray's worker
    # script again as the child's main module and so load Ray into the rank's process.
    process = subprocess.Popen(
        rendezvous.python("sweeper.rank.process", str(theirs.fileno()), str(os.getpid())),
        pass_fds=(theirs.fileno(),),
        cwd=rendezvous.CODE_ROOT,
        env=env,
    )
    theirs.close()
    conn = Connection(ours.detach())
    try:
        conn.recv()  # its pid: it runs
    except EOFError:
        os._exit(1)
    return conn, process


class RankActor:
    """The actor: `args` are worker.Rank's, given to it with what Ray told this actor. Each
    method is Rank's, its result Relayed."""

    def __init__(self, *args: Any) -> None:
        self._conn, self._fresh = rank_process()
        self._conn.send((args, ray_facts()))
        self._reply()

    def _reply(self) -> Relayed[Any]:
        try:
            ok, value = self._conn.recv()
        except EOFError:  # the rank's process died (a crash inside NCCL, a kill): so does this
            os._exit(1)
        if not ok:
            raise value
        return Relayed(value)

    def _call(self, call: RankCall, *args: Any) -> Relayed[Any]:
        self._conn.send((call, args))
        return self._reply()

    def info(self) -> Relayed[RankInfo]:
        return self._call(RankCall.INFO)

    def versions(self) -> Relayed[Versions]:
        return self._call(RankCall.VERSIONS)

    def listen(self, host: str) -> Relayed[int]:
        return self._call(RankCall.LISTEN, host)

    def join(
        self, rank: int, world_size: int, host: str, port: int, timeout_s: float, bind: str
    ) -> Relayed[None]:
        return self._call(RankCall.JOIN, rank, world_size, host, port, timeout_s, bind)

    def open_group(
        self, group_id: str, ranks: tuple[int, ...], nodes: tuple[int, ...]
    ) -> Relayed[None]:
        return self._call(RankCall.OPEN_GROUP, group_id, ranks, nodes)

    def close_group(self, group_id: str) -> Relayed[None]:
        return self._call(RankCall.CLOSE_GROUP, group_id)

    def leave(self) -> Relayed[None]:
        return self._call(RankCall.LEAVE)

    def budget(self) -> Relayed[int]:
        return self._call(RankCall.BUDGET)

    def prepare(self, point: Point) -> Relayed[Prepared]:
        return self._call(RankCall.PREPARE, point)

    def execute(self) -> Relayed[RankTimings]:
        return self._call(RankCall.EXECUTE)

    def copy_matrix(self, sizes: Sequence[int], iters: int, warmup: int) -> Relayed[list[Copied]]:
        return self._call(RankCall.COPY_MATRIX, sizes, iters, warmup)

    def release(self) -> Relayed[None]:
        return self._call(RankCall.RELEASE)
