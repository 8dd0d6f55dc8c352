"""Simulated scans as the driver records them, for the tests of the scan's summary document,
its Prometheus series, the dashboard that reads them and the report's fleet section (whose
scans are written as a run: rows, record and summary, with no cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sweeper.results import records, scans
from sweeper.results.writer import ResultWriter
from sweeper.scan.document import Scanned, document
from sweeper.scan.fleet import GroupOutcome, Result, Stage
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Fault, fleet_of, plant, run
from sweeper.topology import Gpu, Node
from tests.report_data import SOFTWARE

RECORDED_RUN = "20261125T063903Z-c4526e"  # the run of tests/data/results/main-2026-11-25

FAULTS = (Fault.SLOW_NODE, Fault.SLOW_LINK, Fault.DEAD_NODE, Fault.SLOW_GPU)
RANDOM = Strategy.parse("random:3", seed=7)
ADAPTIVE = Strategy.parse("adaptive")
STARTED = datetime(2026, 11, 25, 2, 0, tzinfo=timezone.utc)  # a written scan's
LATENCY_BYTES = 8
BANDWIDTH_BYTES = 1 << 30


def _links(gpus: int) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple("X" if a == b else "NV18" for b in range(gpus)) for a in range(gpus))


def machine(node_id: str, host: str, gpus: int) -> Node:
    return Node(
        host=host,
        node_id=node_id,
        ip="10.0.0.1",
        gpus=tuple(
            Gpu(
                index=i,
                uuid=f"GPU-{node_id}-{i}",
                pci_bus_id=f"00000000:{i + 0x18:02X}:00.0",
                name="NVIDIA H100 80GB HBM3",
                memory_total_bytes=80 << 30,
                memory_free_bytes=80 << 30,
                numa_node=0,
                nvlink_gb_per_s=450.0,
                pcie_gb_per_s=64.0,
            )
            for i in range(gpus)
        ),
        links=_links(gpus),
    )


def scanned(
    nodes: int = 32,
    gpus: int = 4,
    *,
    faults: tuple[Fault, ...] = FAULTS,
    strategy: Strategy = RANDOM,
    run_id: str = "20261125T020000Z-000001",
) -> Scanned:
    """A simulated scan of a fleet with planted faults (a slow node, a slow link, a dead node
    and a slow GPU), as the driver records one, every group's outcome with it."""
    fleet = fleet_of(nodes, gpus)
    sim = run(fleet, plant(fleet, faults, 7), strategy=strategy, seed=7)
    return Scanned(
        run_id=run_id,
        fleet=fleet,
        strategy=strategy,
        outcomes=sim.outcomes,
        verdicts=sim.verdicts,
        waves=sim.waves,
        rows=0,
        seconds=sim.seconds,
        machines=tuple(machine(n.id, n.host, n.gpus) for n in fleet.nodes),
        findings=sim.findings,
    )


def scan_summary(run_id: str = RECORDED_RUN) -> dict[str, Any]:
    """A scan's summary: 16 nodes of 2 GPUs, a slow node, a slow link and a slow GPU."""
    faults = (Fault.SLOW_NODE, Fault.SLOW_LINK, Fault.SLOW_GPU)
    return document(scanned(16, 2, faults=faults, strategy=ADAPTIVE, run_id=run_id))


def _group_rows(
    scan: Scanned, outcome: GroupOutcome, at: datetime, took: timedelta
) -> Iterator[dict[str, Any]]:
    """A group's rows as the driver writes them: the judged all_reduce at the latency and the
    bandwidth size, failed with its reason where the group failed, none where it was missing."""
    if outcome.result is Result.MISSING:
        return
    group = outcome.group
    nodes = [scan.fleet.node(n) for n in group.nodes]
    gate = group.stage is Stage.GATE
    ok = outcome.result is Result.OK
    meta = {
        "run_id": scan.run_id,
        "run_started_at": STARTED,
        "run_kind": "scan",
        "cluster_name": "fleet",
        **SOFTWARE,
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "backend": "nccl",
        "nccl_env": [("NCCL_ALGO", "Ring")],
        "tier": "nvlink" if gate else "internode",
        "variant": "default",
        "group_id": ("nvlink:" if gate else "internode:") + "+".join(group.nodes),
        "world_size": group.ranks(scan.fleet),
        "n_nodes": len(nodes),
        "hosts": [n.host for n in nodes for _ in range(n.gpus)],
        "gpu_uuids": [f"GPU-{n.id}-{i}" for n in nodes for i in range(n.gpus)],
        "kind": "collective",
        "op": "all_reduce",
        "algorithm": "native",
        "dtype": "float32",
        "engine": "torch",
        "launch": "graph",
        "status": "ok" if ok else "error",
        "error": None if ok else outcome.reason,
        "n_wrong": 0 if ok else None,
        "wave": group.wave,
        "stage": str(group.stage),
        "started_at": at,
        "ended_at": at + took,
        "measured_at": at + took,
    }
    factor = 2 * (meta["world_size"] - 1) / meta["world_size"]
    for size, busbw in (
        (LATENCY_BYTES, None),
        (BANDWIDTH_BYTES, outcome.busbw_gb_per_s),
    ):
        time_us = outcome.latency_us if busbw is None else size * factor / (busbw * 1e3)
        yield {
            **meta,
            "size_bytes": size,
            "busbw_factor": factor,
            "time_us": time_us if ok else None,
            "algbw_gb_per_s": size / time_us / 1e3 if ok and time_us else None,
            "busbw_gb_per_s": size * factor / time_us / 1e3 if ok and time_us else None,
        }


def scan_rows(scan: Scanned) -> Iterator[dict[str, Any]]:
    """Every group's rows, each wave starting as the one before it ended."""
    took = {w.index: timedelta(seconds=w.seconds) for w in scan.waves}
    starts = dict.fromkeys(sorted(took), STARTED)
    at = STARTED
    for index in starts:
        starts[index] = at
        at += took[index]
    for outcome in scan.outcomes:
        wave = outcome.group.wave
        yield from _group_rows(scan, outcome, starts[wave], took[wave])


def write_scan(results: Path, scan: Scanned) -> None:
    """The scan as a run of `results`: its rows, its record and its scan summary."""
    writer = ResultWriter(results, scan.run_id, STARTED.strftime("%Y-%m-%d"))
    rows = list(scan_rows(scan))
    for start in range(0, len(rows), writer.batch_rows):
        writer.extend(rows[start : start + writer.batch_rows])
    writer.flush()
    command = f"sweeper scan --nodes {len(scan.fleet.nodes)} --strategy {scan.strategy}"
    record = records.RunRecord(scan.run_id, command, {}, scan.machines, ended="complete")
    records.save(results, record)
    scans.save(results, scan.run_id, document(replace(scan, rows=len(rows))))
