"""Did a group pass? Its busbw against the fleet's median for the same group shape (robust
sigmas from 1.4826 x MAD, and a minimum ratio) and against an absolute floor per tier (the
settings' `min_busbw_gb_per_s`, else a share of the reference figure). The policy asks this
to choose the next wave, the judge to name what failed. Missing data never passes.

The defaults are for a fleet whose screen gives `min_samples` groups or more. A fleet of a
few nodes has no median to lean on, and none is made robust from its figures: 7 nodes give
the screen three groups, so with one of them faulty and one missing the median is that of a
healthy figure and a faulty one, and the MAD of two figures is as wide as the fault (four
sigmas below the median is below zero: everything passes). Its groups' shapes differ too
(two ranks and three), which at a latency-bound size (CPU ranks) moves busbw up to fivefold,
so no ratio to the median tells a fault from the shape. Such a fleet relies on the absolute
floor (the reference figures, or `min_busbw_gb_per_s`); CPU ranks have none, so a scan of a
fake cluster gives its own thresholds (its test: sigmas 0, a tenth of the median).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median

from sweeper.scan.fleet import Fleet, Group, Outcome, Result, Stage
from sweeper.scan.reference import reference
from sweeper.wire import Name, Tier

# The stages that measure every node, not suspects: the fleet's medians come from these.
UNBIASED = (Stage.GATE, Stage.SCREEN, Stage.CROSS_DOMAIN)
MAD_TO_SIGMA = 1.4826  # a normal distribution's sigma is 1.4826 x its median absolute deviation


class Failure(Name):
    SLOW = "slow"  # ran, below the threshold
    FAILED = "failed"  # an error, a hang, wrong data, or NVML evidence at the gate
    MISSING = "missing"  # no data: never a pass


@dataclass(frozen=True, kw_only=True, slots=True)
class Thresholds:
    sigmas: float = 4.0  # how many robust sigmas below the median a figure must fall
    min_ratio: float = 0.85  # ... and below this share of the median
    min_busbw_gb_per_s: Mapping[Tier, float] = field(default_factory=dict)  # absolute, per tier
    reference_share: float = 0.8  # of the reference figure, for tiers the settings leave out
    # fewer figures of a group shape than this: compared with every internode group's (an
    # all_reduce's busbw across nodes is bound by the NICs whatever the group's size; an
    # assumption where no shape of its own was measured often enough)
    min_samples: int = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class Judged:
    outcome: Outcome
    failure: Failure | None  # None: passed
    fleet_gb_per_s: float | None  # the median it was compared with
    threshold_gb_per_s: float | None
    why: str  # what it missed, in words; empty when it passed

    @property
    def passed(self) -> bool:
        return self.failure is None


@dataclass(frozen=True, kw_only=True, slots=True)
class Robust:
    median: float
    sigma: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Robust:
        mid = median(values)
        return cls(median=mid, sigma=MAD_TO_SIGMA * median(abs(v - mid) for v in values))

    def limit(self, thresholds: Thresholds) -> float:
        return min(self.median * thresholds.min_ratio, self.median - thresholds.sigmas * self.sigma)


def figure(gb_per_s: float) -> str:
    """A bandwidth in words: whole GB/s where that says enough, three digits below 100 (CPU
    ranks move a fraction of a GB/s)."""
    return f"{gb_per_s:.0f}" if gb_per_s >= 100 else f"{gb_per_s:.3g}"


def tier(group: Group) -> Tier:
    return Tier.NVLINK if group.stage is Stage.GATE else Tier.INTERNODE


def _floor(fleet: Fleet, group: Group, ranks: int, thresholds: Thresholds) -> float | None:
    if (given := thresholds.min_busbw_gb_per_s.get(tier(group))) is not None:
        return given
    ref = reference(fleet.gpu_model, tier(group), ranks)
    return None if ref is None else ref.busbw_gb_per_s * thresholds.reference_share


def gpu_copy_limit(outcomes: Iterable[Outcome]) -> Robust | None:
    """The fleet's GPUs' own copy rates at the gate, as one population."""
    rates = [
        r.copy_gb_per_s
        for o in outcomes
        if o.group.stage is Stage.GATE and o.result is Result.OK
        for r in o.readings
        if r.copy_gb_per_s is not None
    ]
    return Robust.of(rates) if rates else None


def judge_groups(
    fleet: Fleet,
    outcomes: Sequence[Outcome],
    thresholds: Thresholds,
    *,
    only: Collection[Group] | None = None,
) -> dict[Group, Judged]:
    """Every outcome (or those of the groups `only` names) passed or failed, and why, against
    the fleet as all the outcomes show it."""
    ranks = {o.group: o.group.ranks(fleet) for o in outcomes}
    # the fleet as a whole: bisection and confirmation pick suspects, so their figures would
    # drag the median down; they are judged against the stages that measure every node
    whole = [o for o in outcomes if o.group.stage in UNBIASED] or list(outcomes)
    by_shape: dict[tuple[bool, int], list[float]] = defaultdict(list)
    by_kind: dict[bool, list[float]] = defaultdict(list)
    for o in whole:
        if o.result is Result.OK and o.busbw_gb_per_s is not None:
            gate = o.group.stage is Stage.GATE
            by_shape[gate, ranks[o.group]].append(o.busbw_gb_per_s)
            by_kind[gate].append(o.busbw_gb_per_s)
    fleets = {key: Robust.of(v) for key, v in by_shape.items() if len(v) >= thresholds.min_samples}
    kinds = {gate: Robust.of(v) for gate, v in by_kind.items()}
    chosen = outcomes if only is None else [o for o in outcomes if o.group in only]
    gates = any(o.group.stage is Stage.GATE for o in chosen)
    copies = gpu_copy_limit(outcomes) if gates else None

    judged: dict[Group, Judged] = {}
    for o in chosen:
        gate = o.group.stage is Stage.GATE
        robust = fleets.get((gate, ranks[o.group])) or kinds.get(gate)
        floor = _floor(fleet, o.group, ranks[o.group], thresholds)
        limit = max(
            (x for x in (robust.limit(thresholds) if robust else None, floor) if x is not None),
            default=None,
        )
        failure, why = _verdict(o, limit, copies, thresholds)
        judged[o.group] = Judged(
            outcome=o,
            failure=failure,
            fleet_gb_per_s=robust.median if robust else None,
            threshold_gb_per_s=limit,
            why=why,
        )
    return judged


def _verdict(
    o: Outcome, limit: float | None, copies: Robust | None, thresholds: Thresholds
) -> tuple[Failure | None, str]:
    if o.result is Result.MISSING:
        return Failure.MISSING, o.reason or "no row came back"
    if o.result is Result.FAILED:
        return Failure.FAILED, o.reason or "failed"
    if o.group.stage is Stage.GATE:
        flagged = [f"gpu {r.gpu}: {', '.join(r.flags)}" for r in o.readings if r.flags]
        if flagged:
            return Failure.FAILED, "; ".join(flagged)
        if copies is not None:
            low = copies.limit(thresholds)
            slow = [r for r in o.readings if r.copy_gb_per_s is not None and r.copy_gb_per_s < low]
            if slow:
                return Failure.SLOW, "; ".join(
                    f"gpu {r.gpu} copies {r.copy_gb_per_s:.1f} GB/s, fleet {copies.median:.1f}"
                    for r in slow
                )
    if o.busbw_gb_per_s is None:
        # a gate of one GPU has no busbw to judge; elsewhere a figure is missing
        if o.group.stage is Stage.GATE:
            return None, ""
        return Failure.MISSING, "no busbw figure"
    if limit is not None and o.busbw_gb_per_s < limit:
        return Failure.SLOW, f"busbw {figure(o.busbw_gb_per_s)} GB/s below {figure(limit)}"
    return None, ""
