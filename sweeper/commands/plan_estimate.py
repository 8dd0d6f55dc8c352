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

import numpy as np
import pandas as pd

from sweeper.analysis.fits import fit_alpha_beta
from sweeper.errors import BadInput
from sweeper.ops.descriptor import Collective
from sweeper.ops.registry import configure_moe, load_plugins, resolve
from sweeper.planning.costs import CostModel, TierCost
from sweeper.planning.estimate import Estimate, duration, estimate, model_for
from sweeper.planning.inputs import read_json
from sweeper.planning.placement import Placement, alone, expected_placement
from sweeper.planning.request import RunPlan, check_groups, planned
from sweeper.planning.schedule import Schedule, apart, nothing_to_measure, schedule
from sweeper.planning.sizes import format_size
from sweeper.planning.spec import DEFAULT_CPU_RANKS, SweepSpec, check_ranks
from sweeper.results.load import load
from sweeper.topology import Node
from sweeper.wire import Backend, Status


def recorded_node(path: Path) -> Node:
    """A recorded topology: `sweeper topo --format json` of one node, or an NVML record as in
    tests/data/topologies (a node without GPUs lists none: `"gpus": []`)."""
    record = read_json(path, "--topology", "topology record")
    try:
        return Node.recorded(record)
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
    ceiling_bytes: int | None  # where --max-size auto series likely end; None: not auto


def plan(spec: SweepSpec, topology: Path | None, calibrate: Path | None = None) -> Plan:
    """The spec's plan on a recorded topology, or on the nodes the cluster gives (Ray)."""
    load_plugins(spec.plugins)
    configure_moe(spec.moe.layer())
    ops = resolve(spec.ops)
    if topology is not None:
        run, placement = on_recorded(spec, topology, ops)
    else:
        from sweeper.driver import sweep  # here, not at the top: Ray loads only for a live cluster

        placement = sweep.survey(spec).placement
        run = planned(spec, placement.backend)
    return plan_placement(spec, run, placement, ops, calibrate)


def plan_recorded(
    spec: SweepSpec, topology: Path, ops: Sequence[Collective], calibrate: Path | None = None
) -> Plan:
    """The spec's plan on a recorded topology, `ops` its operations resolved."""
    run, placement = on_recorded(spec, topology, ops)
    return plan_placement(spec, run, placement, ops, calibrate)


def on_recorded(
    spec: SweepSpec, topology: Path, ops: Sequence[Collective]
) -> tuple[RunPlan, Placement]:
    """The run a recorded topology, replicated on as many nodes as asked, would be given, and
    its placement; BadInput where it cannot run what is asked, or asks more groups than a
    plan holds."""
    node = recorded_node(topology)
    gpus = len(node.gpus)
    backend = spec.requested_backend or (Backend.NCCL if gpus else Backend.GLOO)
    if backend is Backend.NCCL and not gpus:
        raise BadInput(f"--backend nccl: the topology {topology} has no GPUs")
    per_node = spec.ranks_per_node or (gpus if backend is Backend.NCCL else DEFAULT_CPU_RANKS)
    if backend is Backend.NCCL and per_node > gpus:
        raise BadInput(f"--gpus-per-node {per_node}: the topology has {gpus} GPUs")
    try:
        check_ranks(spec.nodes, per_node, "--nodes")
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    run = planned(spec, backend)
    check_groups(run.request(ops), spec.nodes, per_node)
    nodes = replicated(node, spec.nodes)
    return run, expected_placement(backend, nodes, [per_node] * len(nodes))


def plan_placement(
    spec: SweepSpec,
    run: RunPlan,
    placement: Placement,
    ops: Sequence[Collective],
    calibrate: Path | None = None,
) -> Plan:
    model = model_for(run.backend, run.timing, len(placement.members))
    if calibrate is not None:
        model = calibrated(_rows(calibrate), model)
    request = run.request(ops)
    check_groups(request, len(placement.nodes), max(map(len, placement.by_node), default=0))
    start = time.perf_counter()
    scheduled = schedule(placement, request)
    planning_s = time.perf_counter() - start
    ceiling = run.ceiling_bytes(placement.nodes)
    return Plan(
        spec=spec,
        placement=placement,
        schedule=scheduled,
        estimate=estimate(scheduled, model, ceiling, ops),
        planning_s=planning_s,
        fitted_from=calibrate,
        ceiling_bytes=ceiling,
    )


def _rows(calibrate: Path) -> pd.DataFrame:
    try:
        rows = load(calibrate)
    except FileNotFoundError as exc:
        raise BadInput(f"--calibrate: {exc}") from None
    if rows.empty:
        raise BadInput(f"--calibrate {calibrate}: no rows to fit the cost model to")
    return rows


POINT = ["run_id", "group_id", "variant", "op", "algorithm", "dtype", "size_bytes"]


def calibrated(rows: pd.DataFrame, model: CostModel) -> CostModel:
    """The model fitted to a run's rows (`sweeper plan --calibrate`): each tier's latency and
    bandwidth (alpha-beta over every operation of the tier), and from the rows' times what a
    point costs beyond its iterations, what grows with its size, what a series' first point
    adds, probing, and an actor set's start. A figure the rows cannot give keeps the model's
    (tiers with fewer than two sizes; a run's start and end, which no row holds)."""
    ok = rows[rows["status"] == Status.OK]
    tiers = dict(model.tiers)
    for tier, part in ok.groupby("tier"):
        cost = _tier_cost(part)
        if cost is not None:
            tiers[str(tier)] = cost
    timed = ok.dropna(subset=["started_at", "ended_at", "iters", "time_us"])
    found = _overheads(timed, model) if len(timed) else {}
    # An actor set's start ends at the run's first point, whatever its status (a one-GPU
    # run's first are in-place collectives with nothing to move: skipped)
    started = rows.dropna(subset=["started_at"])
    if "run_started_at" in started and len(started):
        runs = started.groupby("run_id").agg(
            run=("run_started_at", "min"), first=("started_at", "min")
        )
        found["set_start_s"] = float((runs["first"] - runs["run"]).dt.total_seconds().median())
    return replace(model, tiers=tiers).with_overheads(**found)


def _tier_cost(part: pd.DataFrame) -> TierCost | None:
    """A tier's bandwidth over the points that bandwidth dominates (S / beta above alpha, an
    alpha-beta fit's), as their time less latency gives it, then its latency as every point's
    time less that gives it: means, so that the points' times sum to what they took, where
    a fit of relative errors (every size alike) misses the sum by the noise of the smallest.
    None with fewer than two sizes."""
    fit = fit_alpha_beta(part["size_bytes"], part["time_us"])
    if fit is None or not fit.beta_gb_per_s > 0:
        return None
    alpha_us = max(0.0, fit.alpha_us)
    big = part[part["size_bytes"] / (fit.beta_gb_per_s * 1e3) > alpha_us]
    spent_us = float((big["time_us"] - alpha_us).sum())
    algbw = float(big["size_bytes"].sum()) / (spent_us * 1e3) if spent_us > 0 else fit.beta_gb_per_s
    algbw = min(algbw, 1e6)
    latency_us = float((part["time_us"] - part["size_bytes"] / (algbw * 1e3)).mean())
    return TierCost(latency_us=max(0.0, latency_us), algbw_gb_per_s=algbw)


def _overheads(timed: pd.DataFrame, model: CostModel) -> dict[str, float]:
    """Each point's wall (ended_at - started_at) less its iterations on each of its launches,
    plus the gap since its group's point before (where the driver and ranks prepare it: at
    large sizes, allocating and filling its buffers): a line over its size for every point
    but a series' first (means, so that the model's sums are the rows'), and what a series'
    first point adds above it; a series' probing."""
    calls = timed["warmup_iters"].fillna(0) + timed["iters"] * model.blocks + 1
    busy = (calls * timed["time_us"] / 1e6).groupby([timed[c] for c in POINT]).sum()
    spans = timed.groupby(POINT).agg(started=("started_at", "min"), ended=("ended_at", "max"))
    points = spans.assign(busy=busy).reset_index().sort_values("started")
    before = points.groupby(["run_id", "group_id", "variant"])["ended"].shift(1)
    gap = (points["started"] - before).dt.total_seconds() - model.overheads.row_s
    wall = (points["ended"] - points["started"]).dt.total_seconds()
    points["excess"] = wall - points["busy"] + gap.clip(lower=0)
    points = points[gap.notna()]  # a group's first point: its gap is the wave's opening
    first = points.groupby(POINT[:-1]).cumcount() == 0
    rest = points[~first]
    found: dict[str, float] = {}
    if len(rest):
        gb = rest["size_bytes"] / 1e9
        slope, point_s = (
            np.polyfit(gb, rest["excess"], 1) if gb.nunique() > 1 else (0.0, rest["excess"].mean())
        )
        if slope < 0:  # what grows with size cannot shrink: all of it a point's
            slope, point_s = 0.0, rest["excess"].mean()
        line = point_s + slope * points["size_bytes"] / 1e9
        found["series_s"] = max(0.0, float((points["excess"] - line)[first].mean()))
        found["point_s"] = max(0.0, float(point_s))
        found["per_gb_s"] = float(slope)
    probes = timed.dropna(subset=["probe_s"])
    if len(probes):
        found["probe_s"] = float(probes.groupby(POINT[:-1])["probe_s"].max().mean())
    return found


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
        "pairs_apart": apart(found.schedule),
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
    tiers = found.spec.tiers
    per_node = len(placement.members) // max(1, len(placement.nodes))
    print(
        f"plan: {len(placement.nodes)} nodes x {per_node} {unit} ({placement.backend}), "
        f"tiers {','.join(tiers)}: {planned.n_groups} groups in "
        f"{len(planned.waves)} waves, {est.points} points (planned in {found.planning_s:.2f} s)"
    )
    note = nothing_to_measure(planned, tiers) or alone(placement)
    if note is not None:
        print(note)
    for tier, why in apart(planned).items():
        print(f"{tier} pairs of a node run one at a time: {why}")
    if found.spec.curves is not None:
        print(
            f"every operation's curve on {found.spec.curves} groups of each tier and shape; "
            "the others measure their bandwidth alone"
        )
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
    ceiling = found.ceiling_bytes
    bound = f", auto sizes to ~{format_size(ceiling)}" if ceiling else ""
    print(
        f"estimated: {duration(est.waves_s)} in waves; one group at a time: "
        f"{duration(est.serial_s)} ({model}{bound})"
    )
