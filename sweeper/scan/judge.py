"""Outcomes -> a verdict for every node and GPU, for every NVLink and node pair a test measured
as a pair or the evidence condemns, each with its evidence; and the fleet's findings. Pure.

Inside a node, the gate and, where the node was isolated, its pairs speak for each GPU and
NVLink. Across nodes, a failing group blames its members only until they are separated
(`explain`): links, hangs and consistent culprits explain the failing groups. Missing data
never passes, and every figure is judged against a threshold that names its source
(`thresholds`). docs/ARCHITECTURE.md, "Inside the rooms", gives each rule."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import log
from statistics import median
from typing import TypedDict

from sweeper.scan.fleet import Fleet, GroupOutcome, MemberReading, Stage
from sweeper.scan.reference import Reference, entry
from sweeper.scan.thresholds import (
    Failure,
    Judged,
    Robust,
    Thresholds,
    figure,
    gpu_copy_limit,
    judge_groups,
    measure,
    unit,
)
from sweeper.wire import Name

# A node is a culprit only where this share of its groups, or more, fail with no other
# culprit to explain them: every node shares a screen group with every other, so a healthy
# node also sits in the one group of each slow pair and beside each faulty node (2 of its 38
# at 1024 nodes where it shares two slow pairs' groups), while a node failing one test in two
# fails half. A node failing less often than this is not told from its neighbours' faults.
FAIL_SHARE = 0.25
# A node's failures across nodes that no other cause explains, its transient ones included,
# are a sequential probability ratio test (Wald's): that its groups fail at the fleet's noise
# rate (the share of groups whose failure did not reproduce, at least NOISE_SHARE: 0.6% of
# recorded GPU points are 25-79% slow, scan.noise), against that it fails one test in
# 1/FLAKY_RATE more. Past ln((1 - FLAKY_BETA) / FLAKY_ALPHA) it is flaky: a healthy node is
# called flaky at most FLAKY_ALPHA of the time, one failing one in five missed FLAKY_BETA.
FLAKY_RATE = 0.2
FLAKY_ALPHA = 0.001
FLAKY_BETA = 0.01
NOISE_SHARE = 0.01
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
# A node whose groups' communicators take over this many times as long to start as its
# peers' groups of the same size (their median) is noted (issue 54, item 4)
START_SHARE = 2.0


class Health(Name):
    HEALTHY = "healthy"
    SLOW = "slow"  # ran, below the threshold
    FAILED = "failed"  # an error, a hang, wrong data, NVML evidence
    UNREACHABLE = "unreachable"  # its actors never started, or it left
    UNCONFIRMED = "unconfirmed"  # a suspect the scan did not separate from its partners
    FLAKY = "flaky"  # passes and failures of its own: its pass ratio says how often
    # NCCL's transport broke the tier's contract (sweeper/fabric): a configuration to fix on
    # the nodes, not a slow node
    MISCONFIGURED = "misconfigured"


CONDEMNED = (Health.SLOW, Health.FAILED, Health.UNREACHABLE, Health.FLAKY, Health.MISCONFIGURED)
# What a misconfigured group's verdict also asks to check, beside what its flag names: the
# kernel modules GPUDirect RDMA needs and the NCCL variables that steer its transports.
CHECK = (
    "the nvidia_peermem module (or dma-buf: NCCL_DMABUF_ENABLE), NCCL_P2P_DISABLE, "
    "NCCL_SHM_DISABLE, NCCL_NET, NCCL_IB_HCA, NCCL_IB_DISABLE and NCCL_SOCKET_IFNAME on its nodes"
)


class Subject(Name):
    NODE = "node"
    GPU = "gpu"
    NVLINK = "nvlink"  # two GPUs of one node
    LINK = "link"  # two nodes: the path between them
    GROUP = "group"  # a failing group whose culprit was not separated


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    subject: Subject
    nodes: tuple[str, ...]
    gpu: int | None = None
    peer_gpu: int | None = None  # an NVLink's other GPU
    health: Health
    stage: Stage | None = None  # where the deciding evidence came from
    partners: tuple[str, ...] = ()  # the nodes it was measured beside in that evidence
    busbw_gb_per_s: float | None = None  # its median figure there
    fleet_gb_per_s: float | None = None  # the fleet's median it was compared with
    threshold_gb_per_s: float | None = None
    threshold_source: str = ""  # where the threshold came from
    # the reference figure for its GPU model, tier, group size and operation, and its table
    # entry and source (`scan.reference`); None and empty where none is known
    reference_gb_per_s: float | None = None
    reference_source: str = ""
    tests: int = 0  # groups it took part in (internode; a GPU's: inside its node)
    passed: int = 0
    evidence: str = ""  # one sentence
    # failures of its that did not reproduce (`transient`), each in words: held against
    # nothing, kept so that one that comes back is seen
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        if self.subject is Subject.GPU:
            return f"{self.nodes[0]}/gpu{self.gpu}"
        if self.subject is Subject.NVLINK:
            return f"{self.nodes[0]}/gpu{self.gpu}-gpu{self.peer_gpu}"
        return ("-" if self.subject is Subject.LINK else "+").join(self.nodes)

    @property
    def condemned(self) -> bool:
        return self.health in CONDEMNED

    @property
    def pass_ratio(self) -> float | None:
        return self.passed / self.tests if self.tests else None

    @property
    def reference_share(self) -> float | None:
        """Its figure as a share of its reference figure; None where either is unknown."""
        if self.busbw_gb_per_s is None or not self.reference_gb_per_s:
            return None
        return self.busbw_gb_per_s / self.reference_gb_per_s


def judge(fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds) -> list[Verdict]:
    judged = judge_groups(fleet, outcomes, thresholds)
    inside = [j for j in judged.values() if j.outcome.group.stage is Stage.ISOLATE]
    gates = settled_gates(fleet, judged.values(), inside, outcomes, thresholds)
    gpus, nodes = _gate_verdicts(fleet, gates, inside, outcomes, thresholds)
    # a group whose transport broke its tier's contract measured the configuration, not its
    # nodes: it neither condemns nor clears them
    tests = [j for j in judged.values() if _across(j) and not j.outcome.misconfigured]
    passed = {n: g.judged for n, g in gates.items()}
    verdicts, links, groups = _internode(fleet, tests, nodes, passed)
    notes = {n: list(g.node_notes) for n, g in gates.items()}
    for n, said in [*_transient_notes(tests).items(), *slow_starts(outcomes).items()]:
        notes.setdefault(n, []).extend(said)
    verdicts = [
        replace(v, notes=(*v.notes, *notes[v.nodes[0]])) if notes.get(v.nodes[0]) else v
        for v in verdicts
    ]
    judged_verdicts = [*verdicts, *gpus, *links, *groups]
    return [*map(_quoted, judged_verdicts), *misconfigured(fleet, outcomes)]


def _transient_notes(tests: Sequence[Judged]) -> dict[str, list[str]]:
    """Each node's failed groups across nodes that passed when run again, in words."""
    out: dict[str, list[str]] = defaultdict(list)
    for i, again in transient(tests).items():
        o, later = tests[i].outcome, tests[again].outcome
        note = (
            f"transient: {len(o.group.nodes)} nodes in wave {o.group.wave} ({o.group.stage}) "
            f"failed ({tests[i].why}), passed when run again in wave {later.group.wave}"
        )
        for n in o.group.nodes:
            out[n].append(note)
    return out


def slow_starts(outcomes: Sequence[GroupOutcome]) -> dict[str, list[str]]:
    """Each node the median start of whose groups is over START_SHARE times that of the other
    nodes' groups of as many nodes, in words."""
    timed = [(o.group.nodes, o.start_s) for o in outcomes if o.start_s is not None]
    out: dict[str, list[str]] = {}
    for node in sorted({n for nodes, _ in timed for n in nodes}):
        for size in sorted({len(nodes) for nodes, _ in timed if node in nodes}):
            same = [(nodes, s) for nodes, s in timed if len(nodes) == size]
            mine = [s for nodes, s in same if node in nodes]
            peers = [s for nodes, s in same if node not in nodes]
            if not peers:
                continue
            own, theirs = median(mine), median(peers)
            if own > START_SHARE * theirs:
                out.setdefault(node, []).append(
                    f"slow start: its groups of {size} node(s) took {own:.2f} s to start their "
                    f"communicators, over {START_SHARE:g}x its peers' {theirs:.2f} s"
                )
    return out


class _Against(TypedDict):
    reference_gb_per_s: float | None
    reference_source: str


def _against(ref: Reference | None) -> _Against:
    """A verdict's reference fields, from its deciding test's reference."""
    if ref is None:
        return {"reference_gb_per_s": None, "reference_source": ""}
    return {"reference_gb_per_s": ref.busbw_gb_per_s, "reference_source": ref.source}


def _quoted(v: Verdict) -> Verdict:
    """Its evidence with its figure's share of the reference, where both are known: with the
    reference's source where it is condemned (once: its threshold may quote it already), its
    table entry alone where not (a fleet's thousands of healthy GPUs would repeat it)."""
    part = v.reference_share
    if part is None:
        return v
    if v.reference_source in v.threshold_source:
        said = f"{part:.0%} of that reference"
    else:
        quoted = v.reference_source if v.condemned else entry(v.reference_source)
        said = f"{part:.0%} of the reference {figure(v.reference_gb_per_s or 0)} GB/s ({quoted})"
    return replace(v, evidence=f"{v.evidence}; {said}")


def misconfigured(fleet: Fleet, outcomes: Sequence[GroupOutcome]) -> list[Verdict]:
    """One verdict for each way the groups' transports broke their tier's contract, naming
    every node of the groups that did and what to check."""
    order = {n: i for i, n in enumerate(fleet.ids)}
    by_flag: dict[str, list[GroupOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.misconfigured:
            by_flag[o.misconfigured].append(o)
    out = []
    for flag, mine in by_flag.items():
        nodes = sorted({n for o in mine for n in o.group.nodes}, key=order.__getitem__)
        stages = ", ".join(dict.fromkeys(str(o.group.stage) for o in mine))
        out.append(
            Verdict(
                subject=Subject.GROUP,
                nodes=tuple(nodes),
                health=Health.MISCONFIGURED,
                stage=mine[0].group.stage,
                tests=len(mine),
                evidence=(
                    f"{len(mine)} group(s) ({stages}) on {len(nodes)} node(s): {flag}; "
                    f"check also {CHECK}. Not held against any node"
                ),
            )
        )
    return out


def _gate(j: Judged) -> bool:
    return j.outcome.group.stage is Stage.GATE


@dataclass(frozen=True, kw_only=True, slots=True)
class Gate:
    """A node's gate as its isolation left it: `judged` passed after all where the GPUs whose
    host copies failed it ran them again alone at or above the threshold (`alone`: each
    such GPU's copies there), with a note for each of them."""

    judged: Judged
    alone: dict[int, float] = field(default_factory=dict)
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


def _settled(gate: Judged, inside: Sequence[Judged], low: float) -> Gate:
    at_gate = {
        r.gpu: r.copy_gb_per_s
        for r in gate.outcome.readings
        if r.gpu is not None and r.copy_gb_per_s is not None and r.copy_gb_per_s < low
    }
    own, limit = gate.figure_gb_per_s, gate.threshold_gb_per_s
    held = own is not None and limit is not None and own < limit
    flagged = any(r.flags for r in gate.outcome.readings)
    if gate.failure is not Failure.SLOW or not at_gate or held or flagged:
        return Gate(judged=gate)
    alone = {
        r.gpu: r.copy_gb_per_s
        for j in inside
        if len(j.outcome.group.gpus) == 1
        for r in j.outcome.readings
        if r.gpu in j.outcome.group.gpus and r.copy_gb_per_s is not None
    }
    if not all(alone.get(g, 0.0) >= low for g in at_gate):
        return Gate(judged=gate)
    notes = {
        g: f"transient: host copies {copy:.1f} GB/s at the gate, {alone[g]:.1f} alone "
        f"(threshold {low:.1f})"
        for g, copy in at_gate.items()
    }
    return Gate(
        judged=replace(gate, failure=None, why=""),
        alone={g: alone[g] for g in at_gate},
        notes=notes,
    )


def _across(j: Judged) -> bool:
    return j.outcome.group.stage not in (Stage.GATE, Stage.ISOLATE)


def _size(size_bytes: int) -> str:
    for name, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size_bytes >= 1 << shift and size_bytes % (1 << shift) == 0:
            return f"{size_bytes >> shift} {name}"
    return f"{size_bytes} B"


# ---- inside a node ----


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
    whose every gate a fleet finding excused isolates every node: 36 groups a node of 8)."""
    out: dict[str, list[Judged]] = defaultdict(list)
    for j in inside:
        out[j.outcome.group.nodes[0]].append(j)
    return out


def isolated(node: str, inside: Sequence[Judged], gate: Judged | None) -> Inside:
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
        # too few pairs to hold one against the others (a node of two or three GPUs): a
        # slow gate with one GPU whose telemetry disagrees names that GPU
        slow_gate = gate is not None and (gate.failure is Failure.SLOW or bool(gate.excused))
        alone = slow_gate and len(said) == 1
        return Inside(slow_gpus={g: [] for g in said} if alone else {}, telemetry=said)
    mid = median(figures)
    low = [j for j in pairs if j.figure_gb_per_s is None or j.figure_gb_per_s < PEER_SHARE * mid]
    by_gpu: dict[int, list[Judged]] = defaultdict(list)
    for j in pairs:
        for g in j.outcome.group.gpus:
            by_gpu[g].append(j)
    slow: dict[int, list[Judged]] = {}
    for g, mine in by_gpu.items():
        rest = [v for j in pairs if g not in j.outcome.group.gpus and (v := j.figure_gb_per_s)]
        own = [j.figure_gb_per_s or 0.0 for j in mine]  # a pair that failed: nothing moved
        under = rest and median(own) < GPU_SHARE * median(rest)
        if len(mine) >= 2 and (under or sum(j in low for j in mine) >= 2):
            slow[g] = [j for j in mine if j in low] or mine  # its evidence: its low pairs
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
    )


def _gate_verdicts(
    fleet: Fleet,
    settled: dict[str, Gate],
    inside: list[Judged],
    outcomes: Sequence[GroupOutcome],
    thresholds: Thresholds,
) -> tuple[list[Verdict], dict[str, Verdict]]:
    """Each GPU's and NVLink's verdict, and the nodes the gate and isolation decide (the
    others go on)."""
    copies = gpu_copy_limit(outcomes)
    low = copies.limit(thresholds) if copies else None
    gpus: list[Verdict] = []
    nodes: dict[str, Verdict] = {}
    each = by_node(inside)
    for node in fleet.nodes:
        gate = settled.get(node.id)
        j = gate.judged if gate else None
        if j is None or j.failure is Failure.MISSING or j.outcome.unanswered:
            nodes[node.id], mine = _gone(node.id, node.gpus, j)
            gpus += mine
            continue
        if j.outcome.misconfigured and not j.passed:  # its transport's fault, not its GPUs'
            why = f"{node.id}: its gate missed ({j.why}) through a misconfigured transport"
            nodes[node.id] = _node(node.id, Health.UNCONFIRMED, why, Stage.GATE)
            gpus += [
                Verdict(
                    subject=Subject.GPU,
                    nodes=(node.id,),
                    gpu=g,
                    health=Health.UNCONFIRMED,
                    stage=Stage.GATE,
                    evidence=f"{node.id}/gpu{g}: only in its node's gate, which ran through a "
                    "misconfigured transport",
                )
                for g in range(node.gpus)
            ]
            continue
        readings = {r.gpu: r for r in j.outcome.readings if r.gpu is not None}
        alone = gate.alone if gate else {}
        readings |= {g: replace(readings[g], copy_gb_per_s=c) for g, c in alone.items()}
        found = {
            g: _gpu(f"{node.id}/gpu{g}", readings.get(g), copies, low) for g in range(node.gpus)
        }
        seen = isolated(node.id, each.get(node.id, []), j)
        for g, pairs in seen.slow_gpus.items():
            if found.get(g) is None:
                found[g] = _slow_gpu(node.id, g, pairs, seen)
        bad = [f"gpu{g} {why.split(': ', 1)[1]}" for g, (_, why) in _condemned(found).items()]
        for g, verdict in found.items():
            made = _gpu_verdict(node.id, g, verdict, j, seen, copies)
            noted = [gate.notes[g]] if gate and g in gate.notes else []
            noted += [note for pair, note in seen.transient.items() if g in pair]
            gpus.append(replace(made, notes=tuple(noted)) if noted else made)
        for (a, b), pair in seen.slow_links.items():
            gpus.append(_nvlink(node.id, a, b, pair, seen))
        if bad or seen.slow_links:
            named = bad + [f"NVLink gpu{a}-gpu{b}" for a, b in seen.slow_links]
            why = f"{node.id}: left out of the internode stages: its " + "; ".join(named)
            if j.excused:  # the fleet finding waived the threshold, not what isolation found
                why += f" (its gate's {j.excused})"
            nodes[node.id] = _node(node.id, Health.UNCONFIRMED, why, Stage.GATE)
        elif not j.passed:
            health = Health.FAILED if j.failure is Failure.FAILED else Health.SLOW
            own = j.figure_gb_per_s
            why = f"{node.id}: its own GPUs' all_reduce at the gate: {j.why}"
            if j.fleet_gb_per_s is not None and own is not None:
                why += f" (the fleet's {figure(j.fleet_gb_per_s)}; threshold: {j.source})"
            if seen.pairs:
                why += "; no GPU or NVLink of it stands out from the others in pairs"
            nodes[node.id] = Verdict(
                subject=Subject.NODE,
                nodes=(node.id,),
                health=health,
                stage=Stage.GATE,
                busbw_gb_per_s=own,
                fleet_gb_per_s=j.fleet_gb_per_s,
                threshold_gb_per_s=j.threshold_gb_per_s,
                threshold_source=j.source,
                **_against(j.reference),
                evidence=why,
            )
    return gpus, nodes


def _gone(node: str, count: int, j: Judged | None) -> tuple[Verdict, list[Verdict]]:
    """A node that did not answer at its gate (a hang: failed) or brought nothing back
    (unreachable), and its GPUs with it."""
    hung = j is not None and bool(j.outcome.unanswered)
    health = Health.FAILED if hung else Health.UNREACHABLE
    why = j.why if j else "no gate result"
    if hung:
        why = f"did not answer at its gate ({why}); left out of every later wave"
    verdict = _node(node, health, f"{node}: {why}", Stage.GATE)
    mine = [
        Verdict(
            subject=Subject.GPU,
            nodes=(node,),
            gpu=g,
            health=health,
            stage=Stage.GATE,
            evidence=f"{node}/gpu{g}: its node did not answer",
        )
        for g in range(count)
    ]
    return verdict, mine


def _slow_gpu(node: str, g: int, pairs: list[Judged], seen: Inside) -> tuple[Health, str]:
    if not pairs:
        return Health.SLOW, (
            f"{node}/gpu{g}: its node's gate is slow and it alone disagrees with its peers "
            f"in telemetry: {seen.telemetry[g]}"
        )
    values = [j.figure_gb_per_s or 0.0 for j in pairs]
    peers = sorted({p for j in pairs for p in j.outcome.group.gpus if p != g})
    everyone = {j.outcome.group: j for mine in seen.pairs.values() for j in mine}
    own = [j.figure_gb_per_s or 0.0 for o, j in everyone.items() if g in o.gpus]
    rest = [v for o, j in everyone.items() if g not in o.gpus and (v := j.figure_gb_per_s)]
    why = (
        f"{node}/gpu{g}: {pairs[0].outcome.op} {figure(median(values))} GB/s in "
        f"{len(pairs)} of its {len(seen.pairs.get(g, []))} pairs (with gpu "
        f"{', '.join(map(str, peers))}) against the median {figure(seen.median_gb_per_s or 0)} "
        f"of its node's pairs (threshold {PEER_SHARE:.0%} of it); the median of all its pairs "
        f"{figure(median(own))} against {figure(median(rest) if rest else 0)} of the others' "
        f"(threshold {GPU_SHARE:.0%} of it)"
    )
    if g in seen.telemetry:
        why += f"; {seen.telemetry[g]}"
    return Health.SLOW, why


def _gpu_verdict(
    node: str,
    g: int,
    verdict: tuple[Health, str] | None,
    gate: Judged,
    seen: Inside,
    copies_of: Robust | None = None,
) -> Verdict:
    name = f"{node}/gpu{g}"
    pairs = seen.pairs.get(g, [])
    figures = [v for j in pairs if (v := j.figure_gb_per_s) is not None]
    copy = next((r.copy_gb_per_s for r in gate.outcome.readings if r.gpu == g), None)
    copies = f", host copies {copy:.1f} GB/s" if copy is not None else ""
    if verdict is not None:
        health, why = verdict
    elif pairs and max(figures, default=0.0) >= PEER_SHARE * (seen.median_gb_per_s or 0.0):
        health = Health.HEALTHY
        why = (
            f"{name}: in pairs with each other GPU of its node {figure(median(figures or [0]))} "
            f"GB/s against their median {figure(seen.median_gb_per_s or 0)}{copies}"
        )
    elif gate.passed and not gate.excused and gate.figure_gb_per_s is None:
        # a node of one GPU: no peer in its gate, so what one GPU does alone is its evidence
        health = Health.HEALTHY
        why = f"{name}: the only GPU of its node, no collective to time{copies}"
        if copy is not None and copies_of is not None:
            why += f" against the fleet's median {copies_of.median:.1f} of {copies_of.count} GPUs"
    elif gate.passed and not gate.excused:
        health = Health.HEALTHY
        own = gate.figure_gb_per_s
        ran = f" at {figure(own)} GB/s" if own is not None else ""
        why = f"{name}: its node's gate, all_reduce with its peers{ran}{copies}"
    else:
        health = Health.UNCONFIRMED
        why = f"{name}: took part only in its node's failed gate ({gate.why})"
        if gate.passed:
            why = f"{name}: took part only in its node's gate, {gate.excused}"
    if verdict is None and g in seen.telemetry:
        why += f"; {seen.telemetry[g]}"
    noted = sorted({n for r in gate.outcome.readings if r.gpu == g for n in r.notes})
    if noted:
        why += f"; noted, not held against it: {', '.join(noted)}"
    return Verdict(
        subject=Subject.GPU,
        nodes=(node,),
        gpu=g,
        health=health,
        stage=Stage.ISOLATE if pairs else Stage.GATE,
        busbw_gb_per_s=median(figures) if figures else gate.figure_gb_per_s,
        fleet_gb_per_s=seen.median_gb_per_s if pairs else gate.fleet_gb_per_s,
        threshold_gb_per_s=(
            PEER_SHARE * seen.median_gb_per_s
            if pairs and seen.median_gb_per_s
            else gate.threshold_gb_per_s
        ),
        threshold_source=(
            f"{PEER_SHARE:.0%} of the median of its node's pairs" if pairs else gate.source
        ),
        **_against(pairs[0].reference if figures else gate.reference),
        tests=len(pairs) + 1,
        passed=sum(j.passed for j in pairs) + gate.passed,
        evidence=why,
    )


def _nvlink(node: str, a: int, b: int, pair: Judged, seen: Inside) -> Verdict:
    mid = seen.median_gb_per_s or 0.0
    own = pair.figure_gb_per_s
    return Verdict(
        subject=Subject.NVLINK,
        nodes=(node,),
        gpu=a,
        peer_gpu=b,
        health=Health.SLOW if own is not None else Health.FAILED,
        stage=Stage.ISOLATE,
        busbw_gb_per_s=own,
        fleet_gb_per_s=mid,
        threshold_gb_per_s=PEER_SHARE * mid,
        threshold_source=f"{PEER_SHARE:.0%} of the median of its node's pairs",
        **_against(pair.reference),
        tests=1,
        evidence=(
            f"{node}/gpu{a}-gpu{b}: {pair.outcome.op} "
            f"{figure(own) + ' GB/s' if own is not None else pair.why} against the median "
            f"{figure(mid)} of its node's pairs, each GPU fine beside the others"
        ),
    )


def _gpu(
    name: str, r: MemberReading | None, copies: Robust | None, low: float | None
) -> tuple[Health, str] | None:
    """A GPU the gate's readings condemn, and why."""
    if r is not None and r.flags:
        return Health.FAILED, f"{name}: {', '.join(r.flags)} at the gate"
    if r is None or r.copy_gb_per_s is None or copies is None or low is None:
        return None
    if r.copy_gb_per_s < low:
        return Health.SLOW, (
            f"{name}: host copies {r.copy_gb_per_s:.1f} GB/s against the fleet's "
            f"{copies.median:.1f} (threshold {low:.1f})"
        )
    return None


def _condemned(found: Mapping[int, tuple[Health, str] | None]) -> dict[int, tuple[Health, str]]:
    return {g: v for g, v in found.items() if v is not None}


def _node(node: str, health: Health, evidence: str, stage: Stage | None = None) -> Verdict:
    return Verdict(
        subject=Subject.NODE, nodes=(node,), health=health, stage=stage, evidence=evidence
    )


# ---- across nodes ----


@dataclass(frozen=True, kw_only=True, slots=True)
class Explained:
    """The internode groups' failures, each explained by a node that did not answer, a link,
    a culprit node, or none (`unexplained`: a fault among its members not yet separated)."""

    tests: list[Judged]
    members: list[set[str]]
    passes: dict[str, list[int]]
    fails: dict[str, list[int]]
    hung: dict[str, list[int]]
    culprits: dict[str, list[int]]
    pairs: list[set[str]]  # slow as a pair, both ends passing elsewhere: links until shown not
    unexplained: set[int]
    # failures that did not reproduce: each failing group whose nodes were run again, whole,
    # and passed the last time, with that passing test; held against no one
    transient: dict[int, int] = field(default_factory=dict)
    # each node with failures of its own (`sequential`): its log likelihood ratio, flaky past
    # FLAKY_LIMIT; one above 0 and under it is in doubt, for the policy to test again
    sequential: dict[str, float] = field(default_factory=dict)

    def known_good(self, node: str) -> bool:
        """Whether it passed beside at least two different sets of partners."""
        seen: set[frozenset[str]] = set()
        for i in self.passes.get(node, []):
            seen.add(frozenset(self.members[i]))
            if len(seen) > 1:
                return True
        return False


def transient(tests: Sequence[Judged]) -> dict[int, int]:
    """Each failing group whose very nodes were run again later and passed the last time
    (the policy runs a failing group again before it bisects it), with that test: a slow
    block or an error that did not reproduce (0.6% of recorded GPU points are 25-79% slow,
    scan.noise). A hang or a group that brought nothing back is never transient."""
    runs: dict[frozenset[str], list[int]] = defaultdict(list)
    for i, j in enumerate(tests):
        runs[frozenset(j.outcome.group.nodes)].append(i)
    out: dict[int, int] = {}
    for idx in runs.values():
        last = max(idx, key=lambda i: (tests[i].outcome.group.wave, i))
        if len(idx) < 2 or not tests[last].passed:
            continue
        for i in idx:
            j = tests[i]
            if not j.passed and j.failure is not Failure.MISSING and not j.outcome.unanswered:
                out[i] = last
    return out


FLAKY_LIMIT = log((1 - FLAKY_BETA) / FLAKY_ALPHA)


def ratio(failures: int, tests: int, noise: float) -> float:
    """Wald's log likelihood ratio of `failures` in `tests`: failing one test in
    1/FLAKY_RATE beyond the `noise` rate, against failing at the noise rate."""
    flaky = noise + (1 - noise) * FLAKY_RATE
    return failures * log(flaky / noise) + (tests - failures) * log((1 - flaky) / (1 - noise))


def explain(tests: list[Judged]) -> Explained:
    members = [set(j.outcome.group.nodes) for j in tests]
    passing = transient(tests)
    failing = {i for i, j in enumerate(tests) if not j.passed and i not in passing}
    fails: dict[str, list[int]] = defaultdict(list)
    passes: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(members):
        if i in passing:
            continue
        for n in group:
            (fails if i in failing else passes)[n].append(i)
    hung: dict[str, list[int]] = defaultdict(list)
    for i in sorted(failing):
        for n in tests[i].outcome.unanswered:
            hung[n].append(i)
    timed_out = {i for mine in hung.values() for i in mine}
    # a slow node explains slow groups, not errors: a flaky node's error in a group a slow
    # node was also in stays the flaky node's to explain
    slow = {i for i in failing - timed_out if tests[i].failure is Failure.SLOW}
    # a pair slow as a pair whose ends each pass elsewhere, at least a third as often as they
    # fail: a node slow near the threshold passes a group of 40 now and then, and its pairs
    # beside known-good partners are its own, not links
    pairs = [
        members[i]
        for i in slow
        if len(members[i]) == 2
        and all(passes[n] and 3 * len(passes[n]) >= len(fails[n]) for n in members[i])
    ]
    held = {i for i in slow if any(pair <= members[i] for pair in pairs)}
    # a node that passed every test of its beside known-good partners, two or more, is no
    # slow node: slow groups of its are a hub's slow pairs, to bisect (a node failing one
    # test in two with errors is another matter: the errors are its own)
    confirmed: dict[str, list[bool]] = defaultdict(list)
    for j in tests:
        if (g := j.outcome.group).stage is Stage.CONFIRM and g.partners:
            for n in g.tested:
                confirmed[n].append(j.passed)
    cleared = {n for n, seen in confirmed.items() if len(seen) > 1 and all(seen)}
    slow_nodes, slow_left = _explain(slow - held, fails, passes, members, cleared)
    if any(pair & slow_nodes for pair in pairs):  # a slow node's own pairs: no links
        pairs = [pair for pair in pairs if not pair & slow_nodes]
        held = {i for i in slow if any(pair <= members[i] for pair in pairs)}
        slow_nodes, slow_left = _explain(slow - held, fails, passes, members, cleared)
    broken_nodes, broken_left = _explain(failing - slow - timed_out, fails, passes, members)
    culprits = {
        n: [i for i in fails[n] if i not in timed_out]
        for n in fails
        if n in slow_nodes | broken_nodes and n not in hung
    }
    unexplained = slow_left | held | broken_left
    noise = max(NOISE_SHARE, len(passing) / len(tests)) if tests else NOISE_SHARE
    sequential: dict[str, float] = {}
    free = slow_left | broken_left  # what no culprit, hang or slow pair explains
    for n in sorted({n for i in free | set(passing) for n in members[i]} | set(culprits)):
        if n in hung:
            continue
        # errors and transient failures: a slow group that reproduced is for bisection
        errors = {i for i in fails.get(n, []) if i in free and tests[i].failure is not Failure.SLOW}
        own = set(culprits.get(n, [])) | errors
        mine = sorted(own | {i for i in passing if n in members[i]})
        sequential[n] = ratio(len(mine), len(mine) + len(passes.get(n, [])), noise)
        if n not in culprits and sequential[n] >= FLAKY_LIMIT:  # its failures, not partners'
            culprits[n] = mine
            unexplained -= set(mine)
    return Explained(
        tests=tests,
        members=members,
        passes=dict(passes),
        fails=dict(fails),
        hung=dict(hung),
        culprits=culprits,
        pairs=pairs,
        unexplained=unexplained,
        transient=passing,
        sequential=sequential,
    )


def _internode(
    fleet: Fleet, tests: list[Judged], decided: dict[str, Verdict], gates: dict[str, Judged]
) -> tuple[list[Verdict], list[Verdict], list[Verdict]]:
    order = {n: i for i, n in enumerate(fleet.ids)}
    e = explain(tests)
    unexplained = set(e.unexplained)
    by_link: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in sorted(unexplained):
        if len(e.members[i]) == 2:
            a, b = sorted(e.members[i], key=order.__getitem__)
            by_link[a, b].append(i)
    for a, b in list(by_link):
        both = [i for i in unexplained if {a, b} <= e.members[i]]
        by_link[a, b] = both
        unexplained -= set(both)

    verdicts: list[Verdict] = []
    for node in fleet.ids:
        if node in decided:
            verdicts.append(decided[node])
        elif node in e.hung:
            verdicts.append(_hung(node, e))
        elif node in e.culprits:
            verdicts.append(_culprit(node, e))
        else:
            verdicts.append(_bystander(node, e, len(fleet.ids), gates.get(node)))
    measured = {n for nodes in e.members for n in nodes}
    links = [_link(link, e, idx, alone=measured == set(link)) for link, idx in by_link.items()]
    links += _healthy_pairs(e, fleet)
    groups = [
        Verdict(
            subject=Subject.GROUP,
            nodes=tuple(tests[i].outcome.group.nodes),
            health=Health.UNCONFIRMED,
            stage=tests[i].outcome.group.stage,
            evidence=f"{'+'.join(tests[i].outcome.group.nodes)}: failed as a whole "
            f"({tests[i].why}); every member passed elsewhere: a link among them",
        )
        for i in sorted(unexplained)
        if all(e.passes.get(n) for n in e.members[i])
    ]
    return verdicts, links, groups


def _explain(
    failing: set[int],
    fails: Mapping[str, list[int]],
    passes: Mapping[str, list[int]],
    members: list[set[str]],
    cleared: Collection[str] = (),
) -> tuple[set[str], set[int]]:
    """The fewest culprits for the `failing` groups, each node that failed most consistently
    first (its share of them, then their count), among those that failed in at least two
    with different partners and FAIL_SHARE of theirs; and the groups they leave unexplained."""
    unexplained = set(failing)
    culprits: set[str] = set()
    keys = {i: frozenset(members[i]) for i in failing}
    # each test below only fails more as groups are explained (fewer left, a smaller share,
    # more shared partners), so a node that fails one is out for good: at 1024 nodes with 40
    # faults, most nodes fail some screen group and would be read again for every culprit
    candidates = {n: mine for n, mine in fails.items() if n not in cleared}
    while True:
        best: tuple[float, int, str] | None = None
        for n, mine in list(candidates.items()):
            left = [i for i in mine if i in unexplained]
            # all of them beside one other node: that one, or the link between the two,
            # explains them as well (a slow node's follower down the bisection, a link's end)
            if (
                len(left) < 2
                or len({keys[i] for i in left}) < 2
                or set.intersection(*(members[i] - {n} for i in left))
            ):
                del candidates[n]
                continue
            key = (len(left) / (len(left) + len(passes.get(n, []))), len(left), n)
            if key[0] < FAIL_SHARE:
                del candidates[n]
            elif best is None or key[:2] > best[:2]:
                best = key
        if best is None:
            return culprits, unexplained
        culprits.add(best[2])
        del candidates[best[2]]
        unexplained -= set(fails[best[2]])


class _Figures(_Against):
    busbw_gb_per_s: float | None
    fleet_gb_per_s: float | None
    threshold_gb_per_s: float | None
    threshold_source: str


@dataclass(frozen=True, slots=True)
class _Measured:
    """What a verdict's tests across nodes measured: its median figure and the fleet's, and
    the threshold and the reference of the last of them."""

    own: float | None
    fleet: float | None
    threshold: float | None
    source: str
    reference: Reference | None

    @classmethod
    def of(cls, tests: list[Judged], idx: Sequence[int]) -> _Measured:
        own = [v for i in idx if (v := tests[i].figure_gb_per_s) is not None]
        fleet = [v for i in idx if (v := tests[i].fleet_gb_per_s) is not None]
        last = tests[max(idx)] if idx else None
        return cls(
            median(own) if own else None,
            median(fleet) if fleet else None,
            last.threshold_gb_per_s if last else None,
            last.source if last else "",
            last.reference if last else None,
        )

    def fields(self) -> _Figures:
        """The verdict's fields of its figures."""
        return {
            "busbw_gb_per_s": self.own,
            "fleet_gb_per_s": self.fleet,
            "threshold_gb_per_s": self.threshold,
            "threshold_source": self.source,
            **_against(self.reference),
        }


def _hung(node: str, e: Explained) -> Verdict:
    """A node that did not answer in a group: the group's hang is its, not its partners'."""
    idx = e.hung[node]
    first = e.tests[idx[0]].outcome.group
    passed = len(e.passes.get(node, []))
    return Verdict(
        subject=Subject.NODE,
        nodes=(node,),
        health=Health.FAILED,
        stage=first.stage,
        partners=tuple(n for n in first.nodes if n != node),
        tests=passed + len(e.fails.get(node, [])),
        passed=passed,
        evidence=(
            f"{node}: did not answer in {len(idx)} group(s), first wave {first.wave} "
            f"({e.tests[idx[0]].why}); its partners answered; left out of every later wave"
            + (f" (it had passed {passed} groups before)" if passed else "")
        ),
    )


def _culprit(node: str, e: Explained) -> Verdict:
    """A node that explains failing groups."""
    tests = e.tests
    idx = e.culprits[node]
    kinds = Counter(tests[i].failure for i in idx)
    partners = sorted(
        {p for i in idx for p in tests[i].outcome.group.partners if p != node}
        | {p for i in idx if len(e.members[i]) == 2 for p in e.members[i] if p != node}
    )
    m = _Measured.of(tests, idx)
    last = tests[idx[-1]]
    flags = sorted({f for i in idx for f in tests[i].outcome.flags(node)})
    passed = len(e.passes.get(node, []))
    total = len(idx) + passed
    last_pass = max((tests[i].outcome.group.wave for i in e.passes.get(node, [])), default=-1)
    after = [i for i in idx if tests[i].outcome.group.wave > last_pass]
    if after and all(tests[i].failure is Failure.MISSING for i in after):
        health = Health.UNREACHABLE
        why = f"{node}: no row came back from its last {len(after)} groups ({last.why})"
    elif passed and (4 * passed >= total or kinds[Failure.FAILED]):
        health = Health.FLAKY
        why = (
            f"{node}: passed {passed} of {total} groups and failed the others beside "
            f"different nodes ({last.why})"
        )
        if node in e.sequential:
            why += (
                f"; a sequential test of one failure in {1 / FLAKY_RATE:.0f} against the "
                f"fleet's noise: log ratio {e.sequential[node]:.1f} past {FLAKY_LIMIT:.1f} "
                f"(a healthy node called flaky {FLAKY_ALPHA:.1%} of the time)"
            )
    elif kinds[Failure.FAILED] >= kinds[Failure.SLOW]:  # the kind most of them show
        health = Health.FAILED
        why = f"{node}: failed {len(idx)} of {total} groups beside different nodes ({last.why})"
    else:
        health = Health.SLOW
        size = _size(last.outcome.size_bytes)
        why = (
            f"{node}: {last.outcome.op} at {size} {figure(m.own or 0)} GB/s "
            f"{unit(last.outcome)} against the fleet's {figure(m.fleet or 0)} in {len(idx)} "
            f"groups with different partners (threshold {figure(m.threshold or 0)}: {m.source})"
        )
        if passed:  # a few, near the threshold: slow, not flaky
            why += f"; it passed {passed} of {total}"
    if flags:
        why += f"; {', '.join(flags)}"
    return Verdict(
        subject=Subject.NODE,
        nodes=(node,),
        health=health,
        stage=last.outcome.group.stage,
        partners=tuple(partners),
        **m.fields(),
        tests=total,
        passed=passed,
        evidence=why,
    )


def _bystander(node: str, e: Explained, fleet_size: int, gate: Judged | None) -> Verdict:
    failed = e.fails.get(node, [])
    passing = e.passes.get(node, [])
    total = len(failed) + len(passing)
    if passing and all(e.tests[i].unheld for i in passing):
        model = e.tests[passing[0]].outcome.op
        return Verdict(
            subject=Subject.NODE,
            nodes=(node,),
            health=Health.UNCONFIRMED,
            tests=total,
            passed=len(passing),
            evidence=(
                f"{node}: cannot tell: its {model} groups across nodes have no reference "
                f"for its GPU model, and a fleet of {len(e.passes | e.fails)} nodes cannot be "
                "held against itself; --min-busbw internode=GB/S sets a threshold"
            ),
        )
    if passing:
        m = _Measured.of(e.tests, passing)
        ran = (
            f": {measure(e.tests[passing[-1]].outcome)} {figure(m.own)} GB/s, the fleet's "
            f"{figure(m.fleet or 0)} (threshold {figure(m.threshold or 0)}: {m.source})"
            if m.own is not None
            else ""
        )
        own_failures = [i for i in failed if i in e.unexplained]
        why = (
            f"{node}: passed its gate{_gate_figures(gate)} and {len(passing)} of {total} "
            f"internode groups{ran}"
        )
        if own_failures:
            why += f"; {len(own_failures)} failing group(s) beside it that no culprit explains"
        return Verdict(
            subject=Subject.NODE,
            nodes=(node,),
            health=Health.HEALTHY,
            **m.fields(),
            tests=total,
            passed=len(passing),
            evidence=why,
        )
    if not total and fleet_size == 1 and gate is not None:
        # the only node, its gate passed; where a fleet finding excused the gate's threshold,
        # its isolation named nothing (else the gate decided it): its GPUs alike, the finding
        # stands for what the threshold saw, and no threshold is quoted
        held = not gate.excused
        return Verdict(
            subject=Subject.NODE,
            nodes=(node,),
            health=Health.HEALTHY,
            stage=Stage.GATE,
            busbw_gb_per_s=gate.figure_gb_per_s,
            fleet_gb_per_s=gate.fleet_gb_per_s if held else None,
            threshold_gb_per_s=gate.threshold_gb_per_s if held else None,
            threshold_source=gate.source if held else "",
            **_against(gate.reference),
            tests=1,
            passed=1,
            evidence=(
                f"{node}: passed its gate{_gate_figures(gate)} (the only node)"
                if held
                else f"{node}: the only node; its gate's {gate.excused}, a fleet finding; "
                "isolated, none of its GPUs or NVLinks stands out from the others"
            ),
        )
    why = (
        f"{node}: failed {len(failed)} internode groups, never separated from its partners"
        if failed
        else f"{node}: passed its gate; no internode group measured it"
    )
    return Verdict(
        subject=Subject.NODE, nodes=(node,), health=Health.UNCONFIRMED, tests=total, evidence=why
    )


def _gate_figures(gate: Judged | None) -> str:
    """What a node's passed gate measured and the threshold it passed, in words (none where
    its gate had no figure: a node of one rank)."""
    if gate is None or gate.figure_gb_per_s is None:
        return ""
    o = gate.outcome
    said = f" ({o.op} at {_size(o.size_bytes)} {figure(gate.figure_gb_per_s)} GB/s {unit(o)}"
    if gate.threshold_gb_per_s is not None:
        said += f", threshold {figure(gate.threshold_gb_per_s)}: {gate.source}"
    return said + ")"


def _link(link: tuple[str, str], e: Explained, idx: list[int], alone: bool = False) -> Verdict:
    """A pair of nodes whose groups failed: slow or failed where each end passed elsewhere,
    or where the two are the whole fleet across nodes (`alone`: the path between them is what
    failed, against an absolute threshold, whichever end holds it); else unconfirmed."""
    a, b = link
    tests = e.tests
    m = _Measured.of(tests, idx)
    last = tests[max(idx)]
    passes = {n: len(e.passes.get(n, [])) for n in link}
    separated = passes[a] and passes[b]
    kinds = {tests[i].failure for i in idx}
    health = (
        Health.UNCONFIRMED
        if not separated and not alone
        else Health.FAILED
        if Failure.FAILED in kinds or Failure.MISSING in kinds
        else Health.SLOW
    )
    measured = (
        f"{last.outcome.op} at {_size(last.outcome.size_bytes)} {figure(m.own)} GB/s "
        f"{unit(last.outcome)} against the fleet's {figure(m.fleet or 0)} "
        f"(threshold {figure(m.threshold or 0)}: {m.source})"
        if m.own is not None and Failure.SLOW in kinds
        else f"failed ({last.why})"
    )
    ends = f"each end passed beside other nodes ({a} {passes[a]}, {b} {passes[b]} groups)"
    if alone and not separated:
        ends = (
            "the fleet's only pair across nodes: the path between them (either node's NICs, "
            "or the fabric), which a fleet of two cannot tell apart"
        )
    elif not separated:
        ends = "an end never passed elsewhere, so node and link are not separated"
    return Verdict(
        subject=Subject.LINK,
        nodes=link,
        health=health,
        stage=last.outcome.group.stage,
        partners=link,
        **m.fields(),
        tests=len(idx),
        passed=0,
        evidence=f"{a}-{b}: {measured} in {len(idx)} groups holding both; {ends}",
    )


def _healthy_pairs(e: Explained, fleet: Fleet) -> list[Verdict]:
    """Links measured as a pair and never failing as one."""
    seen: dict[tuple[str, str], list[int]] = defaultdict(list)
    order = {n: i for i, n in enumerate(fleet.ids)}
    for i, nodes in enumerate(e.members):
        if len(nodes) == 2:
            a, b = sorted(nodes, key=order.__getitem__)
            seen[a, b].append(i)
    out = []
    for (a, b), idx in seen.items():
        if all(e.tests[i].passed and not e.tests[i].unheld for i in idx):
            m = _Measured.of(e.tests, idx)
            out.append(
                Verdict(
                    subject=Subject.LINK,
                    nodes=(a, b),
                    health=Health.HEALTHY,
                    busbw_gb_per_s=m.own,
                    fleet_gb_per_s=m.fleet,
                    **_against(m.reference),
                    tests=len(idx),
                    passed=len(idx),
                    evidence=f"{a}-{b}: passed {len(idx)} of {len(idx)} as a pair",
                )
            )
    return out


def named(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts that name something: condemned or unconfirmed, a condemned node's GPUs
    left out (they go with it)."""
    down = {v.nodes[0] for v in verdicts if v.subject is Subject.NODE and v.condemned}
    return [
        v
        for v in verdicts
        if v.health is not Health.HEALTHY
        and not (v.subject in (Subject.GPU, Subject.NVLINK) and v.nodes[0] in down)
    ]
