"""Recorded NVML topologies -> the link matrix, NVLink islands, tiers and groups."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from sweeper.planning.placement import Placement, classify, expected_placement, groups
from sweeper.topology import Node

DATA = Path(__file__).parents[1] / "data" / "topologies"


def node(name: str) -> Node:
    return Node.from_record(json.loads((DATA / f"{name}.json").read_text()))


def place(*nodes: Node, backend: str = "nccl") -> Placement:
    return expected_placement(backend, nodes, [len(n.gpus) or 2 for n in nodes])


def tiers(found: list) -> Counter[str]:  # type: ignore[type-arg]
    return Counter(g.tier if g.variant == "default" else f"{g.tier}/{g.variant}" for g in found)


@pytest.mark.parametrize(
    ("name", "matrix"),
    [
        (
            "h200x4-nvswitch",
            [
                ["X", "NV18", "NV18", "NV18"],
                ["NV18", "X", "NV18", "NV18"],
                ["NV18", "NV18", "X", "NV18"],
                ["NV18", "NV18", "NV18", "X"],
            ],
        ),
        (
            "a100x4-nvlink-pairs",
            [
                ["X", "NV12", "SYS", "SYS"],
                ["NV12", "X", "SYS", "SYS"],
                ["SYS", "SYS", "X", "NV12"],
                ["SYS", "SYS", "NV12", "X"],
            ],
        ),
        ("rtx3060x2-pcie", [["X", "PHB"], ["PHB", "X"]]),
        (
            "l40sx4-two-numa",
            [
                ["X", "PIX", "SYS", "SYS"],
                ["PIX", "X", "SYS", "SYS"],
                ["SYS", "SYS", "X", "PIX"],
                ["SYS", "SYS", "PIX", "X"],
            ],
        ),
        ("cpu-no-nvml", []),
    ],
)
def test_link_matrix_reads_like_nvidia_smi_topo(name: str, matrix: list[list[str]]) -> None:
    assert [list(row) for row in node(name).links] == matrix


def test_nvswitch_node_is_one_island_with_every_pair_nv18() -> None:
    dgx = node("dgx-h100-nvswitch")
    assert dgx.islands() == [tuple(range(8))]
    assert {dgx.links[a][b] for a in range(8) for b in range(8) if a != b} == {"NV18"}
    assert [g.numa_node for g in dgx.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_link_bandwidths_come_from_nvml_speed_or_version() -> None:
    h200 = node("h200x4-nvswitch").gpus[0]
    assert h200.nvlink_gb_per_s == pytest.approx(18 * 26.5625)  # NVLink 4.0 by version enum
    assert h200.pcie_gb_per_s == pytest.approx(16 * 3.938)  # gen 5 x16
    assert node("dgx-h100-nvswitch").gpus[0].nvlink_gb_per_s == pytest.approx(18 * 26.562)
    assert node("a100x4-nvlink-pairs").gpus[0].nvlink_gb_per_s == pytest.approx(12 * 25.0)
    assert node("rtx3060x2-pcie").gpus[1].pcie_gb_per_s == pytest.approx(4 * 1.969)


def test_a_node_without_nvml_is_reported_as_such() -> None:
    cpu = node("cpu-no-nvml")
    assert not cpu.nvml
    assert cpu.gpus == ()
    assert cpu.cpus == 2


@pytest.mark.parametrize(
    ("name", "world_tier", "expected"),
    [
        # island (4) + 6 pairs; the forced host path again over the island and its pairs
        ("h200x4-nvswitch", "nvlink", {"nvlink": 7, "pcie/p2p-off": 7}),
        ("dgx-h100-nvswitch", "nvlink", {"nvlink": 29, "pcie/p2p-off": 29}),
        # each bridged pair; GPU0+GPU2 (one per island) and the 4 pairs across, once each
        ("a100x4-nvlink-pairs", "pcie", {"nvlink": 2, "pcie": 4}),
        ("rtx3060x2-pcie", "pcie", {"pcie": 1}),
        ("l40sx4-two-numa", "pcie", {"pcie": 7}),  # all four, and the 6 pairs
    ],
)
def test_tiers_and_groups_of_one_node(name: str, world_tier: str, expected: dict[str, int]) -> None:
    placement = place(node(name))
    everyone = [m.rank for m in placement.members]
    assert classify(placement, everyone) == world_tier
    found = groups(placement, ("nvlink", "pcie", "internode"))
    assert tiers(found) == expected
    assert len({(g.variant, g.ranks) for g in found}) == len(found)  # each group once
    assert all(len(g.ranks) >= 2 for g in found)


def test_bridged_pairs_are_nvlink_and_the_cross_pairs_pcie() -> None:
    found = groups(place(node("a100x4-nvlink-pairs")), ("nvlink", "pcie"))
    assert {g.ranks for g in found if g.tier == "nvlink"} == {(0, 1), (2, 3)}
    assert {g.ranks for g in found if g.tier == "pcie"} == {(0, 2), (0, 3), (1, 2), (1, 3)}
    placement = place(node("a100x4-nvlink-pairs"))
    assert [placement.group_id(g) for g in found][:2] == ["nvlink:n0g0,1", "nvlink:n0g2,3"]


def test_pairs_none_keeps_only_the_larger_groups() -> None:
    placement = place(node("dgx-h100-nvswitch"))
    found = groups(placement, ("nvlink", "pcie"), pairs=False)
    assert [(placement.group_id(g), g.variant) for g in found] == [
        ("nvlink:n0g0,1,2,3,4,5,6,7", "default"),
        ("pcie:n0g0,1,2,3,4,5,6,7/p2p-off", "p2p-off"),
    ]


def test_internode_groups_across_nodes_and_the_forced_network_variant() -> None:
    two = place(node("h200x4-nvswitch"), node("h200x4-nvswitch"))
    found = groups(two, ("internode",), force_network=True)
    assert [(two.group_id(g), g.variant) for g in found] == [
        ("internode:n0g0+n1g0", "default"),  # one GPU per node (with two nodes: the node pair)
        ("internode:n0g0,1,2,3+n1g0,1,2,3", "default"),
        ("internode:n0g0+n1g0/network", "network"),
        ("internode:n0g0,1,2,3+n1g0,1,2,3/network", "network"),
    ]
    assert classify(two, [0, 4]) == "internode"
    assert two.n_nodes([0, 4]) == 2


def test_every_node_pair_is_planned_with_three_nodes() -> None:
    three = place(*(node("rtx3060x2-pcie") for _ in range(3)))
    found = [g for g in groups(three, ("internode",)) if g.tier == "internode"]
    assert [g.ranks for g in found] == [(0, 2, 4), (0, 2), (0, 4), (2, 4), (0, 1, 2, 3, 4, 5)]


def test_cpu_ranks_form_the_cpu_tier_per_node_and_internode_across() -> None:
    cpus = place(node("cpu-no-nvml"), node("cpu-no-nvml"), backend="gloo")
    found = groups(cpus, ("cpu", "internode", "nvlink", "pcie"))
    assert tiers(found) == {"cpu": 2, "internode": 2}
    assert classify(cpus, [0, 1]) == "cpu"


def test_world_is_one_group_of_every_rank() -> None:
    placement = place(node("h200x4-nvswitch"))
    (world,) = groups(placement, ("world",))
    assert (world.tier, world.ranks) == ("nvlink", (0, 1, 2, 3))
    assert placement.group_id(world) == "nvlink:n0g0,1,2,3"


@pytest.mark.parametrize(
    ("backend", "tier", "name"), [("nccl", "local", "local:n0g0"), ("gloo", "cpu", "cpu:n0r0")]
)
def test_a_set_of_one_rank_runs_its_world_group_alone(backend: str, tier: str, name: str) -> None:
    one = expected_placement(backend, [node("h200x4-nvswitch")], [1])
    (world,) = groups(one, ("world", "nvlink", "pcie", "cpu", "internode"))
    assert (world.tier, world.ranks) == (tier, (0,))
    assert one.group_id(world) == name
    everyone = groups(place(node("h200x4-nvswitch")), ("world", "nvlink", "pcie"))
    assert min(len(g.ranks) for g in everyone) == 2  # with more ranks, no one runs alone


def test_a_pcie_link_counts_the_width_it_trained_at() -> None:
    raw = json.loads((DATA / "l40sx4-two-numa.json").read_text())
    raw["gpus"][0]["pcie_width"] = 8  # a x16 GPU in a x8 slot
    narrowed = Node.from_record(raw)
    assert narrowed.gpus[0].pcie_gb_per_s == pytest.approx(8 * 1.969)
    assert narrowed.gpus[1].pcie_gb_per_s == pytest.approx(16 * 1.969)  # none recorded: max


def _sysfs(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    return root


def test_nics_are_read_from_sysfs_active_and_physical_only(tmp_path: Path) -> None:
    from sweeper.topology import read_nics

    root = _sysfs(
        tmp_path,
        {
            "infiniband/mlx5_0/ports/1/state": "4: ACTIVE",
            "infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)",
            "infiniband/mlx5_1/ports/1/state": "1: DOWN",
            "infiniband/mlx5_1/ports/1/rate": "400 Gb/sec (4X NDR)",
            "net/eth0/operstate": "up",
            "net/eth0/speed": "100000",
            "net/eth0/device/vendor": "0x15b3",
            "net/eth1/operstate": "down",  # down: its speed is not read
            "net/eth1/device/vendor": "0x15b3",
            "net/lo/operstate": "unknown",  # virtual: no device
            "net/docker0/operstate": "up",
            "net/docker0/speed": "10000",
        },
    )
    assert read_nics(root) == [
        {"name": "mlx5_0/1", "kind": "rdma", "gb_per_s": 50.0},
        {"name": "eth0", "kind": "ethernet", "gb_per_s": 12.5},
    ]
    assert read_nics(tmp_path / "absent") == []


def test_a_nodes_network_is_its_rdma_ports_together_else_its_ethernet() -> None:
    assert node("dgx-h100-nvswitch").network_gb_per_s == pytest.approx(8 * 50.0)
    ethernet = Node.from_record({"nics": [{"name": "eth0", "kind": "ethernet", "gb_per_s": 3.125}]})
    assert ethernet.network_gb_per_s == pytest.approx(3.125)
    assert node("h200x4-nvswitch").network_gb_per_s is None  # not recorded: unknown


@pytest.mark.parametrize(
    ("name", "tier", "ranks", "link_gb_per_s"),
    [
        ("h200x4-nvswitch", "nvlink", (0, 1, 2, 3), 18 * 26.5625),
        ("h200x4-nvswitch", "pcie", (0, 1), 16 * 3.938),  # p2p-off: through the host
        ("rtx3060x2-pcie", "pcie", (0, 1), 4 * 1.969),  # the slower of the two: x4
        ("a100x4-nvlink-pairs", "nvlink", (0, 1), 12 * 25.0),
        ("dgx-h100-nvswitch", "internode", (0, 8), 8 * 50.0),  # the NICs of a node together
        ("h200x4-nvswitch", "internode", (0, 4), None),  # NIC speeds not recorded
        ("h200x4-nvswitch", "local", (0,), None),
    ],
)
def test_the_link_a_tier_crosses_has_its_peak_from_the_recorded_topology(
    name: str, tier: str, ranks: tuple[int, ...], link_gb_per_s: float | None
) -> None:
    found = place(node(name), node(name)).link_gb_per_s(tier, ranks)
    assert found == (pytest.approx(link_gb_per_s) if link_gb_per_s else None)


def test_cpu_ranks_have_no_link_peak() -> None:
    cpu = place(node("cpu-no-nvml"), backend="gloo")
    assert cpu.link_gb_per_s("cpu", (0, 1)) is None


def test_busbw_is_a_share_of_the_link_where_its_peak_is_known() -> None:
    from sweeper.driver.measurement import pct_of_link

    h200 = place(node("h200x4-nvswitch"))
    link = h200.link_gb_per_s("nvlink", (0, 1, 2, 3))
    assert pct_of_link(18 * 26.5625 * 0.75, link) == pytest.approx(75.0)
    assert pct_of_link(None, link) is None  # a failed point
    assert pct_of_link(100.0, None) is None  # no known peak
