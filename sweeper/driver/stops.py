"""Graceful stops: SIGINT and SIGTERM end a sweep as an error does, through the driver's cleanup
(rows written, the run record marked, Ray closed); a second signal ends the process at once.

The command line's handlers come first (`install`, before the command line is imported) and
stay until the process ends (`exiting`); the run that registered itself tells what was kept
(`tell`). Ray's C++ waits cannot take an exception from a handler, so the driver calls into
Ray `held()`, in short slices (docs/RELIABILITY.md, "Signals at any moment")."""

from __future__ import annotations

import _thread
import atexit
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
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
        self.command = "run"  # the command that resumes the run
        self.complete = False
        self.unreported = False
        self.unjudged: str | None = None  # the command that judges a complete nightly run
        self.exiting = False  # the command had ended: only the process's exit was left

    @property
    def exit_code(self) -> int:
        """The shell's code for a death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    def line(self) -> str:
        """What the user reads: what stopped, what was kept, how to go on."""
        name = signal.Signals(self.signum).name
        if self.run_id is None and self.exiting:
            return f"stopped by {name} as sweeper exited"
        if self.run_id is None:
            return f"stopped by {name} before a run started; nothing was written"
        if self.complete:
            line = f"stopped by {name} after run {self.run_id} completed: its rows are in "
            if self.unjudged:
                return f"{line}{self.output}; it was not judged: {self.unjudged}"
            if self.unreported:
                return (
                    f"{line}{self.output}; its report was not written: "
                    f"sweeper report {self.run_id} --results {self.output}"
                )
            return f"{line}{self.output}"
        return (
            f"stopped by {name}: run {self.run_id} interrupted, its rows kept in {self.output}; "
            f"resume with: {resume_command(self.run_id, self.output, self.command)}"
        )


def resume_command(run_id: str, output: Path | None, command: str = "run") -> str:
    return f"sweeper {command} --resume {run_id} --results {output}"


def _at_once(signum: int) -> None:
    """The second signal: no more cleanup. Rows already handed to the writer are in its
    journal, which `sweeper history` or a resume turns into Parquet."""
    name = signal.Signals(signum).name
    _end(f"stopped at once by a second {name}; measured rows are kept", 128 + signum)


def end_told(signum: int) -> None:
    """End the process now with the line of a stop by `signum`, as its run tells it: where
    nothing is left to clean up (the command has ended), or nothing can be (the head is gone).
    Where the stop's line is out already, the process only ends."""
    if _BASE.said is not None:
        _flushed()
        os._exit(_BASE.said)
    stop = stopped(signum)
    _end(stop.line(), stop.exit_code)


def _end(line: str, code: int) -> None:
    if sys.stdout.isatty():  # a progress bar hid the cursor
        sys.stdout.write(SHOW_CURSOR)
    _flushed()
    sys.stderr.write(f"sweeper: {line}\n")
    _flushed()
    end_descendants()
    os._exit(code)


def _flushed() -> None:
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed pipe, a closed stream
            stream.flush()


def end_descendants() -> None:
    """Kill every process this one started, and theirs (an embedded Ray's GCS, raylet, agents
    and workers), where it cannot shut them down in order: none is left running. Each is
    stopped (SIGSTOP) before any is killed, so none forks a child that escapes the count."""
    stopped: set[int] = set()
    while fresh := descendants() - stopped:
        _send(fresh, signal.SIGSTOP)
        stopped |= fresh
    _send(stopped, signal.SIGKILL)


def descendants() -> set[int]:
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
    """The signals seen while `graceful` is on: the first one, the depth of `held` blocks, a
    first signal that came within one (raised when the outermost ends), and what tells a
    stop's line (`tell`)."""

    signum: int | None = None
    holding: int = 0
    kept: int | None = None
    teller: Callable[[Stopped], None] | None = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if _BASE.rearming:  # within _unraisable, where a Stopped would be lost again
            _again(signum)
            return
        if _BASE.exiting or _BASE.said is not None:
            end_told(signum)  # the command has ended, or its stop's line is out
        if self.signum is not None:
            _at_once(signum)
        self.signum = signum
        if self.holding:
            self.kept = signum
            return
        raise stopped(signum)


@dataclass
class _Process(_Stopping):
    """The command line's own handling, once `install`ed: whether a stop's line is out (its
    exit code), and whether the command has ended and the process exits (with what code)."""

    installed: bool = False
    rearming: bool = False  # a lost Stopped's signal is being sent again (`_unraisable`)
    said: int | None = None
    exiting: bool = False
    code: int | None = None


_BASE = _Process()
_ON: list[_Stopping] = []  # _BASE once installed, then graceful()'s, innermost last, while on


def install() -> None:
    """The command line's handlers, before anything heavy is imported and until the process
    ends: a first signal raises Stopped where Python runs (an import, a command that is not
    a sweep), a second ends the process at once, and once the command has ended (`exiting`)
    a signal ends the process at once with its line. The process ends without Python's
    teardown of its modules, which runs with the default handlers: no line, for a second."""
    _BASE.installed = True
    _ON.append(_BASE)
    atexit.register(_exit)  # the first registered, so the last to run
    sys.unraisablehook = partial(_unraisable, sys.unraisablehook)
    for signum in SIGNALS:  # last: a Stopped is raised only once all is in place
        signal.signal(signum, _BASE.handle)


def _unraisable(
    before: Callable[[sys.UnraisableHookArgs], object], unraisable: sys.UnraisableHookArgs
) -> None:
    """A first signal's Stopped raised where Python ignores exceptions (a weakref callback of
    importlib's, an object's __del__) stopped nothing: the signal comes again from a thread,
    to land once this has returned, in code it can stop (one that lands sooner comes again
    too). Anything else goes to the hook before."""
    stop = unraisable.exc_value
    if not isinstance(stop, Stopped):
        before(unraisable)
        return
    _BASE.rearming = True
    for state in _ON:
        if state.signum == stop.signum:
            state.signum = None  # still the first signal: it stopped nothing
    _again(stop.signum)
    _BASE.rearming = False


def _again(signum: int) -> None:
    """`signum` again, in the main thread, from a thread that needs the GIL to start."""
    _thread.start_new_thread(_thread.interrupt_main, (signal.Signals(signum),))


def say(stop: Stopped) -> None:
    """A stop's one line, on stderr; any later signal only ends the process."""
    print(f"sweeper: {stop.line()}", file=sys.stderr)
    if _BASE.installed:
        _BASE.said = stop.exit_code


def exiting(code: object) -> None:
    """The command has ended with `code` (SystemExit's): a signal from now on ends the process
    at once, told as the stop of what the command did."""
    if _BASE.installed:
        _BASE.exiting = True
        _BASE.code = code if isinstance(code, int) else None if code else 0


def exit_code(otherwise: int) -> int:
    """The code the command line ends with, where it has ended; else `otherwise`."""
    return otherwise if _BASE.code is None else _BASE.code


def _exit() -> None:
    """The last of the exit's steps that run Python: the process ends here, its handlers on."""
    if _BASE.code is not None:
        _flushed()
        os._exit(_BASE.code)


def signalled() -> int | None:
    """The first signal that asked this process to stop, if one did."""
    return next((state.signum for state in reversed(_ON) if state.signum is not None), None)


def tell(teller: Callable[[Stopped], None]) -> None:
    """From now on, a stop's line is told by `teller` (a run: what it kept, how to go on),
    until the process ends where the command line's handlers are on."""
    if _ON:
        _ON[-1].teller = teller


def tell_also(more: Callable[[Stopped], None]) -> None:
    """From now on, a stop's line is told by the teller so far, then by `more` (what the
    command does after its run: a nightly's judgment)."""
    if not _ON:
        return
    before = next((state.teller for state in reversed(_ON) if state.teller), None)

    def both(stop: Stopped) -> None:
        if before is not None:
            before(stop)
        more(stop)

    _ON[-1].teller = both


def stopped(signum: int) -> Stopped:
    """The Stopped of a signal, told by the innermost teller."""
    stop = Stopped(signum)
    stop.exiting = _BASE.exiting
    teller = next((state.teller for state in reversed(_ON) if state.teller), None)
    if teller is not None:
        teller(stop)
    return stop


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
        if _ON and state.teller:  # its run is what a later stop tells of, to the exit
            _ON[-1].teller = state.teller
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
            raise stopped(signum)


def taken(signum: int) -> Stopped:
    """The Stopped of a signal that another handler took (ray.init's, while it runs): the next
    one exits at once, as after any first signal."""
    if _ON:
        _ON[-1].signum = _ON[-1].signum or signum
    return stopped(signum)
