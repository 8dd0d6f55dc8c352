"""Groups across nodes of some GPUs of each (`ScanGroup.subsets`): the ranks a real scan
runs for one, its outcome read back on a resumed scan, and its figure per GPU's NIC where a
node takes part with fewer GPUs than the others (`Collective.nic_rate`'s `fewest`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sweeper.commands.plan_estimate import recorded_node, replicated
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import expected_placement
from sweeper.scan.fleet import GroupOutcome, Result, ScanGroup, ScanWave, Stage
from sweeper.scan.judge import judge
from sweeper.scan.plan import ScanPlan
from sweeper.scan.policy import ScanPolicy, Strategy
from sweeper.scan.simulate import Costs, Fault, Oracle, Planted, fleet_of
from sweeper.scan.thresholds import Thresholds, rate
from sweeper.scan.verdict import Health, Subject
from sweeper.scan.waves import plain, replayed
from sweeper.wire import Backend

DGX = Path(__file__).parents[1] / "data" / "topologies" / "dgx-h100-nvswitch.json"


def test_a_group_with_seven_gpus_of_a_node_beside_full_ones_is_judged_per_busiest_nic() -> None:
    a2a = REGISTRY["all_to_all"]
    ranks, nodes = 7 + 8, 2
    busbw = a2a.busbw_at(45.0, ranks, nodes, fewest=7)
    assert a2a.nic_rate(busbw, ranks, nodes, fewest=7) == pytest.approx(45.0)
    # its 7 GPUs each send 8/15 of their data to the other node, not half of it
    algbw = busbw / a2a.busbw_factor(ranks)
    assert algbw * 8 / 15 == pytest.approx(45.0)
    full = a2a.busbw_at(45.0, 16, nodes)
    assert a2a.nic_rate(full, 16, nodes, fewest=8) == pytest.approx(45.0)


def test_a_group_of_some_gpus_of_several_nodes_runs_those_ranks_and_reads_back() -> None:
    hosts = replicated(recorded_node(DGX), 3)
    ids = [n.node_id for n in hosts]
    placement = expected_placement(Backend.NCCL, hosts, [8, 8, 8])
    group = ScanGroup(
        wave=4,
        stage=Stage.ISOLATE,
        nodes=(ids[0], ids[2]),
        partners=(ids[2],),
        subsets=((1,), (6,)),
    )
    plan = ScanPlan(placement=placement, registry=REGISTRY, sizes=(8, 1 << 30))
    (step,) = plan.group(group).steps
    (part,) = step
    assert part.group.ranks == (1, 22)  # node 0's GPU 1, node 2's GPU 6
    wave = ScanWave(index=4, stage=Stage.ISOLATE, groups=(group,))
    done = GroupOutcome(group=group, result=Result.OK, busbw_gb_per_s=40.0)
    again = replayed(plain(wave, [done], 1.0), wave)
    assert again is not None
    assert again.outcomes == (done,)
    with pytest.raises(ValueError, match="one a node"):
        ScanGroup(wave=0, stage=Stage.SCREEN, nodes=(ids[0], ids[1]), subsets=((1,),))


def test_a_slow_gpu_left_out_of_a_group_across_nodes_holds_none_of_it_back() -> None:
    fleet = fleet_of(3, 8)
    a, b, _ = fleet.ids
    slow = (Planted(fault=Fault.SLOW_GPU, nodes=(a,), gpu=3, rate=0.5),)
    oracle = Oracle(slow, Costs(), seed=0)
    rest = tuple(g for g in range(8) if g != 3)
    left = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=(a, b), subsets=(rest, tuple(range(8))))
    whole = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=(a, b))
    without = rate(fleet, oracle.measure(fleet, left)) or 0.0
    held = rate(fleet, oracle.measure(fleet, whole)) or 0.0
    assert without == pytest.approx(45.0, rel=0.15)  # each GPU's NIC, as full groups'
    assert held == pytest.approx(22.5, rel=0.15)  # the slow GPU's rank holds back its group


def test_a_gpu_nvml_flags_at_its_gate_is_condemned_and_its_node_tested_across_without_it() -> None:
    """n0002's gpu3 reports Xid 79 at its gate, its figures fine: the GPU is `failed` on the
    flag, and its node's paths are still tested, in each group across nodes without that GPU
    (it was kept out of every one, its paths untested); its node, healthy there, is healthy."""
    fleet = fleet_of(8, 8)
    oracle = Oracle((), Costs(), 0)
    policy = ScanPolicy(fleet, Strategy.parse("adaptive"), Thresholds())

    def flagged(o: GroupOutcome) -> GroupOutcome:
        if o.group.stage is not Stage.GATE or o.group.nodes != ("n0002",):
            return o
        marked = tuple(replace(r, flags=("xid 79",)) if r.gpu == 3 else r for r in o.readings)
        return replace(o, readings=marked)

    outcomes: list[GroupOutcome] = []
    across: list[ScanGroup] = []
    wave = policy.next()
    while wave is not None:
        if wave.stage not in (Stage.GATE, Stage.ISOLATE):
            across += [g for g in wave.groups if "n0002" in g.nodes]
        got = [flagged(oracle.measure(fleet, g)) for g in wave.groups]
        outcomes += got
        wave = policy.next(got)
    assert across
    rest = tuple(g for g in range(8) if g != 3)
    assert {g.subsets[g.nodes.index("n0002")] for g in across} == {rest}
    verdicts = {(v.subject, v.nodes, v.gpu): v for v in judge(fleet, outcomes, Thresholds())}
    gpu = verdicts[Subject.GPU, ("n0002",), 3]
    assert (gpu.health, gpu.evidence) == (Health.FAILED, "n0002/gpu3: xid 79 at the gate")
    node = verdicts[Subject.NODE, ("n0002",), None]
    assert node.health is Health.HEALTHY
    assert "without the GPUs its gate or isolation condemned" in node.evidence
