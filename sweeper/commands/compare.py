"""`sweeper compare`: two runs of a results directory point by point (`compare_runs`); exit 1
on a regression."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer

from sweeper.commands.common import EXIT_REGRESSION, examples, fail, printing
from sweeper.commands.options import Format, OutputFormat, Results
from sweeper.errors import BadInput, SweeperError

EXAMPLES = examples(
    "sweeper compare 20261121T020000Z-a1b2c3 latest",
    "sweeper compare RUN_A RUN_B --results /data/results --threshold 0.03 --all --format json",
)


def compare(
    base: Annotated[
        str, typer.Argument(metavar="BASE", help="The run compared with: a run id, or latest.")
    ],
    new: Annotated[
        str, typer.Argument(metavar="NEW", help="The run compared: a run id, or latest.")
    ],
    results: Results = Path("results"),
    threshold: Annotated[
        float | None,
        typer.Option(
            metavar="RATIO",
            min=0,
            help="Smallest change of bus bandwidth that counts \\[default: 0.05].",
        ),
    ] = None,
    every: Annotated[
        bool,
        typer.Option(
            "--all", metavar="", help="Every point, not only regressions and improvements."
        ),
    ] = False,
    format: OutputFormat = Format.human,
) -> None:
    """Two runs point by point: each point's change against the noise two runs of it show,
    and its verdict (regression, improvement, unclear, unchanged); exit 1 on a regression."""
    from sweeper.analysis import RegressionRule  # pandas too
    from sweeper.commands import compare_runs  # pandas: loaded only for a comparison

    rule = RegressionRule() if threshold is None else RegressionRule(threshold=threshold)
    try:
        if not math.isfinite(rule.threshold):  # the option's range lets nan and inf by
            raise BadInput(f"--threshold {threshold}: a ratio is a finite number, such as 0.05")
        comparison = compare_runs.compare(results, base, new, rule)
    except SweeperError as exc:
        raise fail(exc) from None
    with printing():
        if format is Format.json:
            print(json.dumps(compare_runs.records(comparison, every), indent=1))
        else:
            compare_runs.print_comparison(comparison, every)
    if comparison.regressions:
        raise typer.Exit(EXIT_REGRESSION)
