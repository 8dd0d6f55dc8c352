"""How long this process tree's work waits for a CPU: each thread's time runnable but waiting
(/proc's schedstat) per second it ran, over a while. On a machine others keep busy a gloo
run's ranks wait as its Ray's start did, so its estimate asks (planning.costs.crowded). It is
what the tree felt, at its own niceness, where the load average counts every runnable task
alike. Linux only: None where there is no /proc."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from sweeper.driver.stops import descendants

# A thread's nanoseconds on a CPU and runnable waiting for one, by (process, thread)
Sample = dict[tuple[int, int], tuple[int, int]]


def sample() -> Sample:
    """Every thread of this process and its descendants, now (none without /proc)."""
    found: Sample = {}
    for pid in (os.getpid(), *descendants()):
        with suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with suppress(OSError, ValueError):
                    ran, waited, _ = map(int, (task / "schedstat").read_text().split())
                    found[pid, int(task.name)] = (ran, waited)
    return found


def waiting(since: Sample | None) -> float | None:
    """Seconds this tree's threads waited for a CPU per second they ran since `since` (a
    thread started since counts whole); None where it ran under a tenth of a second."""
    if since is None:
        return None
    ran = waited = 0
    for key, (now_ran, now_waited) in sample().items():
        then_ran, then_waited = since.get(key, (0, 0))
        ran += now_ran - then_ran
        waited += now_waited - then_waited
    return waited / ran if ran >= 1e8 else None
