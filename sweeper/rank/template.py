"""A node's rank-process template (`python -m sweeper.rank.template DIGEST RAYLET IDLE_S`): it
imports the rank's code (torch above all) once and forks one rank process per actor that asks,
so a rank starts in hundredths of a CPU-second instead of a fresh interpreter's seconds.

The first actor of a node and setting starts it. A forked rank takes its actor's environment,
import path, directory and output; the template never touches CUDA. A rank dies with its actor
(pidfd) and with the template (PR_SET_PDEATHSIG); the template ends with its raylet, or after
`IDLE_S` with no rank alive. docs/ARCHITECTURE.md, "Inside the rooms", says more."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from sweeper.fabric.multicast import switches_multicast
from sweeper.rank import rendezvous
from sweeper.rank.process import die_with, serve
from sweeper.wire import SET_ENV_PREFIXES

IDLE_S = 300.0  # a nightly's next run on a long-lived cluster imports torch once again
# What a rank's process reads only after the fork, so actors that differ in it share a template:
# Ray's GPU choice (read as CUDA initialises), the job (every driver is one), and the actor
# set's library settings (wire.SET_ENV_PREFIXES) but those that switch NVLink multicast, which
# the template keeps as its actors have them (a machine's "off" holds in every process there).
_OWN = frozenset({"CUDA_VISIBLE_DEVICES", "RAY_JOB_ID"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Setting:
    """What an actor's rank process takes from it, sent after the fork."""

    env: Mapping[str, str]
    path: Sequence[str]
    cwd: str


def shared(env: Mapping[str, str]) -> dict[str, str]:
    """The environment every actor a template serves has alike: its own, less what each rank
    reads only after its fork."""
    return {
        k: v
        for k, v in env.items()
        if k not in _OWN and (switches_multicast(k) or not k.startswith(SET_ENV_PREFIXES))
    }


def digest(setting: Setting, raylet: int) -> str:
    """Which template serves an actor of this setting on the node of this raylet. The code's
    files count by their size and time, so a template never serves code edited since it
    loaded it."""
    torch = importlib.util.find_spec("torch")
    files = sorted(Path(__file__).parents[1].rglob("*.py"))
    if torch is not None and torch.origin is not None:
        files.append(Path(torch.origin))
    stamps = []
    for f in files:
        stat = f.stat()
        stamps.append((str(f), stat.st_size, stat.st_mtime_ns))
    env = sorted(shared(setting.env).items())
    key = repr((sys.executable, raylet, tuple(setting.path), setting.cwd, env, stamps))
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def main(digest: str, raylet: int, idle_s: float) -> None:
    """Claims the socket, leaves its starter (which waits for this to return) once it listens,
    loads the rank's code and forks ranks until the node's raylet goes or it idles out.
    Returns at once where another template holds the socket, the directory is not this user's
    alone, or this kernel has no pidfds: the actor then finds the other one, or starts its rank
    from a fresh interpreter."""
    try:
        raylet_fd = os.pidfd_open(raylet)
    except (AttributeError, OSError):  # Linux before 5.3, or the raylet is gone
        return
    try:
        directory = rendezvous.directory()
        claimed = rendezvous.claim(directory, digest)
    except (rendezvous.Unusable, OSError):  # the actor says why as it goes without
        return
    if claimed is None:
        return
    listener, lock = claimed
    ready, told = os.pipe()
    if os.fork():
        os.close(told)
        os.read(ready, 1)  # end of file: the child listens, or is gone
        os._exit(0)
    os.close(ready)
    os.setsid()
    # Actors check the credentials the kernel took from the process that called listen():
    # this one, whose command line names the template and its digest.
    listener.listen(socket.SOMAXCONN)
    os.close(told)
    # Nothing of its starter's: an actor's log held open would outlive that actor; each rank
    # gets its own actor's stdout and stderr, and a template that fails leaves its actors to
    # start fresh interpreters, which say why.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    try:
        import torch  # the seconds each rank saves: loaded once, here, after the name is ours

        import sweeper.rank.worker  # noqa: F401

        if torch.cuda.is_initialized():  # a child could not use CUDA: leave the ranks fresh
            return
        _Forks(listener, raylet_fd, idle_s, claim=(directory, lock)).serve()
    finally:
        rendezvous.release(directory, digest)


class _Forks:
    """The template's loop: accepts each actor, forks its rank, kills the rank when the actor
    dies and reaps it when it exits."""

    def __init__(
        self, listener: socket.socket, raylet_fd: int, idle_s: float, claim: Sequence[int]
    ) -> None:
        self.listener = listener
        self.raylet_fd = raylet_fd
        self.idle_s = idle_s
        self.claim = claim  # its directory and lock, which no rank keeps
        self.ranks: dict[int, tuple[int, int]] = {}  # rank's pidfd -> (its pid, actor's pidfd)
        self.actors: dict[int, int] = {}  # a live actor's pidfd -> its rank's pid

    def serve(self) -> None:
        while True:
            watched = [self.listener.fileno(), self.raylet_fd, *self.ranks, *self.actors]
            timeout = None if self.ranks else self.idle_s
            ready, _, _ = select.select(watched, [], [], timeout)
            if not ready or self.raylet_fd in ready:
                return  # the ranks left die with this process
            for fd in ready:
                if fd in self.actors:  # its rank goes too, reaped as its own pidfd turns ready
                    os.kill(self.actors.pop(fd), signal.SIGKILL)
                elif fd in self.ranks:
                    self._reap(fd)
            if self.listener.fileno() in ready:
                self._accept()

    def _reap(self, rank_fd: int) -> None:
        pid, actor_fd = self.ranks.pop(rank_fd)
        os.waitpid(pid, 0)
        os.close(rank_fd)
        self.actors.pop(actor_fd, None)
        os.close(actor_fd)

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        actor, uid = rendezvous.peer(conn)
        if uid != os.getuid():  # its directory keeps others out; forking for them never
            conn.close()
            return
        try:
            actor_fd = os.pidfd_open(actor)
        except OSError:  # the actor is gone already
            conn.close()
            return
        inherited = [self.listener.fileno(), self.raylet_fd, actor_fd, *self.claim]
        inherited += [*self.ranks, *(watched for _, watched in self.ranks.values())]
        try:
            pid = os.fork()
        except OSError:  # no memory or pids for it now: the actor's rank starts fresh, or fails
            conn.close()
            os.close(actor_fd)
            return
        if pid == 0:
            os._exit(_rank(conn, os.getppid(), inherited))
        conn.close()
        self.ranks[os.pidfd_open(pid)] = (pid, actor_fd)
        self.actors[actor_fd] = pid


def _rank(conn: socket.socket, template: int, inherited: Sequence[int]) -> int:
    """The forked child's life, and its exit status: it must never return into the loop."""
    try:
        _become_rank(conn, template, inherited)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


def _become_rank(conn: socket.socket, template: int, inherited: Sequence[int]) -> None:
    """In the forked child: the actor's stdout and stderr, environment, import path and
    working directory, then the rank's calls until the actor goes."""
    die_with(template)
    for fd in inherited:
        os.close(fd)
    _, fds, _, _ = socket.recv_fds(conn, 1, 2)
    if len(fds) != 2:  # the actor went before it sent them
        return
    for fd, target in zip(fds, (1, 2), strict=True):
        os.dup2(fd, target)
        os.close(fd)
    channel = Connection(conn.detach())
    setting: Setting = channel.recv()
    os.environ.clear()
    os.environ.update(setting.env)
    sys.path[:] = setting.path
    os.chdir(setting.cwd)
    serve(channel)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
