"""Outcomes -> a verdict for every node and GPU, and for every link a pair test measured or the
evidence condemns, each with its evidence. Pure.

The gate speaks for each node's own GPUs. Across nodes a failing group blames its members
only until they are separated: the judge explains the failing groups by the fewest culprits,
taking first the node that failed most consistently (its share of failing groups, then their
count) among those that failed in at least two groups with different partners, and removing
the groups it explains; a node is blamed only when its failing groups share no other node
(else that node, or the link to it, explains them as well). Slow groups and groups that
failed outright (an error, no data) are explained apart: a slow node explains no error. A
pair slow as a pair whose ends each passed elsewhere is a link, and explains the slow groups
holding both its ends before any node is blamed for them (a pad beside it is no culprit).
Failing pairs left unexplained whose ends both passed elsewhere are links. A node in a
passing group is cleared as a node. Missing data never passes: a node with no passing group
is at best `unconfirmed`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from sweeper.scan.fleet import Fleet, Outcome, Reading, Stage
from sweeper.scan.thresholds import (
    Failure,
    Judged,
    Robust,
    Thresholds,
    figure,
    gpu_copy_limit,
    judge_groups,
)
from sweeper.wire import Name


class Health(Name):
    HEALTHY = "healthy"
    SLOW = "slow"  # ran, below the threshold
    FAILED = "failed"  # an error, a hang, wrong data, NVML evidence
    UNREACHABLE = "unreachable"  # its actors never started, or it left
    UNCONFIRMED = "unconfirmed"  # a suspect the scan did not separate from its partners


CONDEMNED = (Health.SLOW, Health.FAILED, Health.UNREACHABLE)


class Subject(Name):
    NODE = "node"
    GPU = "gpu"
    LINK = "link"
    GROUP = "group"  # a failing group whose culprit was not separated


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    subject: Subject
    nodes: tuple[str, ...]
    gpu: int | None = None
    health: Health
    stage: Stage | None = None  # where the deciding evidence came from
    partners: tuple[str, ...] = ()  # the nodes it was measured beside in that evidence
    busbw_gb_per_s: float | None = None  # its median figure there
    fleet_gb_per_s: float | None = None  # the fleet's median it was compared with
    threshold_gb_per_s: float | None = None
    tests: int = 0  # internode groups it took part in
    passed: int = 0
    evidence: str = ""  # one sentence

    @property
    def name(self) -> str:
        if self.subject is Subject.GPU:
            return f"{self.nodes[0]}/gpu{self.gpu}"
        return ("-" if self.subject is Subject.LINK else "+").join(self.nodes)

    @property
    def condemned(self) -> bool:
        return self.health in CONDEMNED

    @property
    def pass_ratio(self) -> float | None:
        return self.passed / self.tests if self.tests else None


def judge(fleet: Fleet, outcomes: Sequence[Outcome], thresholds: Thresholds) -> list[Verdict]:
    judged = judge_groups(fleet, outcomes, thresholds)
    gates = {j.outcome.group.nodes[0]: j for j in judged.values() if _gate(j)}
    gpus, nodes = _gate_verdicts(fleet, gates, outcomes, thresholds)
    tests = [j for j in judged.values() if not _gate(j)]
    verdicts, links, groups = _internode(fleet, tests, nodes)
    return [*verdicts, *gpus, *links, *groups]


def _gate(j: Judged) -> bool:
    return j.outcome.group.stage is Stage.GATE


def _size(size_bytes: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size_bytes >= 1 << shift and size_bytes % (1 << shift) == 0:
            return f"{size_bytes >> shift} {unit}"
    return f"{size_bytes} B"


def _gate_verdicts(
    fleet: Fleet, gates: dict[str, Judged], outcomes: Sequence[Outcome], thresholds: Thresholds
) -> tuple[list[Verdict], dict[str, Verdict]]:
    """Each GPU's verdict, and the nodes the gate already decides (the others go on)."""
    copies = gpu_copy_limit(outcomes)
    low = copies.limit(thresholds) if copies else None
    gpus: list[Verdict] = []
    nodes: dict[str, Verdict] = {}
    for node in fleet.nodes:
        j = gates.get(node.id)
        if j is None or j.failure is Failure.MISSING:
            why = j.why if j else "no gate result"
            nodes[node.id] = _node(node.id, Health.UNREACHABLE, f"{node.id}: {why}", Stage.GATE)
            gpus += [
                Verdict(
                    subject=Subject.GPU,
                    nodes=(node.id,),
                    gpu=g,
                    health=Health.UNREACHABLE,
                    stage=Stage.GATE,
                    evidence=f"{node.id}/gpu{g}: its node did not answer",
                )
                for g in range(node.gpus)
            ]
            continue
        readings = {r.gpu: r for r in j.outcome.readings if r.gpu is not None}
        found = {
            g: _gpu(f"{node.id}/gpu{g}", readings.get(g), copies, low) for g in range(node.gpus)
        }
        bad = [f"gpu{g} {why.split(': ', 1)[1]}" for g, (_, why) in _condemned(found).items()]
        for g, verdict in found.items():
            name = f"{node.id}/gpu{g}"
            if verdict is not None:
                health, why = verdict
            elif j.passed or j.failure is Failure.SLOW or bad:
                health, why = Health.HEALTHY, f"{name}: its gate's copies and health readings"
            else:
                health, why = Health.UNCONFIRMED, f"{name}: its node's gate failed ({j.why})"
            gpus.append(
                Verdict(
                    subject=Subject.GPU,
                    nodes=(node.id,),
                    gpu=g,
                    health=health,
                    stage=Stage.GATE,
                    evidence=why,
                )
            )
        if bad:
            why = f"{node.id}: left out of the internode stages: its " + "; ".join(bad)
            nodes[node.id] = _node(node.id, Health.UNCONFIRMED, why, Stage.GATE)
        elif not j.passed:
            health = Health.FAILED if j.failure is Failure.FAILED else Health.SLOW
            own = j.outcome.busbw_gb_per_s
            why = f"{node.id}: its own GPUs' all_reduce at the gate: {j.why}"
            if j.fleet_gb_per_s is not None and own is not None:
                why += f" (the fleet's {figure(j.fleet_gb_per_s)})"
            nodes[node.id] = Verdict(
                subject=Subject.NODE,
                nodes=(node.id,),
                health=health,
                stage=Stage.GATE,
                busbw_gb_per_s=own,
                fleet_gb_per_s=j.fleet_gb_per_s,
                threshold_gb_per_s=j.threshold_gb_per_s,
                evidence=why,
            )
    return gpus, nodes


def _gpu(
    name: str, r: Reading | None, copies: Robust | None, low: float | None
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


def _condemned(found: dict[int, tuple[Health, str] | None]) -> dict[int, tuple[Health, str]]:
    return {g: v for g, v in found.items() if v is not None}


def _node(node: str, health: Health, evidence: str, stage: Stage | None = None) -> Verdict:
    return Verdict(
        subject=Subject.NODE, nodes=(node,), health=health, stage=stage, evidence=evidence
    )


def _internode(
    fleet: Fleet, tests: list[Judged], decided: dict[str, Verdict]
) -> tuple[list[Verdict], list[Verdict], list[Verdict]]:
    order = {n: i for i, n in enumerate(fleet.ids)}
    members = [set(j.outcome.group.nodes) for j in tests]
    failing = {i for i, j in enumerate(tests) if not j.passed}
    fails: dict[str, list[int]] = defaultdict(list)
    passes: dict[str, int] = defaultdict(int)
    last_pass: dict[str, int] = {}
    for i, group in enumerate(members):
        for n in group:
            if i in failing:
                fails[n].append(i)
            else:
                passes[n] += 1
                last_pass[n] = max(last_pass.get(n, -1), tests[i].outcome.group.wave)
    # a slow node explains slow groups, not errors: a flapping node's error in a group a
    # slow node was also in stays the flapping node's to explain
    slow = {i for i in failing if tests[i].failure is Failure.SLOW}
    # a pair slow as a pair whose ends each passed elsewhere is a link until shown otherwise:
    # the groups holding both ends are its to explain, not their other members' (a pad)
    pairs = [
        members[i] for i in slow if len(members[i]) == 2 and all(passes[n] for n in members[i])
    ]
    held = {i for i in slow if any(pair <= members[i] for pair in pairs)}
    slow_nodes, slow_left = _explain(slow - held, fails, passes, members)
    broken_nodes, broken_left = _explain(failing - slow, fails, passes, members)
    culprits = {n: fails[n] for n in fleet.ids if n in slow_nodes | broken_nodes}
    unexplained = slow_left | held | broken_left

    by_link: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in sorted(unexplained):
        if len(members[i]) == 2:
            a, b = sorted(members[i], key=order.__getitem__)
            by_link[a, b].append(i)
    for (a, b), _ in list(by_link.items()):
        both = [i for i in unexplained if {a, b} <= members[i]]
        by_link[a, b] = both
        unexplained -= set(both)

    verdicts: list[Verdict] = []
    for node in fleet.ids:
        if node in decided:
            verdicts.append(decided[node])
        elif node in culprits:
            mine = culprits[node]
            after = [i for i in mine if tests[i].outcome.group.wave > last_pass.get(node, -1)]
            verdicts.append(_culprit(node, tests, mine, after, passes[node], members))
        else:
            verdicts.append(_bystander(node, fails.get(node, []), passes[node], len(fleet.ids)))
    links = [_link(link, tests, idx, passes) for link, idx in by_link.items()]
    links += _healthy_pairs(tests, members, fleet)
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
        if all(passes[n] for n in members[i])
    ]
    return verdicts, links, groups


def _explain(
    failing: set[int],
    fails: dict[str, list[int]],
    passes: dict[str, int],
    members: list[set[str]],
) -> tuple[set[str], set[int]]:
    """The fewest culprits for the `failing` groups, each node that failed most consistently
    first (its share of them, then their count), among those that failed in at least two
    with different partners; and the groups they leave unexplained."""
    unexplained = set(failing)
    culprits: set[str] = set()
    while True:
        best: tuple[float, int, str] | None = None
        for n, mine in fails.items():
            if n in culprits:
                continue
            left = [i for i in mine if i in unexplained]
            if len({frozenset(members[i] - {n}) for i in left}) < 2:
                continue
            # all of them beside one other node: that one, or the link between the two,
            # explains them as well (a slow node's follower down the bisection, a link's end)
            if set.intersection(*(members[i] - {n} for i in left)):
                continue
            key = (len(left) / (len(left) + passes[n]), len(left), n)
            if best is None or key[:2] > best[:2]:
                best = key
        if best is None:
            return culprits, unexplained
        culprits.add(best[2])
        unexplained -= set(fails[best[2]])


def _figures(tests: list[Judged], idx: Sequence[int]) -> tuple[float | None, float | None]:
    own = [v for i in idx if (v := tests[i].outcome.busbw_gb_per_s) is not None]
    fleet = [v for i in idx if (v := tests[i].fleet_gb_per_s) is not None]
    return (median(own) if own else None), (median(fleet) if fleet else None)


def _culprit(
    node: str,
    tests: list[Judged],
    idx: list[int],
    after: list[int],
    passed: int,
    members: list[set[str]],
) -> Verdict:
    """A node that explains failing groups; `after`: those after its last pass."""
    kinds = Counter(tests[i].failure for i in idx)
    partners = sorted(
        {p for i in idx for p in tests[i].outcome.group.partners if p != node}
        | {p for i in idx if len(members[i]) == 2 for p in members[i] if p != node}
    )
    own, fleet = _figures(tests, idx)
    last = tests[idx[-1]]
    flags = sorted({f for i in idx for f in tests[i].outcome.flags(node)})
    total = len(idx) + passed
    if after and all(tests[i].failure is Failure.MISSING for i in after):
        health = Health.UNREACHABLE
        why = f"{node}: no row came back from its last {len(after)} groups ({last.why})"
    elif passed:
        health = Health.UNCONFIRMED
        why = f"{node}: passed {passed} of {total} groups, failed the others beside different nodes"
    elif kinds[Failure.FAILED] >= kinds[Failure.SLOW]:  # the kind most of them show
        health = Health.FAILED
        why = f"{node}: failed {len(idx)} of {total} groups beside different nodes ({last.why})"
    else:
        health = Health.SLOW
        size = _size(last.outcome.size_bytes)
        why = (
            f"{node}: all_reduce at {size} {figure(own or 0)} GB/s busbw against the fleet's "
            f"{figure(fleet or 0)} in {len(idx)} groups with different partners"
        )
    if flags:
        why += f"; {', '.join(flags)}"
    return Verdict(
        subject=Subject.NODE,
        nodes=(node,),
        health=health,
        stage=last.outcome.group.stage,
        partners=tuple(partners),
        busbw_gb_per_s=own,
        fleet_gb_per_s=fleet,
        threshold_gb_per_s=last.threshold_gb_per_s,
        tests=total,
        passed=passed,
        evidence=why,
    )


def _bystander(node: str, failed: list[int], passed: int, fleet_size: int) -> Verdict:
    total = len(failed) + passed
    if passed:
        why = f"{node}: passed its gate and {passed} of {total} internode groups"
        return Verdict(
            subject=Subject.NODE,
            nodes=(node,),
            health=Health.HEALTHY,
            tests=total,
            passed=passed,
            evidence=why,
        )
    if not total and fleet_size == 1:
        return _node(node, Health.HEALTHY, f"{node}: passed its gate (the only node)", Stage.GATE)
    why = (
        f"{node}: failed {len(failed)} internode groups, never separated from its partners"
        if failed
        else f"{node}: passed its gate; no internode group measured it"
    )
    return Verdict(
        subject=Subject.NODE, nodes=(node,), health=Health.UNCONFIRMED, tests=total, evidence=why
    )


def _link(
    link: tuple[str, str], tests: list[Judged], idx: list[int], passes: dict[str, int]
) -> Verdict:
    a, b = link
    own, fleet = _figures(tests, idx)
    last = tests[max(idx)]
    separated = passes[a] and passes[b]
    kinds = {tests[i].failure for i in idx}
    health = (
        Health.UNCONFIRMED
        if not separated
        else Health.FAILED
        if Failure.FAILED in kinds or Failure.MISSING in kinds
        else Health.SLOW
    )
    measured = (
        f"all_reduce at {_size(last.outcome.size_bytes)} {figure(own)} GB/s busbw against the "
        f"fleet's {figure(fleet or 0)}"
        if own is not None and Failure.SLOW in kinds
        else f"failed ({last.why})"
    )
    ends = f"each end passed beside other nodes ({a} {passes[a]}, {b} {passes[b]} groups)"
    if not separated:
        ends = "an end never passed elsewhere, so node and link are not separated"
    return Verdict(
        subject=Subject.LINK,
        nodes=link,
        health=health,
        stage=last.outcome.group.stage,
        partners=link,
        busbw_gb_per_s=own,
        fleet_gb_per_s=fleet,
        threshold_gb_per_s=last.threshold_gb_per_s,
        tests=len(idx),
        passed=0,
        evidence=f"{a}-{b}: {measured} in {len(idx)} groups holding both; {ends}",
    )


def _healthy_pairs(tests: list[Judged], members: list[set[str]], fleet: Fleet) -> list[Verdict]:
    """Links measured as a pair and never failing as one."""
    seen: dict[tuple[str, str], list[int]] = defaultdict(list)
    order = {n: i for i, n in enumerate(fleet.ids)}
    for i, nodes in enumerate(members):
        if len(nodes) == 2:
            a, b = sorted(nodes, key=order.__getitem__)
            seen[a, b].append(i)
    out = []
    for (a, b), idx in seen.items():
        if all(tests[i].passed for i in idx):
            own, fleet_median = _figures(tests, idx)
            out.append(
                Verdict(
                    subject=Subject.LINK,
                    nodes=(a, b),
                    health=Health.HEALTHY,
                    busbw_gb_per_s=own,
                    fleet_gb_per_s=fleet_median,
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
        if v.health is not Health.HEALTHY and not (v.subject is Subject.GPU and v.nodes[0] in down)
    ]
