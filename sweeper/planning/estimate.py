"""How long a schedule takes, priced by the cost model (`planning.costs`): each group's series
at the sizes they will measure, a wave as long as its slowest group plus its rows journaled
on the driver, each actor set its start, and the run its command's start and end. Pure: no
Ray, no torch.

The serial figure is what the driver paid before waves: every group alone, each opened and
closed on every rank of the set (a world-wide split per group, whose cost grows with the
set's size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sweeper.planning.costs import CostModel
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group
from sweeper.planning.schedule import Schedule, Series, collector_paused
from sweeper.planning.sizing import Sized, largest_count
from sweeper.wire import Backend, Launch, Timing


@dataclass(frozen=True)
class Estimate:
    waves_s: float  # the run as the executor runs it, its start and end included
    serial_s: float  # every group alone, as the driver ran them before waves
    points: int


def model_for(backend: Backend, timing: Timing) -> CostModel:
    """The cost model of the kind of machine a backend runs on, timing points as a run's
    are handed (`TimingOptions.timing`): iterations, blocks, and every launch mode and
    engine timing each point again."""
    return CostModel.for_backend(
        backend,
        iters=timing.iters,
        warmup=timing.warmup,
        blocks=timing.blocks,
        graph=timing.launches[:1] == (Launch.GRAPH,),
        launches=max(1, len(timing.launches)) * max(1, len(timing.engines)),
    )


class Bounded(Sized, Protocol):
    @property
    def name(self) -> str: ...


def sizes(
    series: Series,
    ceiling_bytes: int | None,
    ranks: int = 1,
    ops: Mapping[str, Bounded] | None = None,
    device: str = "cuda",
) -> list[int]:
    """The sizes of a series' grid it will likely reach: a probe stops at the largest size
    whose buffers fit a rank of `ceiling_bytes` (its operation's footprint, where `ops`
    has it, else the ceiling itself), which it measures."""
    itemsize = DTYPES[series.dtype].itemsize
    grid = [c * itemsize for c in series.counts]
    if series.probe and ceiling_bytes is not None:
        bound: int | None = ceiling_bytes
        op = (ops or {}).get(series.op)
        if op is not None:
            count = largest_count(op, itemsize, [ceiling_bytes] * ranks, device)
            bound = None if count is None else count * itemsize
        if bound is None:
            return grid[:1]  # nothing fits: its first point says so
        below = [s for s in grid if s < bound]
        grid = [*below, bound] if len(below) < len(grid) else below
    return grid


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
                kept = sizes(one, ceiling_bytes, group.world_size, ops, device)
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
    return Estimate(waves_s, serial_s, points)


def duration(seconds: float) -> str:
    """An estimate as a person reads it: 42.0 s, 6.1 min, 7.5 h, 1.2 d."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"
