"""Simulated scans as the driver records them, for the tests of the scan's summary document,
its Prometheus series and the dashboard that reads them."""

from __future__ import annotations

from typing import Any

from sweeper.scan.document import Scanned, document
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Fault, fleet_of, simulate
from sweeper.topology import Gpu, Node

RECORDED_RUN = "20261125T063903Z-c4526e"  # the run of tests/data/results/main-2026-11-25

FAULTS = (Fault.SLOW_NODE, Fault.SLOW_LINK, Fault.DEAD_NODE, Fault.SLOW_GPU)
RANDOM = Strategy.parse("random:3", seed=7)


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
        links=(),
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
    and a slow GPU), as the driver records one."""
    sim = simulate(nodes=nodes, gpus_per_node=gpus, faults=faults, strategy=strategy, seed=7)
    fleet = fleet_of(nodes, gpus)
    return Scanned(
        run_id=run_id,
        fleet=fleet,
        strategy=strategy,
        outcomes=(),
        verdicts=sim.verdicts,
        waves=sim.waves,
        rows=0,
        seconds=sim.seconds,
        machines=tuple(machine(n.id, n.host, n.gpus) for n in fleet.nodes),
    )


def scan_summary(run_id: str = RECORDED_RUN) -> dict[str, Any]:
    """A scan's summary: 16 nodes of 2 GPUs, a slow node, a slow link and a slow GPU."""
    faults = (Fault.SLOW_NODE, Fault.SLOW_LINK, Fault.SLOW_GPU)
    adaptive = Strategy.parse("adaptive")
    return document(scanned(16, 2, faults=faults, strategy=adaptive, run_id=run_id))
