"""The tier contract: a group whose transport contradicts its tier, or falls short of what its
nodes offer, is flagged with one line; one that keeps it is not."""

from __future__ import annotations

import pytest

from sweeper.fabric.contract import breaches
from sweeper.wire import Fabric, Link


def _over(*vias: str, rdma: tuple[str, ...] = (), peer_memory: bool = False) -> Fabric:
    links = tuple(Link(src=0, dst=1, via=via) for via in vias)
    return Fabric(links=links, rdma_devices=rdma, peer_memory=peer_memory)


@pytest.mark.parametrize(
    ("tier", "fabric"),
    [
        ("nvlink", _over("P2P/CUMEM")),
        ("nvlink", _over("P2P/CUMEM/read", "NVLS")),
        ("pcie", _over("SHM/direct/direct")),
        ("internode", _over("P2P/CUMEM", "NET/IB/0/GDRDMA", rdma=("mlx5_0/1",))),
        ("internode", _over("NET/Socket/0")),  # no RDMA device: sockets are all there is
        ("internode", _over("NET/IB/0/GDRDMA", peer_memory=True)),
        ("internode", _over("NET/IB/0")),  # no peer-memory module: no GPUDirect to expect
        ("cpu", Fabric()),
    ],
)
def test_a_transport_that_keeps_its_tier_is_not_flagged(tier: str, fabric: Fabric) -> None:
    assert breaches(tier, [fabric]) is None


def test_an_nvlink_group_through_host_memory_is_flagged() -> None:
    flag = breaches("nvlink", [_over("P2P/CUMEM"), _over("SHM/direct/direct")])

    assert flag is not None
    assert flag.startswith("nvlink group through SHM: check NCCL_P2P_DISABLE")


def test_an_nvlink_or_pcie_group_over_the_network_is_flagged() -> None:
    assert "nvlink group through NET/Socket" in (breaches("nvlink", [_over("NET/Socket/0")]) or "")
    assert "pcie group through NET/Socket" in (breaches("pcie", [_over("NET/Socket/0")]) or "")


def test_an_internode_group_over_sockets_where_its_nodes_have_rdma_is_flagged() -> None:
    fabrics = [_over("NET/Socket/0"), _over("NET/Socket/0", rdma=("mlx5_0/1", "mlx5_1/1"))]

    flag = breaches("internode", fabrics)

    assert flag is not None
    assert "over TCP sockets (NET/Socket)" in flag
    assert "(mlx5_0/1, mlx5_1/1)" in flag
    assert "NCCL_IB_DISABLE" in flag


def test_rdma_without_gpudirect_where_the_peer_memory_module_is_loaded_is_flagged() -> None:
    flag = breaches("internode", [_over("NET/IB/0", peer_memory=True)])

    assert flag is not None
    assert flag.startswith("NET/IB without GPUDirect RDMA though the peer-memory module")


def test_every_breach_of_a_row_is_said() -> None:
    flag = breaches("nvlink", [_over("SHM/direct/direct", "NET/IB/0", peer_memory=True)])

    assert flag is not None
    assert len(flag.split("; ")) == 2
