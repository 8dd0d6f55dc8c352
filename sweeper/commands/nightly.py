"""`sweeper nightly`: a profile swept (or, with a scan: section, the fleet scanned) and judged
against the history of its cluster and hardware (`nightly_run`, `analysis.nightly`), its verdict
shown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sweeper.commands.common import (
    examples,
    fail,
    stoppable,
    sweep_console,
)
from sweeper.commands.options import Format, OutputFormat, ProfileFile, sweep_options
from sweeper.errors import BadInput, SweeperError
from sweeper.planning.profile import SCAN_TAKES, Profile, build_spec, load_profile

EXAMPLES = examples(
    "sweeper nightly --profile jobs/nightly.yaml",
    "sweeper nightly --profile jobs/nightly.yaml --results /data/results "
    "--reports-dir /data/reports",
    "sweeper nightly --profile jobs/nightly.yaml --nodes 2 --max-size 1G",
    "sweeper nightly --profile jobs/nightly.yaml --format json",
)


# What `--judge` takes beside it: where the run and its summary are, and how to judge it.
_JUDGE_TAKES = ("results", "reports_dir")


@sweep_options(after="profile")  # every one of run's: flags override the profile's keys
def nightly(
    profile: ProfileFile = None,
    format: OutputFormat = Format.human,
    judge: Annotated[
        str | None,
        typer.Option(
            metavar="RUN_ID",
            help="Judge a complete nightly run that never was (stopped or killed before its "
            "summary), as it would have been: no sweep.",
        ),
    ] = None,
    **options: Any,
) -> None:
    """Sweep a profile (or scan the fleet, with a scan: section), compare the run with the
    history of this cluster and hardware, write the report and a JSON summary beside it; exit 1
    on a regression or a condemned node, GPU or link (4: neither, but some points failed)."""
    if judge is not None:
        _judge_later(judge, profile, format, options)
    observer = sweep_console(format)
    try:
        with stoppable(observer):
            loaded = _profile(profile) or Profile()
            given = sorted(k for k, v in options.items() if v is not None)
            if loaded.scan is not None and (sweeps := [k for k in given if k not in SCAN_TAKES]):
                flags = ", ".join("--" + k.replace("_", "-") for k in sweeps)
                raise BadInput(f"the profile's scan: chooses what a scan measures; drop {flags}")
            spec = build_spec(loaded, **options)
            # pandas and Ray (not started): once the options are good
            from sweeper.analysis.regression import Policy
            from sweeper.commands import nightly_run

            night = nightly_run.run(spec, Policy.of(loaded.nightly), observer, scan=loaded.scan)
    except SweeperError as exc:
        raise fail(exc) from None
    nightly_run.show_night(night, format)


def _judge_later(run_id: str, profile: Path | None, output_format: Format, options: Any) -> None:
    """`--judge RUN_ID`: the night judged now, its summary written, its verdict shown."""
    try:
        if extra := sorted(
            k for k, v in options.items() if v is not None and k not in _JUDGE_TAKES
        ):
            flags = ", ".join("--" + k.replace("_", "-") for k in extra)
            raise BadInput(f"--judge judges a run measured already; drop {flags}")
        from sweeper.commands import nightly_run  # pandas: once the options are good

        results = options.get("results") or Path("results")
        night = nightly_run.judge_later(results, run_id, options.get("reports_dir"), profile)
    except SweeperError as exc:
        raise fail(exc) from None
    nightly_run.show_night(night, output_format)


def _profile(path: Path | None) -> Profile | None:
    return load_profile(path) if path is not None else None
