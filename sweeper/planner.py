"""`sweeper plan`: a spec's schedule and its estimated duration, on a recorded topology
replicated N times (no cluster) or on the nodes a live cluster would give.

Also the one place where a spec becomes a schedule request, for the executor and for
`sweeper plan` alike, so both plan the same groups, waves and series.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.errors import BadInput
from sweeper.estimate import CostModel, Estimate, estimate, fitted
from sweeper.plan import Placement, alone, expected_placement
from sweeper.schedule import Planned, Request, Schedule, nothing_to_measure, schedule
from sweeper.spec import SIZE_LIMIT_BYTES, MemLimit, SweepSpec, format_size
from sweeper.topology import Node

DEFAULT_CPU_RANKS = 2
DEFAULT_CPU_MEM_LIMIT = 64 * 2**20  # per CPU rank, unless --mem-limit: keeps `sweeper run` quick


def mem_limit(spec: SweepSpec, backend: str) -> MemLimit | None:
    """--mem-limit, or for CPU ranks the default cap."""
    if spec.mem_limit is None and backend == "gloo":
        return MemLimit(size_bytes=DEFAULT_CPU_MEM_LIMIT)
    return spec.mem_limit


def sizes(spec: SweepSpec) -> list[int]:
    """The grid; with auto, up to the largest size accepted (each series stops at its bound)."""
    return spec.sizes(SIZE_LIMIT_BYTES if spec.max_size == "auto" else int(spec.max_size))


def ceiling_bytes(spec: SweepSpec, backend: str, nodes: Sequence[Node]) -> int | None:
    """Where --max-size auto series likely end: about one rank's memory; None: not auto."""
    if spec.max_size != "auto":
        return None
    memory = [gpu.memory_total_bytes for node in nodes for gpu in node.gpus]
    ceiling = min(memory) if memory and backend == "nccl" else DEFAULT_CPU_MEM_LIMIT
    limit = mem_limit(spec, backend)
    return ceiling if limit is None else min(ceiling, limit.of(ceiling))


def request(spec: SweepSpec, backend: str, ops: Sequence[Planned]) -> Request:
    return Request(
        tiers=spec.tiers,
        pairs=spec.pairs == "all",
        force_network=spec.force_network,
        nccl_env=spec.nccl_variables(),
        ops=ops,
        dtypes=spec.dtypes,
        sizes=sizes(spec),
        auto=spec.max_size == "auto",
        sees_node_gpus=backend == "nccl" and spec.gpu_visibility == "node",
        concurrent_pairs=spec.concurrent,
    )


def recorded_nodes(path: Path, count: int) -> list[Node]:
    """A recorded topology (`sweeper topo --format json` of one node, or an NVML record as in
    tests/data/topologies) replicated `count` times, each copy a node of its own."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        node = Node.from_record(record)
    except OSError as exc:
        raise BadInput(f"--topology {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInput(f"--topology {path}: not a topology record ({exc})") from None
    return [
        dataclasses.replace(node, node_id=f"{node.node_id}-{i}", host=f"{node.host}-{i}")
        for i in range(count)
    ]


@dataclass(frozen=True)
class Plan:
    spec: SweepSpec
    placement: Placement
    schedule: Schedule
    estimate: Estimate
    planning_s: float
    fitted_from: Path | None


def plan(spec: SweepSpec, topology: Path | None, results: Path | None = None) -> Plan:
    """The spec's plan on a recorded topology, or on the nodes the cluster gives (Ray)."""
    from sweeper.collectives import configure_moe, load_plugins, resolve

    load_plugins(spec.plugins)
    configure_moe(spec.moe)
    ops = resolve(spec.ops)
    if topology is not None:
        return plan_recorded(spec, topology, ops, results)
    from sweeper.driver import sweep

    return plan_placement(spec, sweep.survey(spec).placement, ops, results)


def plan_recorded(
    spec: SweepSpec, topology: Path, ops: Sequence[Planned], results: Path | None = None
) -> Plan:
    nodes = recorded_nodes(topology, spec.nodes)
    backend = spec.backend if spec.backend != "auto" else ("nccl" if nodes[0].gpus else "gloo")
    if backend == "nccl" and not nodes[0].gpus:
        raise BadInput(f"--backend nccl: the topology {topology} has no GPUs")
    per_node = spec.ranks_per_node() or (
        len(nodes[0].gpus) if backend == "nccl" else DEFAULT_CPU_RANKS
    )
    if backend == "nccl" and per_node > len(nodes[0].gpus):
        raise BadInput(f"--gpus-per-node {per_node}: the topology has {len(nodes[0].gpus)} GPUs")
    placement = expected_placement(backend, nodes, [per_node] * len(nodes))
    return plan_placement(spec, placement, ops, results)


def plan_placement(
    spec: SweepSpec, placement: Placement, ops: Sequence[Planned], results: Path | None = None
) -> Plan:
    model = CostModel(iters=spec.iters, warmup=spec.warmup, blocks=spec.blocks)
    if results is not None:
        model = fitted(_rows(results), model)
    start = time.perf_counter()
    planned = schedule(placement, request(spec, placement.backend, ops))
    planning_s = time.perf_counter() - start
    ceiling = ceiling_bytes(spec, placement.backend, placement.nodes)
    return Plan(spec, placement, planned, estimate(planned, model, ceiling), planning_s, results)


def _rows(results: Path) -> Any:
    from sweeper import store

    try:
        rows = store.load(results)
    except FileNotFoundError as exc:
        raise BadInput(f"--results: {exc}") from None
    if rows.empty:
        raise BadInput(f"--results {results}: no rows to fit the cost model to")
    return rows


def duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def records(found: Plan) -> dict[str, Any]:
    """The plan for machines (`--format json`): totals, actor sets, and every wave's size."""
    placement = found.placement
    return {
        "backend": placement.backend,
        "nodes": len(placement.nodes),
        "ranks": len(placement.members),
        "groups": found.schedule.n_groups,
        "waves": len(found.schedule.waves),
        "points": found.estimate.points,
        "estimated_s": found.estimate.waves_s,
        "serial_s": found.estimate.serial_s,
        "planning_s": found.planning_s,
        "cost_model": "fitted" if found.fitted_from else "defaults",
        "actor_sets": [
            {
                "variant": actors.variant,
                "waves": [
                    {"wave": wave.number, "groups": len(wave.groups), **_tiers(wave.groups)}
                    for wave in actors.waves
                ],
            }
            for actors in found.schedule.actor_sets
        ],
    }


def _tiers(groups: Sequence[Any]) -> dict[str, dict[str, int]]:
    return {"tiers": dict(Counter(g.tier for g in groups))}


def print_plan(found: Plan, shown_groups: int = 4) -> None:
    placement, planned, est = found.placement, found.schedule, found.estimate
    unit = "GPUs" if placement.backend == "nccl" else "ranks"
    per_node = len(placement.members) // max(1, len(placement.nodes))
    print(
        f"plan: {len(placement.nodes)} nodes x {per_node} {unit} ({placement.backend}), "
        f"tiers {','.join(found.spec.tiers)}: {planned.n_groups} groups in "
        f"{len(planned.waves)} waves, {est.points} points (planned in {found.planning_s:.2f} s)"
    )
    note = nothing_to_measure(planned, found.spec.tiers) or alone(placement)
    if note is not None:
        print(note)
    for actors in planned.actor_sets:
        n = sum(len(w.groups) for w in actors.waves)
        print(f"  actor set {actors.variant}: {len(actors.waves)} waves, {n} groups")
        for wave in actors.waves[:shown_groups]:
            names = [placement.group_id(g) for g in wave.groups[:shown_groups]]
            more = (
                f" and {len(wave.groups) - len(names)} more"
                if len(wave.groups) > len(names)
                else ""
            )
            print(f"    wave {wave.number}: {', '.join(names)}{more}")
        if len(actors.waves) > shown_groups:
            print(f"    ... {len(actors.waves) - shown_groups} more waves")
    model = f"fitted to {found.fitted_from}" if found.fitted_from else "default cost model"
    ceiling = ceiling_bytes(found.spec, placement.backend, placement.nodes)
    bound = f", auto sizes to ~{format_size(ceiling)}" if ceiling else ""
    print(
        f"estimated: {duration(est.waves_s)} in waves; one group at a time: "
        f"{duration(est.serial_s)} ({model}{bound})"
    )
