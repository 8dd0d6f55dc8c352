"""How long a schedule takes: a per-point cost model (latency + size / bandwidth per tier, and
the driver's fixed cost per point), defaults from measured figures (`sweeper plan --results` fits
them to an earlier run's rows). Pure: no Ray, no torch.

A wave lasts as long as its slowest group; an actor set costs its start; the serial figure is
what the driver paid before waves: every group alone, each opened and closed on every rank of
the set (a world-wide split per group, whose cost grows with the set's size).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group
from sweeper.planning.schedule import Schedule, Series, collector_paused
from sweeper.wire import Tier


@dataclass(frozen=True)
class TierCost:
    """One iteration of an operation on a tier: latency_us + S / algbw."""

    latency_us: float
    algbw_gb_per_s: float

    def time_s(self, size_bytes: int) -> float:
        return (self.latency_us + size_bytes / (self.algbw_gb_per_s * 1e3)) / 1e6


# docs/PERFORMANCE.md, 4x H200: the smallest all_reduce (35 us) and pairs at 256 MiB (~300
# GB/s; p2p-off ~25). internode: no measured figure yet (the fake clusters use loopback),
# assumed one 400 Gb/s NIC per GPU. cpu: gloo on the 2-core box the tests run on.
DEFAULT_TIERS: dict[str, TierCost] = {
    Tier.NVLINK: TierCost(35.0, 300.0),
    Tier.PCIE: TierCost(40.0, 25.0),
    Tier.INTERNODE: TierCost(50.0, 40.0),
    Tier.CPU: TierCost(150.0, 1.0),
    Tier.LOCAL: TierCost(10.0, 1000.0),
    # copies of each GPU on its own: mostly over PCIe (Gen4 x16 pinned, ~25 GB/s), assumed
    Tier.GPU: TierCost(10.0, 25.0),
}


@dataclass(frozen=True)
class CostModel:
    tiers: Mapping[str, TierCost] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    point_overhead_s: float = 0.05  # driver round trips, allocation and fill, first call, check
    wave_open_s: float = 0.05  # opening and closing a wave's groups (members only)
    # starting an actor set and joining its world: 10.6 s for one NCCL rank on nvidia-h100-x1
    # (benchmarks/scan_costs.py, docs/measurements/h100-x1-2026-11-25.md)
    set_start_s: float = 10.6
    open_per_rank_s: float = 0.003  # serial driver: one group opened on every rank of the set
    adaptive_s: float = 0.03  # timing.TARGET_POINT_S, adaptive blocks together (not imported:
    # timing brings torch)
    iters: int | None = None  # None: adaptive
    warmup: int | None = None
    blocks: int = 3

    def point_s(self, tier: str, size_bytes: int) -> float:
        one = self.tiers.get(tier, DEFAULT_TIERS[Tier.INTERNODE]).time_s(size_bytes)
        timed = self.adaptive_s if self.iters is None else 0.0
        timed = max(timed, self.blocks * (self.iters or 1) * one)
        warm = timed if self.warmup is None else self.warmup * one  # adaptive: as long
        return self.point_overhead_s + timed + warm + 2 * one  # + the first call, the check


@dataclass(frozen=True)
class Estimate:
    waves_s: float  # the schedule as the executor runs it
    serial_s: float  # every group alone, as the driver ran them before waves
    points: int


def _sizes(series: Series, ceiling_bytes: int | None) -> list[int]:
    """The sizes a series will likely run: a probe stops near the ceiling (one rank's memory)."""
    itemsize = DTYPES[series.dtype].itemsize
    sizes = [c * itemsize for c in series.counts]
    if series.probe and ceiling_bytes is not None:
        below = [s for s in sizes if s < ceiling_bytes]
        sizes = [*below, ceiling_bytes] if len(below) < len(sizes) else below
    return sizes


def estimate(schedule: Schedule, model: CostModel, ceiling_bytes: int | None = None) -> Estimate:
    """Seconds for the schedule in waves and serially; `ceiling_bytes`: where --max-size auto
    series likely end. Group costs are computed once per (tier, series tuple)."""
    with collector_paused():
        return _estimate(schedule, model, ceiling_bytes)


def _estimate(schedule: Schedule, model: CostModel, ceiling_bytes: int | None) -> Estimate:
    cache: dict[tuple[str, int], tuple[float, int]] = {}

    def cost(group: Group) -> tuple[float, int]:
        series = schedule.series(group)
        key = (group.tier, id(series))
        if key not in cache:
            sizes = [s for one in series for s in _sizes(one, ceiling_bytes)]
            cache[key] = (sum(model.point_s(group.tier, s) for s in sizes), len(sizes))
        return cache[key]

    waves_s = serial_s = 0.0
    points = 0
    world = len(schedule.placement.members)
    for actors in schedule.actor_sets:
        waves_s += model.set_start_s
        serial_s += model.set_start_s
        for wave in actors.waves:
            longest = 0.0
            for group in wave.groups:
                seconds, n = cost(group)
                longest = max(longest, seconds)
                serial_s += seconds + model.open_per_rank_s * world
                points += n
            waves_s += longest + model.wave_open_s
    return Estimate(waves_s, serial_s, points)
