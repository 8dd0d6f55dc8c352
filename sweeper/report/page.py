"""The report's page: its sections in reading order, each built from the run's view (a
section whose data the run lacks is left out)."""

from __future__ import annotations

from sweeper.report.blocks import Section
from sweeper.report.sections import (
    alternatives,
    baseline,
    collectives,
    decisions,
    devices,
    fleet,
    nightly,
    pairs,
    run,
    transport,
)
from sweeper.report.view import RunView


def sections(view: RunView) -> list[Section]:
    """Every section that has data, in reading order."""
    found = [
        transport.transport(view),  # a path NCCL took that is not the tier's: said first
        run.run_header(view),
        nightly.nightly(view),  # a nightly run's judgment against its history
        fleet.fleet(view),  # a fleet scan's verdicts
        run.status(view),
        run.topology(view),
        devices.gpus(view),
        collectives.operations(view),
        collectives.peaks(view),
        collectives.launch_cost(view),
        pairs.p2p(view),
        devices.host(view),
        alternatives.algorithms(view),
        *alternatives.nccl_variables(view),
        alternatives.composites(view),
        decisions.regret(view),  # NCCL's default against the settings measured beside it
        decisions.energy(view),
        decisions.start_up(view),
        collectives.experiments(view),
        collectives.max_sizes(view),
        collectives.alpha_beta(view),
        baseline.baseline(view),
    ]
    return [section for section in found if section is not None]
