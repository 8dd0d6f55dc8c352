"""The driver of `sweeper scan`: the scan's pure policy (`scan.policy`) as a source of waves
that the run (`run.execute`) executes, each wave planned by `scan.plan` and run on one actor
set over the fleet (`scan_ranks`), every group at once. The rows go to the results, each
with its stage; a group's rows fold into its outcome for the policy and, at the end, the
judge. A node that leaves is `missing` in every group it would have joined, and the others'
ranks join a smaller world. Each finished wave's outcomes are kept (`results.scan_waves`):
a stopped scan goes on (`resumable`) with its record's nodes and settings, the policy fed
again from the start, its finished waves replayed and the first unfinished one run whole."""

from __future__ import annotations

import shlex
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from sweeper.driver import cluster, measurement
from sweeper.driver.executor import Executor
from sweeper.driver.measurement import ResultRow
from sweeper.driver.observer import Finished, Started
from sweeper.driver.outcome import PointResult
from sweeper.driver.run import SCAN_KEY, Resume, RunState, execute, where_stopped
from sweeper.driver.scan_ranks import fleet_of, layout, lose, rehomed, started
from sweeper.errors import BadInput, InfrastructureError
from sweeper.ops.registry import REGISTRY, load_plugins
from sweeper.planning.placement import Group, Placement
from sweeper.planning.schedule import Series
from sweeper.planning.spec import SweepSpec
from sweeper.results import scan_waves, scans
from sweeper.results.files import require_directory
from sweeper.results.writer import columns
from sweeper.scan import fleet as scan
from sweeper.scan.deadline import STALL_FLOOR_S
from sweeper.scan.document import Scanned
from sweeper.scan.judge import verdicts_and_findings
from sweeper.scan.plan import ScanPlan, WavePlan, judged_sizes, missing
from sweeper.scan.policy import ScanPolicy
from sweeper.scan.retest import summary
from sweeper.scan.rows import DEVICE_COPY, HOST_COPIES, Row
from sweeper.scan.settings import ScanSettings
from sweeper.scan.simulate import WaveRun
from sweeper.scan.waves import plain, replayed, timed
from sweeper.topology import Node
from sweeper.wire import Backend, Point

# Pinned in the actor set: a ring's busbw is what crossed the NICs (tree and NVLS can exceed
# the NIC rate), so internode figures compare with the NIC's.
RING = {"NCCL_ALGO": "Ring"}
# A rank's communicator gives up on a collective at this share of the shortest point deadline
# (a stall deadline's floor, or --timeout where it is shorter), so a rank blocked beside one
# that hung answers (with the communicator's timeout) before the deadline, and the point
# names the ranks that did not answer: those of the node that hung.
COMM_SHARE = 0.5
LEFT = "it left the cluster during the scan"


class ScanObserver(Protocol):
    def wave(self, wave: scan.ScanWave) -> None:
        """A wave is about to run."""


@dataclass(frozen=True)
class Resumed:
    """A stopped scan to go on with: where its run stopped, its nodes as its record keeps
    them (in the scan's order), and its finished waves (`scan.waves.plain`)."""

    run: Resume
    machines: tuple[Node, ...]
    waves: tuple[dict[str, Any], ...]


def resumable(output: Path, run_id: str) -> tuple[dict[str, Any], tuple[dict[str, Any], Resumed]]:
    """The sweep options a scan was started with, and its settings (`ScanSettings.plain`)
    and where it stopped; BadInput where `stopped` refuses the run, or it is a nightly scan
    (whose waves and judgement `sweeper nightly` runs again)."""
    started, resume = where_stopped(output, run_id, "scan")
    if shlex.split(started.command)[1:2] == ["nightly"]:
        raise BadInput(
            f"--resume {run_id}: a nightly scan is not resumed; run sweeper nightly again"
        )
    options = dict(started.options)
    settings = options.pop(SCAN_KEY)
    waves = tuple(scan_waves.load(output, run_id))
    return options, (settings, Resumed(resume, started.nodes, waves))


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


class Scan:
    """One scan on its run, from a connected cluster to the verdicts: the waves the scan's
    policy gives, each planned on the actor set's placement and run on its executor."""

    def __init__(
        self, run: RunState, settings: ScanSettings, resumed: Resumed | None = None
    ) -> None:
        self.run, self.settings = run, settings
        self.clock = time.monotonic()
        self.gone: dict[str, str] = {}  # node id: why it is out of the scan (unreachable)
        backend, per_node = run.plan.backend, run.plan.spec.ranks_per_node
        if resumed is not None:  # a Ray started anew gives its nodes new ids
            alive = cluster.choose_nodes(backend, None, per_node)
            homes = rehomed(resumed.machines, resumed.waves, alive)
            resumed = replace(resumed, machines=homes[0], waves=homes[1])
        machines = resumed.machines if resumed else None
        self.slots, run.nodes = layout(backend, per_node, settings.nodes, machines, self.gone)
        self.nodes = run.nodes
        own = (DEVICE_COPY, *HOST_COPIES)  # a GPU's copies at its gate (none on CPU ranks)
        self.copies = tuple(REGISTRY[op] for op in own) if backend is Backend.NCCL else ()
        self.sizes = settings.sizes or judged_sizes(backend, self.nodes)
        # each GPU's node and index by UUID, for the readings (stable: the scan's topology)
        self.gpus = {g.uuid: (n.node_id, g.index) for n in self.nodes for g in n.gpus if g.uuid}
        self.saved = list(resumed.waves) if resumed else []  # the finished waves so far
        self.ranks: cluster.RankSet | None = None
        self.sets: list[cluster.RankSet] = []  # every actor set made, for the actors started
        self.placement: Placement | None = None
        self.meta: measurement.RunColumns | None = None
        self.executor: Executor | None = None
        self.plan: ScanPlan | None = None  # on the placement
        self.wave_plan: WavePlan | None = None  # the wave the executor runs
        self.by_group: dict[Group, list[Row]] = defaultdict(list)
        self.measured: list[ResultRow] = []  # the wave's rows, journaled once it ends
        self.scanned: Scanned | None = None

    # ---- the actor set ----

    def start(self) -> None:
        """An actor set on every node still in the scan (`started`): the set so far without
        the nodes lost since, else a new one; the placement (every node of the scan in its
        place, so a group's id in the rows does not move when a node is lost) and the
        executor on it."""
        ranks, infos = started(self.slots, self.gone, self._rank_set, cluster.alive, self.ranks)
        self.ranks, plan = ranks, self.run.plan
        self.placement = cluster.placement(plan.backend, self.nodes, infos)
        self.plan = ScanPlan(
            placement=self.placement,
            registry=REGISTRY,
            sizes=self.sizes,
            copies=self.copies,
            op=self.settings.op,
        )
        shared = self.meta or self.run.metadata(ranks)
        self.meta = replace(shared, nccl_env=infos[0].nccl_env)  # rows name the pinned ring
        self.executor = Executor(
            ranks=ranks,
            placement=self.placement,
            series_of=self._series,
            collectives=REGISTRY,
            timing=replace(plan.timing, nvlink_every_s=0.0),  # its verdicts quote them
            timeout_s=plan.spec.timeout,
            max_size_bytes=self.sizes[1],
            emit=self._measured,
            # a point that times out ends its group: one deadline for a hung node, not one a
            # point; and each point is waited for its stall deadline, not --timeout
            timeout_ends_group=True,
            deadline_s=self._deadline,
        )

    def _rank_set(self, slots: Sequence[cluster.NodeSlot]) -> cluster.RankSet:
        """A new actor set on `slots`, not started."""
        backend, spec = self.run.plan.backend, self.run.plan.spec
        ranks = cluster.RankSet(
            backend=backend,
            slots=slots,
            bundle=cluster.bundle(backend),
            env=cluster.actor_env(RING if backend is Backend.NCCL else {}),
            group_timeout_s=COMM_SHARE * min(spec.timeout, STALL_FLOOR_S),
            plugins=spec.plugins,
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

    def _series(self, group: Group) -> Sequence[Series]:
        assert self.wave_plan is not None
        return self.wave_plan.series(group)

    def _deadline(self, group: Group, point: Point) -> float:
        """A point's stall deadline (`ScanPlan.deadline_s`), at most --timeout."""
        assert self.plan is not None
        assert self.wave_plan is not None
        part = self.wave_plan.part(group)
        return self.plan.deadline_s(part, point, self.run.plan.spec.timeout)

    # ---- the scan ----

    def measure(self) -> None:
        """Every wave the policy gives (those a stopped scan finished, replayed), then the
        verdicts, kept beside the run's record as its scan summary before the record says
        the run is complete."""
        run = self.run
        run.begin()
        outcomes: list[scan.GroupOutcome] = []
        waves: list[WaveRun] = []
        try:
            self.start()
            gpu_model = self.meta.gpu_model if self.meta else None
            fleet = fleet_of(self.slots, self.settings.domain_label, gpu_model)
            thresholds = self.settings.thresholds
            policy = ScanPolicy(fleet, self.settings.strategy, thresholds)
            wave = policy.next()
            while wave is not None:
                run.observer.wave(wave)
                got, seconds = self._wave(wave, len(waves))
                waves.append(timed(wave, seconds))
                outcomes += got
                wave = policy.next(got)
        finally:
            self.close()
        earlier = len(run.resume.rows) if run.resume else 0
        verdicts, found = verdicts_and_findings(fleet, outcomes, thresholds)
        self.scanned = Scanned(
            run_id=run.run_id,
            fleet=fleet,
            strategy=self.settings.strategy,
            outcomes=tuple(outcomes),
            verdicts=tuple(verdicts),
            waves=tuple(waves),
            rows=earlier + len(run.rows),
            actors_started=self.actors_started,
            seconds=time.monotonic() - self.clock,
            machines=tuple(self.nodes),
            findings=tuple(found),
        )
        kept = summary(self.scanned, run.plan.options, self.settings)
        scans.save(run.plan.spec.results, run.run_id, kept)

    def _wave(self, wave: scan.ScanWave, done: int) -> tuple[list[scan.GroupOutcome], float]:
        """The wave's outcomes and seconds: those kept when a stopped scan finished it (the
        `done`-th wave), else run now, and kept (the finished waves after it dropped)."""
        if done < len(self.saved) and (again := replayed(self.saved[done], wave)) is not None:
            return list(again.outcomes), again.seconds
        began = time.monotonic()
        got = self.run_wave(wave)
        seconds = time.monotonic() - began
        results, run_id = self.run.plan.spec.results, self.run.run_id
        if done == len(self.saved):
            self.saved.append(plain(wave, got, seconds))
            scan_waves.append(results, run_id, self.saved[-1])
        else:  # the policy gave another wave than the stopped scan's: the rest of those go
            self.saved[done:] = [plain(wave, got, seconds)]
            scan_waves.save(results, run_id, self.saved)
        return got, seconds

    # ---- a wave ----

    def run_wave(self, wave: scan.ScanWave) -> list[scan.GroupOutcome]:
        """Every group of the wave at once; each one's outcome, in the wave's order."""
        if self._lose(LEFT):
            self.start()
        done = missing(wave.groups, self.gone)
        todo = [g for g in wave.groups if g not in done]
        while todo:
            try:
                done.update(self._run(wave, todo))
                todo = []
            except InfrastructureError:  # a node left mid-wave: without it, the rest again
                if not self._lose(LEFT):
                    raise
                done.update(missing(todo, self.gone))
                todo = [g for g in todo if g not in done]
                self.start()
        return [done[g] for g in wave.groups]

    def _run(
        self, wave: scan.ScanWave, groups: Sequence[scan.ScanGroup]
    ) -> dict[scan.ScanGroup, scan.GroupOutcome]:
        assert self.executor is not None
        assert self.plan is not None
        self.wave_plan = planned = self.plan.wave(wave, groups)
        self.by_group.clear()  # a wave run again: its own rows only
        self.measured.clear()
        for together in planned.waves:
            self.executor.run_wave(together)
        # one fsync a wave, not a point (512 pairs a round at 1024 nodes): a stopped scan
        # runs the wave it was in again, so a journal per point would keep nothing it uses
        if self.measured:
            self.run.keep(self.measured)
        out = {}
        for p in planned.groups:
            rows = [row for part in p.parts for row in self.by_group[part.group]]
            out[p.scan] = self.plan.outcome(p, rows, self.gpus)
        return out

    def _measured(self, done: PointResult) -> None:
        """A point's rows, with their stage: kept for the run to journal as the wave ends, and
        folded, as measured now, into their group's outcome."""
        assert self.meta is not None
        assert self.placement is not None
        assert self.wave_plan is not None
        stage = self.wave_plan.part(done.group).stage
        rows = [
            replace(row, stage=str(stage))
            for row in measurement.of_point(self.meta, self.placement, done)
        ]
        self.measured += rows
        self.by_group[done.group].extend(columns(row) for row in rows)


def scan_fleet(
    spec: SweepSpec,
    settings: ScanSettings,
    observer: ScanObserver,
    run_kind: str = "scan",
    resumed: Resumed | None = None,
) -> Scanned:
    """A scan: every wave the policy gives, on the cluster, in one run; the rows go
    to the results (as a `run_kind` run: `nightly` for `sweeper nightly`'s), the judge's
    verdicts come back and go beside them as the scan's summary. With `resumed`, the rest
    of a stopped scan, under its id."""
    load_plugins(spec.plugins)
    if settings.op is not None and settings.op not in REGISTRY:
        raise BadInput(f"--op {settings.op}: no such operation")
    output = spec.results
    require_directory(output, f"--results {output}")

    _, ran, _ = execute(
        spec,
        _Waves(observer),
        lambda run: Scan(run, settings, resumed),
        run_kind=run_kind,
        resume=resumed.run if resumed else None,
        command="scan",
        options={SCAN_KEY: settings.plain()},
    )
    assert ran.scanned is not None
    return ran.scanned
