"""`sweeper tune`: from runs that measured NCCL's default beside alternatives, an NCCL tuner
configuration in the CSV NCCL's example tuner plugin reads and the best per size as crossover
thresholds (JSON); `tune_files` does the work. docs/TUNING.md says how to load and verify it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from sweeper.commands.common import examples, fail, printing
from sweeper.commands.options import Format, OutputFormat, Results, directory
from sweeper.errors import SweeperError
from sweeper.results.files import require_directory

EXAMPLES = examples(
    "sweeper tune latest --out tuning",
    "sweeper tune RUN_DEFAULT RUN_NARROWED --results /data/results --format json",
)


def tune(
    runs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_ID...",
            help="Runs of the results, or latest: a grid (--nccl-env, --nccl-algos), or the "
            "runs of one command in each NCCL setting.",
        ),
    ],
    results: Results = Path("results"),
    out: Annotated[
        Path,
        typer.Option(
            parser=directory,
            metavar="DIR",
            help="Where nccl_tuner.conf and crossovers.json are written.",
        ),
    ] = Path("tuning"),
    format: OutputFormat = Format.human,
) -> None:
    """NCCL's default against the settings measured beside it, per operation, group shape and
    size (a winner only beyond the runs' noise): an NCCL tuner configuration for NCCL's
    example tuner plugin (NCCL_TUNER_CONFIG_FILE) and crossover thresholds as JSON."""
    from sweeper.commands import tune_files  # pandas: loaded only for a tuning

    try:
        require_directory(out, f"--out {out}")
        tuning = tune_files.tune(results, runs)
        csv, document = tune_files.write(tuning, out)
    except SweeperError as exc:
        raise fail(exc) from None
    with printing():
        if format is Format.json:
            summary = {
                "csv": str(csv),
                "crossovers": str(document),
                "lines": tuning.lines,
                "left_out": list(tuning.left_out),
            }
            print(json.dumps(summary, indent=1))
            return
        print(f"{csv}: {tuning.lines} line(s) for NCCL's example tuner plugin")
        for line in tuning.left_out:
            print(f"  not written: {line}")
        print(f"{document}: crossover thresholds per operation and group")
        if tuning.lines:
            print(
                "measure it beside the default: sweeper run ... --nccl-env "
                f"NCCL_TUNER_PLUGIN=PLUGIN.so --nccl-env NCCL_TUNER_CONFIG_FILE={csv.resolve()}"
            )
