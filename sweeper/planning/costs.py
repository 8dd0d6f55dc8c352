"""What a run costs, point by point, on each kind of machine: the measured figures, and the rules
that turn them into the sizes a series will run and a point's seconds. Pure: no Ray, no torch.

`sweeper plan`, the estimate a run announces at its start and the scan's simulation all price
with this module; `sweeper plan --calibrate DIR` fits it to a run's rows
(commands/plan_estimate.py). docs/PERFORMANCE.md, "Cost model", says what each figure covers
(`point_s`, `per_gb_s`, `row_s`, `series_s`, `probe_s`, `run_s`) and where it comes from."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import median

from sweeper.planning.iterations import (
    BLOCK_BUDGET_S,
    GRAPH_ITERS,
    MAX_ITERS,
    TARGET_POINT_S,
    block_iters,
)
from sweeper.planning.sizes import plateau_size, thinned
from sweeper.wire import Backend, Tier

GB = 1e9


@dataclass(frozen=True, kw_only=True, slots=True)
class TierCost:
    """One iteration of an operation on a tier: latency_us + S / algbw."""

    latency_us: float
    algbw_gb_per_s: float

    def time_s(self, size_bytes: int) -> float:
        return (self.latency_us + size_bytes / (self.algbw_gb_per_s * 1e3)) / 1e6


def adaptive(one_s: float, blocks: int, graph: bool) -> tuple[int, int]:
    """What rank/timing.py runs for a point whose iteration takes `one_s` (its `calibrate`,
    with the same figures and last step): iterations before the timed blocks (a graph's
    eager call, the first call, batches of 1, 4, 16, ... calls until one lasts a quarter of
    a block's target) and each block's iterations. A graph replays `unit` iterations a call,
    as many as last a quarter of a block (at most GRAPH_ITERS)."""
    one = max(one_s, 1e-9)
    target = TARGET_POINT_S / blocks
    unit = max(1, min(GRAPH_ITERS, math.floor(target / 4 / one))) if graph else 1
    if one >= BLOCK_BUDGET_S and target <= BLOCK_BUDGET_S:  # the first call decides alone
        return (1 if graph else 0) + 1, 1
    warm, batch = 1, 1  # the first call
    while batch * unit * one < target / 4 and batch * unit < MAX_ITERS:
        warm += batch
        batch *= 4
    warm += batch
    iters = max(1, round(block_iters(one, target) / unit)) * unit
    return (1 if graph else 0) + warm * unit, iters


@dataclass(frozen=True, kw_only=True, slots=True)
class Overheads:
    """What a point, a series, an actor set and a run cost beyond the timed iterations."""

    point_s: float  # driver round trips, buffers, graph capture, NVML, the check's compare
    per_gb_s: float  # what grows with S: allocation, the check's fill and compare
    row_s: float  # a point's rows journaled (one fsync), serial over a wave's groups
    series_s: float  # a series' first point beyond a point: communicators, connections
    probe_s: float  # a probed series (--max-size auto): the ranks' budgets, allocation tries
    wave_open_s: float  # opening a wave's groups (members only)
    set_start_s: float  # an actor set's actors started and joined to their world
    run_s: float  # the command itself: imports, an embedded Ray started and stopped, records
    open_per_rank_s: float  # the serial driver before waves: a group opened on every rank


# The figures, by machine kind, each as `sweeper plan --calibrate` fits it (commands/
# plan_estimate.py): a point's wall (ended_at - started_at) less its iterations (warmup_iters
# + 3 x iters + 1, times time_us), plus the gap since its group's point before less row_s
# (where its buffers are allocated and filled), as a line over size_bytes through every point
# but a series' first (point_s, per_gb_s); what a series' first point adds above the line
# (series_s); probe_s's mean per series; run_started_at to the first point (set_start_s).
# Where a figure was not measured on the kind it says so.
#
# GPUs: the default `sweeper run` on 4 H200 as `sweeper plan --calibrate` fits it
# (docs/measurements/h200-x4-2026-11-27.md, "The cost model's fit"); row_s from nvidia-h100-x1
# (docs/measurements/h100-x1-2026-11-25.md); wave_open_s from the 2-core box
# (docs/measurements/cpu-2026-11-23.md); open_per_rank_s from issue 15's fake clusters.
GPU_OVERHEADS = Overheads(
    point_s=0.036,
    per_gb_s=0.0118,
    row_s=0.0032,
    series_s=0.110,
    probe_s=0.040,
    wave_open_s=0.05,
    set_start_s=19.2,
    run_s=14.9,
    open_per_rank_s=0.003,
)
# A machine of one GPU (nvidia-h200): its default run fitted as above, with set_start_s from
# its first row of any status (docs/measurements/h200-x1-2026-12-02.md, "The one-GPU fit");
# row_s, wave_open_s, run_s and open_per_rank_s as GPU_OVERHEADS'.
ONE_GPU_OVERHEADS = replace(
    GPU_OVERHEADS,
    point_s=0.030,
    per_gb_s=0.0076,
    series_s=0.048,
    probe_s=0.008,
    set_start_s=14.0,
)
# The 2-core CPU box the tests run on (2 gloo ranks): four default runs with nothing else on
# the box, fitted together, run_s each wall less its actor set's start and its points' span
# (docs/measurements/cpu-2026-12-03-estimate.md).
CPU_OVERHEADS = Overheads(
    point_s=0.0175,
    per_gb_s=1.97,
    row_s=0.0032,
    series_s=0.0052,
    probe_s=0.0134,
    wave_open_s=0.05,
    set_start_s=3.2,
    run_s=5.4,
    open_per_rank_s=0.003,
)

# An iteration per tier. nvlink and gpu (each GPU's copies, pinned and pageable together):
# the 4 H200 default run above fitted (graph launches; their eager smallest all_reduce was
# 35 us, docs/measurements/h200-x4-2026-11-22.md). cpu: the CPU runs of CPU_OVERHEADS
# fitted. pcie: 4 H200 with NCCL_P2P_DISABLE=1, 23.0-31.4 GB/s at 256 MiB
# (h200-x4-2026-11-22.md), the latency assumed. internode: assumed, one 400 Gb/s NIC per GPU,
# no fleet measured. local (one GPU alone): the one-H200 default run fitted (h200-x1-2026-12-02.md).
DEFAULT_TIERS: dict[str, TierCost] = {
    Tier.NVLINK: TierCost(latency_us=8.4, algbw_gb_per_s=331.0),
    Tier.PCIE: TierCost(latency_us=40.0, algbw_gb_per_s=25.0),
    Tier.INTERNODE: TierCost(latency_us=50.0, algbw_gb_per_s=40.0),
    Tier.CPU: TierCost(latency_us=592.0, algbw_gb_per_s=1.11),
    Tier.LOCAL: TierCost(latency_us=2.3, algbw_gb_per_s=1590.0),
    Tier.GPU: TierCost(latency_us=9.3, algbw_gb_per_s=10.8),
}


# A gloo run beside others' work (`crowded`): it keeps about RUN_CPUS of the machine's CPUs
# busy, and each thread others keep runnable beyond the CPUs it leaves free stretches the
# whole run by CROWDING. A thread at a higher nice value than the run's counts less, by
# NICE_STEP a step, one at most: a quarter of the scheduler's own step (1.25), since the
# run's threads mostly wait on each other and wake into a CPU another thread holds. Fitted
# to 17 default runs idle and beside busy loops at nice 0 and 10, the run at nice 0 and 10
# (docs/measurements/cpu-2026-12-03-estimate.md).
RUN_CPUS = 1.15
CROWDING = 0.66
NICE_STEP = 1.057


def crowded(samples: Sequence[Sequence[int]], nice: int, cpus: int) -> float:
    """A gloo run's slowdown on a machine of `cpus` where others' runnable threads had these
    nice values each time it was looked at (`driver.busy.CpuWatch`), the run at `nice`: the
    median look's threads, each weighed against the run's; 1 with no look, or where they
    leave it the CPUs it keeps busy."""
    if not samples:
        return 1.0
    others = median(sum(min(1.0, NICE_STEP ** (nice - n)) for n in seen) for seen in samples)
    return 1.0 + CROWDING * max(others - (cpus - RUN_CPUS), 0.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class CostModel:
    """The figures of one kind of machine, and how a sweep times its points (the spec's
    iterations, blocks, launch modes and engines)."""

    tiers: Mapping[str, TierCost] = field(default_factory=lambda: dict(DEFAULT_TIERS))
    overheads: Overheads = GPU_OVERHEADS
    iters: int | None = None  # None: adaptive
    warmup: int | None = None
    blocks: int = 3
    graph: bool = True  # the first launch mode is a CUDA graph's (the default on GPUs)
    launches: int = 1  # launch modes x engines: each times the point again
    slowdown: float = 1.0  # the whole run's, where others keep its CPUs busy (`crowded`)

    @classmethod
    def for_backend(
        cls,
        backend: Backend,
        *,
        iters: int | None = None,
        warmup: int | None = None,
        blocks: int = 3,
        graph: bool = True,
        launches: int = 1,
        world: int = 2,
        slowdown: float = 1.0,
    ) -> CostModel:
        """The model of the kind a backend runs on: GPUs' (4 H200; one H200 for a world of
        one GPU) or the CPU box's, timing points as given; `slowdown`: a gloo run's on a
        machine others keep busy (`crowded`)."""
        gpus = backend == Backend.NCCL
        one = ONE_GPU_OVERHEADS if world == 1 else GPU_OVERHEADS
        return cls(
            overheads=one if gpus else CPU_OVERHEADS,
            iters=iters,
            warmup=warmup,
            blocks=blocks,
            graph=graph and gpus,
            launches=launches,
            slowdown=1.0 if gpus else slowdown,
        )

    def tier(self, tier: str) -> TierCost:
        return self.tiers.get(tier, DEFAULT_TIERS[Tier.INTERNODE])

    def iteration_s(self, tier: str, size_bytes: int) -> float:
        return self.tier(tier).time_s(size_bytes)

    def calls(self, one_s: float) -> float:
        """Iterations a point runs on one launch: warm-up, the timed blocks and the check's
        one more, as given or by the adaptive rule."""
        warm, iters = self.warmup, self.iters
        if warm is None or iters is None:
            calibrated = adaptive(one_s, self.blocks, self.graph)
            warm = calibrated[0] if warm is None else warm
            iters = calibrated[1] if iters is None else iters
        return warm + self.blocks * iters + 1

    def point_s(self, tier: str, size_bytes: int) -> float:
        return self.point_of(self.iteration_s(tier, size_bytes), size_bytes)

    def point_of(self, one_s: float, size_bytes: int) -> float:
        """A point whose iteration takes `one_s`: its iterations on every launch, and what
        surrounds them on the ranks (its rows on the driver are the wave's: `row_s`)."""
        o = self.overheads
        return self.launches * self.calls(one_s) * one_s + o.point_s + o.per_gb_s * size_bytes / GB

    def sparse(self, tier: str, sizes: Sequence[int]) -> list[int]:
        """The sizes a sparse series will measure: above the plateau of the busbw the model
        predicts, only those the run keeps (planning.sizes, the run's own rule). busbw is
        algbw times the operation's factor, so algbw's plateau is busbw's."""
        cost = self.tier(tier)
        algbw = [s / cost.time_s(s) for s in sizes]
        return thinned(sizes, plateau_size(sizes, algbw))

    def series_s(self, tier: str, sizes: Sequence[int], probe: bool) -> float:
        o = self.overheads
        seconds = sum(self.point_s(tier, s) for s in sizes) + o.series_s
        return seconds + (o.probe_s if probe else 0.0)

    def with_overheads(self, **changes: float) -> CostModel:
        return replace(self, overheads=replace(self.overheads, **changes))
