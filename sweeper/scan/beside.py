"""A node of two GPUs isolated across nodes: its one pair of GPUs cannot tell which is slow,
so each GPU is tested beside a proven GPU of another node (a node whose gate passed), in
turn, and beside proven pairs of the same shape in the same waves. Pure: the policy plans
these waves, the judge reads them (`inside.isolated`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median

from sweeper.scan.fleet import Fleet, ScanGroup, ScanWave, Stage
from sweeper.scan.thresholds import Judged

# The proven partners each GPU is tested beside, each of another node: a GPU is named only
# where its pair was low beside each (nothing condemned on one observation, issue 52)
PARTNERS = 2
# Pairs of two proven GPUs run beside them in each wave, where the fleet has the nodes: the
# figure a GPU's pairs are held against (a pair across nodes is no NVLink pair's peer)
BASELINES = 2


def across(fleet: Fleet, node: str) -> bool:
    """Whether a node's isolation pairs its GPUs across nodes: its own two GPUs are one pair,
    which a slow GPU and a slow partner alike hold back."""
    return fleet.node(node).gpus == 2


def beside_waves(
    fleet: Fleet, suspects: Sequence[str], proven: Sequence[str], start: int
) -> list[ScanWave]:
    """For each GPU of each node of `suspects`, PARTNERS waves in which it is paired with a
    GPU of a different node of `proven`, with up to BASELINES pairs of the proven nodes left
    over (where fewer are, the rest in waves of their own); a wave's groups share no node
    (each pair's path is its two nodes' network). None where fewer than two proven nodes are
    known."""
    if len(proven) < 2 or not suspects:
        return []
    made: list[ScanWave] = []
    used: dict[tuple[str, int], set[str]] = {(n, g): set() for n in suspects for g in (0, 1)}
    ran: set[frozenset[tuple[str, int]]] = set()  # proven pairs so far: each GPU set once
    cursor = 0
    for turn in range(2 * PARTNERS):
        g, k = turn % 2, turn // 2
        index = start + len(made)
        free = list(proven[cursor:]) + list(proven[:cursor])
        groups: list[ScanGroup] = []
        for node in suspects:
            partner = next((p for p in free if p not in used[node, g]), None)
            if partner is None:
                continue
            free.remove(partner)
            used[node, g].add(partner)
            cursor = (proven.index(partner) + 1) % len(proven)
            groups.append(_pair(index, (node, g), _gpu(fleet, partner, g + k), (partner,)))
        baselines = 0
        for a, b in zip(free[0::2], free[1::2], strict=False):
            pair = _gpu(fleet, a, g + k), _gpu(fleet, b, g + k)
            if baselines < BASELINES and frozenset(pair) not in ran:
                ran.add(frozenset(pair))
                groups.append(_pair(index, *pair))
                baselines += 1
        if any(len(group.tested) == 1 for group in groups):
            made.append(ScanWave(index=index, stage=Stage.ISOLATE, groups=tuple(groups)))
    # two proven nodes, each partner in turn, leave none over beside (a fleet of three): the
    # proven pairs run in waves of their own, else no figure holds the suspects' pairs
    a, b = proven[:2]
    for turn in range(BASELINES - len(ran) if made else 0):
        index = start + len(made)
        pair = _gpu(fleet, a, turn), _gpu(fleet, b, turn)
        made.append(ScanWave(index=index, stage=Stage.ISOLATE, groups=(_pair(index, *pair),)))
    return made


def _gpu(fleet: Fleet, node: str, turn: int) -> tuple[str, int]:
    """A proven node's GPU for a turn: a different one from turn to turn, so no set of ranks
    is a group twice (the executor opens a new world for one that is)."""
    return node, turn % fleet.node(node).gpus


def _pair(
    wave: int, one: tuple[str, int], other: tuple[str, int], partners: tuple[str, ...] = ()
) -> ScanGroup:
    (a, g), (b, h) = one, other
    return ScanGroup(
        wave=wave,
        stage=Stage.ISOLATE,
        nodes=(a, b),
        partners=partners or (a, b),
        subsets=((g,), (h,)),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Beside:
    """A node's GPUs each beside proven GPUs of other nodes: each GPU's pairs, the proven
    pairs' median, and the GPU whose every pair was below PEER_SHARE of it (the other's
    were not)."""

    pairs: dict[int, list[Judged]] = field(default_factory=dict)
    share: float = 0.0  # of the proven pairs' median: the threshold
    proven_gb_per_s: float | None = None
    proven_count: int = 0
    slow: int | None = None


def beside(node: str, inside: Sequence[Judged], share: float) -> Beside:
    """What the node's GPUs' pairs across nodes say, against the proven pairs among `inside`
    (`by_node` gives each node those of the scan): a GPU is slow where each of its pairs (at
    least PARTNERS) is below `share` of the proven pairs' median (the scan's min_ratio: they
    are figures across nodes) while some pair of its other GPU is not (both low: the node's
    network or both GPUs, not one of them)."""
    mine: dict[int, list[Judged]] = {}
    for j in sorted(inside, key=lambda j: j.outcome.group.wave):
        group = j.outcome.group
        if len(group.nodes) == 2 and group.subsets and group.tested == (node,):
            mine.setdefault(group.subsets[0][0], []).append(j)
    proven = [
        v
        for j in inside
        if len(j.outcome.group.nodes) == 2
        and not j.outcome.group.tested
        and (v := j.figure_gb_per_s) is not None
    ]
    if not mine or not proven:
        return Beside(pairs=mine)
    limit = share * median(proven)
    low = {
        g: len(pairs) >= PARTNERS and all((j.figure_gb_per_s or 0.0) < limit for j in pairs)
        for g, pairs in mine.items()
    }
    slow = [g for g, is_low in low.items() if is_low]
    fine = [g for g, is_low in low.items() if not is_low]
    return Beside(
        pairs=mine,
        share=share,
        proven_gb_per_s=median(proven),
        proven_count=len(proven),
        slow=slow[0] if len(slow) == 1 and fine else None,
    )
