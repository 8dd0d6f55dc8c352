"""One series (an operation and dtype on a group) as a state machine: it says what to do next
(measure a size, ask the ranks' memory budgets, try an allocation) and is told how that
went. No Ray: the executor drives many at once, so probing and bisection of different
groups interleave, and every point's row is written the moment it is measured.

A grid series measures every size, whatever each one's outcome. A probe (--max-size auto)
measures the smallest size first (so NCCL's own buffers exist when the ranks read their
free memory), asks the budgets, measures the grid up to the largest size whose buffers fit
every rank and then that size; if an allocation is refused after all, it bisects between
the last size that ran and that one by allocation alone, and measures the largest that
allocates. A point that fails for another reason (an error, a timeout) does not end a probe:
its row says so and the series goes on with its next size, so the bound is only ever what
the budgets and allocations found. Only memory ends a probe early: nothing fits at all, or a
point ran out of memory once launched (a larger one would too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sweeper.plan.dtypes import DTYPES
from sweeper.plan.sizing import BISECT_STEPS, bisect, largest_count

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sweeper.ops.descriptor import Collective
    from sweeper.plan.schedule import Series


@dataclass(frozen=True)
class Measure:
    count: int


@dataclass(frozen=True)
class Budgets:
    """Ask every member for the bytes it can give a point."""


@dataclass(frozen=True)
class Allocate:
    """Whether every member can hold the buffers of `count`: allocation alone, then freed."""

    count: int


Action = Measure | Budgets | Allocate


class SeriesRunner:
    def __init__(
        self,
        series: Series,
        collective: Collective,
        world_size: int,
        device_type: str,
        max_size_bytes: int | None = None,  # a grid's limit, as asked
    ) -> None:
        self.series = series
        self.collective = collective
        self.n = world_size
        self.device_type = device_type
        self.itemsize = DTYPES[series.dtype].itemsize
        self.queue = list(series.counts)
        self.limit_bytes = None if series.probe else max_size_bytes
        self.good: int | None = None  # the largest count that ran
        self.lo = self.hi = self.trying = 0  # bisection: allocates, refused, being tried
        self.steps = 0
        self.state = "first" if series.probe else "grid"

    @property
    def done(self) -> bool:
        return self.state == "done"

    def next(self) -> Action | None:
        """What to do now; None once the series is over."""
        if self.state in ("first", "grid", "final"):
            if not self.queue:
                self._finish()
                return None
            return Measure(self.queue[0])
        if self.state == "budget":
            return Budgets()
        if self.state == "bisect":
            mid = bisect(self.collective, self.itemsize, self.n, self.lo, self.hi)
            if mid is not None and self.steps < BISECT_STEPS:
                self.steps += 1
                self.trying = mid
                return Allocate(mid)
            self.state = "final"  # the largest that allocates runs as the bound
            self.queue = [self.lo] if self.lo > (self.good or 0) else []
            self._limit(self.lo if self.queue else self.good)
            return self.next()
        return None

    def measured(self, status: str, launched: bool = True) -> None:
        """How the point of the last Measure went."""
        count = self.queue.pop(0)
        ok = status == "ok"
        if not self.series.probe:
            return  # a grid runs every size
        if self.state == "first":
            self.good = count if ok else None
            self.state = "done" if status == "oom" else "budget"
            return
        if self.state == "final":
            if ok:
                self.good = count
            self._finish()
            return
        if ok:
            self.good = count
        elif status == "oom" and not launched:
            self.lo, self.hi = self.good or 0, count
            self.queue = []
            self.state = "bisect"
        elif status == "oom":  # out of memory once launched: a larger one would be too
            self._limit(self.good)
            self._finish()

    def budgets(self, budgets: Sequence[int]) -> None:
        """The members' memory budgets: the largest count whose buffers fit every one."""
        first = self.series.counts[0]
        fits = largest_count(self.collective, self.itemsize, budgets, self.device_type)
        self.bound(max(fits or first, first))

    def bound(self, count: int) -> None:
        """The probe's bound, from the budgets or, resuming, from the bound a row recorded:
        the grid between the first size and it, then it."""
        first = self.series.counts[0]
        self.queue = [c for c in self.series.counts if first < c < count]
        self.queue += [count] if count > first else []
        self.limit_bytes = count * self.itemsize
        self.state = "grid"

    def allocated(self, ok: bool) -> None:
        """How the last Allocate went."""
        if ok:
            self.lo = self.trying
        else:
            self.hi = self.trying

    def _limit(self, count: int | None) -> None:
        self.limit_bytes = None if count is None else count * self.itemsize

    def _finish(self) -> None:
        self.state = "done"
