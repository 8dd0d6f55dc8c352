"""`sweeper history`: the runs in a results directory, oldest first, with their status
(`history_runs`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from sweeper.commands.common import examples, fail, printing
from sweeper.commands.options import Format, OutputFormat, Results
from sweeper.errors import BadInput
from sweeper.report import directory

EXAMPLES = examples(
    "sweeper history",
    "sweeper history --results /data/results --last 7",
    "sweeper history --format json",
)


def history(
    results: Results = Path("results"),
    reports_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Where the nightly summaries are; default reports/ beside --results.",
        ),
    ] = None,
    last: Annotated[int, typer.Option(metavar="N", min=1, help="Show the last N runs.")] = 30,
    format: OutputFormat = Format.human,
) -> None:
    """The runs in a results directory, oldest first, with their status: ok, failed (some
    points failed), regression, condemned (a nightly scan condemned a node, GPU or link), or
    unjudged (a nightly run without its summary)."""
    from sweeper.commands import history_runs  # pandas: loaded only for a history

    try:
        runs = history_runs.runs(results, directory(results, reports_dir)).tail(last)
    except FileNotFoundError as exc:
        raise fail(BadInput(str(exc))) from None
    with printing():
        if format is Format.json:
            print(json.dumps(history_runs.records(runs), indent=1))
        else:
            history_runs.print_runs(runs)
