"""`sweeper run`: sweep every collective over a range of sizes into the results dataset, or
go on with an interrupted run (`--resume`) with the options it was started with."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sweeper.commands.common import (
    EXIT_POINTS_FAILED,
    EXIT_TRANSPORT_FLAGGED,
    examples,
    fail,
    stoppable,
    sweep_console,
    sweep_profile,
)
from sweeper.commands.options import Format, OutputFormat, ProfileFile, sweep_options
from sweeper.errors import SweeperError
from sweeper.planning.profile import build_spec
from sweeper.planning.spec import SweepSpec

if TYPE_CHECKING:
    from sweeper.driver.run import Resume

EXAMPLES = examples(
    "sweeper run",
    "sweeper run --ops all_reduce,all_gather --max-size 4G --dtypes bfloat16",
    "sweeper run --nodes 2 --tiers all --force-network",
    "sweeper run --ops 'p2p*' --tiers nvlink --concurrent --copy-engine",
    "sweeper run --ops 'all_to_all*,moe*' --moe tokens=8192,zipf=1.2",
    "sweeper run --ops 'all_reduce*,reduce_scatter+all_gather' --nccl-algos ring,tree",
    "sweeper run --ops all_reduce,all_to_all --nccl-env NCCL_PROTO=LL,LL128,Simple "
    "--nccl-env NCCL_MAX_NCHANNELS=1,4,32",
    "sweeper run --address ray://head:10001 --format json",
    "sweeper run --no-report",
    "sweeper run --profile jobs/weekly.yaml --max-size 1G",
)


@sweep_options(after="profile")
def run(
    profile: ProfileFile = None,
    resume: Annotated[
        str | None,
        typer.Option(
            metavar="RUN_ID",
            help="Go on with an interrupted or killed run (its id, from `sweeper history`) "
            "under --results, with the options it was started with: the points it has rows "
            "for are not measured again.",
        ),
    ] = None,
    format: OutputFormat = Format.human,
    **options: Any,
) -> None:
    """Sweep every collective over a range of sizes; write rows to the results dataset."""
    observer = sweep_console(format)
    try:
        with stoppable(observer):
            from sweeper.driver import sweep  # Ray and pandas: loaded only for a sweep

            if resume is None:
                finished = sweep.run(build_spec(sweep_profile(profile), **options), observer)
            else:
                spec, stopped = _resumed(resume, {"profile": profile, **options})
                if stopped.run_kind == "nightly":  # one nightly run, judged once at its end
                    from sweeper.commands import nightly_run  # pandas: only for a nightly run

                    policy = nightly_run.policy_of(stopped.command)
                    night = nightly_run.run(spec, policy, observer, stopped)
                else:
                    finished = sweep.run(spec, observer, resume=stopped)
    except SweeperError as exc:
        raise fail(exc) from None
    if resume is not None and stopped.run_kind == "nightly":
        nightly_run.show_night(night, format)
    if finished.failed:
        raise typer.Exit(EXIT_POINTS_FAILED)
    flagged = sorted({row.group_id for row in finished.rows if row.transport_flag})
    if flagged:
        print(
            f"sweeper: warning: NCCL took another path than the tier's for {len(flagged)} "
            f"group(s) ({', '.join(flagged[:3])}{', ...' if len(flagged) > 3 else ''}): each "
            "row's transport_flag says what to check, and the report opens with them",
            file=sys.stderr,
        )
        raise typer.Exit(EXIT_TRANSPORT_FLAGGED)


def _resumed(run_id: str, options: dict[str, Any]) -> tuple[SweepSpec, Resume]:
    """The spec a run was started with, where it is now, and where the run stopped."""
    from sweeper.driver import sweep  # Ray and pandas: loaded only for a sweep
    from sweeper.driver.run import resumed

    return resumed(run_id, options, "the run's own options", sweep.resumable)
