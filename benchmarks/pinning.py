"""Both sides of a GPU benchmark's comparison on the same CPU cores: sweeper's rank actors,
and the anchor they are measured against (the bare torch.distributed loop, nccl-tests).

A launch-bound eager call costs what the core it runs on gives it: one torch all_reduce
loop ran at 14 us per call on one core of a 16-core GPU machine and at 23 us on others (the
same process, unpinned, from one run to the next). A ratio of the two sides then says which
core each landed on, not what sweeper's harness costs.

Only the thread that issues the calls gets a measuring core, on both sides: each rank's main
thread (sweeper's rank runs in a process its Ray actor starts, the bare loop and nccl-tests -g
call from their own). Every other thread (the actor's, Ray's, torch's watchdog, NCCL's proxy,
this benchmark's own) runs on the other cores, as it would on an unpinned machine. With every
thread of a process on one core, a block of 150 eager calls took 1x to 3x its neighbours' time
on both sides, whenever a background thread woke up (one H100, 2026-11-24).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

RANK_ACTOR = b"ray::Rank"  # how Ray names the process of sweeper's rank actor (RankActor)
TEMPLATE = b"sweeper.rank.template"  # in the command line of the process that forks ranks


def rank_cores(n: int) -> set[int]:
    """The CPU cores both sides' n ranks call from: the last n this process may use."""
    return set(sorted(os.sched_getaffinity(0))[-n:])


def pinned(argv: Sequence[str], cores: set[int]) -> list[str]:
    """`argv` run on `cores` only, every thread it starts included: the interpreter sets its
    own affinity, which exec keeps, then becomes the program."""
    code = "import os, sys; os.sched_setaffinity(0, {}); os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", code.format(sorted(cores)), *argv]


class Pinner:
    """Keeps the main thread of each measured process on `cores` and its other threads on the
    rest, from the moment it appears to the end. Measured: the rank processes that sweeper's
    rank actors start or their node's template forks (the actors themselves only relay calls:
    all their threads go to the rest; the template makes none), processes whose command line
    starts with one of `prefixes`, and `pids`. Threads appear late (NCCL's at a communicator's
    first use), so it looks again every `every_s`.

    `away()` first: the benchmark's own process (and what it starts from then on: Ray, the
    bare loop) leaves the measuring cores."""

    def __init__(
        self,
        cores: set[int],
        prefixes: Iterable[bytes] = (),
        pids: Iterable[int] = (),
        every_s: float = 0.1,
    ):
        self.cores = cores
        self.rest = set(os.sched_getaffinity(0)) - cores or cores
        self.prefixes = tuple(prefixes)
        self.pids = set(pids)
        self.every_s = every_s
        self.placed: set[tuple[int, int]] = set()  # (process, thread)
        self.actors: set[int] = set()  # rank actors seen
        self.templates: set[int] = set()  # the processes that fork ranks (rank/template.py)
        self.ranks: set[int] = set()  # the processes they started or forked
        self.lock = threading.Lock()  # a process is placed whole before `watch` changes a role
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> Pinner:
        self.thread.start()
        return self

    def away(self) -> Pinner:
        """Moves the calling thread, and so every process and thread it starts later, off the
        measuring cores; then starts watching."""
        os.sched_setaffinity(0, self.rest)
        return self.start()

    def watch(self, pids: Iterable[int]) -> None:
        """Measure these processes too; ones already placed otherwise are placed again."""
        pids = set(pids)
        with self.lock:
            self.pids.update(pids)
            self.placed = {(pid, tid) for pid, tid in self.placed if pid not in pids}

    def _calls(self, proc: Path) -> bool | None:
        """True: a process whose main thread issues the measured calls (one watched, a rank
        process, one of `prefixes`); False: a rank actor, which relays them; None: not
        one to place."""
        pid = int(proc.name)
        command = (proc / "cmdline").read_bytes()
        stat = (proc / "stat").read_text()
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if command.startswith(RANK_ACTOR):
            self.actors.add(pid)
        elif parent in self.actors | self.templates:  # a rank process it started or forked
            self.ranks.add(pid)
        elif TEMPLATE in command:
            self.templates.add(pid)
        if pid in self.pids or pid in self.ranks:
            return True
        if pid in self.actors:
            return False
        return True if self.prefixes and command.startswith(self.prefixes) else None

    def _watch(self) -> None:
        # in pid order, so an actor is seen before the process it starts
        while not self.stop.wait(self.every_s):
            for proc in sorted(Path("/proc").glob("[0-9]*"), key=lambda p: int(p.name)):
                with self.lock:
                    self._place(proc)

    def _place(self, proc: Path) -> None:
        pid = int(proc.name)
        try:
            calls = self._calls(proc)
            if calls is None:
                return
            for task in (proc / "task").iterdir():
                tid = int(task.name)
                if (pid, tid) not in self.placed:
                    main = calls and tid == pid
                    os.sched_setaffinity(tid, self.cores if main else self.rest)
                    self.placed.add((pid, tid))
        except OSError:  # gone, or not ours
            return

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()

    def check(self) -> None:
        """RuntimeError if no rank's process was found to pin: the comparison would be unfair."""
        if not self.ranks:
            raise RuntimeError(
                "no process of a ray::Rank actor found to pin: sweeper's ranks ran unpinned"
            )
