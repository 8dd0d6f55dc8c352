"""The driver of `sweeper run`: spec -> cluster -> plan -> points -> rows -> Parquet.

Run metadata is gathered once here; every row is assembled here from the ranks'
measurements (max over ranks, nccl-tests' bandwidths) and streamed to the store and the
observer (the terminal) as soon as its point is done.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import ray

import sweeper
from sweeper import cluster
from sweeper.collectives import REGISTRY, Collective, load_plugins, resolve
from sweeper.errors import BadInput, InfrastructureError
from sweeper.plan import Group, Point, Timing, points
from sweeper.spec import DTYPES, SweepSpec, format_size
from sweeper.store import ResultWriter
from sweeper.timing import across_ranks, algbw_gb_per_s
from sweeper.topology import RankInfo, Versions

DEFAULT_CPU_RANKS = 2
DEFAULT_MAX_SIZE = {"gloo": 16 * 2**20, "nccl": 1 * 2**30}

Row = dict[str, Any]


@dataclass(frozen=True)
class Started:
    run_id: str
    backend: str
    groups: tuple[Group, ...]
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    sizes: tuple[int, int]  # smallest and largest S of the plan
    n_points: int
    output: Path


@dataclass(frozen=True)
class Finished:
    run_id: str
    rows: tuple[Row, ...]
    elapsed_s: float
    output: Path

    @property
    def failed(self) -> int:
        return sum(row["status"] != "ok" for row in self.rows)


class Observer(Protocol):
    def started(self, run: Started) -> None: ...

    def point(self, row: Row) -> None: ...

    def finished(self, run: Finished) -> None: ...


def new_run_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def _backend(spec: SweepSpec, gpus: int) -> str:
    if spec.backend == "auto":
        return "nccl" if gpus else "gloo"
    if spec.backend == "nccl" and not gpus:
        raise InfrastructureError("--backend nccl: the Ray cluster has no GPUs")
    return spec.backend


def _check_dtypes(dtypes: Sequence[str], backend: str) -> None:
    if backend == "gloo":
        unsupported = [d for d in dtypes if not DTYPES[d].gloo]
        if unsupported:
            raise BadInput(f"--dtypes: gloo cannot reduce or move {unsupported[0]}")


def _world(spec: SweepSpec, backend: str, gpus: int) -> tuple[int, dict[str, float]]:
    if backend == "gloo":
        return spec.world or DEFAULT_CPU_RANKS, {"CPU": 1.0}
    world = spec.world or gpus
    if world > gpus:
        raise InfrastructureError(f"--world {world}: the Ray cluster has only {gpus} GPUs")
    return world, {"CPU": 1.0, "GPU": 1.0}


def _world_group(backend: str, infos: Sequence[RankInfo]) -> Group:
    hosts = tuple(info.host for info in infos)
    uuids = tuple(info.gpu_uuid for info in infos if info.gpu_uuid)
    tier = "cpu" if backend == "gloo" else "internode" if len(set(hosts)) > 1 else "intranode"
    return Group("world", tier, tuple(info.rank for info in infos), hosts, uuids)


def run(spec: SweepSpec, observer: Observer, run_kind: str = "run") -> Finished:
    load_plugins(spec.plugins)
    collectives = resolve(spec.ops)
    if spec.max_size == "auto":
        raise BadInput("--max-size auto is not available yet; give a size such as 1G")
    started_at = datetime.now(timezone.utc)
    clock = time.monotonic()
    run_id = new_run_id(started_at)
    connection = cluster.connect(spec.address, spec.world or DEFAULT_CPU_RANKS)
    ranks: cluster.RankSet | None = None
    try:
        gpus = connection.gpus()
        backend = _backend(spec, gpus)
        _check_dtypes(spec.dtypes, backend)
        max_size = spec.max_size if isinstance(spec.max_size, int) else DEFAULT_MAX_SIZE[backend]
        sizes = spec.sizes(max_size)
        world, bundle = _world(spec, backend, gpus)
        ranks = cluster.RankSet(
            backend,
            [bundle] * world,
            env=cluster.actor_env(),
            group_timeout_s=2 * spec.timeout,
            plugins=spec.plugins,
        )
        infos = ranks.start()
        meta = _metadata(
            spec, run_id, started_at, run_kind, backend, ranks.versions(), infos, connection
        )
        group = _world_group(backend, infos)
        ranks.open_group(group.group_id, group.ranks)
        timing = Timing(spec.iters, spec.warmup, spec.check, spec.samples, spec.seed)
        plan = points(group, collectives, spec.dtypes, sizes, timing)
        observer.started(
            Started(
                run_id,
                backend,
                (group,),
                tuple(c.name for c in collectives),
                spec.dtypes,
                (plan[0].size_bytes, plan[-1].size_bytes) if plan else (0, 0),
                len(plan),
                spec.output,
            )
        )
        writer = ResultWriter(spec.output, run_id, started_at.strftime("%Y-%m-%d"))
        rows = []
        for point in plan:
            outcome = ranks.run_point(point, spec.timeout)
            row = make_row(meta, group, point, REGISTRY[point.op], outcome, max_size)
            writer.append(row)
            rows.append(row)
            observer.point(row)
        writer.flush()
    finally:
        if ranks is not None:
            ranks.close()
        connection.close()
    finished = Finished(run_id, tuple(rows), time.monotonic() - clock, spec.output)
    observer.finished(finished)
    return finished


def _metadata(
    spec: SweepSpec,
    run_id: str,
    started_at: datetime,
    run_kind: str,
    backend: str,
    versions: Versions,
    infos: Sequence[RankInfo],
    connection: cluster.Connection,
) -> Row:
    """The columns every row of this run shares."""
    return {
        "run_id": run_id,
        "run_started_at": started_at,
        "run_kind": run_kind,
        "cluster_name": spec.cluster_name or connection.head_host(),
        "sweeper_version": sweeper.__version__,
        "ray_version": ray.__version__,
        "torch_version": versions.torch,
        "nccl_version": versions.nccl,
        "cuda_version": versions.cuda,
        "driver_version": versions.driver,
        "gpu_model": versions.gpu_model,
        "nccl_env": list(infos[0].nccl_env),
        "backend": backend,
    }


def make_row(
    meta: Mapping[str, Any],
    group: Group,
    point: Point,
    collective: Collective,
    outcome: cluster.Outcome,
    max_size_bytes: int | None,
) -> Row:
    n = group.world_size
    row: Row = {
        **meta,
        "tier": group.tier,
        "variant": group.variant,
        "group_id": group.group_id,
        "world_size": n,
        "n_nodes": group.n_nodes,
        "hosts": list(group.hosts),
        "gpu_uuids": list(group.gpu_uuids),
        "op": collective.op,
        "algorithm": collective.algorithm,
        "dtype": point.dtype,
        "in_place": collective.in_place,
        "size_bytes": point.size_bytes,
        "count_elems": point.count,
        "busbw_factor": collective.busbw_factor(n),
        "status": outcome.status,
        "error": outcome.error,
        "max_size_bytes": max_size_bytes,
        "measured_at": datetime.now(timezone.utc),
    }
    if outcome.status != "ok":
        return row
    slowest, fastest, samples = across_ranks([m.block for m in outcome.measured])
    checked = [m.n_wrong for m in outcome.measured if m.n_wrong is not None]
    n_wrong = sum(checked) if checked else None
    algbw = algbw_gb_per_s(point.size_bytes, slowest)
    row.update(
        warmup_iters=max(m.warmup_iters for m in outcome.measured),
        iters=outcome.measured[0].block.iters,
        time_us=slowest * 1e6,
        time_us_min=fastest * 1e6,
        algbw_gb_per_s=algbw,
        busbw_gb_per_s=algbw * row["busbw_factor"],
        n_wrong=n_wrong,
    )
    if samples:
        micros = np.asarray(samples) * 1e6
        row.update(
            time_us_p50=float(np.percentile(micros, 50)),
            time_us_p99=float(np.percentile(micros, 99)),
            samples_us=micros.astype(np.float32).tolist(),
        )
    if n_wrong:
        row.update(
            status="error", error=f"{n_wrong} elements wrong ({format_size(point.size_bytes)})"
        )
    return row
