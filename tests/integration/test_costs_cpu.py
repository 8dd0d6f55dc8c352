"""The cost model against the suite's own CPU sweeps (tests/cli_runs.py, run once a session):
`sweeper plan --calibrate` fitted to a run's rows gives back the time its points took, and
the CPU box's default figures (planning/costs.py) are of the same order."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import sweeper
from sweeper.commands.plan_estimate import calibrated, plan_recorded
from sweeper.ops.registry import resolve
from sweeper.planning.costs import CostModel
from sweeper.planning.estimate import estimate
from sweeper.planning.profile import build_spec
from sweeper.wire import Backend
from tests.cli_runs import OPS, Runs

CPU = Path(__file__).parents[1] / "data" / "topologies" / "cpu-no-nvml.json"


def _points_s(model: CostModel, ranks: int) -> float:
    """The plan of cli_runs' RUN on one node of `ranks` gloo ranks, its points alone (no run
    start, no actor set), priced by `model`."""
    spec = build_spec(
        ops=",".join(OPS), max_size="64K", iters=5, warmup=1, samples=True, world=ranks
    )
    found = plan_recorded(spec, CPU, resolve(spec.ops))
    o = model.overheads
    return estimate(found.schedule, model).waves_s - o.run_s - o.set_start_s


def test_the_model_calibrated_on_a_cpu_sweep_gives_back_its_points_time(cli_runs: Runs) -> None:
    rows = sweeper.load(cli_runs.results)
    rows = rows[rows["run_id"] == cli_runs.first]
    span = (rows["ended_at"].max() - rows["started_at"].min()).total_seconds()
    ranks = int(rows["world_size"].max())
    fitted = calibrated(rows, CostModel.for_backend(Backend.GLOO, iters=5, warmup=1))
    assert _points_s(fitted, ranks) == pytest.approx(span, rel=0.2)
    # the box's default figures (measured on the default run) are of the same order
    default = CostModel.for_backend(Backend.GLOO, iters=5, warmup=1)
    assert span / 3 < _points_s(default, ranks) < span * 3
    finished = json.loads(cli_runs.first_stdout.splitlines()[0])
    assert finished["estimated_s"] > 0  # the run announced its estimate as it started
    assert not pd.isna(rows["started_at"]).any()
