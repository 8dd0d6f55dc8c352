"""Spec x topology -> a schedule: actor sets -> waves -> groups -> series. Pure: no Ray, no torch.

A wave holds groups that share no contended resource (a GPU, a node's fabric, a node's
network), so the executor runs them at once. Each GPU's own copies run on groups of tier `gpu`.
With `curves` (K) each operation's curve runs on K groups of each shape, and the others measure
their bandwidth alone. Groups of one shape share their series, so a plan of a million node
pairs holds a handful. docs/ARCHITECTURE.md, "Inside the rooms", gives the rules."""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from sweeper.planning import knobs
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import (
    Group,
    OpShape,
    Placement,
    Shape,
    gpu_groups,
    groups,
    rounds,
    series_counts,
    variants,
)
from sweeper.wire import DEFAULT_VARIANT, Backend, Tier


class Planned(OpShape, Protocol):
    @property
    def nccl_kernels(self) -> frozenset[str]: ...

    def why_not_on(self, shape: Shape) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Series:
    """One operation and dtype on a group: its element counts, ascending. `probe`: --max-size
    auto, the counts are candidates and the series stops at the bound the ranks' memory
    gives. `skipped`: why it cannot run there (its rows say so). `sparse`: once its measured
    busbw shows a plateau, the counts above it run only as `sizes.thinned` keeps them (not
    with --dense-sizes)."""

    op: str
    dtype: str
    counts: tuple[int, ...]
    probe: bool = False
    skipped: str | None = None
    sparse: bool = False


class Wave(NamedTuple):
    number: int  # unique in the run: the `wave` column
    groups: tuple[Group, ...]


@dataclass(frozen=True)
class ActorSet:
    """The waves one actor set (one NCCL environment: a variant) runs, in order."""

    variant: str
    waves: tuple[Wave, ...]


@dataclass(frozen=True)
class Schedule:
    """Actor sets -> waves -> groups; each group's series by `series(group)`, shared by every
    group of its shape (looked up, not stored per group: a fleet plan has a million)."""

    placement: Placement
    actor_sets: tuple[ActorSet, ...]
    table: _SeriesTable

    @property
    def waves(self) -> list[Wave]:
        return [wave for actors in self.actor_sets for wave in actors.waves]

    @property
    def n_groups(self) -> int:
        return sum(len(wave.groups) for wave in self.waves)

    def series(self, group: Group) -> tuple[Series, ...]:
        return self.table.of(group)

    def measures_nothing(self, actors: ActorSet) -> bool:
        """Whether every series of the actor set is skipped (a swept NCCL variable on CPU
        ranks): its rows need no actor started."""
        return all(
            s.skipped is not None
            for wave in actors.waves
            for group in wave.groups
            for s in self.series(group)
        )


def nothing_to_measure(planned: Schedule, tiers: Collection[str]) -> str | None:
    """Why a schedule measures nothing at all (no group, or no series on any), or None. A
    series skipped with its reason is something: its rows say why, as every skipped row
    does. Stops at the first group with a series: a fleet's plan shares a handful of series
    tuples."""
    placement = planned.placement
    gpus = placement.backend == Backend.NCCL
    n = len(placement.members)
    where = f"{n} {'GPU' if gpus else 'rank'}{'' if n == 1 else 's'}"
    if planned.n_groups == 0:
        what = f"--tiers {','.join(tiers)} gives no group"
    elif any(planned.series(group) for wave in planned.waves for group in wave.groups):
        return None
    else:
        what = "no operation asked for runs"
    two = "; collectives between GPUs need two" if gpus and n == 1 else ""
    return f"nothing to measure: {what} on {where}{two}"


@dataclass(frozen=True)
class Request:
    """What the spec asks a schedule for, resolved (`RunPlan.request`): its options by their
    names, the ops, the size grid and what the backend and visibility make of them."""

    tiers: Collection[str]
    pairs: bool
    force_network: bool
    nccl_env: Mapping[str, Sequence[str]]  # the swept NCCL variables and their values
    ops: Sequence[Planned]
    dtypes: Sequence[str]
    sizes: Sequence[int]  # the grid; with auto, to the largest size accepted
    auto: bool
    sees_node_gpus: bool
    concurrent: bool = False  # a node's pairs share its links on purpose
    dense_sizes: bool = False  # every size of the grid, above a plateau too
    curves: int | None = None  # groups of each tier and shape that run every curve; None: all

    def groups(self, placement: Placement, swept: bool = True) -> list[Group]:
        """The groups the tiers ask for, on every variant of the swept NCCL variables (not
        `swept`: on the fixed variants alone)."""
        grid = list(knobs.grid(self.nccl_env)) if swept else []
        return groups(placement, self.tiers, self.pairs, self.force_network, grid)


def schedule(placement: Placement, request: Request) -> Schedule:
    """Every group the request asks for, each exactly once, in waves per actor set.

    The collector waits meanwhile: a fleet plan makes millions of tuples and no garbage,
    and each collection would scan them all again (3x the planning time at 1024 nodes)."""
    with collector_paused():
        return _schedule(placement, request)


@contextmanager
def collector_paused() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _schedule(placement: Placement, request: Request) -> Schedule:
    per_gpu = [op.traits.per_gpu for op in request.ops if op.traits.per_gpu is not None]
    found: list[Group] = []
    if placement.backend != Backend.NCCL or len(per_gpu) < len(request.ops):
        found = request.groups(placement, swept=request.curves is None)
    if per_gpu:
        found += gpu_groups(placement, together=any(p.together for p in per_gpu))
    sampled = None
    if request.curves is not None:  # the swept variables on the curves' groups alone
        sampled = curve_groups(placement, found, request.curves)
        curves = [  # copies call no NCCL: the default set's only, as without curves
            g for g in found if g in sampled and g.variant == "default" and g.tier != Tier.GPU
        ]
        again = [Group(g.tier, v, g.ranks) for v in knobs.grid(request.nccl_env) for g in curves]
        found += again
        sampled |= frozenset(again)
    by_variant: dict[str, list[Group]] = defaultdict(list)
    for group in found:
        by_variant[group.variant].append(group)
    sets, number = [], 0
    for variant, mine in by_variant.items():
        waves = []
        for together in pack(placement, mine, request.concurrent):
            waves.append(Wave(number, tuple(together)))
            number += 1
        sets.append(ActorSet(variant, tuple(waves)))
    return Schedule(placement, tuple(sets), _SeriesTable(placement, request, sampled))


def curve_groups(placement: Placement, found: Sequence[Group], count: int) -> frozenset[Group]:
    """`count` groups of each tier, variant and shape (ranks; inside a node or across nodes),
    evenly spread over them in plan order; a swept variant's are its default's again."""
    node_of = [m.node for m in placement.members]
    by_shape: dict[tuple[str, str, int, bool], list[Group]] = defaultdict(list)
    for group in found:
        tier, variant, ranks = group
        by_shape[(tier, variant, len(ranks), node_of[ranks[0]] != node_of[ranks[-1]])].append(group)
    out: set[Group] = set()
    for mine in by_shape.values():
        k = min(count, len(mine))
        out.update(mine[i * len(mine) // k] for i in range(k))
    return frozenset(out)


# Why a node's pairs of a tier run one at a time (a pair's path shares a link with another's)
APART = {
    Tier.PCIE: "their paths share the node's PCIe switches and host bridge",
    Tier.NVLINK: "their NVLink path crosses a third GPU's links",
    Tier.CPU: "their ranks share the host's cores and memory",
}


def linked_pair(placement: Placement, group: Group) -> bool:
    """A pair of GPUs with an NVLink of their own, direct or through NVSwitches: disjoint
    such pairs share no link."""
    tier, _, ranks = group
    if tier != Tier.NVLINK or len(ranks) != 2:
        return False
    a, b = (placement.members[r] for r in ranks)
    node = placement.nodes[a.node]
    index_of = {gpu.index: position for position, gpu in enumerate(node.gpus)}
    if a.local not in index_of or b.local not in index_of:
        return False
    return node.nvlinked(index_of[a.local], index_of[b.local])


def apart(planned: Schedule) -> dict[str, str]:
    """The tiers whose pairs inside a node run one at a time, and why (`APART`)."""
    if planned.table.request.concurrent:
        return {}
    node_of = [m.node for m in planned.placement.members]
    out: dict[str, str] = {}
    for wave in planned.waves:
        for group in wave.groups:
            tier, _, ranks = group
            if (
                len(ranks) == 2
                and tier in APART
                and tier not in out
                and node_of[ranks[0]] == node_of[ranks[1]]
                and not linked_pair(planned.placement, group)
            ):
                out[tier] = APART[Tier(tier)]
    return out


def pack(
    placement: Placement, mine: Sequence[Group], concurrent_pairs: bool = False
) -> list[list[Group]]:
    """One actor set's groups in waves of groups that share no contended resource."""
    node_of = [m.node for m in placement.members]
    intra: dict[int, list[Group]] = defaultdict(list)
    node_pairs: list[tuple[int, int, Group]] = []
    wide: list[Group] = []
    for group in mine:  # a million node pairs at fleet scale: unpacked, no properties
        tier, _, ranks = group
        first, last = node_of[ranks[0]], node_of[ranks[-1]]
        if first == last and tier != Tier.INTERNODE:
            intra[first].append(group)
        elif len(ranks) == 2 and first != last:
            node_pairs.append((first, last, group))
        else:
            wide.append(group)
    return [
        *_intra_waves(placement, intra, concurrent_pairs),
        *_wide_waves(wide, node_of),
        *_pair_waves(node_pairs),
    ]


def _intra_waves(
    placement: Placement, per_node: dict[int, list[Group]], concurrent_pairs: bool
) -> list[list[Group]]:
    """Slot k of every node runs in wave k: one group per node's fabric, or a round of that
    node's disjoint pairs that share no link (with `concurrent_pairs`, of all its pairs)."""
    slots: dict[int, list[list[Group]]] = {}
    for node, mine in per_node.items():
        together = [
            g for g in mine if g.world_size == 2 and (concurrent_pairs or linked_pair(placement, g))
        ]
        rest = [[g] for g in mine if g not in together]
        slots[node] = [*rest, *_by_tier_rounds(together)]
    depth = max((len(s) for s in slots.values()), default=0)
    return [[g for s in slots.values() if k < len(s) for g in s[k]] for k in range(depth)]


def _by_tier_rounds(pairs: Sequence[Group]) -> list[list[Group]]:
    """Circle-method rounds of a node's pairs, tier by tier (tiers are measured apart)."""
    by_tier: dict[str, list[Group]] = defaultdict(list)
    for group in pairs:
        by_tier[group.tier].append(group)
    return [r for tier in by_tier.values() for r in rounds(tier)]


def _wide_waves(wide: Sequence[Group], node_of: Sequence[int]) -> list[list[Group]]:
    """Groups over more than two nodes (or all ranks): greedy on node networks, each group in
    the first wave after the last that used one of its nodes."""
    waves: list[list[Group]] = []
    nodes_in: list[set[int]] = []
    for group in wide:
        mine = {node_of[r] for r in group.ranks}
        k = next((i for i in range(len(waves)) if not nodes_in[i] & mine), len(waves))
        if k == len(waves):
            waves.append([])
            nodes_in.append(set())
        waves[k].append(group)
        nodes_in[k] |= mine
    return waves


def _pair_waves(node_pairs: Sequence[tuple[int, int, Group]]) -> list[list[Group]]:
    """Node pairs by the circle method over the nodes they touch: N-1 waves (N for odd N),
    in each every node in at most one pair; several groups of one node pair take turns.

    The round of a pair in closed form, no simulation (a million pairs at fleet scale): the
    last player stays put and the others turn, so p, q < last meet in round (p + q) mod last,
    and p meets the last player in round 2p mod last."""
    if not node_pairs:
        return []
    nodes = sorted({n for a, b, _ in node_pairs for n in (a, b)})
    position = {node: i for i, node in enumerate(nodes)}
    players = len(nodes) + len(nodes) % 2  # odd: a bye
    by_round: list[list[Group]] = [[] for _ in range(players - 1)]
    again: list[tuple[int, int, Group]] = []  # a node pair's second group: a later turn
    seen: set[int] = set()
    last = players - 1
    for a, b, group in node_pairs:
        pa, pb = position[a], position[b]
        key = pa * players + pb
        if key in seen:
            again.append((a, b, group))
            continue
        seen.add(key)
        if last in (pa, pb):
            by_round[(2 * (pa + pb - last)) % last].append(group)
        else:
            by_round[(pa + pb) % last].append(group)
    return [*(r for r in by_round if r), *_pair_waves(again)]


class _SeriesTable:
    """Series per group shape, built once per shape and shared."""

    def __init__(
        self, placement: Placement, request: Request, sampled: frozenset[Group] | None = None
    ) -> None:
        self.placement = placement
        self.request = request
        self.sampled = sampled  # the groups that run every curve; None: every group
        self.node_of = [m.node for m in placement.members]
        self.cache: dict[tuple[str, int, tuple[int, ...], bool, bool], tuple[Series, ...]] = {}
        self.envs = variants(request.nccl_env)
        # what a grid variant may only repeat: NCCL's defaults, and the grid before it
        grid = knobs.grid(request.nccl_env)
        self.comparable = {DEFAULT_VARIANT: self.envs[DEFAULT_VARIANT], **grid}

    def of(self, group: Group) -> tuple[Series, ...]:
        variant, ranks = group.variant, group.ranks
        n, node_of = len(ranks), self.node_of
        first, last = node_of[ranks[0]], node_of[ranks[-1]]
        if first == last:  # ranks ascend node by node: one node
            pattern: tuple[int, ...] = (0,) * n
        elif n == 2:
            pattern = (0, 1)
        else:  # each rank's node, renumbered in order of first appearance
            seen: dict[int, int] = {}
            pattern = tuple(seen.setdefault(node_of[r], len(seen)) for r in ranks)
        curves = self.sampled is None or group in self.sampled
        key = (variant, n, pattern, group.tier == Tier.GPU, curves)
        found = self.cache.get(key)
        if found is None:
            built = tuple(self._build(variant, n, pattern, key[3]))
            found = self.cache[key] = built if curves else _bandwidth(built)
        return found

    def _ops(self, n: int, per_gpu: bool) -> list[Planned]:
        """A group's operations: on a `gpu` group those each GPU performs on its own (all of
        a node's GPUs at once only where they run `together`); on the sweep's groups the
        others, and on CPU ranks (no `gpu` groups) every one."""
        ops = self.request.ops
        if per_gpu:
            return [
                op for op in ops if op.traits.per_gpu and (n == 1 or op.traits.per_gpu.together)
            ]
        gpus = self.placement.backend == Backend.NCCL
        return [op for op in ops if op.traits.per_gpu is None or not gpus]

    def _build(
        self, variant: str, n: int, nodes: tuple[int, ...], per_gpu: bool
    ) -> Iterable[Series]:
        r, backend = self.request, self.placement.backend
        env = self.envs[variant]
        shape = Shape(n, nodes, backend, r.sees_node_gpus, tuple(env.items()))
        swept = variant != DEFAULT_VARIANT and variant in self.comparable
        for op in self._ops(n, per_gpu):
            repeats = (
                knobs.same_as(op.nccl_kernels, variant, self.comparable, backend) if swept else None
            )
            why = repeats or op.why_not_on(shape)
            for dtype in r.dtypes:
                counts = series_counts(op, DTYPES[dtype].itemsize, n, r.sizes, r.auto)
                if not counts:
                    continue
                if why is not None:  # with auto there is no grid end to list: one row says it
                    yield Series(
                        op.name, dtype, tuple(counts[:1] if r.auto else counts), False, why
                    )
                else:
                    fixed = op.traits.fixed_count is not None or op.traits.ends_bytes is not None
                    probe = r.auto and not fixed
                    yield Series(op.name, dtype, tuple(counts), probe, sparse=not r.dense_sizes)


# A group measured for its bandwidth alone (`curves`): at the largest size up to this (the
# scan's bandwidth size, scan/fleet.py)
BANDWIDTH_BYTES = 1 << 30


def _bandwidth(built: Sequence[Series]) -> tuple[Series, ...]:
    """A group's bandwidth alone: its first series that runs, at its largest size up to
    BANDWIDTH_BYTES (else its smallest), never probed; all of them where none runs (their
    rows say why)."""
    for series in built:
        if series.skipped is None:
            itemsize = DTYPES[series.dtype].itemsize
            below = [c for c in series.counts if c * itemsize <= BANDWIDTH_BYTES]
            count = max(below) if below else series.counts[0]
            return (Series(series.op, series.dtype, (count,)),)
    return tuple(built)
