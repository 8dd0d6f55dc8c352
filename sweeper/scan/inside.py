"""Inside a node: its gate as its isolation left it, and what the isolation's pairs of GPUs
and its telemetry find against each GPU and NVLink. Pure; the policy reads them too."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import median

from sweeper.scan.beside import Beside, beside
from sweeper.scan.fleet import Fleet, GroupOutcome, MemberReading, Result, Stage
from sweeper.scan.thresholds import Failure, Judged, Thresholds, figure, gpu_copy_limit

# A clock this far below its peers' median is evidence: analysis.why's rule for the report
# (not imported from there: it loads pandas, which the scan's pure modules do without).
CLOCK_SHARE = 0.95
# A GPU pair this far below the median of its node's pairs is slow (the fleet's own min_ratio).
PEER_SHARE = 0.85
# A GPU the median of whose pairs is this far below the median of its node's other pairs is
# slow: a median of n - 1 pairs moves by the pairs' noise (1-2%), and a slow block (0.6% of
# recorded points) moves it not at all, where a GPU 15% slow put half its pairs above
# PEER_SHARE and was named as the NVLinks of the others (issue 52).
GPU_SHARE = 0.9


def _gate(j: Judged) -> bool:
    return j.outcome.group.stage is Stage.GATE


@dataclass(frozen=True, kw_only=True, slots=True)
class Gate:
    """A node's gate as its isolation left it: `judged` passed after all where the GPUs whose
    host copies failed it ran them again alone, after it, at or above the threshold, with a
    note for each of them."""

    judged: Judged
    notes: dict[int, str] = field(default_factory=dict)
    node_notes: tuple[str, ...] = ()  # an earlier gate of its that failed, run again passed


def settled_gates(
    fleet: Fleet,
    judged: Iterable[Judged],
    inside: Sequence[Judged],
    outcomes: Sequence[GroupOutcome],
    thresholds: Thresholds,
) -> dict[str, Gate]:
    """Each node's gate, its last where the policy ran it again (`policy.regate`), and a
    failure on host copies alone that did not reproduce when each of those GPUs copied
    alone (its isolation's first wave) passed: one slow point is one observation (0.6% of
    recorded GPU points are 25-79% slow, scan.noise), each kept as a transient note."""
    copies = gpu_copy_limit(outcomes)
    low = copies.limit(thresholds) if copies else None
    each = by_node(inside)
    out: dict[str, Gate] = {}
    for j in judged:
        if not _gate(j):
            continue
        node = j.outcome.group.nodes[0]
        gate = _settled(j, each.get(node, []), low) if low is not None else Gate(judged=j)
        first = out.get(node)
        if first is not None and not first.judged.passed and gate.judged.passed:
            was = first.judged
            note = (
                f"transient: its gate in wave {was.outcome.group.wave} {was.why}, "
                f"{figure(j.figure_gb_per_s or 0)} GB/s when run again in wave "
                f"{j.outcome.group.wave}"
            )
            gate = replace(gate, node_notes=(*first.node_notes, note))
        out[node] = gate
    return {n: out[n] for n in fleet.ids if n in out}


def _low_at_gate(gate: Judged, low: float) -> dict[int, float]:
    return {
        r.gpu: r.copy_gb_per_s
        for r in gate.outcome.readings
        if r.gpu is not None and r.copy_gb_per_s is not None and r.copy_gb_per_s < low
    }


def _alone(inside: Iterable[Judged], after: int = -1) -> dict[int, float]:
    """Each GPU's host copies alone after wave `after`, its last run where it ran them again."""
    ran = sorted(
        (j for j in inside if len(j.outcome.group.gpus) == 1 and j.outcome.group.wave > after),
        key=lambda j: j.outcome.group.wave,
    )
    return {
        r.gpu: r.copy_gb_per_s
        for j in ran
        for r in j.outcome.readings
        if r.gpu in j.outcome.group.gpus and r.copy_gb_per_s is not None
    }


def latest_copies(gate: Judged, inside: Sequence[Judged]) -> dict[int, float]:
    """Each GPU's host copies by its last reading: alone, where it copied alone after its
    node's (last) gate, else at that gate."""
    at_gate = {
        r.gpu: r.copy_gb_per_s
        for r in gate.outcome.readings
        if r.gpu is not None and r.copy_gb_per_s is not None
    }
    return at_gate | _alone(inside, gate.outcome.group.wave)


def low_alone(gate: Judged, inside: Sequence[Judged], low: float) -> list[int]:
    """The GPUs of an isolated node whose host copies are low at their last reading (at the
    gate or alone): for the policy to copy alone again (`policy.relink`), since a slow point
    is chance where 1.1% of recorded points are 15% slow or more (scan.noise)."""
    alone = _alone(inside)
    latest = latest_copies(gate, inside)
    return [g for g, copy in latest.items() if g in alone and copy < low]


def _settled(gate: Judged, inside: Sequence[Judged], low: float) -> Gate:
    at_gate = _low_at_gate(gate, low)
    own, limit = gate.figure_gb_per_s, gate.threshold_gb_per_s
    held = own is not None and limit is not None and own < limit
    flagged = any(r.flags for r in gate.outcome.readings)
    if gate.failure is not Failure.SLOW or not at_gate or held or flagged:
        return Gate(judged=gate)
    alone = _alone(inside, gate.outcome.group.wave)
    if not all(alone.get(g, 0.0) >= low for g in at_gate):
        return Gate(judged=gate)
    notes = {
        g: f"transient: host copies {copy:.1f} GB/s at the gate, {alone[g]:.1f} alone "
        f"(threshold {low:.1f})"
        for g, copy in at_gate.items()
    }
    return Gate(
        judged=replace(gate, failure=None, why=""),
        notes=notes,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Inside:
    """What a node's isolation found: its slow GPUs and NVLinks, each GPU's pairs, and what
    its telemetry says against each GPU."""

    slow_gpus: dict[int, list[Judged]] = field(default_factory=dict)
    slow_links: dict[tuple[int, int], Judged] = field(default_factory=dict)
    pairs: dict[int, list[Judged]] = field(default_factory=dict)
    median_gb_per_s: float | None = None
    telemetry: dict[int, str] = field(default_factory=dict)
    # pairs low once that passed when run again: a note on each of their GPUs
    transient: dict[tuple[int, int], str] = field(default_factory=dict)
    # low pairs that the median of a GPU's pairs does not explain (an NVLink, or a GPU named
    # by two low pairs alone): each is one observation until run again (`policy.relink`)
    doubtful: tuple[tuple[int, ...], ...] = ()
    beside: Beside = field(default_factory=Beside)  # its GPUs beside proven ones elsewhere

    @property
    def named(self) -> bool:
        return bool(self.slow_gpus or self.slow_links)


def telemetry(readings: Iterable[MemberReading]) -> dict[int, str]:
    """Each GPU whose telemetry disagrees with its node's other GPUs', and how: an SM clock
    under CLOCK_SHARE of theirs (analysis.why's rule), or the power cap holding it while most
    of them are not held."""
    by_gpu = {r.gpu: r for r in readings if r.gpu is not None}
    clocks = {g: r.sm_clock_mhz for g, r in by_gpu.items() if r.sm_clock_mhz}
    capped = {g for g, r in by_gpu.items() if r.at_power_cap}
    out: dict[int, str] = {}
    for g in by_gpu:
        said = []
        others = [c for h, c in clocks.items() if h != g]
        if g in clocks and others and clocks[g] < CLOCK_SHARE * median(others):
            said.append(f"SM clock {clocks[g]:.0f} MHz against its peers' {median(others):.0f}")
        if g in capped and len(capped) * 2 < len(by_gpu):
            said.append("at its power cap while its peers are not")
        if said:
            out[g] = ", ".join(said)
    return out


def by_node(inside: Iterable[Judged]) -> dict[str, list[Judged]]:
    """Isolation's groups by their node: each node's isolation read from its own (a fleet
    whose every gate a fleet finding excused isolates every node: 36 groups a node of 8),
    and the pairs of proven GPUs across nodes (`beside`) that its GPUs' pairs across nodes
    are held against, with each."""
    out: dict[str, list[Judged]] = defaultdict(list)
    proven: list[Judged] = []
    for j in inside:
        if j.outcome.group.tested:
            out[j.outcome.group.tested[0]].append(j)
        else:
            proven.append(j)
    for mine in out.values():
        mine.extend(proven)
    return out


def isolated(
    node: str, inside: Sequence[Judged], gate: Judged | None, share: float = PEER_SHARE
) -> Inside:
    """A node's pairs of GPUs against each other: a GPU the median of whose pairs is below
    GPU_SHARE of the median of the node's other pairs, or that two pairs below PEER_SHARE of
    the median of the node's pairs share, is slow; a slow pair of two GPUs neither of which
    is, is its NVLink."""
    tested = [
        j for j in inside if j.outcome.group.nodes == (node,) and len(j.outcome.group.gpus) == 2
    ]
    # a pair run again (`policy.relink`: a low pair is one observation) counts by its last run
    last = {j.outcome.group.gpus: j for j in sorted(tested, key=lambda j: j.outcome.group.wave)}
    pairs = list(last.values())
    again = {
        j.outcome.group.gpus: j
        for j in tested
        if j is not last[j.outcome.group.gpus] and j.figure_gb_per_s is not None
    }
    figures = [v for j in pairs if (v := j.figure_gb_per_s) is not None]
    said = telemetry(gate.outcome.readings) if gate else {}
    if len(figures) < 3:
        # too few pairs to hold one against the others (a node of two or three GPUs): each
        # GPU beside proven GPUs of other nodes names one (`beside`), else a slow gate with
        # one GPU whose telemetry disagrees names that GPU
        across = beside(node, inside, share)
        if across.slow is not None:
            slow_one = {across.slow: across.pairs[across.slow]}
            return Inside(slow_gpus=slow_one, telemetry=said, beside=across)
        slow_gate = gate is not None and (gate.failure is Failure.SLOW or bool(gate.excused))
        alone = slow_gate and len(said) == 1
        named: dict[int, list[Judged]] = {g: [] for g in said} if alone else {}
        return Inside(slow_gpus=named, telemetry=said, beside=across)
    mid = median(figures)
    low = [j for j in pairs if j.figure_gb_per_s is None or j.figure_gb_per_s < PEER_SHARE * mid]
    by_gpu: dict[int, list[Judged]] = defaultdict(list)
    for j in pairs:
        for g in j.outcome.group.gpus:
            by_gpu[g].append(j)
    slow: dict[int, list[Judged]] = {}
    by_median: set[int] = set()  # named by the median of its pairs: one slow block moves none
    for g, mine in by_gpu.items():
        rest = [v for j in pairs if g not in j.outcome.group.gpus and (v := j.figure_gb_per_s)]
        own = [j.figure_gb_per_s or 0.0 for j in mine]  # a pair that failed: nothing moved
        under = bool(rest) and median(own) < GPU_SHARE * median(rest)
        if len(mine) >= 2 and (under or sum(j in low for j in mine) >= 2):
            slow[g] = [j for j in mine if j in low] or mine  # its evidence: its low pairs
            if under:
                by_median.add(g)
    links = {
        (a, b): j for j in low for a, b in [j.outcome.group.gpus] if a not in slow and b not in slow
    }
    transient = {
        (a, b): f"transient: NVLink gpu{a}-gpu{b} {figure(first.figure_gb_per_s or 0)} GB/s "
        f"in wave {first.outcome.group.wave}, {figure(last[a, b].figure_gb_per_s or 0)} when "
        f"run again in wave {last[a, b].outcome.group.wave}"
        for (a, b), first in again.items()
        if (first.figure_gb_per_s or 0) < PEER_SHARE * mid and last[a, b] not in low
    }
    return Inside(
        slow_gpus=slow,
        slow_links=links,
        pairs=dict(by_gpu),
        median_gb_per_s=mid,
        telemetry=said,
        transient=transient,
        doubtful=tuple(
            j.outcome.group.gpus for j in low if not by_median & set(j.outcome.group.gpus)
        ),
    )


def left_out(fleet: Fleet, node: str, seen: Inside, gate: Judged) -> tuple[int, ...]:
    """The GPUs the internode stages leave out of a node that goes on without them: those
    its isolation named slow and those NVML flags at its gate, where it named no NVLink, no
    NVML evidence is against the node itself, its gate answered (slow, passed, or failed on
    its GPUs' flags alone), some GPU is left and the fleet has another node to test it
    beside; none where it does not go on."""
    o = gate.outcome
    # NVML's evidence against one GPU (an Xid, retired pages) condemns that GPU, and the
    # node's paths are still to be tested without it; evidence of the node's (a NIC's) keeps
    # it whole
    own = {r.gpu for r in o.readings if r.flags and r.gpu is not None}
    flagged = any(r.flags for r in o.readings if r.gpu is None)
    answered = gate.failure in (None, Failure.SLOW) or (bool(own) and o.result is Result.OK)
    ran = answered and not o.unanswered and not o.misconfigured
    slow = tuple(sorted(set(seen.slow_gpus) | own))
    whole = len(slow) >= fleet.node(node).gpus
    if not slow or seen.slow_links or flagged or not ran or whole or len(fleet.nodes) < 2:
        return ()
    return slow


def leaving(
    fleet: Fleet, gates: Mapping[str, Gate], inside: Sequence[Judged], share: float
) -> dict[str, tuple[int, ...]]:
    """The nodes that go on to the internode stages without some GPUs (`left_out`), and
    those GPUs: their paths are still tested, judged per GPU's NIC (`Collective.nic_rate`),
    so a node of 7 GPUs of 8 compares with full ones."""
    each = by_node(inside)
    out = {}
    for node, gate in gates.items():
        seen = isolated(node, each.get(node, []), gate.judged, share)
        if gpus := left_out(fleet, node, seen, gate.judged):
            out[node] = gpus
    return out
