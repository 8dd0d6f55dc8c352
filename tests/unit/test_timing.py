from __future__ import annotations

from collections.abc import Callable

import pytest

from sweeper.timing import MAX_ITERS, MIN_ITERS, Block, across_ranks, algbw_gb_per_s, calibrate


class ClockTimer:
    """A timer whose iterations take a fixed time: calibration is tested on its own logic."""

    def __init__(self, per_iter_s: float) -> None:
        self.per_iter_s = per_iter_s
        self.iterations = 0

    def time(self, step: Callable[[], None], iters: int, samples: bool) -> Block:
        for _ in range(iters):
            step()
        self.iterations += iters
        return Block(self.per_iter_s * iters, iters, None)


@pytest.mark.parametrize(
    ("per_iter_s", "iters"),
    [(1e-6, 20_000), (1e-4, 200), (1e-3, 20), (0.01, MIN_ITERS), (2.0, MIN_ITERS)],
)
def test_calibration_sizes_the_block_to_the_target(per_iter_s: float, iters: int) -> None:
    timer = ClockTimer(per_iter_s)
    calls = []
    warm, timed = calibrate(timer, lambda: calls.append(1), lambda s: s, target_s=0.02)
    assert timed == min(MAX_ITERS, iters)
    assert warm == len(calls) == timer.iterations + 1


def test_calibration_uses_the_agreed_time_not_the_local_one() -> None:
    slow_peer = lambda seconds: seconds * 10  # noqa: E731
    _, timed_alone = calibrate(ClockTimer(1e-4), lambda: None, lambda s: s, 0.02)
    _, timed_agreed = calibrate(ClockTimer(1e-4), lambda: None, slow_peer, 0.02)
    assert timed_agreed < timed_alone


def test_across_ranks_takes_the_slowest_rank_and_each_iterations_slowest() -> None:
    blocks = [Block(0.010, 2, (0.004, 0.006)), Block(0.012, 2, (0.007, 0.005))]
    slowest, fastest, samples = across_ranks(blocks)
    assert (slowest, fastest) == (pytest.approx(0.006), pytest.approx(0.005))
    assert samples == (0.007, 0.006)
    assert across_ranks([Block(0.01, 2, None), Block(0.01, 2, None)])[2] is None


def test_algbw_is_bytes_over_time_in_decimal_gigabytes() -> None:
    assert algbw_gb_per_s(2 * 10**9, 0.5) == pytest.approx(4.0)
