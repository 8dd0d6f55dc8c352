"""The simulated scan's measurement noise, drawn from recorded GPU runs: each point's median
block over the median block of its series, for series measured in two runs or more
(`recorded_noise.py`, written by `benchmarks/scan_noise.py` from tests/data/results). A point
is drawn whole, not its blocks one by one: a slow state stays for the point
(docs/REGRESSIONS.md), so independent blocks would hide it behind their median.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from sweeper.scan.recorded_noise import TIMES


@dataclass(frozen=True, slots=True)
class Noise:
    """An empirical distribution of relative point times: 1.0 is its series' median, 1.3 a
    point 30% slower (its bus bandwidth 1/1.3 of the median's)."""

    times: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.times or min(self.times) <= 0:
            raise ValueError("a noise distribution needs positive relative times")

    def draw(self, rng: random.Random) -> float:
        return self.times[rng.randrange(len(self.times))]

    def share_slower(self, than: float) -> float:
        """The share of points slower than `than` times their series' median."""
        return sum(t > than for t in self.times) / len(self.times)


QUIET = Noise((1.0,))  # every figure its model's: for tests of a fault's physics alone


def relative_times(series: Iterable[Sequence[Sequence[float]]]) -> list[float]:
    """Each point's median block over the median of every block of its series (a series: its
    points' blocks, one point a run), for series of two points or more: a point alone is its
    own median and says nothing of the spread."""
    out: list[float] = []
    for points in series:
        if len(points) < 2:
            continue
        middle = median(b for blocks in points for b in blocks)
        out += [median(blocks) / middle for blocks in points]
    return out


def recorded(min_size_bytes: int = 0) -> Noise:
    """The recorded runs' points of `min_size_bytes` or more (0: every size, the heaviest
    tails; from 1 MiB: the bandwidth sizes only)."""
    return Noise(tuple(t for size, times in TIMES.items() if size >= min_size_bytes for t in times))
