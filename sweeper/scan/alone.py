"""A node of one GPU, judged by what one GPU does alone: its copy within its memory (d2d) and
its slower host copy at the gate, each against its model's reference (`scan.reference`), and
the compute processes NVML lists on it besides the scan's. No peer and no fleet of GPUs to
compare it with, so the reference is the only yardstick; where there is none it says so.
Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweeper.scan.fleet import GroupOutcome, MemberReading
from sweeper.scan.reference import Reference, entry, reference
from sweeper.scan.thresholds import Judged, Thresholds, figure
from sweeper.scan.verdict import Health
from sweeper.wire import Tier

# A second process of bf16 matrix products halved one H200's d2d (4243 -> 2052 GB/s) and left
# its host copies where they were (55.4, 55.3), its processes listed by NVML
# (docs/measurements/h200-x1-2026-12-02.md, "A GPU shared with another process"): d2d is the
# figure a job beside the scan moves, held to the reference share the gate's floors use.


@dataclass(frozen=True, kw_only=True, slots=True)
class Alone:
    """What its copies and NVML say of a lone GPU: `health` None where nothing is held
    against it; the d2d figure, its reference and the threshold it was held to."""

    health: Health | None
    evidence: str  # its figures against their references, in words (its name left out)
    d2d_gb_per_s: float | None
    reference: Reference | None
    threshold_gb_per_s: float | None
    threshold_source: str
    note: str = ""  # a gate's low copies that did not reproduce alone: held against nothing


def _host(copy: float, ref: Reference | None, share: float) -> tuple[str, bool]:
    """Its host copies in words against their reference, and whether below `share` of it."""
    if ref is None:
        return f"host copies {figure(copy)} GB/s", False
    said = (
        f"host copies {figure(copy)} GB/s, {copy / ref.busbw_gb_per_s:.0%} of the reference "
        f"{figure(ref.busbw_gb_per_s)} ({entry(ref.source)})"
    )
    return said, copy < share * ref.busbw_gb_per_s


def alone(r: MemberReading | None, gpu_model: str | None, thresholds: Thresholds) -> Alone:
    """A lone GPU by its gate's reading `r`: slow where a copy is below
    `thresholds.reference_share` of its reference, unconfirmed where other processes share it
    and no reference (or no d2d) can tell whether they slow it. Its d2d's share of its
    reference is the verdict's (`judge` adds it to the evidence)."""
    share = thresholds.reference_share
    d2d_ref = reference(gpu_model, Tier.GPU, 1, "d2d") if gpu_model else None
    host_ref = reference(gpu_model, Tier.GPU, 1, "h2d") if gpu_model else None
    d2d = r.d2d_gb_per_s if r else None
    copy = r.copy_gb_per_s if r else None
    others = r.other_processes if r else None
    said: list[str] = []
    low: list[str] = []
    if copy is not None:
        words, under = _host(copy, host_ref, share)
        said.append(words)
        low += ["host copies"] if under else []
    limit = share * d2d_ref.busbw_gb_per_s if d2d_ref else None
    if d2d is not None:
        said.append(f"d2d {figure(d2d)} GB/s")
        low[:0] = ["d2d"] if limit is not None and d2d < limit else []
    figures = "; ".join(said) or "no copy figure"
    shared = f"{others} other compute process{'es' if others != 1 else ''} on it (NVML)"
    health: Health | None = None
    if low:
        health = Health.SLOW
        why = f"{' and '.join(low)} below {share:.0%} of the reference: "
        why += f"{shared}, a job sharing this GPU; {figures}" if others else figures
    elif others and limit is None:
        health = Health.UNCONFIRMED
        why = f"{shared}, and no reference d2d for its model to tell whether that slows it: "
        why += figures
    else:
        why = (
            f"{shared}, its copies at their reference regardless: {figures}" if others else figures
        )
        if d2d_ref is None:
            why += "; no reference for its model, so a job sharing it could not be told"
    return Alone(
        health=health,
        evidence=why,
        d2d_gb_per_s=d2d,
        reference=d2d_ref,
        threshold_gb_per_s=limit,
        # naming the reference's entry, not its source: the verdict quotes that (`judge`)
        threshold_source=f"{share:.0%} of the reference d2d ({entry(d2d_ref.source)})"
        if d2d_ref
        else "",
    )


def _reading(o: GroupOutcome) -> MemberReading | None:
    return next((r for r in o.readings if r.gpu == 0), None)


def judged_alone(
    gate: Judged, inside: Sequence[Judged], gpu_model: str | None, thresholds: Thresholds
) -> Alone:
    """A lone GPU by its last reading: its gate's, or where its copies there were low, its
    copies alone after it (`policy.to_isolate` runs them again: one slow point condemns
    nothing); low at both, slow, saying so; low at the gate only, a transient note."""
    first = alone(_reading(gate.outcome), gpu_model, thresholds)
    after = gate.outcome.group.wave
    again = [j for j in inside if j.outcome.group.gpus == (0,) and j.outcome.group.wave > after]
    if not again:
        return first
    last = max(again, key=lambda j: j.outcome.group.wave)
    now = alone(_reading(last.outcome), gpu_model, thresholds)
    wave = last.outcome.group.wave
    if first.health is Health.SLOW and now.health is None:
        note = f"transient: at its gate {first.evidence}; alone again in wave {wave}, not"
        return replace(now, note=note)
    if first.health is Health.SLOW and now.health is Health.SLOW:
        return replace(now, evidence=f"at its gate and alone again in wave {wave}: {now.evidence}")
    return now
