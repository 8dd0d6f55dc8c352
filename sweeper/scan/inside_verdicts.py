"""Inside a node: each GPU's and NVLink's verdict, and the nodes their gate and isolation
decide (no answer, a slow or failed gate, a GPU or NVLink named), a node of one GPU as any
other. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from statistics import median

from sweeper.scan.alone import Alone, judged_alone
from sweeper.scan.fleet import Fleet, GroupOutcome, MemberReading, Stage
from sweeper.scan.inside import (
    GPU_SHARE,
    PEER_SHARE,
    Gate,
    Inside,
    by_node,
    isolated,
    latest_copies,
    left_out,
)
from sweeper.scan.thresholds import Failure, Judged, Robust, Thresholds, figure, gpu_copy_limit
from sweeper.scan.verdict import Health, Subject, Verdict, against


def gate_verdicts(
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
        # its copies by their last reading: alone, where it copied alone after the gate
        latest = latest_copies(j, each.get(node.id, []))
        readings |= {g: replace(r, copy_gb_per_s=latest.get(g)) for g, r in readings.items()}
        # a node of one GPU: what it does alone, against its model's reference (CPU ranks
        # read nothing of the kind)
        lone = (
            judged_alone(j, each.get(node.id, []), fleet.gpu_model, thresholds)
            if node.gpus == 1 and 0 in readings
            else None
        )
        found = {
            g: _gpu(f"{node.id}/gpu{g}", readings.get(g), copies, low) or _held(node.id, lone)
            for g in range(node.gpus)
        }
        seen = isolated(node.id, each.get(node.id, []), j, thresholds.min_ratio)
        for g, pairs in seen.slow_gpus.items():
            if found.get(g) is None:
                found[g] = _slow_gpu(node.id, g, pairs, seen)
        bad = [f"gpu{g} {why.split(': ', 1)[1]}" for g, (_, why) in _condemned(found).items()]
        for g, verdict in found.items():
            made = _gpu_verdict(node.id, g, verdict, j, seen, copies, lone)
            noted = [gate.notes[g]] if gate and g in gate.notes else []
            noted += [lone.note] if lone is not None and lone.note else []
            noted += [note for pair, note in seen.transient.items() if g in pair]
            gpus.append(replace(made, notes=tuple(noted)) if noted else made)
        for (a, b), pair in seen.slow_links.items():
            gpus.append(_nvlink(node.id, a, b, pair, seen))
        if _went_on(fleet, node.id, seen, j, found):
            continue  # the internode stages decide it (`judge`)
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
                **against(j.reference),
                evidence=why,
            )
    return gpus, nodes


def _went_on(
    fleet: Fleet,
    node: str,
    seen: Inside,
    gate: Judged,
    found: Mapping[int, tuple[Health, str] | None],
) -> bool:
    """Whether the node went on to the internode stages without the GPUs condemned in it
    (`inside.left_out`), none else."""
    going = left_out(fleet, node, seen, gate)
    return bool(going) and set(going) == set(_condemned(found))


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
    if seen.beside.slow == g:
        said = f"; {seen.telemetry[g]}" if g in seen.telemetry else ""
        return Health.SLOW, f"{node}/gpu{g}: {_beside_words(g, seen)}{said}"
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
    lone: Alone | None = None,
) -> Verdict:
    name = f"{node}/gpu{g}"
    if seen.beside.pairs.get(g) and seen.beside.proven_gb_per_s is not None:
        return _beside_verdict(node, g, verdict, gate, seen)
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
        if lone is not None:
            why = f"{name}: the only GPU of its node, no collective to time: {lone.evidence}"
        if copy is not None and copies_of is not None and copies_of.count > 1:
            why += f"; host copies against the fleet's median {copies_of.median:.1f} of "
            why += f"{copies_of.count} GPUs"
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
    judged = Verdict(
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
        **against(pairs[0].reference if figures else gate.reference),
        tests=len(pairs) + 1,
        passed=sum(j.passed for j in pairs) + gate.passed,
        evidence=why,
    )
    if lone is None or pairs:
        return judged
    # a lone GPU: its figure is its own d2d, against the reference
    return replace(
        judged,
        busbw_gb_per_s=lone.d2d_gb_per_s,
        fleet_gb_per_s=None,
        threshold_gb_per_s=lone.threshold_gb_per_s,
        threshold_source=lone.threshold_source,
        **against(lone.reference),
        tests=1,
        passed=int(health is Health.HEALTHY),
    )


def _beside_words(g: int, seen: Inside) -> str:
    """A GPU's pairs beside proven GPUs of other nodes against the proven pairs', in words."""
    b = seen.beside
    mine = b.pairs[g]
    partners = ", ".join(
        f"{j.outcome.group.nodes[1]}/gpu{j.outcome.group.subsets[1][0]}" for j in mine
    )
    values = ", ".join(figure(j.figure_gb_per_s or 0) for j in mine)
    return (
        f"{mine[0].outcome.op} {values} GB/s beside proven GPUs of other nodes ({partners}) "
        f"against the median {figure(b.proven_gb_per_s or 0)} of {b.proven_count} pairs of "
        f"proven GPUs (threshold {b.share:.0%} of it)"
    )


def _beside_verdict(
    node: str, g: int, verdict: tuple[Health, str] | None, gate: Judged, seen: Inside
) -> Verdict:
    """A GPU of a node of two by its pairs beside proven GPUs of other nodes: slow where
    `beside` named it (or the gate's readings condemn it), else healthy."""
    b = seen.beside
    mine = b.pairs[g]
    health, why = verdict or (Health.HEALTHY, f"{node}/gpu{g}: {_beside_words(g, seen)}")
    figures = [v for j in mine if (v := j.figure_gb_per_s) is not None]
    limit = b.share * (b.proven_gb_per_s or 0.0)
    return Verdict(
        subject=Subject.GPU,
        nodes=(node,),
        gpu=g,
        health=health,
        stage=Stage.ISOLATE,
        partners=tuple(j.outcome.group.nodes[1] for j in mine),
        busbw_gb_per_s=median(figures) if figures else None,
        fleet_gb_per_s=b.proven_gb_per_s,
        threshold_gb_per_s=limit,
        threshold_source=f"{b.share:.0%} of the median of {b.proven_count} pairs of proven "
        "GPUs across nodes",
        tests=len(mine) + 1,
        passed=sum(v >= limit for v in figures) + gate.passed,
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
        **against(pair.reference),
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


def _held(node: str, lone: Alone | None) -> tuple[Health, str] | None:
    """What its copies alone hold against a node's one GPU, and why."""
    if lone is None or lone.health is None:
        return None
    return lone.health, f"{node}/gpu0: {lone.evidence}"


def _condemned(found: Mapping[int, tuple[Health, str] | None]) -> dict[int, tuple[Health, str]]:
    return {g: v for g, v in found.items() if v is not None}


def _node(node: str, health: Health, evidence: str, stage: Stage | None = None) -> Verdict:
    return Verdict(
        subject=Subject.NODE, nodes=(node,), health=health, stage=stage, evidence=evidence
    )
