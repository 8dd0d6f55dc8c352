"""The simulated scan's fault models, each by its physics and without noise: a slowdown of any
severity, a pair that caps its rate beside a pair cut, a rack of slow nodes under one label,
pairs sharing a node, a node flaky at any rate, the counts `--faults` takes, fleets of two."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.ops.registry import REGISTRY
from sweeper.scan.fleet import Result, ScanGroup, Stage
from sweeper.scan.noise import QUIET
from sweeper.scan.simulate import (
    RACK_NODES,
    Costs,
    Fault,
    Oracle,
    Planted,
    factor,
    fleet_of,
    parse_faults,
    plant,
    simulate,
)

QUIET_COSTS = Costs(noise=QUIET)


def screen(*nodes: str) -> ScanGroup:
    return ScanGroup(wave=1, stage=Stage.SCREEN, nodes=nodes)


def figure(oracle: Oracle, group: ScanGroup, nodes: int = 8) -> float:
    got = oracle.measure(fleet_of(nodes, 2), group).busbw_gb_per_s
    assert got is not None
    return got


def test_a_capped_pair_slows_only_traffic_between_its_nodes_where_its_cap_binds() -> None:
    capped = Oracle(
        (Planted(fault=Fault.CAPPED_LINK, nodes=("n0000", "n0002"), rate=0.5),), QUIET_COSTS, 0
    )
    healthy = Oracle((), QUIET_COSTS, 0)
    pair, three = screen("n0000", "n0002"), screen("n0000", "n0001", "n0002")
    elsewhere = screen("n0000", "n0001", "n0003")
    # alone, the pair asks all of its NICs' rate of the path: the cap halves it
    assert figure(capped, pair) == pytest.approx(0.5 * figure(healthy, pair))
    # in three nodes it asks half of it of each pair: a cap of a half does not bind
    assert figure(capped, three) == pytest.approx(figure(healthy, three))
    assert figure(capped, elsewhere) == pytest.approx(figure(healthy, elsewhere))
    tight = Oracle(
        (Planted(fault=Fault.CAPPED_LINK, nodes=("n0000", "n0002"), rate=0.2),), QUIET_COSTS, 0
    )
    assert figure(tight, three) == pytest.approx(0.4 * figure(healthy, three))
    # a pair cut loses its share of every flow between its ends, whatever the group's size
    cut = Oracle(
        (Planted(fault=Fault.SLOW_LINK, nodes=("n0000", "n0002"), rate=0.5),), QUIET_COSTS, 0
    )
    assert figure(cut, three) == pytest.approx(0.5 * figure(healthy, three))


def test_a_slowdown_of_any_severity_is_what_each_slow_fault_keeps_of_its_speed() -> None:
    fleet = fleet_of(64, 2)
    faults = (Fault.SLOW_NODE, Fault.SLOW_GPU, Fault.SLOW_LINK, Fault.SLOW_NIC)
    planted = plant(fleet, faults, seed=1, slowdown=0.15)
    assert [p.speed for p in planted] == [0.85] * 4
    node = planted[0].nodes[0]
    other = next(n for n in fleet.ids if n not in {x for p in planted for x in p.nodes})
    oracle = Oracle(planted[:1], QUIET_COSTS, 0)
    healthy = Oracle((), QUIET_COSTS, 0)
    group = screen(node, other)
    assert figure(oracle, group, 64) == pytest.approx(0.85 * figure(healthy, group, 64))


def test_a_nic_says_so_in_sysfs_only_where_it_trained_down_a_link_speed_step() -> None:
    group = screen("n0000", "n0001")
    fleet = fleet_of(2, 2)
    for rate, flags in ((0.5, ("NIC mlx5_3 at 200 of 400 Gb/s",)), (0.8, ())):
        nic = Planted(fault=Fault.SLOW_NIC, nodes=("n0000",), rate=rate)
        got = Oracle((nic,), QUIET_COSTS, 0).measure(fleet, group)
        assert got.flags("n0000") == flags


def test_a_rack_of_slow_nodes_shares_one_label_and_racks_are_scattered_in_id_order() -> None:
    fleet = fleet_of(1024, 8, racks=RACK_NODES, seed=3)
    by_rack: dict[str | None, list[int]] = {}
    for i, n in enumerate(fleet.nodes):
        by_rack.setdefault(n.domain, []).append(i)
    assert len(by_rack) == 1024 // RACK_NODES
    assert {len(members) for members in by_rack.values()} == {RACK_NODES}
    planted = plant(fleet, (Fault.SLOW_NODE,) * RACK_NODES, seed=5, rack=True)
    (rack,) = {fleet.node(p.nodes[0]).domain for p in planted}
    assert sorted(p.nodes[0] for p in planted) == sorted(fleet.ids[i] for i in by_rack[rack])
    # the policy's blocks are runs of ids: a rack is not one of them
    positions = by_rack[rack]
    assert max(positions) - min(positions) > 4 * RACK_NODES
    assert fleet_of(64, 8).nodes[0].domain is None  # no label where none is asked


def test_pairs_on_a_hub_share_one_end_and_each_has_its_own_other_end() -> None:
    fleet = fleet_of(100, 4)
    for hub in (2, 3):
        planted = plant(fleet, (Fault.SLOW_LINK,) * hub, seed=hub, hub=hub)
        ends = [set(p.nodes) for p in planted]
        (shared,) = set.intersection(*ends)
        assert len(set.union(*ends)) == hub + 1
        assert all(p.subject[1] == tuple(sorted(p.nodes)) for p in planted)
        assert shared in fleet.ids


def test_a_node_flaky_at_one_in_five_fails_about_a_fifth_of_its_tests() -> None:
    flaky = Planted(fault=Fault.FLAPPING, nodes=("n0001",), fails=0.2)
    oracle = Oracle((flaky,), QUIET_COSTS, seed=7)
    fleet = fleet_of(4, 2)
    failed = sum(
        oracle.measure(fleet, screen("n0000", "n0001")).result is Result.FAILED
        for _ in range(10_000)
    )
    # binomial(10000, 0.2): 2000 +- 40 a sigma; 8 sigmas cannot be crossed by chance
    assert abs(failed - 2000) < 320
    assert Planted(fault=Fault.FLAPPING, nodes=("n0001",)).failing == 0.5  # one in two


def test_faults_are_given_as_counts_of_each_class_with_no_cap_of_sixteen() -> None:
    assert (
        parse_faults("slow-node=26,capped-link=2")
        == (Fault.SLOW_NODE,) * 26 + (Fault.CAPPED_LINK,) * 2
    )
    assert len(parse_faults("40")) == 40
    args = ["scan", "--simulate", "--nodes", "64", "--gpus-per-node", "2"]
    more = ["--faults", "slow-node=20", "--slowdown", "0.3", "--format", "json"]
    result = CliRunner().invoke(app, [*args, *more])
    assert result.exit_code in (0, 1), result.output
    planted = json.loads(result.stdout)["planted"]
    assert len(planted) == 20
    assert [p["rate"] for p in planted] == pytest.approx([0.7] * 20)


def test_a_fleet_of_two_nodes_plants_its_one_pair_and_scans() -> None:
    sim = simulate(nodes=2, gpus_per_node=8, faults=(Fault.SLOW_LINK,), seed=0)
    (link,) = sim.planted
    assert link.nodes == ("n0000", "n0001")
    assert sim.waves


def test_a_bus_factor_is_the_registrys_for_every_operation() -> None:
    for name in ("all_reduce", "all_to_all", "send_recv", "reduce_scatter", "broadcast"):
        assert factor(name, 16) == REGISTRY[name].busbw_factor(16)
    assert factor("reduce_scatter", 16) == pytest.approx(15 / 16)
    assert factor("all_reduce", 1) == 1.0  # a group of one rank moves nothing across
