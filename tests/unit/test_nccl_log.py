"""NCCL's INFO lines read into each process's connections, channels and calls: on output
recorded on 4 H200 for each transport there, and on lines written from NCCL's formats for
the fabrics no machine here has (tests/data/nccl_logs/README.md says which is which)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.fabric.nccl_log import ProcessLog, net_device, read, spelled, summary, transport
from sweeper.wire import Link

LOGS = Path(__file__).parents[1] / "data" / "nccl_logs"
RECORDED = LOGS / "h200-x4-2026-11-27"
WRITTEN = LOGS / "written"


def _read(path: Path) -> dict[int, ProcessLog]:
    return read(path.read_text().splitlines())


def _only(path: Path) -> ProcessLog:
    (reading,) = _read(path).values()
    return reading


@pytest.mark.parametrize(
    ("log", "named", "channels"),
    [("p2p", "P2P/CUMEM", 24), ("shm", "SHM", 4), ("socket", "NET/Socket", 2)],
)
def test_each_recorded_process_names_the_transport_nccl_chose(
    log: str, named: str, channels: int
) -> None:
    readings = _read(RECORDED / f"{log}.log")

    assert len(readings) == 4  # one process per GPU
    for reading in readings.values():
        assert summary(reading.links) == named
        assert reading.channels == channels


def test_a_recorded_process_connects_to_every_peer_it_sent_to() -> None:
    readings = _read(RECORDED / "p2p.log")
    first = readings[min(readings)]

    # its ring's neighbour, then every peer for all_to_all's point-to-point channels
    assert sorted({spelled(link) for link in first.links}) == [
        "0->1 P2P/CUMEM",
        "0->2 P2P/CUMEM",
        "0->3 P2P/CUMEM",
    ]


def test_a_recorded_socket_connection_names_its_device_and_both_directions() -> None:
    reading = _read(RECORDED / "socket.log")[1805]

    assert Link(src=2, dst=0, via="NET/Socket/0") in reading.links  # [receive]
    assert Link(src=0, dst=1, via="NET/Socket/0/Shared") in reading.links  # all_to_all's
    assert reading.devices == {("Socket", 0): "eth0"}


def test_the_recorded_calls_give_nccls_algorithm_and_protocol_in_order() -> None:
    readings = _read(RECORDED / "socket.log")

    # NCCL 2.28 prints TUNING on a communicator's rank 0 only
    assert [bool(r.calls) for r in readings.values()] == [True, False, False, False]
    assert readings[1805].calls == (
        ("TREE", "LL"),  # all_reduce 1 KiB
        ("RING", "SIMPLE"),  # 1 MiB
        ("RING", "SIMPLE"),  # 64 MiB
        ("RING", "SIMPLE"),  # all_gather
    )


def test_infiniband_with_gpudirect_rdma_names_the_plugin_its_devices_and_gdr() -> None:
    reading = _only(WRITTEN / "ib.log")

    assert summary(reading.links) == "mixed:NET/IB+GDRDMA,P2P/CUMEM/read"
    assert reading.devices == {("IB", 0): "mlx5_0", ("IB", 1): "mlx5_1"}
    assert Link(src=0, dst=2, via="NET/IB/1(1)/GDRDMA/Shared") in reading.links  # PXN
    assert net_device("NET/IB/1(1)/GDRDMA/Shared") == ("IB", 1)
    assert reading.channels == 4
    assert reading.calls == (("RING", "SIMPLE"),)


def test_rdma_without_gpudirect_is_net_ib_alone() -> None:
    assert summary(_only(WRITTEN / "ib-no-gdr.log").links) == "NET/IB"


def test_efa_is_the_aws_plugin_by_its_name_with_a_space_in_it() -> None:
    reading = _only(WRITTEN / "efa.log")

    assert summary(reading.links) == "mixed:NET/AWS Libfabric+GDRDMA,P2P/CUMEM/read"
    assert net_device("NET/AWS Libfabric/0/GDRDMA") == ("AWS Libfabric", 0)


def test_nvls_is_a_connection_of_the_group_as_a_whole() -> None:
    reading = _only(WRITTEN / "nvls.log")

    assert Link(src=None, dst=None, via="NVLS") in reading.links
    assert summary(reading.links) == "mixed:NVLS,P2P/CUMEM/read"
    assert reading.calls == (("NVLS", "SIMPLE"),)
    assert reading.channels == 32


def test_collnet_is_a_rank_to_its_reducing_network() -> None:
    reading = _only(WRITTEN / "collnet.log")

    assert summary(reading.links) == "CollNet/SHARP+GDRDMA"
    assert {spelled(link) for link in reading.links} == {"0 COLLNET/SHARP/0/GDRDMA"}
    assert reading.calls == (("COLLNET_DIRECT", "SIMPLE"),)


def test_other_versions_forms_read_too() -> None:
    reading = _only(WRITTEN / "older.log")

    assert sorted(transport(link.via) for link in reading.links) == [
        "P2P/IPC",
        "P2P/direct/read",
        "P2P/indirect",
        "SHM",
    ]
    assert reading.calls == (("RING", "SIMPLE"),)  # NCCL 2.23's numbers


@pytest.mark.parametrize(
    ("via", "named"),
    [
        ("P2P/CUMEM", "P2P/CUMEM"),
        ("P2P/CUMEM/read/CE", "P2P/CUMEM/read/CE"),
        ("P2P/MNNVL", "P2P/MNNVL"),
        ("SHM/direct/direct", "SHM"),
        ("NET/Socket/0", "NET/Socket"),
        ("NET/IB/0/GDRDMA(PCI)/Shared", "NET/IB+GDRDMA"),
        ("NVLS", "NVLS"),
    ],
)
def test_a_connection_is_named_by_its_transport(via: str, named: str) -> None:
    assert transport(via) == named


def test_no_connection_has_no_summary() -> None:
    assert summary([]) is None


def test_lines_not_nccls_info_are_skipped() -> None:
    lines = [
        "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",  # no prefix: someone else's print
        "vm:1:1 [0] NCCL WARN Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct",
        "vm:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
    ]

    assert read(lines)[1].links == (Link(src=0, dst=1, via="P2P/CUMEM"),)
