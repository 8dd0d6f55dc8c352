"""How long a schedule takes, priced by the cost model (`planning.costs`). Each group's series
costs the sizes it will measure; a wave lasts as long as its slowest group, plus its rows
journaled on the driver; each actor set costs its start, the run its command's start and end.
Pure: no Ray, no torch.

The serial figure is what the driver paid before waves: every group alone, each opened and
closed on every rank of the set (a world-wide split per group, dearer as the set grows)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sweeper.planning.costs import CostModel
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group
from sweeper.planning.schedule import Schedule, Series, collector_paused
from sweeper.planning.sizing import Sized, footprint_bytes
from sweeper.wire import Backend, Launch, Timing


@dataclass(frozen=True)
class Estimate:
    waves_s: float  # the run as the executor runs it, its start and end included
    serial_s: float  # every group alone, as the driver ran them before waves
    points: int


def model_for(backend: Backend, timing: Timing, world: int, slowdown: float = 1.0) -> CostModel:
    """The cost model of the kind of machine a backend runs on (`world` ranks), timing points
    as a run's are handed (`request.timing`): iterations, blocks, and every launch mode and
    engine timing each point again; `slowdown`: a gloo run's where others keep its CPUs
    busy (`costs.crowded`)."""
    return CostModel.for_backend(
        backend,
        world=world,
        iters=timing.iters,
        warmup=timing.warmup,
        blocks=timing.blocks,
        graph=timing.launches[:1] == (Launch.GRAPH,),
        launches=max(1, len(timing.launches)) * max(1, len(timing.engines)),
        slowdown=slowdown,
    )


class Bounded(Sized, Protocol):
    @property
    def name(self) -> str: ...


def sizes(series: Series, bound_bytes: int | None) -> list[int]:
    """The sizes of a series' grid it will likely reach: a probe stops at the largest size
    whose buffers fit (`bound_bytes`, `bound`), which it measures; nothing fits: its first
    point, which says so."""
    itemsize = DTYPES[series.dtype].itemsize
    grid = [c * itemsize for c in series.counts]
    if series.probe and bound_bytes is not None:
        below = [s for s in grid if s < bound_bytes]
        grid = [*below, bound_bytes] if len(below) < len(grid) else below
    return grid


def bound(op: Sized | None, itemsize: int, n: int, ceiling_bytes: int, device: str) -> int | None:
    """Where a probe of `op` on n ranks of `ceiling_bytes` each ends: its footprint's bound
    (the ceiling itself for an operation not known here)."""
    if op is None:
        return ceiling_bytes
    count = _largest(op, itemsize, n, ceiling_bytes, device)
    return None if count is None else count * itemsize


def _largest(op: Sized, itemsize: int, n: int, budget: int, device: str) -> int | None:
    """About sizing.largest_count where every rank has `budget` (within 0.1%: an estimate):
    the first rank (a root) and the second stand for all, so a group of 8192 ranks is not
    walked rank by rank, and the search starts near the budget in elements."""

    def valid(elements: int) -> int:
        return op.count(elements * itemsize, itemsize, n)

    def ok(elements: int) -> bool:
        count = valid(elements)
        return all(
            footprint_bytes(op, count, n, rank, itemsize, device) <= budget
            for rank in range(min(n, 2))
        )

    if not ok(1):
        return None
    lo, hi = 1, max(2, budget // itemsize // 64)
    while ok(hi):
        lo, hi = hi, hi * 2
    while hi - lo > max(1, lo // 1000):
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return valid(lo)


def estimate(
    schedule: Schedule,
    model: CostModel,
    ceiling_bytes: int | None = None,
    ops: Sequence[Bounded] = (),
) -> Estimate:
    """Seconds for the schedule in waves and serially; `ceiling_bytes`: one rank's memory,
    where --max-size auto series end (each operation's by its footprint, `ops` being the
    schedule's). Group costs are computed once per (tier, series tuple)."""
    with collector_paused():
        return _estimate(schedule, model, ceiling_bytes, {op.name: op for op in ops})


def _estimate(
    schedule: Schedule,
    model: CostModel,
    ceiling_bytes: int | None,
    ops: Mapping[str, Bounded],
) -> Estimate:
    cache: dict[tuple[str, int], tuple[float, int]] = {}
    bounds: dict[tuple[str, str, int], int | None] = {}
    o = model.overheads
    device = "cuda" if schedule.placement.backend == Backend.NCCL else "cpu"

    def cost(group: Group) -> tuple[float, int]:
        """A group's seconds and points."""
        series = schedule.series(group)
        key = (group.tier, id(series))
        if key not in cache:
            seconds, points = 0.0, 0
            for one in series:
                if one.skipped is not None:  # a row a size saying why, nothing measured
                    points += len(one.counts)
                    continue
                limit: int | None = None
                if one.probe and ceiling_bytes is not None:
                    shape = (one.op, one.dtype, group.world_size)
                    if shape not in bounds:  # a fleet's groups share a handful
                        itemsize = DTYPES[one.dtype].itemsize
                        op = ops.get(one.op)
                        bounds[shape] = bound(op, itemsize, shape[2], ceiling_bytes, device)
                    limit = bounds[shape]
                    if limit is None:
                        points += 1  # nothing fits: its first point says so
                        seconds += model.series_s(group.tier, sizes(one, None)[:1], True)
                        continue
                kept = sizes(one, limit)
                if one.sparse:
                    kept = model.sparse(group.tier, kept)
                seconds += model.series_s(group.tier, kept, one.probe)
                points += len(kept)
            cache[key] = (seconds, points)
        return cache[key]

    waves_s = serial_s = o.run_s
    points = 0
    world = len(schedule.placement.members)
    for actors in schedule.actor_sets:
        if not schedule.measures_nothing(actors):  # else its rows say why; no actor starts
            waves_s += o.set_start_s
            serial_s += o.set_start_s
        for wave in actors.waves:
            longest = 0.0
            rows = 0
            for group in wave.groups:
                seconds, n = cost(group)
                longest = max(longest, seconds)
                serial_s += seconds + n * o.row_s + o.open_per_rank_s * world
                rows += n
            waves_s += longest + rows * o.row_s + o.wave_open_s
            points += rows
    return Estimate(waves_s * model.slowdown, serial_s * model.slowdown, points)


def duration(seconds: float) -> str:
    """An estimate as a person reads it: 42.0 s, 6.1 min, 7.5 h, 1.2 d."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"
