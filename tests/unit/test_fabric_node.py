"""What a node offers NCCL's network, read from recorded /sys and /proc trees
(tests/data/sysfs), and the preflight's lines on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.fabric import node, preflight
from sweeper.fabric.node import Port

DATA = Path(__file__).parents[1] / "data" / "sysfs"
IB, EFA, NONE = DATA / "ib-node", DATA / "efa-node", DATA / "no-rdma"


def test_an_infiniband_node_lists_each_port_its_kind_state_and_rate() -> None:
    assert node.ports(IB) == (
        Port(name="mlx5_0/1", kind="IB", state="ACTIVE", rate="400 Gb/sec (4X NDR)"),
        Port(name="mlx5_1/1", kind="IB", state="ACTIVE", rate="400 Gb/sec (4X NDR)"),
        Port(name="mlx5_2/1", kind="IB", state="DOWN", rate="10 Gb/sec (4X SDR)"),
        Port(name="mlx5_3/1", kind="RoCE", state="ACTIVE", rate="200 Gb/sec (4X HDR)"),
    )
    assert node.rdma_devices(IB) == ("mlx5_0/1", "mlx5_1/1", "mlx5_3/1")
    assert node.peer_memory_module(IB) == "nvidia_peermem"  # from /proc/modules
    assert not node.dma_buf(IB)  # NVIDIA's proprietary module exports none


def test_an_efa_node_is_told_by_its_driver_and_has_dma_buf_and_the_ofi_plugin() -> None:
    (efa,) = node.ports(EFA)
    assert (efa.name, efa.kind, efa.active) == ("rdmap79s0/1", "EFA", True)
    assert node.peer_memory_module(EFA) is None
    assert node.dma_buf(EFA)  # kernel 6.8, NVIDIA's open kernel module
    assert node.net_plugin({}, EFA) == "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
    assert node.net_plugin({"NCCL_NET_PLUGIN": "none"}, EFA) is None
    assert node.net_plugin({"NCCL_NET_PLUGIN": "ofi"}, EFA) == "ofi"


def test_a_node_without_rdma_has_no_port_nor_gpudirect() -> None:
    offer = node.offer({}, NONE)
    assert (offer.ports, offer.peer_memory, offer.dma_buf, offer.net_plugin) == (
        (),
        None,
        False,
        None,
    )
    assert node.between_nodes(offer) == "NET/Socket"


@pytest.mark.parametrize(
    ("root", "environ", "chosen"),
    [
        (IB, {}, "NET/IB+GDRDMA"),
        (IB, {"NCCL_IB_DISABLE": "1"}, "NET/Socket"),
        (IB, {"NCCL_NET": "Socket"}, "NET/Socket"),
        (EFA, {}, "NET/<libnccl-net-ofi.so>"),
        (EFA, {"NCCL_NET_PLUGIN": "none"}, "NET/Socket"),  # NCCL's IB transport drives no EFA
        (NONE, {}, "NET/Socket"),
    ],
)
def test_the_transport_nccl_will_choose_between_two_such_nodes(
    root: Path, environ: dict[str, str], chosen: str
) -> None:
    assert node.between_nodes(node.offer(environ, root)) == chosen


def test_the_preflight_says_each_nodes_offer_on_one_line() -> None:
    (line,) = preflight.lines(["h0"], [node.offer({"NCCL_IB_HCA": "mlx5"}, IB)], False)
    assert line == (
        "preflight h0: RDMA mlx5_0/1 IB ACTIVE 400 Gb/sec (4X NDR), mlx5_1/1 IB ACTIVE "
        "400 Gb/sec (4X NDR), mlx5_2/1 IB DOWN 10 Gb/sec (4X SDR), mlx5_3/1 RoCE ACTIVE "
        "200 Gb/sec (4X HDR); GPUDirect RDMA nvidia_peermem loaded; net plugin none; "
        "NCCL_IB_HCA=mlx5; between nodes NCCL will use NET/IB+GDRDMA"
    )


def test_the_preflight_warns_where_a_run_would_measure_tcp() -> None:
    offers = [
        node.offer({"NCCL_IB_DISABLE": "1"}, IB),
        node.offer({"NCCL_NET_PLUGIN": "none"}, EFA),
    ]
    _, _, ib, efa = preflight.lines(["h0", "h1"], offers, force_network=False)
    assert ib.startswith("warning: h0 has RDMA ports (mlx5_0/1, mlx5_1/1, mlx5_3/1) but NCCL")
    assert "check NCCL_IB_DISABLE" in ib
    assert efa.startswith("warning: h1 has RDMA ports (rdmap79s0/1) but NCCL will use TCP")
    assert "install aws-ofi-nccl" in efa


def test_force_network_on_a_node_without_rdma_says_it_measures_tcp() -> None:
    offers = [node.offer({}, NONE)] * 2
    *lines, warning, other = preflight.lines(["h0", "h1"], offers, force_network=True)
    assert lines[0].startswith("preflight h0: RDMA none; GPUDirect RDMA no; net plugin none")
    assert warning == (
        "warning: h0 has no RDMA device: --force-network measures TCP sockets (NET/Socket)"
    )
    assert other.startswith("warning: h1 has no RDMA device")
    assert preflight.lines(["h0", "h1"], offers, force_network=False)[2:] == []
    *_, alone = preflight.lines(["h0"], offers[:1], force_network=True)
    assert alone == "warning: --force-network on one node: it has no internode group to force"


def test_the_preflight_warns_where_rdma_goes_through_host_memory() -> None:
    port = Port(name="mlx5_0/1", kind="IB", state="ACTIVE", rate="400 Gb/sec (4X NDR)")
    (warning,) = preflight.warnings("h0", node.Offer(ports=(port,)), force_network=True)
    assert warning.startswith("h0: NET/IB without GPUDirect RDMA")
