"""A scan's wave as the executor runs it: each scan group's executor groups by the executor
wave they run in, each with its stage, judged operation and series; a point's stall deadline;
and a group's outcome from its rows. Pure: a placement and the registry's descriptors in,
plain records out, so a wave's plan is tested without Ray."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sweeper.ops.descriptor import Collective
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group, Placement, classify
from sweeper.planning.schedule import Series
from sweeper.planning.schedule import Wave as ExecutorWave
from sweeper.scan.deadline import stall_s
from sweeper.scan.fleet import GroupOutcome, Result, ScanGroup, ScanWave, Stage
from sweeper.scan.rows import Asked, Row, outcome
from sweeper.scan.simulate import Costs
from sweeper.topology import Node
from sweeper.wire import DEFAULT_VARIANT, Backend, Point, Tier

DTYPE = "float32"
COPY_BYTES = 256 << 20  # the gate's host copies, as the copy-engine matrix's bandwidth size
LATENCY_BYTES = 8
# The bandwidth size: 1 GiB, or the largest power of two below it that an all_reduce's two
# buffers fit in a quarter of the smallest GPU's memory; on CPU ranks 1 MiB keeps a box fast.
GPU_BANDWIDTH_BYTES = 1 << 30
CPU_BANDWIDTH_BYTES = 1 << 20
COSTS = Costs()  # what a point is expected to take, for its stall deadline


def judged_sizes(backend: Backend, nodes: Sequence[Node]) -> tuple[int, int]:
    """The judged operation's latency and bandwidth sizes on these nodes (the bandwidth
    size's rule above)."""
    if backend is not Backend.NCCL:
        return LATENCY_BYTES, CPU_BANDWIDTH_BYTES
    memory = [gpu.memory_total_bytes for node in nodes for gpu in node.gpus]
    size = GPU_BANDWIDTH_BYTES
    while memory and 2 * size > min(memory) // 4 and size > LATENCY_BYTES:
        size //= 2
    return LATENCY_BYTES, size


@dataclass(frozen=True, kw_only=True, slots=True)
class Part:
    """One executor group of a scan group: its stage, judged operation and series."""

    group: Group
    stage: Stage
    judged: Collective
    series: tuple[Series, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedGroup:
    """A scan group as the executor runs it: its parts by executor wave (none: nothing to
    run, a GPU alone on CPU ranks), what its judged operation measures, and the (op,
    size_bytes) points its parts are asked for."""

    scan: ScanGroup
    steps: tuple[tuple[Part, ...], ...]
    asked: Asked
    expected: frozenset[tuple[str, int]]

    @property
    def parts(self) -> tuple[Part, ...]:
        return tuple(part for step in self.steps for part in step)


@dataclass(frozen=True, kw_only=True, slots=True)
class WavePlan:
    """A scan wave's groups as the executor runs them: `waves` are its executor waves (each
    group's k-th step together, numbered as the scan wave)."""

    index: int
    groups: tuple[PlannedGroup, ...]
    waves: tuple[ExecutorWave, ...] = field(init=False)
    _parts: dict[Group, Part] = field(init=False, repr=False)
    _owner: dict[Group, PlannedGroup] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        longest = max((len(p.steps) for p in self.groups), default=0)
        waves = tuple(
            ExecutorWave(
                self.index,
                tuple(part.group for p in self.groups if k < len(p.steps) for part in p.steps[k]),
            )
            for k in range(longest)
        )
        object.__setattr__(self, "waves", waves)
        object.__setattr__(self, "_parts", {q.group: q for p in self.groups for q in p.parts})
        object.__setattr__(self, "_owner", {q.group: p for p in self.groups for q in p.parts})

    def part(self, group: Group) -> Part:
        return self._parts[group]

    def owner(self, group: Group) -> PlannedGroup:
        """The scan group an executor group of this wave belongs to."""
        return self._owner[group]

    def series(self, group: Group) -> tuple[Series, ...]:
        return self._parts[group].series


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanPlan:
    """How a scan's groups run on its placement: the judged operation's two sizes (latency,
    bandwidth), the host copies a GPU times (none on CPU ranks), the operation the settings
    name for groups of whole nodes (None: each stage's own, from `registry`), and the
    operation a pair of one-GPU nodes also times one way."""

    placement: Placement
    registry: Mapping[str, Collective]
    sizes: tuple[int, int]
    copies: tuple[Collective, ...] = ()
    op: str | None = None
    pair_op: str = "send_recv"

    def wave(self, wave: ScanWave, groups: Sequence[ScanGroup] | None = None) -> WavePlan:
        """The wave's groups (or those of `groups`, some of them) as the executor runs them."""
        chosen = wave.groups if groups is None else groups
        return WavePlan(index=wave.index, groups=tuple(self.group(g) for g in chosen))

    def judged(self, group: ScanGroup) -> Collective:
        """A scan group's judged operation: its stage's (scan.fleet.OPS: all_reduce in a
        node's gate, all_to_all across nodes, send_recv between two of a node's GPUs), or for
        a group across nodes (or of whole nodes) the one the settings name."""
        if self.op is not None and not group.gpus:
            return self.registry[self.op]
        return self.registry[group.op]

    def group(self, group: ScanGroup) -> PlannedGroup:
        """A scan group's executor groups by the executor wave they run in: a gate's node's
        GPUs together, then (with GPUs) each of them copying to and from the host at once;
        across nodes, every GPU of every member node; a node's GPUs isolated, one alone (its
        copies; none on CPU ranks) or a pair."""
        placement = self.placement
        position = {n.node_id: i for i, n in enumerate(placement.nodes)}
        members = [
            m
            for node, subset in self._members(group)
            for m in placement.by_node[position[node]]
            if subset is None or m.local in subset
        ]
        ranks = tuple(sorted(m.rank for m in members))
        copies = Group(Tier.GPU, DEFAULT_VARIANT, ranks)
        if group.gpus and len(ranks) == 1:
            made = [[copies]] if self.copies else []
        else:
            made = [[Group(classify(placement, ranks), DEFAULT_VARIANT, ranks)]]
            if group.stage is Stage.GATE and self.copies:
                made.append([copies])
        judged = self.judged(group)
        steps = tuple(
            tuple(
                Part(group=g, stage=group.stage, judged=judged, series=self._series(g, judged))
                for g in step
            )
            for step in made
        )
        n = steps[0][0].group.world_size if steps else 1
        itemsize = DTYPES[DTYPE].itemsize
        latency, bandwidth = (judged.count(s, itemsize, n) * itemsize for s in self.sizes)
        expected = frozenset(
            (self.registry[s.op].op, count * itemsize)
            for step in steps
            for part in step
            for s in part.series
            for count in s.counts
        )
        asked = Asked(op=judged.op, latency_bytes=latency, bandwidth_bytes=bandwidth)
        return PlannedGroup(scan=group, steps=steps, asked=asked, expected=expected)

    @staticmethod
    def _members(group: ScanGroup) -> list[tuple[str, tuple[int, ...] | None]]:
        """Each node of the group and the GPUs of it taking part (None: all)."""
        if group.gpus:
            return [(group.nodes[0], group.gpus)]
        if group.subsets:
            return list(zip(group.nodes, group.subsets, strict=True))
        return [(node, None) for node in group.nodes]

    def _series(self, group: Group, judged: Collective) -> tuple[Series, ...]:
        n = group.world_size
        if group.tier == Tier.GPU:
            return tuple(_one(c, (COPY_BYTES,), n) for c in self.copies)
        pair = self.registry[self.pair_op]
        out = [_one(judged, self.sizes, n)]
        if n == 2 and judged is not pair:  # a pair of one-GPU nodes (or ranks)
            out.append(_one(pair, self.sizes[1:], n))  # what one way carries too
        return tuple(out)

    def deadline_s(self, part: Part, point: Point, timeout_s: float) -> float:
        """A point's stall deadline: a multiple of what the simulation's cost model expects
        of it on a healthy fleet of GPUs (`scan.deadline`); the floor holds on CPU ranks."""
        nodes, ranks = self.placement.n_nodes(part.group.ranks), part.group.world_size
        op = self.registry[point.op].op
        expected = COSTS.expected_s(part.stage, op, ranks, nodes, point.size_bytes)
        return stall_s(expected, timeout_s)

    def outcome(
        self,
        planned: PlannedGroup,
        rows: Sequence[Row],
        gpus: Mapping[str, tuple[str, int]] | None = None,
    ) -> GroupOutcome:
        """The scan group's outcome from its parts' rows (`scan.rows.outcome`); the nodes that
        did not answer a point that timed out are those its rows' `unanswered` name. A group
        with nothing to run is ok: nothing is held against it."""
        if not planned.steps:
            return GroupOutcome(group=planned.scan, result=Result.OK, op=planned.asked.op)
        parts = [part.group for part in planned.parts]
        silent = silent_nodes(self.placement, parts, rows)
        return outcome(planned.scan, rows, planned.expected, planned.asked, gpus, silent)


def _one(collective: Collective, sizes: Sequence[int], n: int) -> Series:
    itemsize = DTYPES[DTYPE].itemsize
    counts = tuple(sorted({collective.count(s, itemsize, n) for s in sizes}))
    return Series(op=collective.name, dtype=DTYPE, counts=counts)


def missing(groups: Iterable[ScanGroup], gone: Mapping[str, str]) -> dict[ScanGroup, GroupOutcome]:
    """The groups holding a node that is out of the scan (`gone`: node, why), each missing,
    saying why (which node, where the group holds others: the judge names a gate's node
    itself)."""
    out = {}
    for group in groups:
        if lost := [n for n in group.nodes if n in gone]:
            why = "; ".join(gone[n] if len(group.nodes) == 1 else f"{n}: {gone[n]}" for n in lost)
            out[group] = GroupOutcome(group=group, result=Result.MISSING, reason=why)
    return out


def silent_nodes(placement: Placement, parts: Sequence[Group], rows: Iterable[Row]) -> set[str]:
    """The nodes whose ranks did not answer a point of `rows` that timed out: a row's
    `unanswered` are group ranks of the part (executor group) its group id names, placed by
    `placement`. Where every node of several went silent, none: nothing tells a hung node
    from those it blocked."""
    by_id = {placement.group_id(g): g for g in parts}
    out: set[str] = set()
    for row in rows:
        part, places = by_id.get(row["group_id"]), row.get("unanswered")
        if part is None or places is None or not len(places):
            continue
        node_of = [placement.nodes[placement.members[r].node].node_id for r in part.ranks]
        silent, nodes = {node_of[i] for i in places}, set(node_of)
        if silent < nodes or len(nodes) == 1:
            out |= silent
    return out
