"""How a judged figure is normalised across nodes is its operation's descriptor's to say
(`Collective.every_pair`), not its name's: a plugin's operation that sends to every rank is
judged per NIC as all_to_all is, in the judge and in the simulation's cost model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sweeper.ops.descriptor import Collective
from sweeper.ops.registry import REGISTRY, register
from sweeper.scan.fleet import Fleet, FleetNode, GroupOutcome, Result, ScanGroup, Stage
from sweeper.scan.simulate import Costs
from sweeper.scan.thresholds import Thresholds, judge_groups, measure

GiB = 1 << 30
FLEET = Fleet(nodes=tuple(FleetNode(id=f"n{i}", host=f"h{i}", gpus=4) for i in range(16)))


@pytest.fixture
def plugin(isolated_registry: None) -> tuple[Collective, Collective]:
    """Two plugin operations of all_gather's bus factor, (n-1)/n as all_to_all's, under a
    name of their own (their rows' `op`, "exchange", is not it): one that sends to every
    rank, one that does not say so."""
    return (
        register(
            replace(REGISTRY["all_gather"], name="plugin:exchange", op="exchange", every_pair=True)
        ),
        register(replace(REGISTRY["all_gather"], name="plugin:gather", op="gather_v")),
    )


def screen(op: str) -> list[GroupOutcome]:
    """Groups across nodes of 2 and of 4 nodes, each GPU moving 45 GB/s (one 40) through its
    NIC, as an all_to_all's busbw counts it."""
    out = []
    for k, size in enumerate((2, 2, 4, 4, 2, 4, 2, 4)):
        nodes = tuple(f"n{(2 * k + i) % 16}" for i in range(size))
        group = ScanGroup(wave=1 + k // 4, stage=Stage.SCREEN, nodes=nodes)
        ranks = group.ranks(FLEET)
        through = 40.0 if k == 5 else 45.0
        busbw = through * size / (size - 1) * (ranks - 1) / ranks
        out.append(
            GroupOutcome(group=group, result=Result.OK, busbw_gb_per_s=busbw, size_bytes=GiB, op=op)
        )
    return out


def test_a_plugin_operation_that_sends_to_every_rank_is_judged_per_nic_as_all_to_all(
    plugin: tuple[Collective, Collective],
) -> None:
    thresholds = Thresholds(min_samples=4)
    a2a = judge_groups(FLEET, screen("all_to_all"), thresholds)
    exchange = judge_groups(FLEET, screen("exchange"), thresholds)
    assert [j.figure_gb_per_s for j in exchange.values()] == [
        j.figure_gb_per_s for j in a2a.values()
    ]
    assert [j.threshold_gb_per_s for j in exchange.values()] == [
        j.threshold_gb_per_s for j in a2a.values()
    ]
    # every group's figure is what went through its NICs, whatever its size: one population
    assert {round(j.figure_gb_per_s or 0, 9) for j in exchange.values()} == {40.0, 45.0}
    assert len({j.threshold_gb_per_s for j in exchange.values()}) == 1
    assert measure(next(iter(exchange.values())).outcome) == "exchange through each GPU's NIC"


def test_a_plugin_operation_that_does_not_send_to_every_rank_is_judged_by_its_busbw(
    plugin: tuple[Collective, Collective],
) -> None:
    outcomes = screen("gather_v")
    judged = judge_groups(FLEET, outcomes, Thresholds(min_samples=4))
    assert [j.figure_gb_per_s for j in judged.values()] == [o.busbw_gb_per_s for o in outcomes]
    assert measure(outcomes[0]) == "gather_v busbw"


def test_the_cost_model_times_a_plugin_operation_that_sends_to_every_rank_as_all_to_all(
    plugin: tuple[Collective, Collective],
) -> None:
    costs = Costs()
    for nodes in (2, 4, 37):
        ranks = 8 * nodes
        a2a = costs.expected_s(Stage.SCREEN, "all_to_all", ranks, nodes, GiB)
        assert costs.expected_s(Stage.SCREEN, "exchange", ranks, nodes, GiB) == a2a
        # the fleet's all_reduce figure, not the NIC's: a plain busbw
        assert costs.expected_s(Stage.SCREEN, "gather_v", ranks, nodes, GiB) != a2a
