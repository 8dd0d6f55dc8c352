"""What a node offers NCCL's network, read where a rank runs: its active RDMA ports (sysfs,
as `topology.read_nics` finds them) and whether the kernel's peer-memory module, which
GPUDirect RDMA over InfiniBand needs, is loaded (the files NCCL's IB transport checks)."""

from __future__ import annotations

from pathlib import Path

from sweeper.topology import read_nics

# net_ib.cc: nv_peer_mem (MLNX_OFED's) or nvidia_peermem (the driver's)
PEER_MEMORY = (
    "kernel/mm/memory_peers/nv_mem/version",
    "kernel/mm/memory_peers/nv_mem_nc/version",
    "module/nvidia_peermem/version",
)


def rdma_devices(sys: Path = Path("/sys")) -> tuple[str, ...]:
    """The node's active RDMA ports (InfiniBand, RoCE, EFA): `mlx5_0/1`, ..."""
    return tuple(nic["name"] for nic in read_nics(sys / "class") if nic["kind"] == "rdma")


def peer_memory(sys: Path = Path("/sys")) -> bool:
    """Whether a peer-memory module is loaded, as NCCL checks it."""
    return any((sys / path).exists() for path in PEER_MEMORY)
