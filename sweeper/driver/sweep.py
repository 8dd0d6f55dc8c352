"""A run on the driver, and the driver of `sweeper run`: `RunState` is what a run is whatever
gives its waves (the sweep's schedule here, the scan's policy in `scan`), `execute` runs one
from connecting to its end; the sweep is spec -> cluster -> schedule -> executor -> rows ->
Parquet.

Each actor set of the schedule gets its actors; the executor runs its waves. Run metadata
is gathered once here; every point's measurements (`measurement`) are streamed to the store
and the observer (the terminal) as rows as soon as the point is measured.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import ray
from ray._private import ray_constants

from sweeper._version import __version__
from sweeper.driver import cluster, measurement, stops
from sweeper.driver.connection import Connection, HeadLost, connect
from sweeper.driver.executor import Executor
from sweeper.driver.measurement import ResultRow, RunColumns
from sweeper.driver.observer import Finished, Observer, Started
from sweeper.driver.outcome import PointResult, skipped
from sweeper.driver.replay import PointKey, Recorded
from sweeper.driver.stops import Stopped
from sweeper.errors import BadInput, InfrastructureError
from sweeper.fabric import preflight
from sweeper.ops.registry import configure_moe, load_plugins, names, resolve
from sweeper.planning import request
from sweeper.planning.estimate import estimate, model_for
from sweeper.planning.placement import Group, Placement, alone, expected_placement, variants
from sweeper.planning.schedule import ActorSet, Schedule, nothing_to_measure, schedule
from sweeper.planning.spec import ClusterSection, OutputSection, SweepSpec
from sweeper.rank.engines import ENGINES
from sweeper.rank.preflight import no_nccl_allocator
from sweeper.report import directory, require
from sweeper.results import records
from sweeper.results.files import NEW_RUN_ID, require_directory
from sweeper.results.journal import recover, refuse_live
from sweeper.results.load import files, load
from sweeper.results.schema import RUN_POINT
from sweeper.results.writer import ResultWriter
from sweeper.topology import Node, nvml_driver_version
from sweeper.wire import DEFAULT_VARIANT, Backend, Engine, Status

COPY_SIZE = 256 * 2**20  # the copy-engine matrix's bandwidth size (and the smallest, latency)
SCAN_KEY = "scan"  # a scan's record keeps its settings under this key of its options


def new_run_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def choose_backend(asked: Backend | None, gpus: int) -> Backend:
    if asked is None:
        return Backend.NCCL if gpus else Backend.GLOO
    if asked is Backend.NCCL and not gpus:
        raise InfrastructureError("--backend nccl: the Ray cluster has no GPUs")
    return asked


def _gloo_here(options: ClusterSection) -> bool:
    """Whether the run's ranks will be gloo's, known before Ray starts: gloo asked for, or an
    embedded Ray on a machine with no NVIDIA driver (no GPU for Ray to find)."""
    if options.requested_backend is not None:
        return options.requested_backend is Backend.GLOO
    embedded = not (options.address or os.environ.get("RAY_ADDRESS"))
    return embedded and nvml_driver_version() is None


def _check_allocators(
    nodes: Sequence[Node], allocators: Sequence[Mapping[str, bool] | None]
) -> None:
    """BadInput, before anything is written, where a chosen node has a GPU that torch cannot
    allocate from NCCL on (`allocators`: per node, by GPU UUID): every point with
    --register-buffers would fail there. A node that cannot tell is left to its ranks."""
    for node, allocator in zip(nodes, allocators, strict=True):
        names = {gpu.uuid: gpu.name for gpu in node.gpus}
        for uuid, can in (allocator or {}).items():
            if not can:
                raise BadInput(f"{no_nccl_allocator(names.get(uuid, uuid))} ({node.host})")


@dataclass(frozen=True)
class Survey:
    """What `sweeper topo` shows: the chosen nodes and the groups each tier would run."""

    backend: Backend
    nodes: tuple[Node, ...]
    placement: Placement
    groups: tuple[Group, ...]


def _connect(asked: ClusterSection) -> Connection:
    return connect(asked.address, asked.cpu_ranks, asked.connect_timeout)


@contextmanager
def _connected(asked: ClusterSection) -> Iterator[Connection]:
    """A connection that a signal cannot leave half made: a first one while Ray starts stops
    the run once it has, and the embedded Ray is shut down whatever stopped the run.

    Ray's crash handlers stay off in the driver: ray.shutdown takes them out with SIGTERM's,
    which leaves SIGTERM to kill the driver mid-cleanup. And ray.init gives SIGTERM a handler
    of its own while it runs, which exits (SystemExit); that is the stop it was meant to be."""
    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    connection: Connection | None = None
    try:
        with stops.held():
            connection = _connect(asked)
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        ray.shutdown()
        stops.end_descendants()  # what ray.init had started and not yet recorded
        raise stops.taken(signal.SIGTERM) from None
    except Stopped:
        if connection is not None:
            connection.close()
        raise
    try:
        yield connection
    finally:
        connection.close()


def _layout(asked: ClusterSection, backend: Backend) -> tuple[list[cluster.NodeSlot], list[Node]]:
    """The chosen nodes and their topology: the part of a sweep before any actor."""
    slots = cluster.choose_nodes(backend, asked.nodes, asked.ranks_per_node)
    return slots, cluster.discover(slots)


def survey(asked: SweepSpec) -> Survey:
    connection = _connect(asked)
    try:
        backend = choose_backend(asked.requested_backend, connection.gpus())
        slots, nodes = _layout(asked, backend)
    finally:
        connection.close()
    placement = expected_placement(backend, nodes, [slot.ranks for slot in slots])
    groups = request.planned(asked, backend).tier_groups(placement)
    return Survey(backend, tuple(nodes), placement, tuple(groups))


RowKey = tuple[Any, ...]


def _row_key(row: ResultRow | Mapping[str, Any]) -> RowKey:
    """What makes a row one measurement of its run (each engine and launch mode of a point,
    each direction of a copy, each GPU of copies made at once): of a row made now, or of one
    read back."""
    value = row.get if isinstance(row, Mapping) else partial(getattr, row)
    rank = value("rank")  # a row per GPU of copies made at once; read back, a null is NA
    mine = None if rank is None or pd.isna(rank) else int(rank)
    return (*(value(f) for f in RUN_POINT if f != "rank"), mine)


@dataclass(frozen=True)
class Resume:
    """An interrupted or killed run, to go on with: its id and start, the points it has rows
    for (replayed by their series, not measured again), and those rows' keys."""

    run_id: str
    started_at: datetime
    recorded: Mapping[PointKey, Recorded]
    rows: frozenset[RowKey]
    run_kind: str  # the run's own (a nightly run resumed stays one)
    command: str  # the command line that started it


def stopped(output: Path, run_id: str, command: str = "run") -> records.RunRecord:
    """The record of a run to go on with (`sweeper COMMAND --resume`), its journal's rows
    recovered; BadInput where there is no such run under `output`, it is complete, another
    command's (a scan, a sweep), or a live driver is writing it."""
    if not NEW_RUN_ID.fullmatch(run_id):
        raise BadInput(f"--resume {run_id!r}: not a run id (such as 20261122T013412Z-33627a)")
    started = records.load(output, run_id)
    if started is None:
        raise BadInput(f"--resume {run_id}: no such run in {output}")
    if started.ended == "complete":
        raise BadInput(f"--resume {run_id}: the run is complete")
    own = "scan" if SCAN_KEY in started.options else "run"
    if own != command:
        what = "a scan" if own == "scan" else "a sweep"
        raise BadInput(f"--resume {run_id}: {what}; resume it with sweeper {own} --resume")
    refuse_live(output, run_id)
    recover(output, run_id)  # the rows a killed driver left in its journal
    return started


def recorded(rows: Iterable[Mapping[str, Any]]) -> dict[PointKey, Recorded]:
    """Each point these rows (read back) measured, as a resumed series replays it."""
    name_of = names()
    out: dict[PointKey, Recorded] = {}
    for row in rows:
        count = int(row["count_elems"])
        limit, busbw = row["max_size_bytes"], row["busbw_gb_per_s"]
        out[(row["group_id"], name_of[(row["op"], row["algorithm"])], row["dtype"], count)] = (
            Recorded(
                # an oom row is taken for a refused allocation: one at run time ends a probe
                # the same way, bar a bisection by allocation alone
                Status(row["status"]),
                row["status"] != Status.OOM,
                None if pd.isna(limit) else int(limit),
                None if pd.isna(busbw) else float(busbw),
            )
        )
    return out


def resumable(output: Path, run_id: str) -> tuple[dict[str, Any], Resume]:
    """The options a sweep was started with and where it stopped (`stopped`'s refusals)."""
    started = stopped(output, run_id)
    frame = load(output, run_id) if files(output) else None
    rows: list[dict[str, Any]] = [] if frame is None else frame.to_dict("records")  # type: ignore[assignment]
    return started.options, resume_of(started, rows)


def resume_of(started: records.RunRecord, rows: Sequence[Mapping[str, Any]]) -> Resume:
    """Where the run of this record stopped, from its rows read back."""
    if rows:
        begun = min(row["run_started_at"] for row in rows)
        begun = begun.to_pydatetime() if isinstance(begun, pd.Timestamp) else begun
    else:  # the id is the start, to the second
        begun = datetime.strptime(started.run_id[:16], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=timezone.utc
        )
    keys = frozenset(_row_key(row) for row in rows)
    kind = str(rows[0]["run_kind"]) if rows else _kind_of(started.command)
    return Resume(started.run_id, begun, recorded(rows), keys, kind, started.command)


def _kind_of(command: str) -> str:
    """A run's kind by the command that started it, where it left no row to say."""
    words = shlex.split(command)
    return words[1] if words[1:2] in (["nightly"], ["scan"]) else "run"


class RunState:
    """One run's state on the driver, from a connected cluster to its last row: what a sweep
    and a scan share. Its id and start (a resumed run's own), the plan, the rows and their
    journal, the run record before the first row and at the end, the line a signal or a lost
    head leaves. A subclass is a source of waves (the sweep's schedule, the scan's policy):
    `measure` runs them, each point's rows handed to `keep`."""

    command = "run"  # the command that resumes it: sweeper COMMAND --resume RUN

    def __init__(
        self,
        asked: SweepSpec,
        observer: Observer,
        run_kind: str,
        connection: Connection,
        resume: Resume | None = None,
    ) -> None:
        self.observer = observer
        self.run_kind = resume.run_kind if resume else run_kind
        self.connection = connection
        self.resume = resume
        self.started_at = resume.started_at if resume else datetime.now(timezone.utc)
        self.run_id = resume.run_id if resume else new_run_id(self.started_at)
        backend = choose_backend(asked.requested_backend, connection.gpus())
        self.plan = request.resolve(asked, backend)
        self.nodes: list[Node] = []  # the run's nodes, as its record keeps them
        self.rows: list[ResultRow] = []
        self.writer: ResultWriter | None = None
        self.ended: str | None = None  # what the run record says, once it says how it ended
        self.reported = False  # its report written
        self._shared: RunColumns | None = None
        if connection.watch is not None:
            connection.watch.epitaph = self.lost

    def measure(self) -> None:
        raise NotImplementedError

    def record(self, ended: str | None = None) -> records.RunRecord:
        return records.RunRecord.of(self.run_id, self.plan.options, tuple(self.nodes), ended)

    def begin(self) -> None:
        """The journal opened and the run recorded: before the first row, a killed run is
        told (and resumed) by a record with no end."""
        output = self.plan.spec.results
        self.writer = ResultWriter(output, self.run_id, self.started_at.strftime("%Y-%m-%d"))
        records.save(output, self.record())

    def keep(self, rows: Sequence[ResultRow]) -> None:
        """One point's rows: on disk (journaled, one fsync) before anyone is told of them."""
        assert self.writer is not None
        self.writer.extend(rows)
        self.rows.extend(rows)
        for row in rows:
            self.observer.point(row)

    def lost(self, address: str) -> str:
        """The line of a run whose head was lost: what was kept, and how to go on."""
        if self.writer is None:
            return f"lost the Ray head at {address} before a run started; nothing was written"
        resume = stops.resume_command(self.run_id, self.plan.spec.results, self.command)
        return (
            f"lost the Ray head at {address} mid-run: {len(self.rows)} rows written, "
            f"resume with: {resume}"
        )

    def told(self, stop: Stopped) -> None:
        """A signal's Stopped learns what it stopped, for its line: nothing written yet, a run
        to resume, or a complete run (whose report, if it was asked for, is not written)."""
        if self.writer is None:
            return
        outputs = self.plan.spec
        stop.run_id, stop.output, stop.command = self.run_id, outputs.results, self.command
        stop.complete = self.ended == "complete"
        stop.unreported = stop.complete and outputs.report and bool(self.rows) and not self.reported

    def metadata(self, ranks: cluster.RankSet) -> RunColumns:
        """The columns every row of this run shares, gathered once."""
        if self._shared is None:
            self._shared = run_columns(
                self.run_id,
                self.started_at,
                self.run_kind,
                self.plan.spec.cluster_name or self.connection.head_host(),
                self.plan.backend,
                ranks,
            )
        return self._shared


class _Sweep(RunState):
    """A sweep: the schedule's waves, an actor set per NCCL environment."""

    def __init__(
        self,
        asked: SweepSpec,
        observer: Observer,
        run_kind: str,
        connection: Connection,
        resume: Resume | None = None,
    ) -> None:
        super().__init__(asked, observer, run_kind, connection, resume)
        self.placement: Placement | None = None  # the running actor set's, and its columns
        self.meta: RunColumns | None = None
        self.collectives = resolve(self.plan.spec.ops)
        self.slots, self.nodes = _layout(self.plan.spec, self.plan.backend)
        if self.plan.timing.register:
            _check_allocators(self.nodes, cluster.nccl_allocators(self.slots))
        forced = self.plan.spec.force_network
        if self.plan.backend is Backend.NCCL and (len(self.slots) > 1 or forced):
            hosts = [slot.host for slot in self.slots]
            offers = cluster.offers(self.slots, self._env(DEFAULT_VARIANT))
            for line in preflight.lines(hosts, offers, forced):
                print(f"sweeper: {line}", file=sys.stderr)  # before the first point

    def plan_for(self, placement: Placement) -> Schedule:
        return schedule(placement, self.plan.request(self.collectives))

    def measure(self) -> None:
        plan, asked = self.plan, self.plan.spec
        slots = [slot.ranks for slot in self.slots]
        placement = expected_placement(plan.backend, self.nodes, slots)
        planned = self.plan_for(placement)
        empty = nothing_to_measure(planned, asked.tiers)
        if empty is not None:  # before anything is written: no run record, no report
            raise InfrastructureError(empty)
        ceiling = plan.ceiling_bytes(self.nodes)
        model = model_for(plan.backend, plan.timing)  # `sweeper plan`'s, for the same plan
        expected = estimate(planned, model, ceiling, self.collectives)
        self.observer.started(
            Started(
                run_id=self.run_id,
                backend=plan.backend,
                groups=tuple(g for wave in planned.waves for g in wave.groups),
                ops=tuple(c.name for c in self.collectives),
                dtypes=asked.dtypes,
                sizes=(asked.min_size, None if asked.largest is None else max(plan.sizes)),
                n_points=expected.points,
                estimated_s=expected.waves_s,
                output=asked.results,
                note=alone(placement),
            )
        )
        self.begin()
        for actors in planned.actor_sets:
            if planned.measures_nothing(actors) and self._shared is not None:
                self.skip_actor_set(planned, actors)
                continue
            try:
                self.run_actor_set(actors.variant)
            except cluster.StartFailed as exc:
                if self._shared is None:  # the first actor set: nothing of the run started
                    raise InfrastructureError(f"the ranks did not start: {exc}") from exc
                failure = f"the actor set of variant {actors.variant} did not start: {exc}"
                self.skip_actor_set(planned, actors, failure)

    def skip_actor_set(
        self, planned: Schedule, actors: ActorSet, failure: str | None = None
    ) -> None:
        """An actor set that measures nothing: every series skipped, and no actor started; or
        its actors did not start (`failure`), every point an error row saying so. Their
        nccl_env is what its actors would have been (or were) given."""
        assert self._shared is not None
        env = sorted((k, v) for k, v in self._env(actors.variant).items() if k.startswith("NCCL_"))
        meta = replace(self._shared, nccl_env=tuple(env))
        by_name = {c.name: c for c in self.collectives}
        for wave in actors.waves:
            for group in wave.groups:
                group_id = planned.placement.group_id(group)
                for series in planned.series(group):
                    for done in skipped(
                        group,
                        group_id,
                        series,
                        by_name[series.op],
                        wave.number,
                        self.plan.timing,
                        failure,
                    ):
                        self._keep(measurement.of_point(meta, planned.placement, done))

    def run_actor_set(self, variant: str) -> None:
        """One variant's waves, on an actor set of its own environment, planned again from
        where its ranks really landed."""
        plan = self.plan
        ranks = cluster.RankSet(
            backend=plan.backend,
            slots=self.slots,
            bundle=cluster.bundle(plan.backend),
            env=self._env(variant),
            group_timeout_s=2 * plan.spec.timeout,
            plugins=plan.spec.plugins,
            mem_limit=plan.mem_limit,
            moe=plan.spec.moe.layer(),
            engines=plan.timing.engines,
        )
        try:
            infos = ranks.start()
            self.placement = cluster.placement(plan.backend, self.nodes, infos)
            self.meta = replace(self.metadata(ranks), nccl_env=infos[0].nccl_env)
            planned = self.plan_for(self.placement)
            mine = next(a for a in planned.actor_sets if a.variant == variant)
            executor = Executor(
                ranks=ranks,
                placement=self.placement,
                series_of=planned.series,
                collectives={c.name: c for c in self.collectives},
                timing=plan.timing,
                timeout_s=plan.spec.timeout,
                max_size_bytes=plan.spec.largest,
                emit=self.measured,
                recorded=self.resume.recorded if self.resume else None,
            )
            executor.run(mine.waves)
            if plan.spec.copy_engine and variant == DEFAULT_VARIANT:
                self.run_copies(ranks)
        finally:
            ranks.close()

    def measured(self, done: PointResult) -> None:
        """A point of the running actor set: its rows, with the set's columns and placement."""
        assert self.meta is not None
        assert self.placement is not None
        self._keep(measurement.of_point(self.meta, self.placement, done))

    def run_copies(self, ranks: cluster.RankSet) -> None:
        """--copy-engine: on each node, the actor of its first GPU times peer copies among all
        the node's GPUs (it sees them all, with --gpu-visibility node)."""
        plan, placement, meta = self.plan, self.placement, self.meta
        assert placement is not None
        assert meta is not None
        if plan.backend is not Backend.NCCL or plan.spec.gpu_visibility != "node":
            return
        top = COPY_SIZE if plan.spec.largest is None else plan.sizes[-1]
        sizes = sorted({plan.spec.min_size, min(COPY_SIZE, top)})
        rank_of = {m.gpu_uuid: m.rank for m in placement.members}
        for node, placed in enumerate(placement.by_node):
            if len(placed) < 2:
                continue
            copies = ranks.copy_matrix(
                placed[0].rank,
                sizes,
                plan.timing.iters or 20,
                plan.timing.warmup or 3,
                plan.spec.timeout,
            )
            for copied in copies:
                for dst, seconds in zip(copied.dsts, copied.seconds, strict=True):
                    made = measurement.of_copy(meta, placement, node, copied, dst, seconds, rank_of)
                    self._keep([made])

    def _keep(self, rows: list[ResultRow]) -> None:
        """One point's rows: on disk (journaled, one fsync) before anyone is told of them.
        Resuming, rows the run already has are not written again (a skipped series' rows,
        a copy measured again)."""
        assert self.writer is not None
        if self.resume is not None:
            rows = [row for row in rows if _row_key(row) not in self.resume.rows]
        self.writer.extend(rows)
        self.rows.extend(rows)
        for row in rows:
            self.observer.point(row)

    def _env(self, variant: str) -> dict[str, str]:
        plan = self.plan
        extra = dict(variants(plan.spec.nccl_variables())[variant])
        if plan.backend is Backend.NCCL and plan.spec.gpu_visibility == "node":
            extra["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
        return cluster.actor_env(extra)


def run_columns(
    run_id: str,
    started_at: datetime,
    run_kind: str,
    cluster_name: str,
    backend: Backend,
    ranks: cluster.RankSet,
) -> RunColumns:
    """The columns every row of a run shares: what it is, where, and the software its ranks
    run (asked of one of them)."""
    versions = ranks.versions()
    return RunColumns(
        run_id=run_id,
        run_started_at=started_at,
        run_kind=run_kind,
        cluster_name=cluster_name,
        sweeper_version=__version__,
        ray_version=ray.__version__,
        torch_version=versions.torch,
        nccl_version=versions.nccl,
        cuda_version=versions.cuda,
        driver_version=versions.driver,
        gpu_model=versions.gpu_model,
        backend=backend,
    )


def run(
    spec: SweepSpec, observer: Observer, run_kind: str = "run", resume: Resume | None = None
) -> Finished:
    """Run a sweep: rows go to the results dataset as they come, and to the observer. With
    `resume`, the rest of an interrupted run, under its id."""
    load_plugins(spec.plugins)
    configure_moe(spec.moe.layer())
    resolve(spec.ops)  # unknown operations are bad input before anything starts
    for engine in map(Engine, spec.engine):
        if (missing := ENGINES[engine].missing()) is not None:
            raise BadInput(f"--engine {engine} needs {missing}")
    if _gloo_here(spec):  # what gloo cannot run is refused before Ray starts
        request.resolve(spec, Backend.GLOO)
    output = spec.results
    require_directory(output, f"--results {output}")
    if spec.report:
        require()
        reports = directory(output, spec.reports_dir)
        require_directory(reports, f"--reports-dir {reports}")
    made, elapsed = execute(spec, lambda c: _Sweep(spec, observer, run_kind, c, resume))
    page = _report(spec, made.run_id) if spec.report and made.rows else None
    made.reported = page is not None
    finished = Finished(made.run_id, tuple(made.rows), elapsed, output, page)
    observer.finished(finished)
    return finished


R = TypeVar("R", bound=RunState)


def execute(asked: ClusterSection, make: Callable[[Connection], R]) -> tuple[R, float]:
    """A run from connecting (to the cluster `asked`) to its record's end, whatever its
    source of waves: `make` gives the run on the connection, and its `measure` runs them.
    Whatever stops it (an error, a signal, a lost head), what was measured is kept and the
    record says how it ended; a signal's Stopped names the run and how to go on; a lost head
    is one line and exit 3.
    The run, and the seconds from connecting to its end."""
    clock = time.monotonic()
    made: R | None = None
    try:
        with _connected(asked) as connection:
            made = make(connection)
            stops.tell(made.told)  # what a signal stops, from now until the process ends
            try:
                made.measure()
            except BaseException:
                _end(made, "interrupted")
                raise
            _end(made, "complete")
    except Stopped as stop:
        if made is not None:  # one raised as such, not a signal's, learns its run here
            made.told(stop)
        raise
    except HeadLost as lost:
        if made is None:
            raise
        raise InfrastructureError(made.lost(lost.address)) from None
    return made, time.monotonic() - clock


def _end(made: RunState, ended: str) -> None:
    """What was measured is kept, and the run record says how the run ended, whatever stopped
    it. A first signal meanwhile is raised after it: the record then tells the truth."""
    if made.writer is None:
        return  # stopped before the first row could be written
    with stops.held():
        try:
            made.writer.flush()
        finally:
            try:
                records.save(made.plan.spec.results, made.record(ended))
                made.ended = ended
            finally:
                made.writer.close()


def _report(outputs: OutputSection, run_id: str) -> Path:
    from sweeper.report import build  # the report's extra (jinja2, plotly): --report only

    return build.write(
        outputs.results, run_id, build.default_output(outputs.results, run_id, outputs.reports_dir)
    )
