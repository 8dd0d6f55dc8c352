"""Across nodes: each node's verdict from the explanation (hung, culprit, or neither: healthy
or not separated), each node pair's, and each failing group no culprit explains. Pure."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from sweeper.scan.across import FLAKY_ALPHA, FLAKY_LIMIT, FLAKY_RATE, Explained, explain
from sweeper.scan.fleet import Fleet, Stage
from sweeper.scan.reference import Reference
from sweeper.scan.thresholds import Failure, Judged, figure, measure, unit
from sweeper.scan.verdict import Against, Health, Subject, Verdict, against

# Healthy links get a verdict each where a scan tested at most this many pairs alone (129
# nodes' every pair: some 7 MB of a scan's document, at about 870 bytes a link named by Ray's
# node ids); past it only those tested more than once, whose record the scan settled. 1024
# nodes' 523 776 would be some 450 MB, past what sweeper reads back of its own JSON
# (results.files.JSON_LIMIT_BYTES); their nodes' verdicts say they passed.
LISTED_PAIRS = 129 * 128 // 2


def _size(size_bytes: int) -> str:
    for name, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size_bytes >= 1 << shift and size_bytes % (1 << shift) == 0:
            return f"{size_bytes >> shift} {name}"
    return f"{size_bytes} B"


def internode(
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
    told: dict[frozenset[str], Verdict] = {}  # a group run again whole is one verdict
    for i in sorted(unexplained):
        key = frozenset(e.members[i])
        if key not in told and all(e.passes.get(n) for n in e.members[i]):
            told[key] = _group(tests[i], e)
    return verdicts, links, list(told.values())


def _group(test: Judged, e: Explained) -> Verdict:
    """A failing group no culprit, hang or pair explains, each member passing elsewhere: a
    link among them, or, where some members failed more tests than the fleet's noise gives
    (the sequential test leaning their way, undecided: a node failing one test in ten), those
    members, not the 28 of a screen group."""
    group = test.outcome.group.nodes
    doubt = tuple(n for n in group if e.sequential.get(n, 0.0) > 0)
    whole = f"{'+'.join(group)}: failed as a whole ({test.why})"
    if doubt and len(doubt) < len(group):
        said = ", ".join(f"{n} ({e.sequential[n]:.1f})" for n in doubt)
        evidence = (
            f"{whole}, never apart; only {said} failed more tests than the fleet's noise "
            f"gives (log ratio, flaky past {FLAKY_LIMIT:.1f}): flaky or not, not yet told"
        )
    else:
        doubt, evidence = group, f"{whole}; every member passed elsewhere: a link among them"
    return Verdict(
        subject=Subject.GROUP,
        nodes=doubt,
        health=Health.UNCONFIRMED,
        stage=test.outcome.group.stage,
        evidence=evidence,
    )


class _Figures(Against):
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
            **against(self.reference),
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
                f"(a healthy node called flaky {FLAKY_ALPHA:.2%} of the time)"
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
        # a gate a GPU held back that went on without it (`inside.left_out`) did not pass
        held = gate is not None and not gate.passed
        at_gate = f"its gate: {gate.why}" if gate is not None and held else "passed its gate"
        without = " without the GPUs its gate or isolation condemned" if held else ""
        why = (
            f"{node}: {at_gate}{_gate_figures(gate)} and {len(passing)} of {total} "
            f"internode groups{without}{ran}"
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
            **against(gate.reference),
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
    doubt = frozenset(link) in e.doubt
    health = (
        Health.UNCONFIRMED
        if (not separated and not alone) or doubt
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
    if doubt:
        both = set(link)
        own = [
            i for i, j in enumerate(tests) if e.members[i] == both and not j.outcome.group.partners
        ]
        failed = sum(not tests[i].passed for i in own)
        ends += (
            f"; failed {failed} of {len(own)} tests as a pair, where {e.link_fails} failures, "
            "two more than its passes, stand a link at this fleet's noise: to run again"
        )
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
    """Links measured as a pair and never failing as one but by chance: a failure that passed
    when run again (`across.transient`) is noted, so that a pair has its verdict whatever its
    noise did (a resumed scan's pair failed once on a loaded box where the same scan's did
    not, and its link had no verdict at all). Past LISTED_PAIRS pairs, only those tested
    more than once."""
    seen: dict[tuple[str, str], list[int]] = defaultdict(list)
    order = {n: i for i, n in enumerate(fleet.ids)}
    for i, nodes in enumerate(e.members):
        if len(nodes) == 2:
            a, b = sorted(nodes, key=order.__getitem__)
            seen[a, b].append(i)
    listed = len(seen) <= LISTED_PAIRS
    out = []
    for (a, b), idx in seen.items():
        if not listed and len(idx) < 2:
            continue
        passed = [i for i in idx if e.tests[i].passed]
        chance = [i for i in idx if i in e.transient]
        if (
            passed
            and len(passed) + len(chance) == len(idx)
            and not any(e.tests[i].unheld for i in passed)
        ):
            m = _Measured.of(e.tests, passed)
            notes = tuple(
                f"transient: {e.tests[i].why} in wave {e.tests[i].outcome.group.wave}, "
                f"passed when run again in wave {e.tests[e.transient[i]].outcome.group.wave}"
                for i in chance
            )
            out.append(
                Verdict(
                    subject=Subject.LINK,
                    nodes=(a, b),
                    health=Health.HEALTHY,
                    busbw_gb_per_s=m.own,
                    fleet_gb_per_s=m.fleet,
                    **against(m.reference),
                    tests=len(idx),
                    passed=len(passed),
                    evidence=f"{a}-{b}: passed {len(passed)} of {len(idx)} as a pair",
                    notes=notes,
                )
            )
    return out
