"""The network preflight's words. Before a run of several nodes (or with --force-network)
measures anything, it gives one line per node on what it offers NCCL's network. It warns where
the run would measure TCP: sockets between nodes that have RDMA ports, or --force-network on a
node with none. Pure: the offers are read on each node (`node.offer`)."""

from __future__ import annotations

from collections.abc import Sequence

from sweeper.fabric.node import Offer, between_nodes


def describe(host: str, node: Offer) -> str:
    """One node's line: its RDMA ports, GPUDirect RDMA, net plugin, the network variables
    set, and the transport NCCL will choose to another node like it."""
    ports = ", ".join(
        f"{port.name} {port.kind} {port.state}" + (f" {port.rate}" if port.rate else "")
        for port in node.ports
    )
    ways = [f"{node.peer_memory} loaded"] if node.peer_memory else []
    gpudirect = ", ".join(ways + ["dma-buf"] * node.dma_buf)
    variables = " ".join(f"{k}={v}" for k, v in node.variables)
    return (
        f"preflight {host}: RDMA {ports or 'none'}; GPUDirect RDMA {gpudirect or 'no'}; "
        f"net plugin {node.net_plugin or 'none'}"
        + (f"; {variables}" if variables else "")
        + f"; between nodes NCCL will use {between_nodes(node)}"
    )


def warnings(host: str, node: Offer, force_network: bool) -> list[str]:
    """What the run would measure that is not the node's network at its best."""
    chosen = between_nodes(node)
    active = ", ".join(port.name for port in node.rdma)
    found = []
    if chosen == "NET/Socket" and active:
        efa = any(port.kind == "EFA" for port in node.rdma)
        check = "install aws-ofi-nccl (EFA's NCCL plugin)" if efa else "check NCCL_IB_DISABLE"
        found.append(
            f"{host} has RDMA ports ({active}) but NCCL will use TCP sockets (NET/Socket) "
            f"between nodes: {check}, NCCL_NET, NCCL_NET_PLUGIN"
        )
    elif chosen == "NET/Socket" and force_network:
        found.append(
            f"{host} has no RDMA device: --force-network measures TCP sockets (NET/Socket)"
        )
    if chosen == "NET/IB" and node.rdma:
        found.append(
            f"{host}: NET/IB without GPUDirect RDMA (no peer-memory module, no dma-buf): "
            "data passes through host memory; load nvidia_peermem"
        )
    return found


def lines(hosts: Sequence[str], offers: Sequence[Offer], force_network: bool) -> list[str]:
    """Each node's line, then each warning (`warning: ...`)."""
    described = [describe(host, node) for host, node in zip(hosts, offers, strict=True)]
    warned = [
        f"warning: {line}"
        for host, node in zip(hosts, offers, strict=True)
        for line in warnings(host, node, force_network)
    ]
    if force_network and len(hosts) == 1:
        warned.append("warning: --force-network on one node: it has no internode group to force")
    return described + warned
