"""The driver of `sweeper scan`: the scan's pure policy (`scan.policy`) on a real cluster.

One actor per GPU on every node (one `RankSet` over the fleet); each wave the policy gives is
turned into the executor's groups, every GPU of each member node taking part, and run by the
existing `Executor`, every group at once. The rows go to the results like any run's, each
with its stage; each group's rows fold into a scan `Outcome` (`scan.rows`) for the policy and,
at the end, the judge. Before each wave the fleet's nodes are looked up: a node that left is
`missing` in every group it would have joined, and the actor set goes on without it: the
other nodes' ranks keep their processes and join a smaller world (`RankSet.drop`), and only
where they cannot does the set start again. So is a node whose actors do not start while Ray
still has it (the judge: `unreachable`): the actors that did start join without it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Container, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Protocol, TypeVar

import ray

from sweeper.driver import cluster, measurement
from sweeper.driver.connection import Connection, connect
from sweeper.driver.executor import Executor
from sweeper.driver.outcome import PointResult
from sweeper.driver.sweep import choose_backend, new_run_id, run_columns
from sweeper.errors import BadInput, InfrastructureError
from sweeper.ops.descriptor import Collective
from sweeper.ops.registry import REGISTRY, load_plugins
from sweeper.planning import request
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group, Placement, classify
from sweeper.planning.schedule import Series
from sweeper.planning.schedule import Wave as ExecutorWave
from sweeper.planning.spec import SweepSpec
from sweeper.report import require_directory
from sweeper.results import records, scans
from sweeper.results.writer import ResultWriter, columns
from sweeper.scan import fleet as scan
from sweeper.scan.document import Scanned, document
from sweeper.scan.judge import judge
from sweeper.scan.policy import Policy, Strategy
from sweeper.scan.rows import HOST_COPIES, Asked, Row, outcome
from sweeper.scan.simulate import WaveRun
from sweeper.scan.thresholds import Thresholds
from sweeper.topology import Node
from sweeper.wire import Backend, RankInfo, Tier

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


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanSettings:
    strategy: Strategy
    thresholds: Thresholds
    op: str = "all_reduce"  # the judged operation, by registry name (a plugin's, in tests)
    nodes: int | None = None  # None: every node with a GPU (CPU, on gloo)
    domain_label: str | None = None  # a Ray node label: its values are the screen's groups
    sizes: tuple[int, int] | None = None  # latency, bandwidth; None: by backend
    start_timeout_s: float = 120.0  # an actor set's start, and a rebuild's


class ScanObserver(Protocol):
    def wave(self, wave: scan.Wave) -> None:
        """A wave is about to run."""


def bandwidth_bytes(backend: Backend, nodes: Sequence[Node]) -> int:
    """The judged operation's bandwidth size on these nodes (GPU_BANDWIDTH_BYTES' rule)."""
    if backend is not Backend.NCCL:
        return CPU_BANDWIDTH_BYTES
    memory = [gpu.memory_total_bytes for node in nodes for gpu in node.gpus]
    size = GPU_BANDWIDTH_BYTES
    while memory and 2 * size > min(memory) // 4 and size > LATENCY_BYTES:
        size //= 2
    return size


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


class _Scan:
    """One scan's state on the driver, from a connected cluster to the verdicts."""

    def __init__(
        self,
        spec: SweepSpec,
        settings: ScanSettings,
        connection: Connection,
        run_kind: str,
    ) -> None:
        self.connection = connection
        self.run_kind = run_kind
        self.settings = settings
        self.started_at = datetime.now(timezone.utc)
        self.run_id = new_run_id(self.started_at)
        backend = choose_backend(spec.cluster.backend, connection.gpus())
        self.plan = request.resolve(spec, backend)
        self.backend = backend
        self.slots = cluster.choose_nodes(backend, settings.nodes, spec.cluster.ranks_per_node)
        self.nodes = cluster.discover(self.slots)
        self.collective = REGISTRY[settings.op]
        self.pair_op = REGISTRY["send_recv"]
        self.copies = [REGISTRY[op] for op in HOST_COPIES] if backend is Backend.NCCL else []
        latency, bandwidth = settings.sizes or (LATENCY_BYTES, bandwidth_bytes(backend, self.nodes))
        self.asked = Asked(op=self.collective.op, latency_bytes=latency, bandwidth_bytes=bandwidth)
        self.lost: dict[str, str] = {}  # node id: why it is out (unreachable)
        self.writer = ResultWriter(
            self.plan.outputs.results, self.run_id, self.started_at.strftime("%Y-%m-%d")
        )
        self.rows = 0
        self.ranks: cluster.RankSet | None = None
        self.sets: list[cluster.RankSet] = []  # every actor set made, for the actors started
        self.placement: Placement | None = None
        self.meta: measurement.RunColumns | None = None
        self.executor: Executor | None = None
        self.by_group: dict[Group, list[Row]] = defaultdict(list)
        self.stage_of: dict[Group, scan.Stage] = {}

    # ---- the fleet and its actor set ----

    def fleet(self) -> scan.Fleet:
        label = self.settings.domain_label
        labels = cluster.alive()
        gpu_model = self.meta.gpu_model if self.meta else None
        return scan.Fleet(
            nodes=tuple(
                scan.Node(
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
        the nodes lost since, else a new one; the placement and the executor on it."""
        ranks, infos = started(self.slots, self.lost, self._rank_set, cluster.alive, self.ranks)
        nodes = [n for n in self.nodes if n.node_id not in self.lost]
        self.ranks = ranks
        self.placement = cluster.placement(self.backend, nodes, infos)
        shared = self.meta or run_columns(
            self.run_id,
            self.started_at,
            self.run_kind,
            self.plan.cluster.name or self.connection.head_host(),
            self.backend,
            ranks,
        )
        self.meta = replace(shared, nccl_env=infos[0].nccl_env)  # rows name the pinned ring
        self.executor = Executor(
            ranks,
            self.placement,
            self._series,
            {c.name: c for c in (self.collective, self.pair_op, *self.copies)},
            self.plan.timing,
            self.plan.timeout_s,
            self.asked.bandwidth_bytes,
            self._measured,
        )

    def _rank_set(self, slots: Sequence[cluster.NodeSlot]) -> cluster.RankSet:
        """A new actor set on `slots`, not started."""
        ranks = cluster.RankSet(
            self.backend,
            slots,
            cluster.bundle(self.backend),
            cluster.actor_env(RING if self.backend is Backend.NCCL else {}),
            group_timeout_s=2 * self.plan.timeout_s,
            plugins=self.plan.experiments.plugins,
            start_timeout_s=self.settings.start_timeout_s,
        )
        self.sets.append(ranks)
        return ranks

    @property
    def actors_started(self) -> int:
        return sum(ranks.actors_started for ranks in self.sets)

    def _lose(self, why: str) -> bool:
        """Nodes of the scan Ray no longer has, out of it with `why`; whether there were any."""
        return lose(self.slots, self.lost, why, cluster.alive())

    def close(self) -> None:
        if self.ranks is not None:
            self.ranks.close()
            self.ranks = None

    # ---- a wave ----

    def groups(self, group: scan.Group) -> list[list[Group]]:
        """The executor's groups of a scan group, by the executor wave they run in: a gate's
        node's GPUs together, then (with GPUs) each of them copying to and from the host at
        once; across nodes, every GPU of every member node."""
        assert self.placement is not None
        position = {n.node_id: i for i, n in enumerate(self.placement.nodes)}
        ranks = tuple(
            sorted(m.rank for node in group.nodes for m in self.placement.by_node[position[node]])
        )
        tier = classify(self.placement, ranks)
        made = [[Group(tier, "default", ranks)]]
        if group.stage is scan.Stage.GATE and self.copies:
            made.append([Group(Tier.GPU, "default", ranks)])
        return made

    def _series(self, group: Group) -> list[Series]:
        n = group.world_size
        if group.tier == Tier.GPU:
            return [self._one(c, COPY_BYTES, n) for c in self.copies]
        sizes = (self.asked.latency_bytes, self.asked.bandwidth_bytes)
        out = [self._one(self.collective, sizes, n)]
        if n == 2:  # a pair of one-GPU nodes (or ranks): what one way carries too
            out.append(self._one(self.pair_op, self.asked.bandwidth_bytes, n))
        return out

    @staticmethod
    def _one(collective: Collective, sizes: int | Sequence[int], n: int) -> Series:
        itemsize = DTYPES[DTYPE].itemsize
        wanted = (sizes,) if isinstance(sizes, int) else sizes
        counts = tuple(sorted({collective.count(s, itemsize, n) for s in wanted}))
        return Series(op=collective.name, dtype=DTYPE, counts=counts)

    def _expected(self, group: Group) -> set[tuple[str, int]]:
        itemsize = DTYPES[DTYPE].itemsize
        return {
            (REGISTRY[s.op].op, count * itemsize) for s in self._series(group) for count in s.counts
        }

    def _measured(self, done: PointResult) -> None:
        assert self.meta is not None
        assert self.placement is not None
        stage = self.stage_of[done.group]
        rows = [
            replace(row, stage=str(stage))
            for row in measurement.of_point(self.meta, self.placement, done)
        ]
        self.writer.extend(rows)
        self.rows += len(rows)
        self.by_group[done.group].extend(columns(row) for row in rows)

    def _missing(self, groups: Sequence[scan.Group]) -> dict[scan.Group, scan.Outcome]:
        """The groups holding a node that is out of the scan, each missing, saying why (which
        node, where the group holds others: the judge names a gate's node itself)."""
        out = {}
        for group in groups:
            if gone := [n for n in group.nodes if n in self.lost]:
                why = "; ".join(
                    self.lost[n] if len(group.nodes) == 1 else f"{n}: {self.lost[n]}" for n in gone
                )
                out[group] = scan.Outcome(group=group, result=scan.Result.MISSING, reason=why)
        return out

    def run_wave(self, wave: scan.Wave) -> list[scan.Outcome]:
        """Every group of the wave at once; each one's outcome, in the wave's order."""
        if self._lose("it left the cluster during the scan"):
            self.start()
        done = self._missing(wave.groups)
        todo = [g for g in wave.groups if g not in done]
        while todo:
            try:
                done.update(self._run(wave.index, todo))
                todo = []
            except InfrastructureError:  # a node left mid-wave: without it, the rest again
                if not self._lose("it left the cluster during the scan"):
                    raise
                done.update(self._missing(todo))
                todo = [g for g in todo if g not in done]
                self.start()
        return [done[g] for g in wave.groups]

    def _run(self, index: int, groups: Sequence[scan.Group]) -> dict[scan.Group, scan.Outcome]:
        assert self.executor is not None
        assert self.placement is not None
        made = {group: self.groups(group) for group in groups}
        for group, parts in made.items():
            for part in parts:
                for g in part:
                    self.stage_of[g] = group.stage
                    self.by_group.pop(g, None)  # a wave run again: its own rows only
        for k in range(max(len(parts) for parts in made.values())):
            together = tuple(g for s in made.values() if k < len(s) for g in s[k])
            self.executor.run_wave(ExecutorWave(index, together))
        gpus = {
            m.gpu_uuid: (self.placement.nodes[m.node].node_id, m.local)
            for m in self.placement.members
            if m.gpu_uuid
        }
        out = {}
        for group, parts in made.items():
            mine = [g for part in parts for g in part]
            rows = [r for g in mine for r in self.by_group[g]]
            expected = set().union(*(self._expected(g) for g in mine))
            out[group] = outcome(group, rows, expected, self.asked, gpus)
        return out


def scan_fleet(
    spec: SweepSpec, settings: ScanSettings, observer: ScanObserver, run_kind: str = "scan"
) -> Scanned:
    """A scan: every wave the policy gives, on the cluster; the rows go to the results (as a
    `run_kind` run: `nightly` for `sweeper nightly`'s), the judge's verdicts come back and go
    beside them as the scan's summary."""
    load_plugins(spec.experiments.plugins)
    if settings.op not in REGISTRY:
        raise BadInput(f"--op {settings.op}: no such operation")
    output = spec.outputs.results
    require_directory(output, f"--output {output}")
    clock = time.monotonic()
    connection = connect(
        spec.cluster.address, spec.cluster.cpu_ranks, spec.cluster.connect_timeout_s
    )
    try:
        state = _Scan(spec, settings, connection, run_kind)
        records.save(output, records.RunRecord.of(state.run_id, spec, tuple(state.nodes)))
        ended = "interrupted"
        try:
            state.start()
            fleet = state.fleet()
            policy = Policy(fleet, settings.strategy, settings.thresholds)
            outcomes: list[scan.Outcome] = []
            waves: list[WaveRun] = []
            wave = policy.next()
            while wave is not None:
                observer.wave(wave)
                began = time.monotonic()
                got = state.run_wave(wave)
                waves.append(_timed(wave, time.monotonic() - began))
                outcomes += got
                wave = policy.next(got)
            ended = "complete"
        finally:
            state.close()
            state.writer.flush()
            records.save(
                output, records.RunRecord.of(state.run_id, spec, tuple(state.nodes), ended)
            )
    finally:
        connection.close()
    scanned = Scanned(
        run_id=state.run_id,
        fleet=fleet,
        strategy=settings.strategy,
        outcomes=tuple(outcomes),
        verdicts=tuple(judge(fleet, outcomes, settings.thresholds)),
        waves=tuple(waves),
        rows=state.rows,
        actors_started=state.actors_started,
        seconds=time.monotonic() - clock,
        machines=tuple(state.nodes),
    )
    scans.save(output, scanned.run_id, document(scanned))
    return scanned


def _timed(wave: scan.Wave, seconds: float) -> WaveRun:
    largest = max((len(g.nodes) for g in wave.groups), default=0)
    return WaveRun(
        index=wave.index,
        stage=wave.stage,
        groups=len(wave.groups),
        largest=largest,
        seconds=seconds,
    )
