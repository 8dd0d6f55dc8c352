"""One series (an operation and dtype on a group) as a state machine: it says what to do next
(measure a size, ask the ranks' memory budgets, try an allocation) and is told how that went.
No Ray: the executor drives many at once, and each point's row is written as it is measured.

A grid series measures every size. A probe (--max-size auto) measures up to the largest size
whose buffers fit every rank, bisecting by allocation where one is refused; only memory ends it
early. A sparse series leaves out sizes above its plateau (`sizes.thinned`).
docs/ARCHITECTURE.md, "Inside the rooms", gives the probe's steps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from sweeper.planning.dtypes import DTYPES
from sweeper.planning.schedule import Series
from sweeper.planning.sizes import plateau_size, thinned
from sweeper.planning.sizing import BISECT_STEPS, Sized, bisect, largest_count
from sweeper.wire import Status


@dataclass(frozen=True)
class MeasurePoint:
    """Run the point of `count` elements (prepare, then execute) and say how it went."""

    count: int


@dataclass(frozen=True)
class Budgets:
    """Ask every member for the bytes it can give a point."""


@dataclass(frozen=True)
class Allocate:
    """Whether every member can hold the buffers of `count`: allocation alone, then freed."""

    count: int


Action = MeasurePoint | Budgets | Allocate


class SeriesState(Enum):
    """Where a series is: its first point (a probe), the grid, the members' budgets, a
    bisection by allocation, the bound the bisection found, or its end."""

    FIRST = "first"
    GRID = "grid"
    BUDGET = "budget"
    BISECT = "bisect"
    FINAL = "final"
    DONE = "done"


class SeriesRunner:
    def __init__(
        self,
        series: Series,
        collective: Sized,  # the operation's descriptor (ops.descriptor.Collective)
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
        self.state = SeriesState.FIRST if series.probe else SeriesState.GRID
        self.ran: list[tuple[int, float]] = []  # a sparse series' counts so far, and busbw

    @property
    def done(self) -> bool:
        return self.state is SeriesState.DONE

    def next(self) -> Action | None:
        """What to do now; None once the series is over."""
        if self.state in (SeriesState.FIRST, SeriesState.GRID, SeriesState.FINAL):
            if not self.queue:
                self.stop()
                return None
            return MeasurePoint(self.queue[0])
        if self.state is SeriesState.BUDGET:
            return Budgets()
        if self.state is SeriesState.BISECT:
            mid = bisect(self.collective, self.itemsize, self.n, self.lo, self.hi)
            if mid is not None and self.steps < BISECT_STEPS:
                self.steps += 1
                self.trying = mid
                return Allocate(mid)
            self.state = SeriesState.FINAL  # the largest that allocates runs as the bound
            self.queue = [self.lo] if self.lo > (self.good or 0) else []
            self._limit(self.lo if self.queue else self.good)
            return self.next()
        return None

    def measured(
        self, status: Status, launched: bool = True, busbw_gb_per_s: float | None = None
    ) -> None:
        """How the point of the last MeasurePoint went, and its busbw where it has one."""
        count = self.queue.pop(0)
        ok = status == Status.OK
        if self.series.sparse:
            self._thin(count, busbw_gb_per_s if ok else None)
        if not self.series.probe:
            return  # a grid runs every size
        if self.state is SeriesState.FIRST:
            self.good = count if ok else None
            self.state = SeriesState.DONE if status == Status.OOM else SeriesState.BUDGET
            return
        if self.state is SeriesState.FINAL:
            if ok:
                self.good = count
            self.stop()
            return
        if ok:
            self.good = count
        elif status == Status.OOM and not launched:
            self.lo, self.hi = self.good or 0, count
            self.queue = []
            self.state = SeriesState.BISECT
        elif status == Status.OOM:  # out of memory once launched: a larger one would be too
            self._limit(self.good)
            self.stop()

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
        self.state = SeriesState.GRID

    def allocated(self, ok: bool) -> None:
        """How the last Allocate went."""
        if ok:
            self.lo = self.trying
        else:
            self.hi = self.trying

    def _thin(self, count: int, busbw_gb_per_s: float | None) -> None:
        """The counts left, once the busbw so far shows a plateau: those `thinned` keeps. The
        same plateau every time after (the first one), so a count kept stays kept."""
        self.ran.append((count, math.nan if busbw_gb_per_s is None else busbw_gb_per_s))
        plateau = plateau_size([c for c, _ in self.ran], [b for _, b in self.ran])
        if plateau is not None:
            kept = set(thinned([*(c for c, _ in self.ran), *self.queue], plateau))
            self.queue = [c for c in self.queue if c in kept]

    def _limit(self, count: int | None) -> None:
        self.limit_bytes = None if count is None else count * self.itemsize

    def stop(self) -> None:
        """The series ends here: over, or its group can answer no more (a budget query or an
        allocation that broke or hung, a group that did not open)."""
        self.state = SeriesState.DONE
