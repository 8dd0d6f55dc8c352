from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from sweeper.ops.conventions import across_ranks, algbw_gb_per_s
from sweeper.planning.costs import adaptive
from sweeper.planning.iterations import BLOCK_BUDGET_S, GRAPH_ITERS, MAX_ITERS, MIN_ITERS
from sweeper.rank.timing import (
    Eager,
    HostTimer,
    block_target_s,
    calibrate,
    graph_unit,
)
from sweeper.wire import Block


@dataclass
class Counted:
    """A launcher whose calls run `unit` iterations each, counted."""

    unit: int = 1
    calls: list[int] = field(default_factory=list)

    def run(self) -> None:
        self.calls.append(self.unit)


class ClockTimer:
    """A timer whose iterations take a fixed time: calibration is tested on its own logic."""

    def __init__(self, per_iter_s: float) -> None:
        self.per_iter_s = per_iter_s
        self.iterations = 0

    def time(self, launcher: Counted, calls: int, samples: bool) -> Block:
        for _ in range(calls):
            launcher.run()
        self.iterations += calls * launcher.unit
        iters = calls * launcher.unit
        return Block(seconds=self.per_iter_s * iters, iters=iters, samples=None)


@pytest.mark.parametrize(
    ("per_iter_s", "iters"),
    [(1e-6, 20_000), (1e-4, 200), (1e-3, 20), (0.01, MIN_ITERS), (2.0, 1)],
)
def test_calibration_sizes_the_block_to_the_target(per_iter_s: float, iters: int) -> None:
    timer, launcher = ClockTimer(per_iter_s), Counted()
    warm, calls = calibrate(timer, launcher, lambda s: s, target_s=0.02)  # type: ignore[arg-type]
    assert calls == min(MAX_ITERS, iters)
    assert warm == len(launcher.calls) == timer.iterations  # the first call is timed too


@pytest.mark.parametrize(
    ("per_iter_s", "iters"),
    [(BLOCK_BUDGET_S / MIN_ITERS, MIN_ITERS), (0.03, 3), (0.06, 1), (0.6, 1)],
)
def test_at_large_sizes_a_time_budget_not_the_minimum_count_bounds_a_block(
    per_iter_s: float, iters: int
) -> None:
    timer, launcher = ClockTimer(per_iter_s), Counted()
    _, calls = calibrate(timer, launcher, lambda s: s, target_s=0.01)  # type: ignore[arg-type]
    assert calls == iters
    assert calls * per_iter_s <= max(BLOCK_BUDGET_S, per_iter_s) * (1 + 1e-9)


@pytest.mark.parametrize("per_iter_s", [BLOCK_BUDGET_S, 0.6, 2.0])
def test_a_first_call_that_fills_the_budget_alone_ends_calibration(per_iter_s: float) -> None:
    timer, launcher = ClockTimer(per_iter_s), Counted()
    warm, calls = calibrate(timer, launcher, lambda s: s, target_s=0.01)  # type: ignore[arg-type]
    assert (warm, calls, len(launcher.calls)) == (1, 1, 1)


def test_a_first_call_under_the_budget_goes_on_to_the_batches() -> None:
    timer, launcher = ClockTimer(BLOCK_BUDGET_S / 2), Counted()
    warm, calls = calibrate(timer, launcher, lambda s: s, target_s=0.01)  # type: ignore[arg-type]
    assert (warm, calls) == (2, 2)


def test_calibration_counts_whole_graph_replays() -> None:
    timer, launcher = ClockTimer(1e-5), Counted(unit=50)
    warm, calls = calibrate(timer, launcher, lambda s: s, target_s=0.02)  # type: ignore[arg-type]
    assert calls == 2000 // 50  # 20 ms of 10 us iterations, in replays of 50
    assert warm == sum(launcher.calls) == timer.iterations


def test_calibration_uses_the_agreed_time_not_the_local_one() -> None:
    slow_peer = lambda seconds: seconds * 10  # noqa: E731
    _, alone = calibrate(ClockTimer(1e-4), Counted(), lambda s: s, 0.02)  # type: ignore[arg-type]
    _, agreed = calibrate(ClockTimer(1e-4), Counted(), slow_peer, 0.02)  # type: ignore[arg-type]
    assert agreed < alone


@pytest.mark.parametrize(
    ("iters", "unit"), [(1, 1), (20, 20), (GRAPH_ITERS, GRAPH_ITERS), (150, 75), (1001, 91)]
)
def test_a_graph_holds_at_most_graph_iters_and_replays_cover_the_block(
    iters: int, unit: int
) -> None:
    assert graph_unit(iters) == unit
    replays = -(-iters // unit)
    assert unit <= GRAPH_ITERS
    assert iters <= replays * unit < iters + replays


def test_host_timer_counts_iterations_of_every_call() -> None:
    launcher = Counted(unit=4)
    block = HostTimer().time(launcher, 3, samples=True)  # type: ignore[arg-type]
    assert (block.iters, len(launcher.calls)) == (12, 3)
    assert len(block.samples or ()) == 3


def test_eager_launches_one_iteration_per_call() -> None:
    steps: list[int] = []
    block = HostTimer().time(Eager(lambda: steps.append(1)), 7, samples=False)
    assert (block.iters, len(steps), block.samples) == (7, 7, None)


def test_the_point_takes_the_median_block_of_the_slowest_rank() -> None:
    rank0 = [
        Block(seconds=0.010, iters=2, samples=None),
        Block(seconds=0.200, iters=2, samples=None),
        Block(seconds=0.012, iters=2, samples=None),
    ]
    rank1 = [
        Block(seconds=0.011, iters=2, samples=None),
        Block(seconds=0.030, iters=2, samples=None),
        Block(seconds=0.008, iters=2, samples=None),
    ]
    across = across_ranks([rank0, rank1])
    assert across.blocks == pytest.approx((0.0055, 0.100, 0.006))
    assert across.seconds == pytest.approx(0.006)  # the stalled block moves nothing
    assert across.fastest == pytest.approx(0.004)  # rank 1, in that same block
    assert across.samples is None


def test_an_even_number_of_blocks_takes_the_lower_middle_one() -> None:
    blocks = [[Block(seconds=seconds, iters=1, samples=None)] for seconds in (0.4, 0.1, 0.3, 0.2)]
    assert across_ranks(list(zip(*blocks, strict=True))).seconds == pytest.approx(0.2)


def test_samples_are_each_iterations_slowest_rank_over_every_block() -> None:
    rank0 = [
        Block(seconds=0.010, iters=2, samples=(0.004, 0.006)),
        Block(seconds=0.010, iters=2, samples=(0.005, 0.005)),
    ]
    rank1 = [
        Block(seconds=0.012, iters=2, samples=(0.007, 0.005)),
        Block(seconds=0.010, iters=2, samples=(0.001, 0.009)),
    ]
    assert across_ranks([rank0, rank1]).samples == (0.007, 0.006, 0.005, 0.009)


def test_algbw_is_bytes_over_time_in_decimal_gigabytes() -> None:
    assert algbw_gb_per_s(2 * 10**9, 0.5) == pytest.approx(4.0)


@pytest.mark.parametrize("per_iter_s", [1e-6, 1e-4, 1e-3, 0.02, 0.05, BLOCK_BUDGET_S, 0.6])
def test_the_cost_model_predicts_the_iterations_calibration_runs(per_iter_s: float) -> None:
    timer, launcher = ClockTimer(per_iter_s), Counted()
    ran = calibrate(timer, launcher, lambda s: s, block_target_s(3))  # type: ignore[arg-type]
    assert adaptive(per_iter_s, 3, graph=False) == ran
