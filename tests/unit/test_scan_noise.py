"""The simulated scan's noise: drawn from the recorded GPU runs (tests/data/results), their
slow tails included, and held to that data by writing its table again."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))  # scripts, not a package

import scan_noise

from sweeper.scan import recorded_noise
from sweeper.scan.fleet import ScanGroup, Stage
from sweeper.scan.noise import Noise, recorded, relative_times
from sweeper.scan.simulate import BANDWIDTH_BYTES, Costs, Oracle, fleet_of

RESULTS = Path(__file__).parents[1] / "data" / "results"


def test_the_recorded_noise_table_is_what_the_recorded_gpu_runs_give() -> None:
    assert scan_noise.table(RESULTS) == Path(recorded_noise.__file__).read_text()


def test_a_point_is_its_median_block_over_its_series_and_a_point_alone_says_nothing() -> None:
    runs = [[[10.0, 10.0, 13.0]], [[10.0, 11.0, 11.0], [20.0, 20.0, 20.0]]]
    # the second series' blocks: 10, 11, 11, 20, 20, 20 (median 15.5)
    assert relative_times(runs) == pytest.approx([11 / 15.5, 20 / 15.5])


def test_the_recorded_noise_keeps_the_slow_tails_a_gaussian_of_one_percent_has_not() -> None:
    every = recorded()
    bandwidth = recorded(BANDWIDTH_BYTES)
    assert len(every.times) > 500
    assert len(bandwidth.times) > 200
    # docs/REGRESSIONS.md's 25-45% slow points: present at every size, none so at 1 MiB up
    assert 0.003 < every.share_slower(1.25) < 0.02
    assert max(every.times) > 1.45
    assert bandwidth.share_slower(1.25) == 0
    # a 1% Gaussian is 10% slow once in 10^23 draws; the recorded bandwidth points, 1 in 252
    assert bandwidth.share_slower(1.10) > 0
    assert min(bandwidth.times) < 0.95
    assert max(bandwidth.times) > 1.05


def test_the_oracle_measures_each_figure_as_its_model_over_a_recorded_relative_time() -> None:
    noise = Noise((1.0, 1.3))
    fleet = fleet_of(4, 2)
    oracle = Oracle((), Costs(noise=noise), seed=0)
    group = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=("n0000", "n0001"))
    model = Oracle((), Costs(noise=Noise((1.0,))), seed=0).measure(fleet, group).busbw_gb_per_s
    assert model is not None
    figures = [oracle.measure(fleet, group).busbw_gb_per_s for _ in range(4000)]
    assert {round(model / (f or 1.0), 9) for f in figures} == {1.0, 1.3}
    slow = sum(f is not None and f < model for f in figures)
    # binomial(4000, 1/2): 2000 +- 32 a sigma; 10 sigmas cannot be crossed by chance
    assert abs(slow - 2000) < 320


def test_a_noise_of_no_figure_or_of_a_figure_at_or_below_zero_is_refused() -> None:
    for times in ((), (1.0, 0.0), (-1.0,)):
        with pytest.raises(ValueError, match="positive relative times"):
            Noise(times)
    assert Noise((1.0,)).draw(random.Random(0)) == 1.0
