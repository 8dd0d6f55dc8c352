"""`sweeper plan`: a spec's schedule and its estimated duration, on a recorded topology
replicated N times (no cluster) or on the nodes a live cluster would give, with the cost
model fitted to an earlier run's rows where asked.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from sweeper.analysis.fits import fit_alpha_beta
from sweeper.errors import BadInput
from sweeper.ops.registry import configure_moe, load_plugins, resolve
from sweeper.planning.estimate import CostModel, Estimate, TierCost, estimate
from sweeper.planning.inputs import read_json
from sweeper.planning.placement import Placement, alone, expected_placement
from sweeper.planning.request import ceiling_bytes, check_groups, schedule_request
from sweeper.planning.schedule import Planned, Schedule, nothing_to_measure, schedule
from sweeper.planning.sections import DEFAULT_CPU_RANKS
from sweeper.planning.sizes import format_size
from sweeper.planning.spec import SweepSpec, check_ranks
from sweeper.results.load import load
from sweeper.topology import Node
from sweeper.wire import Backend, Status


def recorded_node(path: Path) -> Node:
    """A recorded topology: `sweeper topo --format json` of one node, or an NVML record as in
    tests/data/topologies (a node without GPUs lists none: `"gpus": []`)."""
    record = read_json(path, "--topology", "topology record")
    try:
        if not isinstance(record, dict) or not isinstance(record.get("gpus"), list):
            raise ValueError("no 'gpus' list")
        return Node.from_record(record)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInput(f"--topology {path}: not a topology record ({exc})") from None


def replicated(node: Node, count: int) -> list[Node]:
    """`count` copies of a recorded node, each a node of its own."""
    return [
        dataclasses.replace(node, node_id=f"{node.node_id}-{i}", host=f"{node.host}-{i}")
        for i in range(count)
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """A planned sweep (`sweeper.plan`): its spec, placement, schedule (actor sets, waves)
    and estimated duration; fitted_from: the results the cost model was fitted to."""

    spec: SweepSpec
    placement: Placement
    schedule: Schedule
    estimate: Estimate
    planning_s: float
    fitted_from: Path | None


def plan(spec: SweepSpec, topology: Path | None, results: Path | None = None) -> Plan:
    """The spec's plan on a recorded topology, or on the nodes the cluster gives (Ray)."""
    experiments = spec.experiments
    load_plugins(experiments.plugins)
    configure_moe(experiments.moe)
    ops = resolve(spec.planning.ops)
    if topology is not None:
        return plan_recorded(spec, topology, ops, results)
    from sweeper.driver import sweep  # here, not at the top: Ray loads only for a live cluster

    return plan_placement(spec, sweep.survey(spec).placement, ops, results)


def plan_recorded(
    spec: SweepSpec, topology: Path, ops: Sequence[Planned], results: Path | None = None
) -> Plan:
    cluster = spec.cluster
    node = recorded_node(topology)
    gpus = len(node.gpus)
    backend = cluster.backend or (Backend.NCCL if gpus else Backend.GLOO)
    if backend is Backend.NCCL and not gpus:
        raise BadInput(f"--backend nccl: the topology {topology} has no GPUs")
    per_node = cluster.ranks_per_node or (gpus if backend is Backend.NCCL else DEFAULT_CPU_RANKS)
    if backend is Backend.NCCL and per_node > gpus:
        raise BadInput(f"--gpus-per-node {per_node}: the topology has {gpus} GPUs")
    try:
        check_ranks(cluster.nodes, per_node, "--nodes")
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    check_groups(schedule_request(spec, backend, ops), cluster.nodes, per_node)
    nodes = replicated(node, cluster.nodes)
    placement = expected_placement(backend, nodes, [per_node] * len(nodes))
    return plan_placement(spec, placement, ops, results)


def plan_placement(
    spec: SweepSpec, placement: Placement, ops: Sequence[Planned], results: Path | None = None
) -> Plan:
    timing = spec.timing
    model = CostModel(iters=timing.iters, warmup=timing.warmup, blocks=timing.blocks)
    if results is not None:
        model = fitted(_rows(results), model)
    request = schedule_request(spec, placement.backend, ops)
    check_groups(request, len(placement.nodes), max(map(len, placement.by_node), default=0))
    start = time.perf_counter()
    planned = schedule(placement, request)
    planning_s = time.perf_counter() - start
    ceiling = ceiling_bytes(spec, placement.backend, placement.nodes)
    return Plan(
        spec=spec,
        placement=placement,
        schedule=planned,
        estimate=estimate(planned, model, ceiling),
        planning_s=planning_s,
        fitted_from=results,
    )


def _rows(results: Path) -> pd.DataFrame:
    try:
        rows = load(results)
    except FileNotFoundError as exc:
        raise BadInput(f"--results: {exc}") from None
    if rows.empty:
        raise BadInput(f"--results {results}: no rows to fit the cost model to")
    return rows


def fitted(rows: pd.DataFrame, model: CostModel) -> CostModel:
    """The model with each tier's latency and bandwidth fitted to an earlier run's ok rows
    (alpha-beta over every operation of the tier), and the per-point overhead from the rows'
    wall time where they have it. Tiers without two sizes keep the defaults."""
    ok = rows[rows["status"] == Status.OK]
    tiers = dict(model.tiers)
    for tier, part in ok.groupby("tier"):
        fit = fit_alpha_beta(part["size_bytes"], part["time_us"])
        if fit is not None and fit.beta_gb_per_s > 0:
            tiers[str(tier)] = TierCost(fit.alpha_us, min(fit.beta_gb_per_s, 1e6))
    out = replace(model, tiers=tiers)
    timed = ok.dropna(subset=["started_at", "ended_at", "iters", "time_us"])
    if len(timed):
        wall = (timed["ended_at"] - timed["started_at"]).dt.total_seconds()
        calls = timed["warmup_iters"].fillna(0) + timed["iters"] * model.blocks + 2
        busy = calls * timed["time_us"] / 1e6
        out = replace(out, point_overhead_s=max(0.0, float((wall - busy).median())))
    return out


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
    unit = "GPUs" if placement.backend == Backend.NCCL else "ranks"
    tiers = found.spec.planning.tiers
    per_node = len(placement.members) // max(1, len(placement.nodes))
    print(
        f"plan: {len(placement.nodes)} nodes x {per_node} {unit} ({placement.backend}), "
        f"tiers {','.join(tiers)}: {planned.n_groups} groups in "
        f"{len(planned.waves)} waves, {est.points} points (planned in {found.planning_s:.2f} s)"
    )
    note = nothing_to_measure(planned, tiers) or alone(placement)
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
