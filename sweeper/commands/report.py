"""`sweeper report`: the HTML report of a run (`sweeper.report`), and its screenshot."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sweeper.commands.common import examples, fail
from sweeper.commands.options import Results, RunId
from sweeper.errors import SweeperError
from sweeper.report import require

EXAMPLES = examples(
    "sweeper report",
    "sweeper report 20261122T013412Z-33627a -o run.html",
    "sweeper report latest --baseline 20261121T230000Z-a1b2c3",
    "sweeper report --js reports/ -o reports/today.html",
    "sweeper report --screenshot run.png",
)


def report(
    run_id: RunId = "latest",
    results: Results = Path("results"),
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="The HTML file; default reports/<run_id>.html beside --results.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            metavar="RUN_ID", help="A run id of the results to compare with, point by point."
        ),
    ] = None,
    js: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Write one shared plotly-<version>.min.js into this directory and point at it, "
            "instead of inlining it (archives of many pages).",
        ),
    ] = None,
    screenshot: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Also save a full-page PNG, through Playwright and Chromium."
        ),
    ] = None,
    chromium: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Chromium for --screenshot; default $SWEEPER_CHROMIUM, else on PATH.",
        ),
    ] = None,
) -> None:
    """Write the HTML report of a run: one self-contained page that works offline."""
    try:
        require()
        from sweeper.report import browser, build  # plotly: loaded once `require` found it

        if screenshot:  # before the page is written: both or neither
            browser.require_png(screenshot)
        executable = browser.require(chromium) if screenshot else None
        # -o into a missing directory is refused, as `export` refuses it; reports/ is made
        page = build.write(results, run_id, output, baseline, js, make_directory=output is None)
        print(f"report: {page}")
        if screenshot:
            print(f"screenshot: {browser.screenshot(page, screenshot, executable)}")
    except SweeperError as exc:
        raise fail(exc) from None
