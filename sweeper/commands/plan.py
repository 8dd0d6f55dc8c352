"""`sweeper plan`: the schedule a sweep would run and its estimated duration
(`plan_estimate`), with no sweep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from sweeper.commands.common import examples, fail, printing, printing_aside, sweep_profile
from sweeper.commands.options import Calibrate, Format, OutputFormat, ProfileFile, sweep_options
from sweeper.errors import SweeperError
from sweeper.planning.fields import cli_of
from sweeper.planning.profile import build_spec
from sweeper.planning.spec import SweepSpec

# what a plan does not ask (marked so in their sections): how points are timed and checked,
# where rows and reports go
PLAN_LEAVES_OUT = [n for n, f in SweepSpec.model_fields.items() if not cli_of(f).plan]

EXAMPLES = examples(
    "sweeper plan --topology tests/data/topologies/dgx-h100-nvswitch.json --nodes 1024 "
    "--profile jobs/weekly.yaml",
    "sweeper plan --tiers all --format json",
    "sweeper plan --topology node.json --nodes 16 --tiers all --calibrate results",
)


@sweep_options(after="calibrate", leave_out=PLAN_LEAVES_OUT)
def plan(
    profile: ProfileFile = None,
    topology: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A recorded topology (one node's NVML record), replicated --nodes times: "
            "plan with no cluster.",
        ),
    ] = None,
    calibrate: Calibrate = None,
    format: OutputFormat = Format.human,
    **options: Any,
) -> None:
    """The schedule a sweep would run: actor sets, waves of groups that share no link, points,
    and the estimated duration (in waves, and one group at a time)."""
    try:
        spec = build_spec(sweep_profile(profile), **options)
        # pandas (the cost model): once the options are good
        from sweeper.commands import plan_estimate

        with printing_aside(format is Format.json):
            found = plan_estimate.plan(spec, topology, calibrate)
    except SweeperError as exc:
        raise fail(exc) from None
    with printing():
        if format is Format.json:
            print(json.dumps(plan_estimate.records(found), indent=1))
        else:
            plan_estimate.print_plan(found)
