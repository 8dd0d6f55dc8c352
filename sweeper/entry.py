"""The `sweeper` command's entry point (the console script and `python -m sweeper`): the signal
handlers first, then the command line, whose imports take a second or two. A signal at any
moment from there to the process's end is one line and 130 or 143 (sweeper/driver/stops.py);
before it, Python's own start (docs/RELIABILITY.md, "Signals at any moment")."""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    # SIGINT's first, so that a caught SIGTERM (/proc's SigCgt) says both are sweeper's
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _before_stops)
    from sweeper.driver import stops  # a few ms of the standard library's imports

    try:
        stops.install()
        try:
            from sweeper.cli import app
        except Exception as exc:  # pydantic wraps what a class's creation raised, a signal too
            received = stops.signalled()
            if received is None:
                raise
            raise stops.stopped(received) from exc
        app(prog_name="sweeper")
    except stops.Stopped as stop:  # outside a sweep's own stop: the imports, another command
        stops.say(stop)
        stops.exiting(stop.exit_code)
        sys.exit(stop.exit_code)
    except SystemExit as ended:  # every command's end: the Typer app always exits
        stops.exiting(ended.code)
        raise


def _before_stops(signum: int, frame: object) -> None:
    """A signal while stops.py is imported: nothing has started, nothing is left to clean."""
    name = signal.Signals(signum).name
    os.write(2, f"sweeper: stopped by {name} before a run started; nothing was written\n".encode())
    os._exit(128 + signum)
