"""The right subject where a node's own GPUs cannot name it (issue 52, item 5): a node of two
GPUs pairs each GPU with a proven GPU of another node (`scan.beside`), and a node whose
isolation named a slow GPU still has its paths across nodes tested, with that GPU left out
of its groups and each group judged per GPU's NIC. On simulated fleets through the same
policy and judge as a real scan."""

from __future__ import annotations

import pytest

from sweeper.scan.beside import BASELINES, PARTNERS, beside_waves
from sweeper.scan.fleet import Stage
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Fault, Planted, fleet_of, run
from sweeper.scan.verdict import Health, Subject, Verdict


def _condemned(verdicts: tuple[Verdict, ...]) -> list[tuple[Subject, tuple[str, ...], int | None]]:
    return [(v.subject, v.nodes, v.gpu) for v in verdicts if v.condemned]


@pytest.mark.parametrize("seed", range(4))
def test_a_slow_gpu_of_a_node_of_two_is_named_beside_proven_gpus_its_other_gpu_healthy(
    seed: int,
) -> None:
    fleet = fleet_of(7, 2)
    node, gpu = fleet.ids[seed % 7], seed % 2
    planted = (Planted(fault=Fault.SLOW_GPU, nodes=(node,), gpu=gpu, rate=0.8),)
    sim = run(fleet, planted, strategy=Strategy.parse("adaptive", seed=seed), seed=seed)
    assert _condemned(sim.verdicts) == [(Subject.GPU, (node,), gpu)]
    by_gpu = {v.gpu: v for v in sim.verdicts if v.subject is Subject.GPU and v.nodes == (node,)}
    slow, other = by_gpu[gpu], by_gpu[1 - gpu]
    assert slow.health is Health.SLOW
    assert other.health is Health.HEALTHY
    assert "beside proven GPUs of other nodes" in slow.evidence
    assert "SM clock 1683 MHz against its peers' 1980" in slow.evidence  # its telemetry too
    assert slow.busbw_gb_per_s is not None
    assert slow.threshold_gb_per_s is not None
    assert slow.busbw_gb_per_s < slow.threshold_gb_per_s <= (other.busbw_gb_per_s or 0)
    assert len(set(slow.partners)) == PARTNERS
    assert node not in slow.partners
    (verdict,) = (v for v in sim.verdicts if v.subject is Subject.NODE and v.nodes == (node,))
    assert verdict.health is Health.HEALTHY  # its paths tested with its slow GPU left out
    assert f"its gpu{gpu} (slow) left out of its groups across nodes" in verdict.notes


def test_each_gpu_of_a_node_of_two_is_paired_with_a_different_proven_gpu_in_turn() -> None:
    fleet = fleet_of(7, 2)
    suspect, proven = fleet.ids[3], [n for n in fleet.ids if n != fleet.ids[3]]
    waves = beside_waves(fleet, [suspect], proven, start=5)
    assert [w.index for w in waves] == list(range(5, 5 + 2 * PARTNERS))
    partners: dict[int, list[str]] = {0: [], 1: []}
    for wave in waves:
        nodes = [n for g in wave.groups for n in g.nodes]
        assert len(nodes) == len(set(nodes))  # a pair's path is its two nodes' network
        (mine,) = (g for g in wave.groups if g.tested)
        assert mine.nodes[0] == suspect
        assert mine.partners == (mine.nodes[1],)
        assert mine.stage is Stage.ISOLATE
        assert mine.ranks(fleet) == 2
        partners[mine.subsets[0][0]].append(mine.nodes[1])
        baselines = [g for g in wave.groups if not g.tested]
        assert baselines
        assert all(set(g.nodes) <= set(proven) for g in baselines)
    assert all(len(set(p)) == PARTNERS for p in partners.values())
    assert beside_waves(fleet, [suspect], proven[:1], start=5) == []  # no pair to hold it to


@pytest.mark.parametrize("seed", range(6))
def test_at_three_nodes_of_two_gpus_the_proven_pairs_run_alone_and_name_the_slow_gpu(
    seed: int,
) -> None:
    """Two proven nodes, each a suspect GPU's partner in turn, leave none over for a proven
    pair beside it: the other GPU was `unconfirmed` for want of a figure to hold it to."""
    fleet = fleet_of(3, 2)
    node, gpu = fleet.ids[seed % 3], seed % 2
    proven = [n for n in fleet.ids if n != node]
    waves = beside_waves(fleet, [node], proven, start=1)
    assert len(waves) == 2 * PARTNERS + BASELINES
    own = [w.groups for w in waves if not any(g.tested for g in w.groups)]
    assert [[set(g.nodes) for g in groups] for groups in own] == [[set(proven)]] * BASELINES
    planted = (Planted(fault=Fault.SLOW_GPU, nodes=(node,), gpu=gpu, rate=0.5),)
    sim = run(fleet, planted, strategy=Strategy.parse("adaptive", seed=seed), seed=seed)
    assert _condemned(sim.verdicts) == [(Subject.GPU, (node,), gpu)]
    (other,) = (
        v for v in sim.verdicts if v.subject is Subject.GPU and v.nodes == (node,) and v.gpu != gpu
    )
    assert other.health is Health.HEALTHY, other.evidence
    assert "beside proven GPUs of other nodes" in other.evidence


@pytest.mark.parametrize("seed", range(3))
def test_a_slow_pair_at_a_node_that_also_has_a_slow_gpu_is_found_with_the_gpu_left_out(
    seed: int,
) -> None:
    fleet = fleet_of(49, 8)
    hub, far = fleet.ids[seed], fleet.ids[30 + seed]
    planted = (
        Planted(fault=Fault.SLOW_GPU, nodes=(hub,), gpu=5, rate=0.5),
        Planted(fault=Fault.SLOW_LINK, nodes=(hub, far), rate=0.5),
    )
    sim = run(fleet, planted, strategy=Strategy.parse("adaptive", seed=seed), seed=seed)
    assert sorted(_condemned(sim.verdicts)) == [
        (Subject.GPU, (hub,), 5),
        (Subject.LINK, (hub, far), None),
    ]
    across = [o.group for o in sim.outcomes if o.group.stage is Stage.SCREEN]
    held = [g for g in across if hub in g.nodes]
    assert held
    assert all(g.subsets[g.nodes.index(hub)] == (0, 1, 2, 3, 4, 6, 7) for g in held)
