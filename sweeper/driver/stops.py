"""Graceful stops: SIGINT and SIGTERM end a sweep the way an error does, by an exception that
the driver's cleanup sees (rows written, the run record marked, Ray closed); a second signal
ends the process at once. What was measured is on disk either way (see sweeper/results/).

Ray's C++ code runs Python's signal handlers while it waits (ray.get, ray.wait) and cannot
take an exception from one (SystemError): the driver calls into Ray `held()`, in short slices.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
SHOW_CURSOR = "\x1b[?25h"


class Stopped(BaseException):
    """A signal asked the run to stop. A BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way up swallows it. The driver names its run on it, and says
    whether the run had ended (`complete`) and whether its report is still to be written."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.run_id: str | None = None
        self.output: Path | None = None
        self.complete = False
        self.unreported = False

    @property
    def exit_code(self) -> int:
        """The shell's code for a death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    def line(self) -> str:
        """What the user reads: what stopped, what was kept, how to go on."""
        name = signal.Signals(self.signum).name
        if self.run_id is None:
            return f"stopped by {name} before a run started; nothing was written"
        if self.complete:
            line = f"stopped by {name} after run {self.run_id} completed: its rows are in "
            if self.unreported:
                return (
                    f"{line}{self.output}; its report was not written: "
                    f"sweeper report {self.run_id} --results {self.output}"
                )
            return f"{line}{self.output}"
        return (
            f"stopped by {name}: run {self.run_id} interrupted, its rows kept in {self.output}; "
            f"resume with: {resume_command(self.run_id, self.output)}"
        )


def resume_command(run_id: str, output: Path | None) -> str:
    return f"sweeper run --resume {run_id} --results {output}"


def _at_once(signum: int) -> None:
    """The second signal: no more cleanup. Rows already handed to the writer are in its
    journal, which `sweeper history` or a resume turns into Parquet."""
    if sys.stdout.isatty():
        sys.stdout.write(SHOW_CURSOR)
        sys.stdout.flush()
    name = signal.Signals(signum).name
    sys.stderr.write(f"sweeper: stopped at once by a second {name}; measured rows are kept\n")
    sys.stderr.flush()
    end_descendants()
    os._exit(128 + signum)


def end_descendants() -> None:
    """Kill every process this one started, and theirs (an embedded Ray's GCS, raylet, agents
    and workers), where it cannot shut them down in order: none is left running. Each is
    stopped (SIGSTOP) before any is killed, so none forks a child that escapes the count."""
    stopped: set[int] = set()
    while fresh := _descendants() - stopped:
        _send(fresh, signal.SIGSTOP)
        stopped |= fresh
    _send(stopped, signal.SIGKILL)


def _descendants() -> set[int]:
    """This process's descendants, read from /proc (none where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (name)"
        except (OSError, IndexError):  # gone meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _send(pids: set[int], signum: signal.Signals) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):  # gone meanwhile
            os.kill(pid, signum)


@dataclass
class _Stopping:
    """The signals seen while `graceful` is on: whether one came, the depth of `held` blocks,
    and a first signal that came within one, raised when the outermost ends."""

    stopping: bool = False
    holding: int = 0
    kept: int | None = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            _at_once(signum)
        self.stopping = True
        if self.holding:
            self.kept = signum
            return
        raise Stopped(signum)


_ON: list[_Stopping] = []  # graceful()'s, innermost last, while it is on


@contextmanager
def graceful() -> Iterator[None]:
    """Within it, the first SIGINT or SIGTERM raises Stopped in the main thread (the point in
    flight is abandoned), and a second one exits at once. The previous handlers come back
    on the way out."""
    state = _Stopping()
    previous = {signum: signal.signal(signum, state.handle) for signum in SIGNALS}
    _ON.append(state)
    try:
        yield
    finally:
        _ON.remove(state)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def held() -> Iterator[None]:
    """A first signal within it is kept and raised as Stopped on the way out, not inside: for
    calls into Ray, whose C++ waits run Python's handlers and fail where one raises. Keep
    what runs within short (wait in slices): the stop comes only after it."""
    if not _ON:
        yield
        return
    state = _ON[-1]
    state.holding += 1
    try:
        yield
    finally:
        state.holding -= 1
        if not state.holding and state.kept is not None:
            signum, state.kept = state.kept, None
            raise Stopped(signum)


def taken(signum: int) -> Stopped:
    """The Stopped of a signal that another handler took (ray.init's, while it runs): the next
    one exits at once, as after any first signal."""
    if _ON:
        _ON[-1].stopping = True
    return Stopped(signum)
