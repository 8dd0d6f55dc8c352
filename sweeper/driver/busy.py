"""How busy others keep this machine's CPUs: the nice value of each thread runnable outside
this process tree (/proc's stat), looked at again and again while a run's Ray starts
(`CpuWatch`), which a gloo run's estimate weighs as the kernel's scheduler does
(planning.costs.crowded). Linux only: nothing where there is no /proc."""

from __future__ import annotations

import os
import threading
from contextlib import suppress
from pathlib import Path

from sweeper.driver.stops import descendants

_STATE, _NICE = 0, 16  # in a thread's stat after "pid (name)": fields 3 and 19
EVERY_S = 0.25  # between two looks: a Ray's start (3-5 s on the CPU box) gets a dozen or more
LONGEST_S = 30.0  # a watch no one stopped ends by itself (a scan never asks it)


class CpuWatch:
    """Others' runnable threads (`runnable`), looked at every EVERY_S from `start` until
    `stop`, on a daemon thread: a busy loop is in every look, another run's last second in a
    few (the median of the looks is what `crowded` weighs)."""

    def __init__(self) -> None:
        self.looks: list[tuple[int, ...]] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._look, name="sweeper-busy", daemon=True)

    def start(self) -> CpuWatch:
        self._thread.start()
        return self

    def _look(self) -> None:
        for _ in range(int(LONGEST_S / EVERY_S)):
            self.looks.append(runnable())
            if self._stopped.wait(EVERY_S):
                return

    def stop(self) -> tuple[tuple[int, ...], ...]:
        """The looks so far, the watch ended (again: the same looks)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        return tuple(self.looks)


def runnable() -> tuple[int, ...]:
    """The nice value of every thread runnable now, this process and its descendants
    left out (an empty tuple without /proc)."""
    ours = {os.getpid(), *descendants()}
    found: list[int] = []
    with suppress(OSError):
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) in ours:
                continue
            with suppress(OSError):
                for task in (proc / "task").iterdir():
                    with suppress(OSError, ValueError, IndexError):
                        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                        if fields[_STATE] == "R":
                            found.append(int(fields[_NICE]))
    return tuple(found)


def nice() -> int:
    """This process's nice value: the run's (Ray starts its workers at 15 above it, yet they
    wait on each other more than they compute, so the run is weighed at this one)."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
