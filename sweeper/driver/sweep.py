"""The driver of `sweeper run`: the sweep as a source of waves that the run (`run.execute`)
executes: spec -> cluster -> schedule -> executor -> rows -> Parquet. Each actor set of the
schedule gets its actors and the executor runs its waves; every point's rows (`measurement`)
go to the run's journal and the observer (the terminal) as soon as it is measured.
`survey` is `sweeper topo`'s view of the same plan, before any actor starts."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sweeper.driver import busy, cluster, measurement
from sweeper.driver.executor import Executor
from sweeper.driver.measurement import RunColumns
from sweeper.driver.observer import Finished, Observer, Started
from sweeper.driver.outcome import PointResult, skipped
from sweeper.driver.run import (
    Resume,
    RunState,
    choose_backend,
    connected_to,
    execute,
    where_stopped,
)
from sweeper.errors import BadInput, InfrastructureError
from sweeper.fabric import preflight
from sweeper.ops.registry import configure_moe, load_plugins, resolve
from sweeper.planning import request
from sweeper.planning.costs import crowded
from sweeper.planning.estimate import estimate, model_for
from sweeper.planning.placement import Group, Placement, alone, expected_placement, variants
from sweeper.planning.schedule import ActorSet, Schedule, nothing_to_measure, schedule
from sweeper.planning.spec import ClusterSection, OutputSection, SweepSpec
from sweeper.rank.engines import ENGINES
from sweeper.rank.preflight import no_nccl_allocator
from sweeper.report import directory, require
from sweeper.results.files import require_directory
from sweeper.topology import Node, nvml_driver_version
from sweeper.wire import DEFAULT_VARIANT, Backend, Engine

COPY_SIZE = 256 * 2**20  # the copy-engine matrix's bandwidth size (and the smallest, latency)


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


def _layout(asked: ClusterSection, backend: Backend) -> tuple[list[cluster.NodeSlot], list[Node]]:
    """The chosen nodes and their topology: the part of a sweep before any actor."""
    slots = cluster.choose_nodes(backend, asked.nodes, asked.ranks_per_node)
    return slots, cluster.discover(slots)


def survey(asked: SweepSpec) -> Survey:
    connection = connected_to(asked)
    try:
        backend = choose_backend(asked.requested_backend, connection.gpus())
        slots, nodes = _layout(asked, backend)
    finally:
        connection.close()
    placement = expected_placement(backend, nodes, [slot.ranks for slot in slots])
    groups = request.planned(asked, backend).tier_groups(placement)
    return Survey(backend, tuple(nodes), placement, tuple(groups))


def resumable(output: Path, run_id: str) -> tuple[dict[str, Any], Resume]:
    """The options a sweep was started with and where it stopped (`stopped`'s refusals)."""
    started, resume = where_stopped(output, run_id)
    return started.options, resume


class Sweep:
    """A sweep on its run: the schedule's waves, an actor set per NCCL environment."""

    def __init__(self, run: RunState) -> None:
        self.run = run
        self.plan = plan = run.plan
        self.placement: Placement | None = None  # the running actor set's, and its columns
        self.meta: RunColumns | None = None
        self.collectives = resolve(plan.spec.ops)
        self.slots, run.nodes = _layout(plan.spec, plan.backend)
        self.nodes = run.nodes
        if plan.timing.register:
            _check_allocators(self.nodes, cluster.nccl_allocators(self.slots))
        forced = plan.spec.force_network
        if plan.backend is Backend.NCCL and (len(self.slots) > 1 or forced):
            hosts = [slot.host for slot in self.slots]
            offers = cluster.offers(self.slots, self._env(DEFAULT_VARIANT))
            for line in preflight.lines(hosts, offers, forced):
                print(f"sweeper: {line}", file=sys.stderr)  # before the first point

    def slowdown(self) -> float:
        """A gloo run's on this machine's CPUs, by the threads others kept runnable from its
        connecting until its Ray started; 1 where its ranks run elsewhere (a cluster joined)."""
        watch = self.run.others
        if self.plan.backend is not Backend.GLOO or not self.run.connection.embedded or not watch:
            return 1.0
        return crowded(watch.stop(), busy.nice(), busy.cpus())

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
        # `sweeper plan`'s model, stretched where others keep a gloo run's CPUs busy
        model = model_for(plan.backend, plan.timing, len(placement.members), self.slowdown())
        expected = estimate(planned, model, ceiling, self.collectives)
        self.run.observer.started(
            Started(
                run_id=self.run.run_id,
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
        self.run.begin()
        for actors in planned.actor_sets:
            if planned.measures_nothing(actors) and self.meta is not None:
                self.skip_actor_set(planned, actors)
                continue
            try:
                self.run_actor_set(actors.variant)
            except cluster.StartFailed as exc:
                if self.meta is None:  # the first actor set: nothing of the run started
                    raise InfrastructureError(f"the ranks did not start: {exc}") from exc
                failure = f"the actor set of variant {actors.variant} did not start: {exc}"
                self.skip_actor_set(planned, actors, failure)

    def skip_actor_set(
        self, planned: Schedule, actors: ActorSet, failure: str | None = None
    ) -> None:
        """An actor set that measures nothing: every series skipped, and no actor started; or
        its actors did not start (`failure`), every point an error row saying so. Their
        nccl_env is what its actors would have been (or were) given."""
        assert self.meta is not None
        env = sorted((k, v) for k, v in self._env(actors.variant).items() if k.startswith("NCCL_"))
        meta = replace(self.meta, nccl_env=tuple(env))
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
                        self.run.keep(measurement.of_point(meta, planned.placement, done))

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
            self.meta = replace(self.run.metadata(ranks), nccl_env=infos[0].nccl_env)
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
                recorded=self.run.resume.recorded if self.run.resume else None,
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
        self.run.keep(measurement.of_point(self.meta, self.placement, done))

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
                    self.run.keep([made])

    def _env(self, variant: str) -> dict[str, str]:
        plan = self.plan
        extra = dict(variants(plan.spec.nccl_variables())[variant])
        if plan.backend is Backend.NCCL and plan.spec.gpu_visibility == "node":
            extra["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
        return cluster.actor_env(extra)


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
    made, _, elapsed = execute(spec, observer, Sweep, run_kind=run_kind, resume=resume)
    # a nightly's pages, one a night, share one plotly.js in their directory
    page = _report(spec, made.run_id, run_kind == "nightly") if spec.report and made.rows else None
    made.reported = page is not None
    finished = Finished(made.run_id, tuple(made.rows), elapsed, output, page)
    observer.finished(finished)
    return finished


def _report(outputs: OutputSection, run_id: str, shared_js: bool) -> Path:
    from sweeper.report import build  # the report's extra (jinja2, plotly): --report only

    page = build.default_output(outputs.results, run_id, outputs.reports_dir)
    return build.write(outputs.results, run_id, page, js_dir=page.parent if shared_js else None)
