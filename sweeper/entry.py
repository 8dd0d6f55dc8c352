"""The `sweeper` command's entry point (the console script and `python -m sweeper`): the
signal handlers first, then the command line, whose imports take a second or two. A signal at
any moment, from the first import to the process's end, is one line and 130 or 143
(sweeper/driver/stops.py)."""

from __future__ import annotations

import sys

from sweeper.driver import stops  # the standard library's os, signal, atexit: nothing heavy


def main() -> None:
    stops.install()
    try:
        from sweeper.cli import app

        app(prog_name="sweeper")
    except stops.Stopped as stop:  # outside a sweep's own stop: the imports, another command
        stops.say(stop)
        stops.exiting(stop.exit_code)
        sys.exit(stop.exit_code)
    except SystemExit as ended:  # every command's end: the Typer app always exits
        stops.exiting(ended.code)
        raise
