"""Graceful stops: SIGINT and SIGTERM end a sweep the way an error does, by an exception that
the driver's cleanup sees (rows written, the run record marked, Ray closed); a second signal
ends the process at once. What was measured is on disk either way (see sweeper/results/)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
SHOW_CURSOR = "\x1b[?25h"


class Stopped(BaseException):
    """A signal asked the run to stop. A BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way up swallows it. The driver names its run on it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.run_id: str | None = None
        self.output: Path | None = None

    @property
    def exit_code(self) -> int:
        """The shell's code for a death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    def line(self) -> str:
        """What the user reads: what stopped, what was kept, how to go on."""
        name = signal.Signals(self.signum).name
        if self.run_id is None:
            return f"stopped by {name} before a run started; nothing was written"
        return (
            f"stopped by {name}: run {self.run_id} interrupted, its rows kept in {self.output}; "
            f"resume with: {resume_command(self.run_id, self.output)}"
        )


def resume_command(run_id: str, output: Path | None) -> str:
    return f"sweeper run --resume {run_id} --output {output}"


def _at_once(signum: int) -> None:
    """The second signal: no more cleanup. Rows already handed to the writer are in its
    journal, which `sweeper history` or a resume turns into Parquet."""
    if sys.stdout.isatty():
        sys.stdout.write(SHOW_CURSOR)
        sys.stdout.flush()
    name = signal.Signals(signum).name
    sys.stderr.write(f"sweeper: stopped at once by a second {name}; measured rows are kept\n")
    sys.stderr.flush()
    os._exit(128 + signum)


@contextmanager
def graceful() -> Iterator[None]:
    """Within it, the first SIGINT or SIGTERM raises Stopped in the main thread (the point in
    flight is abandoned), and a second one exits at once. The previous handlers come back
    on the way out."""
    stopping = False

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            _at_once(signum)
        stopping = True
        raise Stopped(signum)

    previous = {signum: signal.signal(signum, handle) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
