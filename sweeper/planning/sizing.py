"""Memory budgets and `--max-size auto`: the largest size an operation can move. Pure.

Each rank reports its budget (free memory after a warm-up, less a reserve, capped by
`--mem-limit`); an operation's per-rank footprint comes from its descriptor (send and
receive buffers, plus the check's scratch); the bound is the largest S whose footprint
fits every rank's budget. When an allocation at the bound still fails, the driver
bisects between the last size that ran and the one that failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

BISECT_STEPS = 6  # at most this many tries below a bound that failed
BISECT_TOLERANCE = 0.01  # stop when the bracket is within 1% of the size
# Elements the data's check (sweeper/rank/data.py) compares per step, so scratch memory stays
# bounded at any size: large on GPUs, where each step is a few kernel launches, smaller on
# CPUs, where memory is shared and tight. The fill writes in place and needs none.
CHUNK_ELEMENTS = {"cuda": 1 << 26, "cpu": 1 << 22}
# Bytes alive at once per element of a chunk, with room to spare: the check's comparison, one
# bool per element (tests/unit/test_data.py measures it), beside one period of the pattern; a
# count of the wrong ones widens a mebi-element at a time (data.COUNT_ELEMENTS), not a chunk.
SCRATCH_PER_ELEMENT = 3


class Footprint(Protocol):
    """A rank's buffers for a point, as its descriptor lays them out (`descriptor.Layout`)."""

    @property
    def elements(self) -> int: ...


class Sized(Protocol):
    """The part of an operation's descriptor that sizing needs (`descriptor.Collective`)."""

    def layout(self, count: int, n: int, rank: int) -> Footprint: ...

    def count(self, size_bytes: int, itemsize: int, n: int) -> int: ...


def scratch_bytes(device_type: str, elements: int) -> int:
    """Memory fill and check need beyond the buffers, for a buffer of `elements`."""
    return SCRATCH_PER_ELEMENT * min(
        elements, CHUNK_ELEMENTS.get(device_type, CHUNK_ELEMENTS["cpu"])
    )


def footprint_bytes(
    collective: Sized, count: int, n: int, rank: int, itemsize: int, device_type: str
) -> int:
    """What one rank needs for a point: its buffers and the fill and check's scratch."""
    elements = collective.layout(count, n, rank).elements
    return elements * itemsize + scratch_bytes(device_type, elements)


def fits(
    collective: Sized, count: int, itemsize: int, budgets: Sequence[int], device_type: str
) -> bool:
    n = len(budgets)
    return all(
        footprint_bytes(collective, count, n, rank, itemsize, device_type) <= budget
        for rank, budget in enumerate(budgets)
    )


def largest_count(
    collective: Sized, itemsize: int, budgets: Sequence[int], device_type: str
) -> int | None:
    """The largest element count of S (rounded as the descriptor rounds) whose footprint fits
    every rank's budget; None if not even the smallest does."""
    n = len(budgets)

    def valid(elements: int) -> int:
        return collective.count(elements * itemsize, itemsize, n)

    def ok(elements: int) -> bool:
        return fits(collective, valid(elements), itemsize, budgets, device_type)

    if not ok(1):
        return None
    lo, hi = 1, 2
    while ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # ok(lo), not ok(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return valid(lo)


def bisect(collective: Sized, itemsize: int, n: int, good: int, bad: int) -> int | None:
    """The count to try between one that ran (`good`) and one that did not (`bad`); None
    once they are within the tolerance (or no valid count lies between them)."""
    if bad - good <= max(1, int(bad * BISECT_TOLERANCE)):
        return None
    mid = collective.count((good + bad) // 2 * itemsize, itemsize, n)
    return mid if good < mid < bad else None
