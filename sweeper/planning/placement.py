"""Where ranks sit, and the groups they form: spec x topology -> groups, and a group's sizes.
Pure: no Ray, no torch.

A `Placement` says where every rank of an actor set sits (node, GPU). `groups` turns it
into the groups each requested tier measures; `series_counts` gives an operation's element
counts on a group (the schedule, `schedule.py`, puts groups in waves and series).
Descriptors come in as an argument (`OpShape` is the part of one that planning needs),
so this module is tested as plain functions on plain data, at any cluster size.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import NamedTuple, Protocol

from sweeper.planning import knobs
from sweeper.topology import Node, gpu_link_peak, link_peak
from sweeper.wire import DEFAULT_VARIANT, Backend, Tier

WORLD = "world"  # --tiers: every rank as one group (beside the Tier values)
# NCCL reads these once per process: a variant that sets them runs on its own actor set.
# The swept ones (--nccl-env, --nccl-algos) come beside them: `variants`.
VARIANTS: dict[str, dict[str, str]] = {
    DEFAULT_VARIANT: {},
    "p2p-off": {"NCCL_P2P_DISABLE": "1"},  # host memory over PCIe instead of NVLink/P2P
    "network": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},  # the network transport
}


def variants(swept: Mapping[str, Sequence[str]]) -> dict[str, dict[str, str]]:
    """Every actor set's NCCL variables by variant name: the fixed ones, then the grid of the
    swept variables' values."""
    return {**VARIANTS, **knobs.grid(swept)}


@dataclass(frozen=True)
class PerGpu:
    """An operation each GPU performs on its own, with no peer (a copy between its memory and
    the host's, or within its memory). It runs on groups of its own (tier `gpu`): each GPU of
    a node alone, by turns, and with `together` all of a node's GPUs at once, a row per GPU,
    so what they share (a PCIe switch, a host bridge) shows as each one's share dropping."""

    together: bool = True
    host_link: bool = True  # its bytes cross the GPU's link to the host: % of the PCIe peak


@dataclass(frozen=True, kw_only=True, slots=True)
class Traits:
    """How planning schedules an operation: on which groups, at which sizes."""

    ranks: int | None = None  # runs only on groups of exactly this size (a pair: 2)
    fixed_count: Callable[[int], int] | None = None  # one size, set by the operation (MoE)
    # set: only the sweep's smallest size and this one (its largest, if smaller), never
    # probed: an operation whose figure is its peak (copies)
    ends_bytes: int | None = None
    # asked for by name (not by `all`): with ends_bytes, every size of the grid (`resolve`)
    all_sizes: bool = False
    # each GPU performs it on its own: it runs on groups of tier `gpu`, alone and at once
    per_gpu: PerGpu | None = None


class OpShape(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def traits(self) -> Traits: ...

    def count(self, size_bytes: int, itemsize: int, n: int) -> int: ...


@dataclass(frozen=True, slots=True)
class Member:
    """Where one rank sits: its node (position in the placement) and GPU (NVML index)."""

    rank: int
    node: int
    local: int  # NVML index of its GPU; for CPU ranks, its order on the node
    gpu_uuid: str | None = None


@dataclass(frozen=True)
class Placement:
    """Every rank of an actor set, with the topology of the nodes they are on."""

    backend: Backend
    nodes: tuple[Node, ...]
    members: tuple[Member, ...]  # by rank

    @cached_property
    def by_node(self) -> tuple[tuple[Member, ...], ...]:
        per: list[list[Member]] = [[] for _ in self.nodes]
        for member in self.members:
            per[member.node].append(member)
        return tuple(tuple(sorted(m, key=lambda x: x.local)) for m in per)

    def hosts(self, ranks: Iterable[int]) -> tuple[str, ...]:
        return tuple(self.nodes[self.members[r].node].host for r in ranks)

    def gpu_uuids(self, ranks: Iterable[int]) -> tuple[str, ...]:
        return tuple(u for r in ranks if (u := self.members[r].gpu_uuid))

    def link_gb_per_s(self, tier: str, ranks: Iterable[int]) -> float | None:
        """The one-direction peak of the link a group's tier crosses, the slowest of its
        members': NVLink, all of a GPU's active links together; PCIe, generation x width;
        the network, a node's NICs together. None where a speed is unknown, or the tier has
        no such link (CPU ranks, one GPU alone)."""
        members = [self.members[r] for r in ranks]
        if tier == Tier.INTERNODE:
            nodes = {m.node for m in members}
            return link_peak([self.nodes[node].network_gb_per_s for node in nodes])
        if self.backend != Backend.NCCL:
            return None
        by_index = [{gpu.index: gpu for gpu in node.gpus} for node in self.nodes]
        return gpu_link_peak(tier, [by_index[m.node].get(m.local) for m in members])

    def n_nodes(self, ranks: Iterable[int]) -> int:
        return len({self.members[r].node for r in ranks})

    def group_id(self, group: Group) -> str:
        """The group's name in rows: its tier, then its GPUs by node and NVML index, e.g.
        nvlink:n0g0,1,2,3 or internode:n0g0+n1g0/network (ranks r, not g, for CPU ranks)."""
        per_node: dict[int, list[int]] = {}
        for r in group.ranks:
            per_node.setdefault(self.members[r].node, []).append(self.members[r].local)
        unit = "g" if self.backend == Backend.NCCL else "r"
        if len(per_node) > 8:
            where = f"{len(per_node)}nodes-{len(group.ranks)}{unit}"
        else:
            where = "+".join(
                f"n{n}{unit}{','.join(map(str, sorted(at)))}" for n, at in per_node.items()
            )
        suffix = "" if group.variant == DEFAULT_VARIANT else f"/{group.variant}"
        return f"{group.tier}:{where}{suffix}"


def expected_placement(backend: Backend, nodes: Sequence[Node], ranks: Sequence[int]) -> Placement:
    """Where ranks will most likely sit (each node's first GPUs, by NVML index), to plan and
    count ahead of starting actors; the sweep plans again from where they really landed."""
    members: list[Member] = []
    for position, (node, count) in enumerate(zip(nodes, ranks, strict=True)):
        locals_ = [gpu.index for gpu in node.gpus][:count] if backend == Backend.NCCL else []
        locals_ += range(len(locals_), count)
        members += [Member(len(members) + i, position, local) for i, local in enumerate(locals_)]
    return Placement(backend, tuple(nodes), tuple(members))


@dataclass(frozen=True)
class Shape:
    """What a group is, for an operation to say whether it can run there (descriptors'
    `why_not`): planning needs it without torch, so it lives here."""

    size: int
    nodes: tuple[int, ...]  # node of each group rank
    backend: str
    sees_node_gpus: bool  # every actor sees all GPUs of its node (torch symmetric memory)
    nccl_env: tuple[tuple[str, str], ...] = ()  # NCCL variables the group's variant pins


class Group(NamedTuple):
    """Ranks of one actor set that measure together; what tier and variant they stand for.
    A named tuple, and named (`Placement.group_id`) only when it runs: plans can hold a
    million groups (every node pair of a large cluster)."""

    tier: str
    variant: str
    ranks: tuple[int, ...]  # ranks of the actor set, ascending

    @property
    def world_size(self) -> int:
        return len(self.ranks)


def _islands(node: Node, placed: Sequence[Member]) -> list[tuple[int, ...]]:
    """NVLink islands of a node as ranks, keeping only the GPUs that have a rank."""
    index_of = {gpu.index: pos for pos, gpu in enumerate(node.gpus)}
    rank_at = {index_of[m.local]: m.rank for m in placed if m.local in index_of}
    out = []
    for island in node.islands():
        ranks = tuple(sorted(rank_at[pos] for pos in island if pos in rank_at))
        if ranks:
            out.append(ranks)
    unknown = [m.rank for m in placed if m.local not in index_of]  # no NVML: no known links
    return out + [(r,) for r in unknown]


def classify(placement: Placement, ranks: Sequence[int]) -> Tier:
    """The tier a group's slowest link puts it in; `local` for one GPU alone (NCCL's
    single-rank path: no link, only the GPU's own memory)."""
    if placement.n_nodes(ranks) > 1:
        return Tier.INTERNODE
    if placement.backend != Backend.NCCL:
        return Tier.CPU
    if len(ranks) == 1:
        return Tier.LOCAL
    node = placement.members[ranks[0]].node
    wanted = set(ranks)
    for island in _islands(placement.nodes[node], placement.by_node[node]):
        if wanted <= set(island):
            return Tier.NVLINK
    return Tier.PCIE


ONE_GPU = (
    "one GPU: collectives between GPUs need two; measuring what one GPU can (world 1, tier local)"
)


def alone(placement: Placement) -> str | None:
    """The line a run on a machine of one GPU prints (its groups are of that GPU alone)."""
    if placement.backend == Backend.NCCL and sum(len(node.gpus) for node in placement.nodes) == 1:
        return ONE_GPU
    return None


def groups(
    placement: Placement,
    tiers: Collection[str],
    pairs: bool = True,
    force_network: bool = False,
    grid: Sequence[str] = (),
) -> list[Group]:
    """The groups the tiers ask for, each once (by variant and ranks), in tier order.

    world: every rank (also one alone, as nccl-tests -g 1 runs, when the set has one rank).
    nvlink: each NVLink island, and every pair in it. pcie: pairs and
    groups with no NVLink between their GPUs; where every pair of a node has NVLink, the
    island again with NCCL_P2P_DISABLE=1 (variant p2p-off: the host/PCIe path). internode:
    one rank per node, every pair of nodes, and every rank, plus the same with P2P and SHM
    off (variant network) when forced. cpu: the gloo ranks of each node, and their pairs.
    Then every default group again on each variant of the `grid` (swept NCCL variables).
    """
    out: list[Group] = []
    seen: dict[str, set[tuple[int, ...]]] = {}

    def extend(tier: str, variant: str, many: Iterable[tuple[int, ...]], smallest: int = 2) -> None:
        """Ranks come ascending: every caller builds them so (sorting a million pairs costs)."""
        known = seen.setdefault(variant, set())
        add, append, make = known.add, out.append, tuple.__new__  # a million pairs: no lookups
        for ranks in many:
            if len(ranks) >= smallest and ranks not in known:
                add(ranks)
                append(make(Group, (tier, variant, ranks)))

    def with_pairs(tier: str, variant: str, ranks: tuple[int, ...]) -> None:
        extend(tier, variant, (ranks,))
        if pairs:
            extend(tier, variant, combinations(ranks, 2))

    everyone = tuple(m.rank for m in placement.members)
    if WORLD in tiers:
        extend(classify(placement, everyone), DEFAULT_VARIANT, (everyone,), smallest=1)
    gpus = placement.backend == Backend.NCCL
    for node, placed in zip(placement.nodes, placement.by_node, strict=True):
        islands = _islands(node, placed) if gpus else []
        if Tier.NVLINK in tiers:
            for island in islands:
                with_pairs(Tier.NVLINK, DEFAULT_VARIANT, island)
        if Tier.PCIE in tiers and gpus:
            if len(islands) > 1:  # one GPU from each island: no NVLink among them
                with_pairs(
                    Tier.PCIE, DEFAULT_VARIANT, tuple(sorted(island[0] for island in islands))
                )
                if pairs:
                    crossing = ((x, y) for a, b in combinations(islands, 2) for x in a for y in b)
                    extend(
                        Tier.PCIE,
                        DEFAULT_VARIANT,
                        ((x, y) if x < y else (y, x) for x, y in crossing),
                    )
            elif islands:
                with_pairs(Tier.PCIE, "p2p-off", islands[0])
        if Tier.CPU in tiers and not gpus:
            with_pairs(Tier.CPU, DEFAULT_VARIANT, tuple(sorted(m.rank for m in placed)))
    if Tier.INTERNODE in tiers and len(placement.nodes) > 1:
        firsts = tuple(sorted(placed[0].rank for placed in placement.by_node if placed))
        for variant in (
            (DEFAULT_VARIANT, "network") if force_network and gpus else (DEFAULT_VARIANT,)
        ):
            extend(Tier.INTERNODE, variant, (firsts,))
            if pairs:
                extend(Tier.INTERNODE, variant, combinations(firsts, 2))
            extend(Tier.INTERNODE, variant, (everyone,))
    default = [g for g in out if g.variant == DEFAULT_VARIANT]
    for variant in grid:  # on gloo too: their rows say the variables are inert there
        for group in default:
            extend(group.tier, variant, (group.ranks,))
    return out


def gpu_groups(placement: Placement, together: bool) -> list[Group]:
    """The groups of per-GPU operations (`PerGpu`), tier `gpu`: every GPU alone and, with
    `together`, every node's GPUs at once (where it has two or more). None on CPU ranks:
    there the operations are skipped on the sweep's groups, with the reason."""
    if placement.backend != Backend.NCCL:
        return []
    out: list[Group] = []
    for placed in placement.by_node:
        ranks = tuple(sorted(m.rank for m in placed))
        out += [Group(Tier.GPU, DEFAULT_VARIANT, (r,)) for r in ranks]
        if together and len(ranks) > 1:
            out.append(Group(Tier.GPU, DEFAULT_VARIANT, ranks))
    return out


def rounds(pairs: Sequence[Group]) -> list[list[Group]]:
    """Disjoint pairs to run together, by the circle method: with m ranks (one idle when m is
    odd), m - 1 rounds in which every rank is in at most one pair, and every pair of the
    ranks in exactly one round. Only the given pairs are scheduled; each exactly once."""
    wanted = {g.ranks: g for g in pairs}
    ranks: list[int | None] = [*sorted({r for g in pairs for r in g.ranks})]
    if len(ranks) % 2:
        ranks.append(None)  # the bye
    m = len(ranks)
    out = []
    for _ in range(m - 1):
        matched = [(ranks[i], ranks[m - 1 - i]) for i in range(m // 2)]
        found = [
            wanted.pop(tuple(sorted((a, b))))
            for a, b in matched
            if a is not None and b is not None and tuple(sorted((a, b))) in wanted
        ]
        if found:
            out.append(found)
        ranks = [ranks[0], ranks[-1], *ranks[1:-1]]  # keep the first, turn the rest
    return out


def series_counts(
    op: OpShape, itemsize: int, world_size: int, sizes: Iterable[int], auto: bool = False
) -> list[int]:
    """Element counts of S for the requested sizes, as the operation rounds them, ascending:
    none for a group of the wrong size, one for an operation that sets its own size.

    An operation with `ends_bytes` (never probed) takes the grid's smallest size and that
    one (the grid's largest, if smaller); asked for by name (`all_sizes`), every size of the
    grid, which under --max-size auto ends at `ends_bytes` too."""
    traits = op.traits
    if traits.ranks is not None and traits.ranks != world_size:
        return []
    if traits.fixed_count is not None:
        return [traits.fixed_count(world_size)]
    if traits.ends_bytes is not None:
        grid = sorted(sizes)
        if not grid:
            return []
        if not traits.all_sizes:
            sizes = (grid[0], min(grid[-1], traits.ends_bytes))
        elif auto:
            sizes = [size for size in grid if size <= traits.ends_bytes] or grid[:1]
    return sorted({op.count(size, itemsize, world_size) for size in sizes})
