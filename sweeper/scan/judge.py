"""Outcomes -> a verdict for every node and GPU, for every NVLink and node pair a test measured
as a pair or the evidence condemns, each with its evidence; and the fleet's findings. Pure.

Inside a node (`inside`, `inside_verdicts`), the gate and, where the node was isolated, its
pairs speak for each GPU and NVLink. Across nodes (`across`, `across_verdicts`), a failing
group blames its members only until they are separated. Missing data never passes, and every
figure is judged against a threshold that names its source (`thresholds`).
docs/ARCHITECTURE.md, "Inside the rooms", gives each rule."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from statistics import median

from sweeper.scan.across import transient
from sweeper.scan.across_verdicts import internode
from sweeper.scan.fleet import Fleet, GroupOutcome, Stage
from sweeper.scan.inside import leaving, settled_gates
from sweeper.scan.inside_verdicts import gate_verdicts
from sweeper.scan.reference import entry
from sweeper.scan.thresholds import (
    Census,
    Finding,
    Judged,
    Thresholds,
    figure,
    findings,
    judge_groups,
)
from sweeper.scan.verdict import Health, Subject, Verdict

# A node whose groups' communicators take over this many times as long to start as its
# peers' groups of the same size (their median) is noted (issue 54, item 4)
START_SHARE = 2.0
# What a misconfigured group's verdict also asks to check, beside what its flag names: the
# kernel modules GPUDirect RDMA needs and the NCCL variables that steer its transports.
CHECK = (
    "the nvidia_peermem module (or dma-buf: NCCL_DMABUF_ENABLE), NCCL_P2P_DISABLE, "
    "NCCL_SHM_DISABLE, NCCL_NET, NCCL_IB_HCA, NCCL_IB_DISABLE and NCCL_SOCKET_IFNAME on its nodes"
)


def verdicts_and_findings(
    fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds
) -> tuple[list[Verdict], list[Finding]]:
    """A scan's verdicts and its fleet findings, its figures read once, not once each (1024
    nodes' pairs are 531 270 outcomes)."""
    census = Census(fleet)
    verdicts = judge(fleet, outcomes, thresholds, census)
    return verdicts, findings(fleet, outcomes, thresholds, census)


def judge(
    fleet: Fleet,
    outcomes: Sequence[GroupOutcome],
    thresholds: Thresholds,
    census: Census | None = None,
) -> list[Verdict]:
    judged = judge_groups(fleet, outcomes, thresholds, census=census)
    inside = [j for j in judged.values() if j.outcome.group.stage is Stage.ISOLATE]
    gates = settled_gates(fleet, judged.values(), inside, outcomes, thresholds)
    gpus, nodes = gate_verdicts(fleet, gates, inside, outcomes, thresholds)
    # a group whose transport broke its tier's contract measured the configuration, not its
    # nodes: it neither condemns nor clears them
    tests = [j for j in judged.values() if _across(j) and not j.outcome.misconfigured]
    passed = {n: g.judged for n, g in gates.items()}
    verdicts, links, groups = internode(fleet, tests, nodes, passed)
    notes = {n: list(g.node_notes) for n, g in gates.items()}
    for n, out in leaving(fleet, gates, inside, thresholds.min_ratio).items():
        flags = {r.gpu: ", ".join(r.flags) for r in gates[n].judged.outcome.readings if r.flags}
        named = ", ".join(f"gpu{g} ({flags.get(g, 'slow')})" for g in out)
        notes[n].append(f"its {named} left out of its groups across nodes")
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


def _across(j: Judged) -> bool:
    return j.outcome.group.stage not in (Stage.GATE, Stage.ISOLATE)
