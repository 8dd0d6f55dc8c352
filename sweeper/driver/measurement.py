"""A result row, typed: what one row of the results says, built here and nowhere else.

Its `kind` comes from the descriptor (collective, composite, p2p, copy: host<->device,
experiment) or is `copy` for the copy-engine matrix, so readers select rows by it rather
than by how operations happen to be named. A point gives one measurement per engine and
launch mode it was timed with (nccl-tests' numbers: max over ranks, algbw = S / t, busbw =
algbw x factor); a copy gives one per destination. The rows stay typed on their way to the
terminal and the run's summary and into the writer, which alone turns them into the store's
columns (`results.writer.columns`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np

from sweeper.driver.outcome import Outcome, PointResult
from sweeper.fabric.contract import breaches
from sweeper.fabric.nccl_log import spelled, summary
from sweeper.fabric.observer import chosen
from sweeper.ops.conventions import across_ranks, algbw_gb_per_s
from sweeper.planning.placement import Placement
from sweeper.planning.sizes import format_size
from sweeper.telemetry import COLUMNS as TELEMETRY_COLUMNS
from sweeper.telemetry import columns as telemetry_columns
from sweeper.wire import (
    DEFAULT_VARIANT,
    UNKNOWN_TRANSPORT,
    Backend,
    Copied,
    Engine,
    Fabric,
    Kind,
    Launch,
    NcclView,
    RankTimings,
    Status,
    Tier,
    Timed,
)

# The most connections a row lists: 16 GPUs' all-to-all, each pair both ways
MAX_CONNECTIONS = 256


@dataclass(frozen=True, kw_only=True, slots=True)
class RunColumns:
    """The columns every row of a run shares (schema.RUN_COLUMNS), gathered once, and the
    environment of the actor set that measured it."""

    run_id: str
    run_started_at: datetime
    run_kind: str
    cluster_name: str
    sweeper_version: str
    ray_version: str
    torch_version: str
    nccl_version: str | None
    cuda_version: str | None
    driver_version: str | None
    gpu_model: str | None
    backend: Backend
    nccl_env: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ResultRow:
    """One row: the run's shared columns and the row's own, each field a column of the
    schema."""

    run: RunColumns
    kind: Kind
    tier: str
    variant: str
    group_id: str
    world_size: int
    n_nodes: int
    hosts: tuple[str, ...]
    gpu_uuids: tuple[str, ...]
    op: str
    algorithm: str
    dtype: str
    in_place: bool
    size_bytes: int
    count_elems: int
    busbw_factor: float
    engine: Engine
    launch: Launch
    status: Status
    measured_at: datetime
    error: str | None = None
    params: tuple[tuple[str, str], ...] | None = None  # an experiment's knobs
    # what the clock said (a point that ran)
    launch_note: str | None = None
    registered: bool | None = None  # its buffers registered with NCCL (--register-buffers)
    warmup_iters: int | None = None
    iters: int | None = None
    time_us: float | None = None
    time_us_min: float | None = None
    time_us_p50: float | None = None
    time_us_p99: float | None = None
    time_us_blocks: tuple[float, ...] | None = None
    samples_us: tuple[float, ...] | None = None
    algbw_gb_per_s: float | None = None
    busbw_gb_per_s: float | None = None
    busbw_pct_of_link: float | None = None
    n_wrong: int | None = None  # None: not checked
    # the series and the schedule: how large it could go, when it ran
    max_size_bytes: int | None = None
    probe_s: float | None = None
    wave: int | None = None
    stage: str | None = None  # a scan's stage (scan.Stage); null outside a scan
    started_at: datetime | None = None
    ended_at: datetime | None = None
    # a pair's (p2p, copy): who sends to whom
    src_rank: int | None = None
    dst_rank: int | None = None
    src_gpu_uuid: str | None = None
    dst_gpu_uuid: str | None = None
    concurrent: bool | None = None
    # the one rank a row stands for, where a point gives a row per rank (per_gpu at once)
    rank: int | None = None
    # a host<->device copy: algbw against its GPU's PCIe link (NVML's largest generation x
    # width, one direction; the slowest of a group's where one row stands for several)
    pcie_pct_of_peak: float | None = None
    # what NCCL set up for the group's communicator in this engine, as its INFO lines said
    # (sweeper/fabric), and how that holds to the tier's contract
    transport: str | None = None
    transport_flag: str | None = None
    nccl_connections: tuple[str, ...] | None = None
    nccl_channels: int | None = None
    nccl_algo: str | None = None
    nccl_proto: str | None = None
    # a point that timed out: its ranks that did not answer, by their place in the group
    unanswered: tuple[int, ...] | None = None
    # the group's communicator in this engine: seconds to open, the slowest rank's
    comm_start_s: float | None = None
    # the group's GPUs over the timed blocks: NVML's energy counter, summed over the ranks
    energy_j: float | None = None
    energy_j_per_gb: float | None = None
    # NCCL's view of the point's first step in this engine (sweeper's observing tuner plugin)
    nccl_view: str | None = None
    nccl_predicted_us: float | None = None
    nccl_predictions: tuple[tuple[str, float], ...] | None = None
    measured_over_predicted: float | None = None
    nccl_init_s: tuple[tuple[str, float], ...] | None = None  # NCCL's split, the slowest rank's
    # GPU telemetry: a column per telemetry.Reading field, each rank's value in group rank order
    # (last: the writer spreads it after the row's own columns)
    readings: Mapping[str, tuple[Any, ...] | None] = field(
        default_factory=lambda: dict.fromkeys(TELEMETRY_COLUMNS)
    )


def of_point(run: RunColumns, placement: Placement, done: PointResult) -> list[ResultRow]:
    """The point's measurements: one per engine and launch mode it was timed with (a failed
    point: one per engine and launch mode it asked for, each saying why, a timed-out one also
    which of its ranks did not answer). An operation each GPU performs on its own (`per_gpu`)
    run by several GPUs at once gives them per GPU, each from that GPU's own blocks and
    telemetry; its rows say `concurrent`."""
    group, point, collective, outcome = done.group, done.point, done.collective, done.outcome
    n = group.world_size
    pair: dict[str, Any] = {}
    if collective.direction is not None:
        src, dst = (group.ranks[i] for i in collective.direction)
        pair = {
            "src_rank": src,
            "dst_rank": dst,
            "src_gpu_uuid": placement.members[src].gpu_uuid,
            "dst_gpu_uuid": placement.members[dst].gpu_uuid,
            "concurrent": done.shares_node,
        }
    elif collective.traits.per_gpu is not None and group.tier == Tier.GPU:
        pair = {"concurrent": n > 1}
    base = ResultRow(
        run=run,
        kind=collective.kind,
        tier=group.tier,
        variant=group.variant,
        group_id=point.group_id,
        world_size=n,
        n_nodes=placement.n_nodes(group.ranks),
        hosts=placement.hosts(group.ranks),
        gpu_uuids=placement.gpu_uuids(group.ranks),
        op=collective.op,
        algorithm=collective.algorithm,
        dtype=point.dtype,
        in_place=collective.in_place,
        size_bytes=point.size_bytes,
        count_elems=point.count,
        busbw_factor=collective.busbw_factor(n),
        engine=point.timing.engines[0],
        launch=point.timing.launches[0],
        status=outcome.status,
        error=outcome.error,
        measured_at=datetime.now(timezone.utc),
        params=collective.params or None,
        max_size_bytes=done.max_size_bytes,
        probe_s=done.probe_s,
        wave=done.wave,
        started_at=done.started_at,
        unanswered=tuple(group.ranks.index(r) for r in outcome.unanswered) or None,
        ended_at=done.ended_at,
        **pair,
    )
    if outcome.status != Status.OK:
        return [
            replace(base, engine=engine, launch=launch)
            for engine in point.timing.engines
            for launch in point.timing.launches
        ]
    host_link = collective.traits.per_gpu is not None and collective.traits.per_gpu.host_link
    if collective.traits.per_gpu is None or n == 1:
        return _modes(placement, base, group.ranks, outcome.measured, host_link)
    return [  # every GPU at once: each its own row
        measured
        for rank, mine in zip(group.ranks, outcome.measured, strict=True)
        for measured in _modes(
            placement,
            replace(
                base,
                hosts=placement.hosts((rank,)),
                gpu_uuids=placement.gpu_uuids((rank,)),
                rank=rank,
            ),
            (rank,),
            [mine],
            host_link,
        )
    ]


def busbw_gb_per_s(outcome: Outcome, size_bytes: int, busbw_factor: float) -> float | None:
    """The busbw of a point's first engine and launch mode, as its row says it (over every
    rank of the group): what a series' plateau is found from. None where it has no such
    figure: it failed, that mode was skipped, or its result was wrong."""
    if outcome.status != Status.OK or not outcome.measured:
        return None
    first = [rank.timed[0] for rank in outcome.measured]
    if any(t.skipped or t.n_wrong for t in first):
        return None
    seconds = across_ranks([t.blocks for t in first]).seconds
    return algbw_gb_per_s(size_bytes, seconds) * busbw_factor


def _modes(
    placement: Placement,
    base: ResultRow,
    ranks: tuple[int, ...],
    measured: Sequence[RankTimings],
    host_link: bool,
) -> list[ResultRow]:
    """One measurement per engine and launch mode, from these ranks' blocks and telemetry."""
    base = replace(base, readings=telemetry_columns([m.telemetry for m in measured]))
    # a host copy's share of the GPU's PCIe link: the group's PCIe peak, as a pcie group's
    peak = placement.link_gb_per_s(Tier.PCIE, ranks) if host_link else None
    link = placement.link_gb_per_s(base.tier, ranks)
    modes = range(len(measured[0].timed))
    timed = [_timed(base, [m.timed[mode] for m in measured], peak) for mode in modes]
    return [replace(m, busbw_pct_of_link=pct_of_link(m.busbw_gb_per_s, link)) for m in timed]


def pct_of_link(busbw_gb_per_s: float | None, link_gb_per_s: float | None) -> float | None:
    """Bus bandwidth as a percentage of the link's one-direction peak; None where either is
    unknown (a failed point, CPU ranks, a NIC whose speed cannot be read)."""
    if busbw_gb_per_s is None or not link_gb_per_s:
        return None
    return 100 * busbw_gb_per_s / link_gb_per_s


def _timed(base: ResultRow, ranks: list[Timed], pcie_peak_gb_per_s: float | None) -> ResultRow:
    """One engine and launch mode of a point that ran, from every rank's blocks."""
    mine = replace(base, engine=ranks[0].engine, launch=ranks[0].launch)
    skipped = next((t.skipped for t in ranks if t.skipped), None)
    if skipped is not None:
        return replace(mine, status=Status.SKIPPED, error=skipped)
    across = across_ranks([t.blocks for t in ranks])
    checked = [t.n_wrong for t in ranks if t.n_wrong is not None]
    n_wrong = sum(checked) if checked else None
    algbw = algbw_gb_per_s(base.size_bytes, across.seconds)
    micros = None if not across.samples else np.asarray(across.samples) * 1e6
    wrong = f"{n_wrong} elements wrong ({format_size(base.size_bytes)})" if n_wrong else None
    energy_j, energy_j_per_gb = _energy(base.size_bytes, ranks)
    fabric = _fabric(base, [t.fabric for t in ranks if t.fabric is not None])
    views = [t.nccl_view for t in ranks if t.nccl_view is not None]
    view = {} if base.kind == Kind.COPY else _view(views, across.seconds * 1e6)
    for said in ("nccl_algo", "nccl_proto"):  # NCCL's TUNING lines, where the user had them
        if fabric.get(said) is not None:
            view.pop(said, None)
    return replace(
        mine,
        **fabric,
        **view,
        launch_note=next((t.note for t in ranks if t.note), None),
        registered=all(t.registered for t in ranks),
        warmup_iters=max(t.warmup_iters for t in ranks),
        iters=ranks[0].blocks[0].iters,
        time_us=across.seconds * 1e6,
        time_us_min=across.fastest * 1e6,
        time_us_blocks=tuple(seconds * 1e6 for seconds in across.blocks),
        algbw_gb_per_s=algbw,
        busbw_gb_per_s=algbw * base.busbw_factor,
        n_wrong=n_wrong,
        time_us_p50=None if micros is None else float(np.percentile(micros, 50)),
        time_us_p99=None if micros is None else float(np.percentile(micros, 99)),
        samples_us=None if micros is None else tuple(micros.astype(np.float32).tolist()),
        status=Status.ERROR if n_wrong else mine.status,
        error=wrong or mine.error,
        pcie_pct_of_peak=None if pcie_peak_gb_per_s is None else 100 * algbw / pcie_peak_gb_per_s,
        comm_start_s=max((t.start_s for t in ranks if t.start_s is not None), default=None),
        energy_j=energy_j,
        energy_j_per_gb=energy_j_per_gb,
    )


NO_CALL = "no collective call"  # none NCCL tunes: send/recv, or one rank's (a local copy)


def _view(views: list[NcclView], time_us: float) -> dict[str, Any]:
    """NCCL's view columns from the ranks' (rank 0's cost tables; partial where any rank's
    NCCL had another tuner): what NCCL ran in each call (its least-time pair), its time and
    every pair's, and the measured time over the prediction."""
    if not views:
        return {}
    partial = next((v.partial for v in views if v.partial), None)
    if partial is not None:
        return {"nccl_view": f"partial: {partial}"}
    calls = next((v.calls for v in views if v.calls), ())
    runs = [c for c in (chosen(call) for call in calls) if c is not None]
    if not runs:
        return {"nccl_view": NO_CALL}
    named = len(calls) > 1
    predictions = {
        f"{call.function} {pair}" if named else pair: us
        for call in calls
        for pair, us in call.costs_us
    }
    predicted_us = sum(us for _, _, us in runs)
    return {
        "nccl_view": "observed",
        "nccl_predicted_us": predicted_us,
        "nccl_predictions": tuple(predictions.items()),
        "measured_over_predicted": time_us / predicted_us if predicted_us > 0 else None,
        "nccl_algo": "+".join(dict.fromkeys(a for a, _, _ in runs)),
        "nccl_proto": "+".join(dict.fromkeys(p for _, p, _ in runs)),
    }


# NVML's energy counter advances every 100 ms (one H200, docs/measurements/h200-x1-2026-12-02.md):
# over blocks shorter than ten of its steps, what it gained says little of what they used
ENERGY_WINDOW_S = 1.0


def _energy(size_bytes: int, ranks: list[Timed]) -> tuple[float | None, float | None]:
    """The group's GPUs' energy over the timed blocks, and per GB of S per iteration; none
    where any rank's GPU could not say (a sum over some GPUs would read low), or where the
    blocks ran too short for the counter to tell (ENERGY_WINDOW_S)."""
    gains = [t.energy_mj for t in ranks]
    if not gains or any(g is None for g in gains):
        return None, None
    if max(sum(b.seconds for b in t.blocks) for t in ranks) < ENERGY_WINDOW_S:
        return None, None
    joules = sum(g for g in gains if g is not None) / 1e3
    moved_gb = size_bytes * sum(b.iters for b in ranks[0].blocks) / 1e9
    return joules, joules / moved_gb if moved_gb else None


def _fabric(base: ResultRow, fabrics: list[Fabric]) -> dict[str, Any]:
    """The transport columns of a measurement from its ranks' accounts of NCCL: none for
    what does not go through NCCL (gloo ranks, copies); `unknown` where NCCL's output could
    not be read on a rank, or told of no connection in a group of several GPUs."""
    if not fabrics or base.kind == Kind.COPY:
        return {}
    links = [link for fabric in fabrics for link in fabric.links]
    calls = [call for fabric in fabrics for call in fabric.calls]
    channels = [fabric.channels for fabric in fabrics if fabric.channels is not None]
    known = summary(links)
    if (known is None and base.world_size > 1) or any(f.unknown for f in fabrics):
        known = UNKNOWN_TRANSPORT
    slowest = max((f.init_s for f in fabrics if f.init_s), key=lambda s: s[0][1], default=None)
    return {
        "nccl_init_s": slowest,
        "transport": known,
        "transport_flag": breaches(base.tier, fabrics),
        "nccl_connections": _listed(sorted({spelled(link) for link in links})),
        "nccl_channels": max(channels, default=None),
        "nccl_algo": "+".join(dict.fromkeys(algo for algo, _ in calls)) or None,
        "nccl_proto": "+".join(dict.fromkeys(proto for _, proto in calls)) or None,
    }


def _listed(connections: list[str]) -> tuple[str, ...] | None:
    """A group's connections as a row lists them: at most MAX_CONNECTIONS (a large group's
    all-to-all connects every pair), then how many more there were."""
    if len(connections) <= MAX_CONNECTIONS:
        return tuple(connections) or None
    more = len(connections) - MAX_CONNECTIONS
    return (*connections[:MAX_CONNECTIONS], f"... and {more} more")


def of_copy(
    run: RunColumns,
    placement: Placement,
    node: int,
    copied: Copied,
    dst: str,
    seconds: float,
    rank_of: Mapping[str | None, int],
) -> ResultRow:
    """A peer copy inside a node: one per destination (for fan-out, each destination's copy
    of the concurrent set; for bi, both directions as one, S counting both)."""
    host = placement.nodes[node]
    index = {gpu.uuid: pos for pos, gpu in enumerate(host.gpus)}
    a, b = index.get(copied.src), index.get(dst)
    linked = a is not None and b is not None and host.nvlinked(a, b)
    members = 1 + len(copied.dsts)
    algbw = algbw_gb_per_s(copied.size_bytes, seconds)
    tier = Tier.NVLINK if linked else Tier.PCIE
    pair = [rank_of[uuid] for uuid in (copied.src, dst) if uuid in rank_of]
    link = placement.link_gb_per_s(tier, pair) if len(pair) == 2 else None
    return ResultRow(
        run=run,
        kind=Kind.COPY,
        tier=tier,
        variant=DEFAULT_VARIANT,
        group_id=f"copy:n{node}",
        world_size=members,
        n_nodes=1,
        hosts=(host.host,) * members,
        gpu_uuids=(copied.src, *copied.dsts),
        op="copy",
        algorithm=copied.kind,
        dtype="uint8",
        in_place=False,
        size_bytes=copied.size_bytes,
        count_elems=copied.size_bytes,
        busbw_factor=1.0,
        engine=Engine.TORCH,
        launch=Launch.EAGER,
        status=Status.OK,
        measured_at=datetime.now(timezone.utc),
        time_us=seconds * 1e6,
        algbw_gb_per_s=algbw,
        busbw_gb_per_s=algbw,
        busbw_pct_of_link=pct_of_link(algbw, link),
        src_rank=rank_of.get(copied.src),
        dst_rank=rank_of.get(dst),
        src_gpu_uuid=copied.src,
        dst_gpu_uuid=dst,
        concurrent=copied.kind == "fanout",
    )
