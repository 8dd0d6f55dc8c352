"""What the commands share: a known error as one line and its exit code, the examples of a
command's help, a sweep's console and its graceful stop, and where a result is printed."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, redirect_stdout, suppress
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sweeper.commands.options import Format
from sweeper.driver import stops
from sweeper.errors import InfrastructureError, SweeperError
from sweeper.planning.profile import Profile, load_sweep_profile

if TYPE_CHECKING:
    from sweeper.driver.console import HumanConsole, JsonConsole

EXIT_REGRESSION = 1
EXIT_POINTS_FAILED = 4
EXIT_TRANSPORT_FLAGGED = 5  # every point ran, but NCCL took another path than a group's tier's


def fail(exc: SweeperError) -> typer.Exit:
    if os.environ.get("SWEEPER_DEBUG") == "1":
        raise exc
    hint = f" ({exc.hint})" if exc.hint else ""
    print(f"sweeper: error: {exc}{hint}", file=sys.stderr)
    return typer.Exit(exc.exit_code)


def examples(*lines: str) -> str:
    """A command's examples, one a line (help is rich markup, which keeps single line breaks)."""
    return "\n".join(["Examples:", *(f"  {line}" for line in lines)])


def sweep_profile(path: Path | None) -> Profile | None:
    return load_sweep_profile(path) if path is not None else None


def sweep_console(output_format: Format) -> HumanConsole | JsonConsole:
    """What a sweep shows while it works, for `run` and `nightly` alike."""
    # brings Ray and pandas, which `sweeper --help` need not load
    from sweeper.driver import console

    return console.JsonConsole() if output_format is Format.json else console.HumanConsole()


@contextmanager
def stoppable(observer: HumanConsole | JsonConsole) -> Iterator[None]:
    """A sweep that SIGINT or SIGTERM stops gracefully: its rows written, its record marked
    interrupted, the terminal restored, one line on resuming, exit 130 or 143. The terminal
    is restored before any closing line, an error's included. Under `--format json` stdout
    is the observer's alone (it took the stream when it was made): whatever else prints
    meanwhile, a plugin's code run in the driver, goes to stderr."""
    try:
        with stops.graceful(), printing_aside(observer.owns_stdout):
            yield
    except stops.Stopped as stop:
        observer.close()
        stops.say(stop)
        raise typer.Exit(stop.exit_code) from None
    finally:
        observer.close()


@contextmanager
def printing_aside(machine: bool) -> Iterator[None]:
    """While a `--format json` document is made, stdout is the document's alone: whatever else
    prints meanwhile (a plugin's code run in the driver) goes to stderr."""
    with redirect_stdout(sys.stderr) if machine else nullcontext():
        yield


@contextmanager
def printing() -> Iterator[None]:
    """Where a command prints its result, once the work is done: a stdout that refuses it (a
    full disk, /dev/full) is one line on stderr and exit 3, not a traceback at exit; a reader
    that went away (`| head`) ends it quietly with exit 1, as rich does for its tables and
    Python's documentation does for SIGPIPE."""
    try:
        yield
        sys.stdout.flush()
    except OSError as exc:
        with suppress(OSError, ValueError):  # what is left in the buffer goes nowhere at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if isinstance(exc, BrokenPipeError):
            raise typer.Exit(1) from None
        raise fail(InfrastructureError(f"cannot write to stdout: {exc.strerror or exc}")) from None
