"""The cost model against what runs took: the recorded 4 H200 runs (tests/data/results), whose
walls tests/data/results/README.md gives; the fit `sweeper plan --calibrate` makes of their
rows; the adaptive rule the ranks apply; the sizes a sparse series keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.commands.plan_estimate import calibrated, plan_recorded
from sweeper.ops.registry import resolve
from sweeper.planning.costs import CostModel, TierCost, adaptive
from sweeper.planning.iterations import BLOCK_BUDGET_S, MIN_ITERS
from sweeper.planning.profile import build_spec, load_profile
from sweeper.planning.sizes import plateau_size, thinned
from sweeper.wire import Backend, Status, Tier

DATA = Path(__file__).parents[1] / "data"
H200X4 = DATA / "topologies" / "h200x4-nvswitch.json"
IDENTICAL = DATA / "results" / "h200-x4-identical-2026-11-27"
CHANNELS = DATA / "results" / "h200-x4-channels-2026-11-27"
# Each recorded run's wall (tests/data/results/README.md); the last ran with NCCL_MAX_NCHANNELS=2
WALLS_S = {
    "20261127T163755Z-977f70": 47.9,
    "20261127T163843Z-9afd0e": 47.5,
    "20261127T180604Z-ed73d6": 41.9,
    "20261127T180646Z-283fdf": 44.5,
    "20261127T180732Z-1ebc7d": 45.7,
}
# What those runs asked: `sweeper run --ops all_reduce,all_gather,send_recv --max-size 256M
# --samples --no-report` on one node of 4 H200
RECORDED = {"ops": "all_reduce,all_gather,send_recv", "max_size": "256M", "samples": True}


def _recorded_plan(calibrate: Path | None = None) -> float:
    spec = build_spec(**RECORDED)
    return plan_recorded(spec, H200X4, resolve(spec.ops), calibrate).estimate.waves_s


def test_the_plan_of_each_recorded_h200_run_is_within_20_percent_of_its_wall() -> None:
    estimated = _recorded_plan()
    for run_id, wall in WALLS_S.items():
        assert estimated == pytest.approx(wall, rel=0.2), run_id
    # the plan's points are the run's
    rows = sweeper.load(IDENTICAL)
    spec = build_spec(**RECORDED)
    points = plan_recorded(spec, H200X4, resolve(spec.ops)).estimate.points
    assert points == len(rows[rows["run_id"] == "20261127T163755Z-977f70"])


DEFAULT_RUNS = DATA / "results" / "h200-x4-default-2026-11-27"


def test_the_default_plan_of_a_4_h200_node_is_within_20_percent_of_its_default_runs_wall() -> None:
    """The default run of 23:46 UTC (140.2 s, README), which the model's GPU figures are fitted
    to: the plan of the same node within 20% of its wall, and the fit gives back the figures."""
    spec = build_spec()
    rows = sweeper.load(DEFAULT_RUNS)
    assert plan_recorded(spec, H200X4, resolve(spec.ops)).estimate.waves_s == pytest.approx(
        140.2, rel=0.2
    )
    fitted = calibrated(rows, CostModel())
    assert fitted.overheads.point_s == pytest.approx(0.036, rel=0.1)
    assert fitted.overheads.per_gb_s == pytest.approx(0.0118, rel=0.1)
    assert len(rows) == 459


ONE_H200 = DATA / "topologies" / "h200x1.json"
ONE_GPU_RUN = DATA / "results" / "h200-x1-default-2026-12-02"


def test_the_default_plan_of_one_h200_is_within_20_percent_of_its_default_runs_wall() -> None:
    """The default run on one H200 (73.7 s, README), which the one-GPU figures are fitted to:
    its plan within 20% of that wall (4 H200's figures gave 1.5 min), and the fit gives back
    the figures, the actor set's start ending at the first row although that row is skipped
    (an in-place collective of one rank moves nothing)."""
    spec = build_spec()
    estimated = plan_recorded(spec, ONE_H200, resolve(spec.ops)).estimate.waves_s
    assert estimated == pytest.approx(73.7, rel=0.2)
    rows = sweeper.load(ONE_GPU_RUN)
    assert rows.sort_values("started_at")["status"].iloc[0] == Status.SKIPPED
    fitted = calibrated(rows, CostModel.for_backend(Backend.NCCL, world=1)).overheads
    assert fitted.set_start_s == pytest.approx(14.0, rel=0.05)
    assert fitted.point_s == pytest.approx(0.030, rel=0.1)
    assert fitted.series_s == pytest.approx(0.048, rel=0.1)


@pytest.mark.parametrize("results", [IDENTICAL, CHANNELS], ids=lambda p: p.name)
def test_the_model_calibrated_on_recorded_rows_estimates_their_runs_within_20_percent(
    results: Path,
) -> None:
    runs = sweeper.load(results)["run_id"].unique()
    estimated = _recorded_plan(results)
    for run_id in runs:
        assert estimated == pytest.approx(WALLS_S[run_id], rel=0.2), run_id


def test_calibrating_finds_a_points_overhead_from_its_wall_less_its_iterations() -> None:
    rows = sweeper.load(IDENTICAL)
    model = calibrated(rows, CostModel(tiers={}))
    o = model.overheads
    # the recorded points last 0.16-0.21 s each, of which their iterations 0.003-0.05 s
    assert 0.15 < o.point_s < 0.19
    assert 0.0 <= o.per_gb_s < 0.2
    assert 0.05 < o.series_s < 0.4  # a series' first point opens its communicator
    assert 13 < o.set_start_s < 17  # run_started_at to the first point
    nvlink = model.tiers[Tier.NVLINK]
    assert 5 < nvlink.latency_us < 15  # graph launches of 8 B: 9-13 us
    assert 200 < nvlink.algbw_gb_per_s < 320  # all_reduce's 225, all_gather's 403 at 256 MiB


def test_calibrating_rows_without_times_keeps_the_models_overheads() -> None:
    rows = sweeper.load(IDENTICAL).assign(started_at=pd.NaT, ended_at=pd.NaT)
    model = CostModel()
    assert calibrated(rows, model).overheads == model.overheads


def test_the_adaptive_prediction_gives_the_iterations_the_recorded_points_ran() -> None:
    rows = sweeper.load(IDENTICAL)
    rows = rows[rows["status"] == Status.OK]
    ratios = [
        adaptive(row.time_us / 1e6, 3, graph=True)[1] / row.iters for row in rows.itertuples()
    ]
    ratios.sort()
    assert 0.9 < ratios[len(ratios) // 2] < 1.1  # the median point's, within 10%
    assert ratios[0] > 0.6  # every one within 40% (a calibration batch can run slow)
    assert ratios[-1] < 1.4


def test_an_iteration_past_the_block_budget_times_fewer_than_the_minimum() -> None:
    warm, iters = adaptive(0.6, 3, graph=True)  # all_reduce of 147 GB on 4 H200
    assert iters == max(1, int(BLOCK_BUDGET_S / 0.6))
    assert warm <= 3
    assert adaptive(1e-3, 3, graph=False)[1] == 10  # 10 ms a block
    assert adaptive(0.015, 3, graph=False)[1] == MIN_ITERS  # 5 fit the budget


def test_a_sparse_series_is_priced_at_the_sizes_the_run_keeps() -> None:
    model = CostModel()
    sizes = [8 * 2**k for k in range(35)]  # 8 B to 128 GiB
    kept = model.sparse(Tier.NVLINK, sizes)
    cost = TierCost(latency_us=10.9, algbw_gb_per_s=251.0)
    algbw = [s / cost.time_s(s) for s in sizes]
    assert kept == thinned(sizes, plateau_size(sizes, algbw))
    assert kept[-1] == sizes[-1]
    assert len(kept) < len(sizes)


def test_plan_calibrate_fits_the_model_to_a_runs_rows(tmp_path: Path) -> None:
    args = ["plan", "--topology", str(H200X4), "--ops", "all_reduce", "--max-size", "1M"]
    new = CliRunner().invoke(app, [*args, "--calibrate", str(IDENTICAL), "--format", "json"])
    assert new.exit_code == 0, new.output
    assert new.stderr == ""
    plain = CliRunner().invoke(app, [*args, "--format", "json"])
    assert json.loads(new.stdout)["cost_model"] != json.loads(plain.stdout)["cost_model"]
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = CliRunner().invoke(app, [*args, "--calibrate", str(empty)])
    assert refused.exit_code == 2
    assert "--calibrate" in refused.stderr


def test_the_apis_calibrate_keyword_fits_the_model() -> None:
    asked = {"topology": H200X4, "ops": "all_reduce", "max_size": "1M"}
    found = sweeper.plan(**asked, calibrate=IDENTICAL)
    assert found.fitted_from == IDENTICAL
    assert found.estimate != sweeper.plan(**asked).estimate


def test_the_gpu_and_cpu_models_are_the_measured_kinds() -> None:
    gpu, cpu = CostModel.for_backend(Backend.NCCL), CostModel.for_backend(Backend.GLOO)
    assert gpu.graph
    assert not cpu.graph
    assert gpu.overheads.point_s != cpu.overheads.point_s


def test_the_weekly_profile_plans_1024_dgx_nodes_within_8_hours() -> None:
    """jobs/weekly.yaml on 1024 nodes of 8 H100 (NVSwitch): every node pair in the circle
    method's waves, every curve on a sample, its NVLink pairs 4 at a time."""
    root = DATA.parents[1]
    spec = build_spec(load_profile(root / "jobs" / "weekly.yaml"), nodes=1024)
    found = plan_recorded(spec, DATA / "topologies" / "dgx-h100-nvswitch.json", resolve(spec.ops))
    assert found.estimate.waves_s <= 8 * 3600
    pairs = [
        len(w.groups)
        for w in found.schedule.waves
        if w.groups[0].tier == Tier.INTERNODE and len(w.groups[0].ranks) == 2
    ]
    assert sum(pairs) >= 1024 * 1023 // 2  # every node pair, and its network variant's
    assert max(pairs) == 512  # N/2 pairs a wave
    nvlink_pairs = [
        len(w.groups)
        for w in found.schedule.waves
        if w.groups[0][:2] == (Tier.NVLINK, "default") and len(w.groups[0].ranks) == 2
    ]
    assert set(nvlink_pairs) == {4 * 1024}  # each node's 28 pairs in 7 rounds of 4
