"""The report's sections, each built from the run's view (report/view.py: its rows, record
and a baseline's rows where given). A section appears when its data exists: a function
returns None otherwise. Pure, apart from building plotly figure objects.

Where a point was timed both ways (`--launch graph,eager`), the figures and tables show its
CUDA-graph time (`analysis.preferred`), and each says which launch mode it shows; the
eager times are in the launch cost section.
"""

from __future__ import annotations

from sweeper.report.blocks import Section
from sweeper.report.sections import alternatives, baseline, collectives, devices, pairs, run
from sweeper.report.view import RunView


def build(view: RunView) -> list[Section]:
    """Every section that has data, in reading order."""
    found = [
        run.run_header(view),
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
        collectives.experiments(view),
        collectives.max_sizes(view),
        collectives.alpha_beta(view),
        baseline.baseline(view),
    ]
    return [section for section in found if section is not None]
