"""The tier contract: a group's transport, as NCCL set it up, held to the tier the group was
placed for and to what its nodes offer. Each breach is one line: what NCCL did, what was
expected and what to check; none where the contract holds or cannot be judged.

- `nvlink`: P2P between the GPUs; SHM or NET breaks it. `pcie`: P2P or SHM; NET breaks it.
- `internode`: NET over an RDMA plugin where the nodes have RDMA devices; NET/Socket breaks it.
- a NET connection of an RDMA plugin without GPUDirect RDMA, on a node whose peer-memory module
  is loaded, breaks it (NCCL_NET_GDR_LEVEL says how far from its NIC NCCL lets a GPU be)."""

from __future__ import annotations

from collections.abc import Sequence

from sweeper.fabric.nccl_log import transport
from sweeper.wire import Fabric, Tier

SOCKET = "NET/Socket"
# What each in-node tier must not go through, and what to check where it did
_WRONG_INSIDE = {
    Tier.NVLINK.value: (("SHM", "NET/"), "NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, peer access"),
    Tier.PCIE.value: (("NET/",), "NCCL_P2P_DISABLE, NCCL_SHM_DISABLE"),
}


def breaches(tier: str, fabrics: Sequence[Fabric]) -> str | None:
    """Each way the group's connections (every rank's, with its node's facts) break the
    contract of `tier`, joined by '; '; None where they keep it."""
    names = sorted({transport(link.via) for fabric in fabrics for link in fabric.links})
    found: list[str] = []
    if tier in _WRONG_INSIDE:
        prefixes, check = _WRONG_INSIDE[tier]
        bad = [name for name in names if name.startswith(prefixes)]
        if bad:
            found.append(f"{tier} group through {', '.join(bad)}: check {check}")
    rdma = sorted({device for fabric in fabrics for device in fabric.rdma_devices})
    if tier == Tier.INTERNODE and SOCKET in names and rdma:
        found.append(
            f"internode group over TCP sockets ({SOCKET}) where its nodes have RDMA devices "
            f"({', '.join(rdma)}): check NCCL_IB_DISABLE, NCCL_NET, NCCL_IB_HCA, the net plugin"
        )
    no_gdr = sorted(
        {
            name
            for fabric in fabrics
            if fabric.peer_memory
            for name in (transport(link.via) for link in fabric.links)
            if name.startswith("NET/") and name != SOCKET and not name.endswith("+GDRDMA")
        }
    )
    if no_gdr:
        found.append(
            f"{', '.join(no_gdr)} without GPUDirect RDMA though the peer-memory module is "
            "loaded: check NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_READ, the GPU's distance to its NIC"
        )
    return "; ".join(found) or None
