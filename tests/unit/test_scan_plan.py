"""A scan wave as the executor runs it (`scan.plan`), on synthetic placements, without Ray:
each scan group's executor groups by executor wave, their stage, judged operation and
series, the points its outcome expects, which scan group an executor group belongs to, and
the groups a node out of the scan leaves missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.commands.plan_estimate import recorded_node, replicated
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import Group, expected_placement
from sweeper.scan.deadline import STALL_FLOOR_S
from sweeper.scan.fleet import Result, ScanGroup, ScanWave, Stage
from sweeper.scan.plan import COPY_BYTES, ScanPlan, missing
from sweeper.wire import Backend, Point, Status, Tier, Timing

DGX = Path(__file__).parents[1] / "data" / "topologies" / "dgx-h100-nvswitch.json"
NODES = replicated(recorded_node(DGX), 3)  # 8 GPUs each
IDS = [node.node_id for node in NODES]
GPUS = expected_placement(Backend.NCCL, NODES, [8, 8, 8])
CPUS = expected_placement(Backend.GLOO, NODES, [1, 1, 1])
SIZES = (8, 1 << 30)
COPIES = (REGISTRY["h2d"], REGISTRY["d2h"])


def _gpu_plan(**more: object) -> ScanPlan:
    return ScanPlan(placement=GPUS, registry=REGISTRY, sizes=SIZES, copies=COPIES, **more)  # type: ignore[arg-type]


def test_a_gate_runs_its_nodes_gpus_together_then_their_host_copies_in_a_second_wave() -> None:
    gate = ScanGroup(wave=0, stage=Stage.GATE, nodes=(IDS[1],))
    planned = _gpu_plan().wave(ScanWave(index=0, stage=Stage.GATE, groups=(gate,)))
    ranks = tuple(range(8, 16))
    assert [w.groups for w in planned.waves] == [
        (Group(Tier.NVLINK, "default", ranks),),
        (Group(Tier.GPU, "default", ranks),),
    ]
    assert {w.number for w in planned.waves} == {0}  # rows carry the scan's wave
    together, copies = (w.groups[0] for w in planned.waves)
    assert [(s.op, s.counts) for s in planned.series(together)] == [
        ("all_reduce", (2, 1 << 28))  # 8 B and 1 GiB of float32
    ]
    assert [(s.op, s.counts) for s in planned.series(copies)] == [
        ("h2d", (COPY_BYTES // 4,)),
        ("d2h", (COPY_BYTES // 4,)),
    ]
    assert {planned.part(g).stage for g in (together, copies)} == {Stage.GATE}
    (group,) = planned.groups
    assert planned.owner(copies) is group
    assert group.asked.op == "all_reduce"
    assert group.expected == {
        ("all_reduce", 8),
        ("all_reduce", 1 << 30),
        ("h2d", COPY_BYTES),
        ("d2h", COPY_BYTES),
    }


def test_a_screen_wave_runs_its_groups_at_once_at_sizes_its_ranks_can_split() -> None:
    first = ScanGroup(wave=2, stage=Stage.SCREEN, nodes=(IDS[0], IDS[2]))
    second = ScanGroup(wave=2, stage=Stage.SCREEN, nodes=(IDS[1],))  # a lone node's screen
    wave = ScanWave(index=2, stage=Stage.SCREEN, groups=(first, second))
    planned = _gpu_plan().wave(wave)
    (executor,) = planned.waves
    across = Group(Tier.INTERNODE, "default", (*range(0, 8), *range(16, 24)))
    assert executor.groups == (across, Group(Tier.NVLINK, "default", tuple(range(8, 16))))
    assert [s.op for s in planned.series(across)] == ["all_to_all"]
    # 1 GiB of all_to_all over 16 ranks: a whole chunk a rank, as nccl-tests rounds it
    assert planned.owner(across).asked.bandwidth_bytes == (1 << 30) // 16 * 16
    assert planned.owner(across).scan is first


def test_three_ranks_judge_an_all_to_all_at_its_bandwidth_size_rounded_down() -> None:
    group = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=tuple(IDS))
    plan = ScanPlan(placement=CPUS, registry=REGISTRY, sizes=(8, 1 << 20))
    asked = plan.group(group).asked
    chunk = (1 << 20) // 4 // 3 // 4 * 4  # elements a rank, aligned to 16 bytes
    assert (asked.op, asked.bandwidth_bytes) == ("all_to_all", chunk * 3 * 4)
    assert asked.bandwidth_bytes < 1 << 20


def test_a_pair_of_one_rank_nodes_also_times_one_way_at_the_bandwidth_size() -> None:
    pair = ScanGroup(wave=1, stage=Stage.BISECT, nodes=(IDS[0], IDS[1]))
    plan = ScanPlan(placement=CPUS, registry=REGISTRY, sizes=(8, 1 << 20))
    (step,) = plan.group(pair).steps
    (part,) = step
    assert [(s.op, len(s.counts)) for s in part.series] == [("all_to_all", 2), ("send_recv", 1)]
    assert ("send_recv", 1 << 20) in plan.group(pair).expected


def test_the_settings_op_is_judged_on_whole_nodes_and_a_gpu_pair_keeps_its_send_recv() -> None:
    plan = _gpu_plan(op="all_gather")
    whole = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=(IDS[0], IDS[1]))
    isolated = ScanGroup(wave=3, stage=Stage.ISOLATE, nodes=(IDS[2],), gpus=(0, 5))
    assert plan.judged(whole).name == "all_gather"
    (step,) = plan.group(isolated).steps
    assert step[0].group == Group(Tier.NVLINK, "default", (16, 21))
    assert [s.op for s in step[0].series] == ["send_recv"]


def test_a_gpu_alone_times_its_copies_and_on_cpu_ranks_runs_nothing_and_is_ok() -> None:
    alone = ScanGroup(wave=3, stage=Stage.ISOLATE, nodes=(IDS[2],), gpus=(4,))
    (step,) = _gpu_plan().group(alone).steps
    assert step[0].group == Group(Tier.GPU, "default", (20,))
    on_cpu = ScanPlan(placement=CPUS, registry=REGISTRY, sizes=SIZES)
    nothing = on_cpu.group(ScanGroup(wave=3, stage=Stage.ISOLATE, nodes=(IDS[2],), gpus=(0,)))
    assert nothing.steps == ()
    assert on_cpu.wave(ScanWave(index=3, stage=Stage.ISOLATE, groups=(nothing.scan,))).waves == ()
    assert on_cpu.outcome(nothing, []).result is Result.OK


def test_a_group_whose_rows_lack_a_point_is_missing_and_one_with_a_failed_point_failed() -> None:
    plan = ScanPlan(placement=CPUS, registry=REGISTRY, sizes=(8, 1 << 10))
    planned = plan.group(ScanGroup(wave=1, stage=Stage.GATE, nodes=(IDS[0],)))
    (step,) = planned.steps
    where = plan.placement.group_id(step[0].group)
    row = {"group_id": where, "op": "all_reduce", "size_bytes": 8, "status": Status.OK}
    row |= {"kind": "collective", "error": None}
    assert plan.outcome(planned, [row]).result is Result.MISSING
    failed = {**row, "size_bytes": 1 << 10, "status": Status.ERROR, "error": "boom"}
    row |= {"world_size": 1, "time_us": 3.0, "busbw_gb_per_s": 0.0, "algbw_gb_per_s": 1.0}
    assert plan.outcome(planned, [row, failed]).result is Result.FAILED


def test_the_groups_of_a_node_out_of_the_scan_are_missing_saying_which_node_and_why() -> None:
    gate = ScanGroup(wave=0, stage=Stage.GATE, nodes=(IDS[1],))
    pair = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=(IDS[0], IDS[1]))
    other = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=(IDS[0], IDS[2]))
    got = missing([gate, pair, other], {IDS[1]: "it left"})
    assert set(got) == {gate, pair}
    assert got[gate].reason == "it left"
    assert got[pair].reason == f"{IDS[1]}: it left"
    assert {o.result for o in got.values()} == {Result.MISSING}


def test_a_point_on_cpu_ranks_waits_the_stall_floor_and_never_past_the_timeout() -> None:
    plan = ScanPlan(placement=CPUS, registry=REGISTRY, sizes=(8, 1 << 10))
    (step,) = plan.group(ScanGroup(wave=1, stage=Stage.SCREEN, nodes=tuple(IDS))).steps
    point = Point(
        group_id="x", op="all_to_all", dtype="float32", size_bytes=8, count=2, timing=Timing()
    )
    assert plan.deadline_s(step[0], point, 600.0) == pytest.approx(STALL_FLOOR_S)
    assert plan.deadline_s(step[0], point, 1.0) == pytest.approx(1.0)
