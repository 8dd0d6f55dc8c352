"""The driver of `sweeper scan`: the scan's pure policy (`scan.policy`) as a source of waves
that the sweep's run (`sweep.RunState`, `sweep.execute`) executes. The run gives the connection,
the stops and signals, the journal and the run record, the lost head's line and the resume;
this module gives the waves.

One actor per GPU on every node (one `RankSet` over the fleet); each wave the policy gives is
turned into the executor's groups, every GPU of each member node taking part, and run by the
existing `Executor`, every group at once. The rows go to the results like any run's, each
with its stage; each group's rows fold into a scan `Outcome` (`scan.rows`) for the policy and,
at the end, the judge. Before each wave the fleet's nodes are looked up: a node that left is
`missing` in every group it would have joined, and the actor set goes on without it: the
other nodes' ranks keep their processes and join a smaller world (`RankSet.drop`), and only
where they cannot does the set start again. So is a node whose actors do not start while Ray
still has it (the judge: `unreachable`): the actors that did start join without it.

A stopped scan goes on (`resumable`, then `scan_fleet(..., resumed)`) on the nodes its record
names, in their order, with the settings its record keeps: the policy is fed again from the
start, each wave's groups taken from the rows the scan has for that wave where they are
complete, run where not (their points already measured replayed, not measured again), so
the waves, and the verdicts, are those the scan would have given. A row is its group's by
its wave, stage and group id (node positions are the scan's node order, lost nodes
included), which a group of more than 8 nodes shares with the wave's other groups of its
size: there its GPUs' UUIDs (or, on CPU ranks, its hosts) tell them apart, and rows that
still match two groups are measured again. A point that timed out keeps in its rows which
ranks did not answer (`unanswered`), so the node that hung is named from rows read back as
from rows just made (`silent_nodes`).
"""

from __future__ import annotations

import shlex
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pyarrow.dataset as ds
import ray

from sweeper.driver import cluster, measurement
from sweeper.driver.connection import Connection
from sweeper.driver.executor import Executor
from sweeper.driver.measurement import ResultRow
from sweeper.driver.observer import Finished, Started
from sweeper.driver.outcome import PointResult
from sweeper.driver.sweep import (
    SCAN_KEY,
    Resume,
    RunState,
    execute,
    recorded,
    resume_of,
    stopped,
)
from sweeper.errors import BadInput, InfrastructureError
from sweeper.ops.descriptor import Collective
from sweeper.ops.registry import REGISTRY, load_plugins
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group, Placement, classify
from sweeper.planning.profile import SCAN_OPTIONS
from sweeper.planning.schedule import Series
from sweeper.planning.schedule import Wave as ExecutorWave
from sweeper.planning.spec import SweepSpec
from sweeper.results import records, scans
from sweeper.results.files import require_directory
from sweeper.results.load import files, read
from sweeper.results.schema import COLUMNS
from sweeper.results.writer import columns
from sweeper.scan import fleet as scan
from sweeper.scan.deadline import STALL_FLOOR_S, stall_s
from sweeper.scan.document import Scanned, document
from sweeper.scan.judge import Verdict, judge
from sweeper.scan.policy import ScanPolicy, Strategy
from sweeper.scan.rows import HOST_COPIES, Asked, Row, outcome
from sweeper.scan.simulate import Costs, WaveRun
from sweeper.scan.thresholds import Thresholds, findings
from sweeper.topology import Node
from sweeper.wire import DEFAULT_VARIANT, Backend, Point, RankInfo, Tier

GiB = 1 << 30
DTYPE = "float32"
COPY_BYTES = 256 << 20  # the gate's host copies, as the copy-engine matrix's bandwidth size
LATENCY_BYTES = 8
# The bandwidth size: 1 GiB, or the largest power of two below it that an all_reduce's two
# buffers fit in a quarter of the smallest GPU's memory; on CPU ranks 1 MiB keeps a box fast.
GPU_BANDWIDTH_BYTES = GiB
CPU_BANDWIDTH_BYTES = 1 << 20
# Pinned in the actor set: a ring's busbw is what crossed the NICs (tree and NVLS can exceed
# the NIC rate), so internode figures compare with the NIC's.
RING = {"NCCL_ALGO": "Ring"}
# A rank's communicator gives up on a collective at this share of the shortest point deadline
# (a stall deadline's floor, or --timeout where it is shorter), so a rank blocked beside one
# that hung answers (with the communicator's timeout) before the deadline, and the point
# names the ranks that did not answer: those of the node that hung.
COMM_SHARE = 0.5
LEFT = "it left the cluster during the scan"
COSTS = Costs()  # what a point is expected to take, for its stall deadline


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanSettings:
    strategy: Strategy
    thresholds: Thresholds
    # the operation of every group of whole nodes, by registry name (a plugin's, in tests);
    # None: each stage's own (scan.fleet.OPS)
    op: str | None = None
    # None: every node with a GPU (CPU, on gloo); a count; or the nodes by host or Ray id
    nodes: int | tuple[str, ...] | None = None
    domain_label: str | None = None  # a Ray node label: its values are the screen's groups
    sizes: tuple[int, int] | None = None  # latency, bandwidth; None: by backend
    start_timeout_s: float = 120.0  # an actor set's start, and a rebuild's

    def plain(self) -> dict[str, Any]:
        """The settings as a profile's `scan:` section (planning.profile.ScanSection) gives
        them, JSON: what the run record keeps, and a resume reads back."""
        limits = self.thresholds
        return {
            "strategy": str(self.strategy),
            "seed": self.strategy.seed,
            "nodes": list(self.nodes) if isinstance(self.nodes, tuple) else self.nodes,
            "domain_label": self.domain_label,
            "op": self.op,
            "sizes": list(self.sizes) if self.sizes else None,
            "min_busbw_gb_per_s": {str(t): v for t, v in limits.min_busbw_gb_per_s.items()},
            "sigmas": limits.sigmas,
            "min_ratio": limits.min_ratio,
        }


class ScanObserver(Protocol):
    def wave(self, wave: scan.ScanWave) -> None:
        """A wave is about to run."""


@dataclass(frozen=True)
class Resumed:
    """A stopped scan to go on with: where its run stopped, its nodes as its record keeps
    them (in the scan's order), and its rows so far (as the schema's columns)."""

    run: Resume
    machines: tuple[Node, ...]
    rows: tuple[Row, ...]


def resumable(output: Path, run_id: str) -> tuple[dict[str, Any], dict[str, Any], Resumed]:
    """The sweep options and the scan settings (`ScanSettings.plain`) a scan was started
    with, and where it stopped; BadInput where `stopped` refuses the run, or it is a nightly
    scan (whose waves and judgement `sweeper nightly` runs again)."""
    started = stopped(output, run_id, "scan")
    if shlex.split(started.command)[1:2] == ["nightly"]:
        raise BadInput(
            f"--resume {run_id}: a nightly scan is not resumed; run sweeper nightly again"
        )
    options = dict(started.options)
    plain = options.pop(SCAN_KEY)
    load_plugins(options.get("plugins") or ())  # a plugin's rows name its operation
    rows: list[Row] = []
    if files(output):
        rows = read(output, COLUMNS, ds.field("run_id") == run_id).to_pylist()
    return options, plain, Resumed(resume_of(started, rows), started.nodes, tuple(rows))


def bandwidth_bytes(backend: Backend, nodes: Sequence[Node]) -> int:
    """The judged operation's bandwidth size on these nodes (GPU_BANDWIDTH_BYTES' rule)."""
    if backend is not Backend.NCCL:
        return CPU_BANDWIDTH_BYTES
    memory = [gpu.memory_total_bytes for node in nodes for gpu in node.gpus]
    size = GPU_BANDWIDTH_BYTES
    while memory and 2 * size > min(memory) // 4 and size > LATENCY_BYTES:
        size //= 2
    return size


def named(
    slots: Sequence[cluster.NodeSlot], names: Sequence[str]
) -> tuple[list[cluster.NodeSlot], list[str]]:
    """The slots of the nodes `names` gives (each a Ray node id or a host name, every node of
    that host), in the order named; and the names no slot has."""
    out: dict[str, cluster.NodeSlot] = {}
    unknown = []
    for name in names:
        found = [s for s in slots if name in (s.node_id, s.host)]
        if not found:
            unknown.append(name)
        out.update((s.node_id, s) for s in found)
    return list(out.values()), unknown


class Forming(Protocol):
    """What `started` asks of an actor set (`cluster.RankSet`)."""

    def start(self) -> list[RankInfo]: ...
    def drop(self, nodes: Collection[str]) -> list[RankInfo]: ...
    def close(self) -> None: ...


S = TypeVar("S", bound=Forming)


def lose(
    slots: Sequence[cluster.NodeSlot], lost: dict[str, str], why: str, alive: Container[str]
) -> bool:
    """The nodes of `slots` not `alive` (Ray's) and not yet `lost`, put in `lost` with `why`;
    whether there were any."""
    gone = [s.node_id for s in slots if s.node_id not in alive and s.node_id not in lost]
    for node in gone:
        lost[node] = why
    return bool(gone)


def started(
    slots: Sequence[cluster.NodeSlot],
    lost: dict[str, str],
    new_set: Callable[[Sequence[cluster.NodeSlot]], S],
    alive: Callable[[], Container[str]],
    running: S | None = None,
) -> tuple[S, list[RankInfo]]:
    """An actor set on the nodes of `slots` not `lost`, started, and its ranks: `running`
    (the scan's set, some of its nodes lost since it started) without the lost nodes, its
    other ranks joined again in their processes (`drop`); else a `new_set`, started.

    Where the actors of some nodes did not start (the set names them: a constructor or
    runtime env that failed, no answer in time) or the nodes are gone from Ray, those nodes
    are out (`lost`, unreachable, with why). The others' actors, started already, then join
    without them; where they cannot (a drop that failed, a failure that names no node), a
    new set starts without them. A new set's failure that names no node and finds none gone
    stops the scan (InfrastructureError, exit 3); the set is closed whenever one escapes."""
    ranks, rejoin = running, running is not None
    try:
        while True:
            if not any(s.node_id not in lost for s in slots):
                raise InfrastructureError("no node of the scan could start its actors")
            if ranks is None:
                ranks = new_set([s for s in slots if s.node_id not in lost])
            try:
                return ranks, ranks.drop(lost) if rejoin else ranks.start()
            except (InfrastructureError, cluster.StartFailed, ray.exceptions.RayError) as exc:
                named = exc.nodes if isinstance(exc, cluster.StartFailed) else {}
                for node, why in named.items():
                    lost.setdefault(node, f"its actors did not start: {why}")
                gone = lose(slots, lost, f"its actors did not start: {exc}", alive())
                if not (rejoin or gone or named):
                    raise InfrastructureError(f"the ranks did not start: {exc}") from exc
                rejoin = bool(named)  # the other nodes' actors started: they join without
                if not rejoin:
                    ranks.close()
                    ranks = None
    except BaseException:
        if ranks is not None:
            ranks.close()
        raise


class _Waves:
    """The run's observer for a scan: each wave goes to the scan's observer as it starts
    (the sweep's console, a test's), and its rows to the results only."""

    def __init__(self, observer: ScanObserver) -> None:
        self.watcher = observer

    def wave(self, wave: scan.ScanWave) -> None:
        self.watcher.wave(wave)

    def started(self, run: Started) -> None:
        """A scan says what it runs wave by wave."""

    def point(self, row: ResultRow) -> None:
        """A scan's rows are read by its judge, not shown."""

    def finished(self, run: Finished) -> None:
        """A scan ends with its verdicts, which its command shows."""


class _Scan(RunState):
    """One scan on the driver, from a connected cluster to the verdicts: a run whose waves
    the scan's policy gives."""

    command = "scan"

    def __init__(
        self,
        asked: SweepSpec,
        settings: ScanSettings,
        observer: ScanObserver,
        run_kind: str,
        connection: Connection,
        resumed: Resumed | None = None,
    ) -> None:
        super().__init__(
            asked, _Waves(observer), run_kind, connection, resumed.run if resumed else None
        )
        self.settings = settings
        self.clock = time.monotonic()
        self.gone: dict[str, str] = {}  # node id: why it is out of the scan (unreachable)
        self.slots, self.nodes = self._layout(resumed.machines if resumed else None)
        self.pair_op = REGISTRY["send_recv"]
        backend = self.plan.backend
        self.copies = [REGISTRY[op] for op in HOST_COPIES] if backend is Backend.NCCL else []
        self.sizes = settings.sizes or (LATENCY_BYTES, bandwidth_bytes(backend, self.nodes))
        # each GPU's node and index by UUID, for the readings (stable: the scan's topology)
        self.gpus = {g.uuid: (n.node_id, g.index) for n in self.nodes for g in n.gpus if g.uuid}
        self.earlier: dict[int, list[Row]] = defaultdict(list)  # a resumed scan's, by wave
        for row in resumed.rows if resumed else ():
            self.earlier[int(row["wave"])].append(row)
        self.partial: dict[scan.ScanGroup, list[Row]] = {}  # a wave's groups it has some rows of
        self.ranks: cluster.RankSet | None = None
        self.sets: list[cluster.RankSet] = []  # every actor set made, for the actors started
        self.placement: Placement | None = None
        self.meta: measurement.RunColumns | None = None
        self.executor: Executor | None = None
        self.by_group: dict[Group, list[Row]] = defaultdict(list)
        self.stage_of: dict[Group, scan.Stage] = {}
        self.op_of: dict[Group, Collective] = {}  # each executor group's judged operation
        self.scanned: Scanned | None = None

    def _layout(self, machines: Sequence[Node] | None) -> tuple[list[cluster.NodeSlot], list[Node]]:
        """The scan's nodes and their topology: the count or the nodes asked; resuming, the
        record's nodes in its order, those Ray no longer has out of the scan (and their
        topology the record's)."""
        backend, per_node = self.plan.backend, self.plan.spec.ranks_per_node
        asked = self.settings.nodes
        if machines is not None:
            names = [m.node_id for m in machines]
        elif isinstance(asked, tuple):
            names = list(asked)
        else:
            slots = cluster.choose_nodes(backend, asked, per_node)
            return slots, cluster.discover(slots)
        every = cluster.choose_nodes(backend, None, per_node)
        slots, unknown = named(every, names)
        if machines is None:
            if unknown:
                raise InfrastructureError(
                    f"--nodes: the Ray cluster has no node {', '.join(unknown)} alive "
                    "(a host name or a Ray node id)",
                    hint="sweeper topo lists the nodes",
                )
            return slots, cluster.discover(slots)
        found = {s.node_id: node for s, node in zip(slots, cluster.discover(slots), strict=True)}
        ranks = slots[0].ranks if slots else 1
        for node in unknown:
            self.gone[node] = "it left the cluster before the scan went on"
        kept = {s.node_id: s for s in slots}
        return (
            [kept.get(m.node_id) or cluster.NodeSlot(m.node_id, m.host, ranks) for m in machines],
            [found.get(m.node_id, m) for m in machines],
        )

    def record(self, ended: str | None = None) -> records.RunRecord:
        made = super().record(ended)
        return replace(made, options={**made.options, SCAN_KEY: self.settings.plain()})

    # ---- the fleet and its actor set ----

    def fleet(self) -> scan.Fleet:
        label = self.settings.domain_label
        labels = cluster.alive()
        gpu_model = self.meta.gpu_model if self.meta else None
        return scan.Fleet(
            nodes=tuple(
                scan.FleetNode(
                    id=slot.node_id,
                    host=slot.host,
                    gpus=slot.ranks,
                    domain=labels.get(slot.node_id, {}).get(label) if label else None,
                )
                for slot in self.slots
            ),
            gpu_model=gpu_model,
        )

    def start(self) -> None:
        """An actor set on every node still in the scan (`started`): the set so far without
        the nodes lost since, else a new one; the placement (every node of the scan in its
        place, so a group's id in the rows does not move when a node is lost) and the
        executor on it."""
        ranks, infos = started(self.slots, self.gone, self._rank_set, cluster.alive, self.ranks)
        self.ranks = ranks
        self.placement = cluster.placement(self.plan.backend, self.nodes, infos)
        shared = self.meta or self.metadata(ranks)
        self.meta = replace(shared, nccl_env=infos[0].nccl_env)  # rows name the pinned ring
        self.executor = Executor(
            ranks=ranks,
            placement=self.placement,
            series_of=self._series,
            collectives=REGISTRY,
            timing=replace(self.plan.timing, nvlink_every_s=0.0),  # its verdicts quote them
            timeout_s=self.plan.spec.timeout,
            max_size_bytes=self.sizes[1],
            emit=self._measured,
            # a point that times out ends its group: one deadline for a hung node, not one a
            # point; and each point is waited for its stall deadline, not --timeout
            timeout_ends_group=True,
            deadline_s=self._deadline,
        )

    def _rank_set(self, slots: Sequence[cluster.NodeSlot]) -> cluster.RankSet:
        """A new actor set on `slots`, not started."""
        backend = self.plan.backend
        ranks = cluster.RankSet(
            backend=backend,
            slots=slots,
            bundle=cluster.bundle(backend),
            env=cluster.actor_env(RING if backend is Backend.NCCL else {}),
            group_timeout_s=COMM_SHARE * min(self.plan.spec.timeout, STALL_FLOOR_S),
            plugins=self.plan.spec.plugins,
            start_timeout_s=self.settings.start_timeout_s,
        )
        self.sets.append(ranks)
        return ranks

    @property
    def actors_started(self) -> int:
        return sum(ranks.actors_started for ranks in self.sets)

    def _lose(self, why: str) -> bool:
        """Nodes of the scan Ray no longer has, out of it with `why`; whether there were any."""
        return lose(self.slots, self.gone, why, cluster.alive())

    def close(self) -> None:
        if self.ranks is not None:
            self.ranks.close()
            self.ranks = None

    def _deadline(self, group: Group, point: Point) -> float:
        """A point's stall deadline: a multiple of what the simulation's cost model expects
        of it on a healthy fleet of GPUs (`scan.deadline`); the floor holds on CPU ranks."""
        assert self.placement is not None
        nodes, ranks = self.placement.n_nodes(group.ranks), group.world_size
        stage, op = self.stage_of[group], REGISTRY[point.op].op
        return stall_s(
            COSTS.expected_s(stage, op, ranks, nodes, point.size_bytes), self.plan.spec.timeout
        )

    # ---- the scan ----

    def measure(self) -> None:
        """Every wave the policy gives, then the verdicts, kept beside the run's record as
        its scan summary before the record says the run is complete."""
        self.begin()
        outcomes: list[scan.GroupOutcome] = []
        waves: list[WaveRun] = []
        try:
            self.start()
            fleet = self.fleet()
            thresholds = self.settings.thresholds
            policy = ScanPolicy(fleet, self.settings.strategy, thresholds)
            wave = policy.next()
            while wave is not None:
                self.observer.wave(wave)
                began = time.monotonic()
                got = self.run_wave(wave)
                waves.append(_timed(wave, time.monotonic() - began))
                outcomes += got
                wave = policy.next(got)
        finally:
            self.close()
        earlier = sum(len(rows) for rows in self.earlier.values())
        self.scanned = Scanned(
            run_id=self.run_id,
            fleet=fleet,
            strategy=self.settings.strategy,
            outcomes=tuple(outcomes),
            verdicts=tuple(judge(fleet, outcomes, thresholds)),
            waves=tuple(waves),
            rows=earlier + len(self.rows),
            actors_started=self.actors_started,
            seconds=time.monotonic() - self.clock,
            machines=tuple(self.nodes),
            findings=tuple(findings(fleet, outcomes, thresholds)),
        )
        kept = summary(self.scanned, self.plan.options, self.settings)
        scans.save(self.plan.spec.results, self.run_id, kept)

    # ---- a wave ----

    def judged(self, group: scan.ScanGroup) -> Collective:
        """A scan group's judged operation: its stage's (scan.fleet.OPS: all_reduce in a
        node's gate, all_to_all across nodes, send_recv between two of a node's GPUs), or for
        a group of whole nodes the one the settings name."""
        if self.settings.op is not None and not group.gpus:
            return REGISTRY[self.settings.op]
        return REGISTRY[group.op]

    def asked(self, group: scan.ScanGroup) -> Asked:
        """What the group's judged operation measures: its sizes as its ranks run them (an
        all_to_all's rounded down to a whole chunk a rank, as nccl-tests does: 1 GiB over
        3 nodes of 8 GPUs is not 1 GiB), so its rows are found at them."""
        judged, parts = self.judged(group), self.groups(group)
        ranks = parts[0][0].world_size if parts else 1
        itemsize = DTYPES[DTYPE].itemsize
        latency, bandwidth = (judged.count(s, itemsize, ranks) * itemsize for s in self.sizes)
        return Asked(op=judged.op, latency_bytes=latency, bandwidth_bytes=bandwidth)

    def groups(self, group: scan.ScanGroup) -> list[list[Group]]:
        """The executor's groups of a scan group, by the executor wave they run in, each with
        its stage and judged operation: a gate's node's GPUs together, then (with GPUs) each
        of them copying to and from the host at once; across nodes, every GPU of every member
        node; a node's GPUs isolated, one alone (its copies; none on CPU ranks) or a pair."""
        assert self.placement is not None
        position = {n.node_id: i for i, n in enumerate(self.placement.nodes)}
        members = [m for node in group.nodes for m in self.placement.by_node[position[node]]]
        if group.gpus:
            members = [m for m in members if m.local in group.gpus]
        ranks = tuple(sorted(m.rank for m in members))
        if group.gpus and len(ranks) == 1:
            made = [[Group(Tier.GPU, DEFAULT_VARIANT, ranks)]] if self.copies else []
        else:
            made = [[Group(classify(self.placement, ranks), DEFAULT_VARIANT, ranks)]]
            if group.stage is scan.Stage.GATE and self.copies:
                made.append([Group(Tier.GPU, DEFAULT_VARIANT, ranks)])
        for part in made:
            for g in part:
                self.stage_of[g], self.op_of[g] = group.stage, self.judged(group)
        return made

    def _series(self, group: Group) -> list[Series]:
        n = group.world_size
        if group.tier == Tier.GPU:
            return [self._one(c, COPY_BYTES, n) for c in self.copies]
        judged = self.op_of[group]
        out = [self._one(judged, self.sizes, n)]
        if n == 2 and judged is not self.pair_op:  # a pair of one-GPU nodes (or ranks)
            out.append(self._one(self.pair_op, self.sizes[1], n))  # what one way carries too
        return out

    @staticmethod
    def _one(collective: Collective, sizes: int | Sequence[int], n: int) -> Series:
        itemsize = DTYPES[DTYPE].itemsize
        wanted = (sizes,) if isinstance(sizes, int) else sizes
        counts = tuple(sorted({collective.count(s, itemsize, n) for s in wanted}))
        return Series(op=collective.name, dtype=DTYPE, counts=counts)

    def _expected(self, parts: Sequence[Group]) -> set[tuple[str, int]]:
        """The (op, size_bytes) points a scan group's executor groups are asked for."""
        itemsize = DTYPES[DTYPE].itemsize
        return {
            (REGISTRY[s.op].op, count * itemsize)
            for g in parts
            for s in self._series(g)
            for count in s.counts
        }

    def _measured(self, done: PointResult) -> None:
        assert self.meta is not None
        assert self.placement is not None
        stage = self.stage_of[done.group]
        rows = [
            replace(row, stage=str(stage))
            for row in measurement.of_point(self.meta, self.placement, done)
        ]
        self.keep(rows)
        self.by_group[done.group].extend(columns(row) for row in rows)

    def _outcome(
        self, group: scan.ScanGroup, parts: Sequence[Group], rows: Sequence[Row]
    ) -> scan.GroupOutcome:
        """The group's outcome from its rows (`scan.rows.outcome`), measured now or read back:
        its executor groups are `parts`, and the nodes that did not answer a point that timed
        out are those its rows' `unanswered` name (`silent`)."""
        assert self.placement is not None
        silent = silent_nodes(self.placement, parts, rows)
        return outcome(group, rows, self._expected(parts), self.asked(group), self.gpus, silent)

    def _missing(self, groups: Sequence[scan.ScanGroup]) -> dict[scan.ScanGroup, scan.GroupOutcome]:
        """The groups holding a node that is out of the scan, each missing, saying why (which
        node, where the group holds others: the judge names a gate's node itself)."""
        out = {}
        for group in groups:
            if gone := [n for n in group.nodes if n in self.gone]:
                why = "; ".join(
                    self.gone[n] if len(group.nodes) == 1 else f"{n}: {self.gone[n]}" for n in gone
                )
                out[group] = scan.GroupOutcome(group=group, result=scan.Result.MISSING, reason=why)
        return out

    def _earlier(
        self, index: int, groups: Sequence[scan.ScanGroup]
    ) -> dict[scan.ScanGroup, scan.GroupOutcome]:
        """Resuming: the outcomes of the wave's groups whose rows the scan has whole; the
        rows of those it has in part are kept (`partial`) for their points to be replayed."""
        rows = self.earlier.get(index)
        if not rows:
            return {}
        assert self.placement is not None
        shapes = {group: self._shape(group) for group in groups}
        mine: dict[scan.ScanGroup, list[Row]] = defaultdict(list)
        for row in rows:
            owners = [g for g, shape in shapes.items() if _owns(shape, g, row)]
            if len(owners) == 1:
                mine[owners[0]].append(row)
        out = {}
        for group, kept in mine.items():
            parts = [g for part in self.groups(group) for g in part]
            if self._expected(parts) <= {(r["op"], r["size_bytes"]) for r in kept}:
                out[group] = self._outcome(group, parts, kept)
            else:
                self.partial[group] = kept
        return out

    def _shape(self, group: scan.ScanGroup) -> _Shape:
        """What a row of the group says of it: its executor groups' ids, its hosts, its GPUs."""
        assert self.placement is not None
        parts = [g for part in self.groups(group) for g in part]
        ranks = parts[0].ranks if parts else ()
        return _Shape(
            ids=frozenset(self.placement.group_id(g) for g in parts),
            hosts=Counter(self.placement.hosts(ranks)),
            uuids=frozenset(self.placement.gpu_uuids(ranks)),
        )

    def run_wave(self, wave: scan.ScanWave) -> list[scan.GroupOutcome]:
        """Every group of the wave at once; each one's outcome, in the wave's order."""
        if self._lose(LEFT):
            self.start()
        done = self._missing(wave.groups)
        done.update(self._earlier(wave.index, [g for g in wave.groups if g not in done]))
        todo = [g for g in wave.groups if g not in done]
        while todo:
            try:
                done.update(self._run(wave.index, todo))
                todo = []
            except InfrastructureError:  # a node left mid-wave: without it, the rest again
                if not self._lose(LEFT):
                    raise
                done.update(self._missing(todo))
                todo = [g for g in todo if g not in done]
                self.start()
        return [done[g] for g in wave.groups]

    def _run(
        self, index: int, groups: Sequence[scan.ScanGroup]
    ) -> dict[scan.ScanGroup, scan.GroupOutcome]:
        assert self.executor is not None
        made = {group: self.groups(group) for group in groups}
        for g in (g for parts in made.values() for part in parts for g in part):
            self.by_group.pop(g, None)  # a wave run again: its own rows only
        replayed = recorded(r for g in groups for r in self.partial.get(g, ()))
        for k in range(max(len(parts) for parts in made.values())):
            together = tuple(g for s in made.values() if k < len(s) for g in s[k])
            self.executor.run_wave(ExecutorWave(index, together), replayed or None)
        out = {}
        for group, parts in made.items():
            mine = [g for part in parts for g in part]
            if not mine:  # a GPU alone on CPU ranks: no copies to time, nothing against it
                op = self.asked(group).op
                out[group] = scan.GroupOutcome(group=group, result=scan.Result.OK, op=op)
                continue
            rows = [*self.partial.pop(group, ()), *(r for g in mine for r in self.by_group[g])]
            out[group] = self._outcome(group, mine, rows)
        return out


@dataclass(frozen=True)
class _Shape:
    ids: frozenset[str]
    hosts: Counter[str]
    uuids: frozenset[str]


def _owns(shape: _Shape, group: scan.ScanGroup, row: Row) -> bool:
    """Whether a row read back can be the group's (see the module's docstring)."""
    if row["group_id"] not in shape.ids or row["stage"] != group.stage:
        return False
    hosts = Counter(row["hosts"] or ())
    return set(row["gpu_uuids"] or ()) <= shape.uuids and not hosts - shape.hosts


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


def scan_fleet(
    spec: SweepSpec,
    settings: ScanSettings,
    observer: ScanObserver,
    run_kind: str = "scan",
    resumed: Resumed | None = None,
) -> Scanned:
    """A scan: every wave the policy gives, on the cluster, in the sweep's run; the rows go
    to the results (as a `run_kind` run: `nightly` for `sweeper nightly`'s), the judge's
    verdicts come back and go beside them as the scan's summary. With `resumed`, the rest
    of a stopped scan, under its id."""
    load_plugins(spec.plugins)
    if settings.op is not None and settings.op not in REGISTRY:
        raise BadInput(f"--op {settings.op}: no such operation")
    output = spec.results
    require_directory(output, f"--results {output}")

    def made(connection: Connection) -> _Scan:
        return _Scan(spec, settings, observer, run_kind, connection, resumed)

    ran, _ = execute(spec, made)
    assert ran.scanned is not None
    return ran.scanned


def summary(scanned: Scanned, options: Mapping[str, Any], settings: ScanSettings) -> dict[str, Any]:
    """The scan's summary (`scan.document`), each condemned verdict with the command that
    scans its subject again (`retest`); `options`: the scan's sweep options, as its run
    record keeps them."""
    doc = document(scanned)
    hosts = Counter(node.host for node in scanned.fleet.nodes)
    # a node by its host where the host has one node of the scan, else by its Ray id
    name_of = {n.id: n.host if hosts[n.host] == 1 else n.id for n in scanned.fleet.nodes}
    flags = _flags(options, settings)
    for verdict, shown in zip(scanned.verdicts, doc["verdicts"], strict=True):
        if verdict.condemned:
            shown["retest"] = retest(verdict, name_of, flags)
    return doc


def retest(verdict: Verdict, name_of: Mapping[str, str], flags: Sequence[str]) -> str:
    """The command that scans a verdict's subject again: its nodes (a node beside the
    partners it was judged beside, so that it meets the same internode test; a link's two
    ends; a GPU's node), with the scan's own settings."""
    nodes = dict.fromkeys((*verdict.nodes, *verdict.partners))
    named_ = ",".join(name_of.get(node, node) for node in nodes)
    return shlex.join(["sweeper", "scan", "--nodes", named_, *flags])


def _flags(options: Mapping[str, Any], settings: ScanSettings) -> list[str]:
    """The options that make a re-test the scan's test: where and how it ran and where its
    rows went (the sweep options a scan takes, off their defaults) and how it judged (the
    scan's settings off theirs, but for which nodes and how they are grouped)."""
    words = ["--results", str(options["results"])]
    taken = set(SCAN_OPTIONS - {"results"})
    for key, usual in SweepSpec().model_dump(mode="json", include=taken).items():
        value = options[key]
        if value == usual:
            continue
        flag = "--" + key.replace("_", "-")
        for each in value if isinstance(value, list) else [value]:
            words += [flag, str(each)]
    plain = settings.plain()
    usual = ScanSettings(strategy=settings.strategy, thresholds=Thresholds()).plain()
    for key in ("op", "sigmas", "min_ratio"):
        if plain[key] is not None and plain[key] != usual[key]:
            words += ["--" + key.replace("_", "-"), str(plain[key])]
    if plain["sizes"]:
        words += ["--sizes", ",".join(map(str, plain["sizes"]))]
    for tier, figure in plain["min_busbw_gb_per_s"].items():
        words += ["--min-busbw", f"{tier}={figure}"]
    return words


def _timed(wave: scan.ScanWave, seconds: float) -> WaveRun:
    largest = max((len(g.nodes) for g in wave.groups), default=0)
    return WaveRun(
        index=wave.index,
        stage=wave.stage,
        groups=len(wave.groups),
        largest=largest,
        seconds=seconds,
    )
