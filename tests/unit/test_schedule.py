"""The schedule: waves of groups that share no contended resource, every group exactly once."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from sweeper.commands.plan_estimate import Plan, plan_recorded, recorded_node, replicated
from sweeper.ops.registry import REGISTRY, resolve
from sweeper.planning.costs import CostModel
from sweeper.planning.estimate import estimate
from sweeper.planning.placement import (
    ONE_GPU,
    Placement,
    alone,
    expected_placement,
    gpu_groups,
    groups,
)
from sweeper.planning.request import GROUPS_LIMIT, groups_bound
from sweeper.planning.request import resolve as resolve_plan
from sweeper.planning.schedule import (
    BANDWIDTH_BYTES,
    Request,
    Schedule,
    apart,
    linked_pair,
    nothing_to_measure,
    schedule,
)
from sweeper.planning.spec import SweepSpec
from sweeper.wire import Backend, Tier

TOPOLOGIES = Path(__file__).parents[1] / "data" / "topologies"
DGX = TOPOLOGIES / "dgx-h100-nvswitch.json"
CPU = TOPOLOGIES / "cpu-no-nvml.json"
A100_PAIRS = TOPOLOGIES / "a100x4-nvlink-pairs.json"
ALL_TIERS = ("nvlink", "pcie", "internode", "cpu")


@cache
def placement(path: Path, nodes: int, per_node: int) -> Placement:
    backend = "nccl" if json.loads(path.read_text())["gpus"] else "gloo"
    return expected_placement(backend, replicated(recorded_node(path), nodes), [per_node] * nodes)


def request(**changes: object) -> Request:
    asked: dict[str, object] = {
        "tiers": ALL_TIERS,
        "pairs": True,
        "force_network": True,
        "nccl_env": {},
        "ops": resolve(("all", "p2p*")),
        "dtypes": ("bfloat16",),
        "sizes": (8, 1024, 2**20),
        "auto": False,
        "sees_node_gpus": True,
    }
    return Request(**{**asked, **changes})  # type: ignore[arg-type]


def waves_per_set(planned: Schedule) -> dict[str, int]:
    return {actors.variant: len(actors.waves) for actors in planned.actor_sets}


def assert_nothing_shared(planned: Schedule) -> None:
    node_of = [m.node for m in planned.placement.members]
    for wave in planned.waves:
        ranks = [r for g in wave.groups for r in g.ranks]
        assert len(ranks) == len(set(ranks)), f"a GPU twice in wave {wave.number}"
        # a node's fabric carries one group a wave, or its disjoint pairs with links of their own
        intra = [
            node_of[g.ranks[0]]
            for g in wave.groups
            if g.tier != "internode" and not linked_pair(planned.placement, g)
        ]
        assert len(intra) == len(set(intra)), f"a node's fabric twice in wave {wave.number}"
        networks = [node_of[r] for g in wave.groups if g.tier == "internode" for r in g.ranks]
        nodes = [
            n for g in wave.groups if g.tier == "internode" for n in {node_of[r] for r in g.ranks}
        ]
        assert len(nodes) == len(set(nodes)), f"a node's network twice in wave {wave.number}"
        assert not (intra and networks), "intra-node and internode groups share a wave"


@pytest.mark.parametrize("nodes", [1, 2, 3, 16])
def test_waves_share_no_gpu_fabric_or_network_and_hold_every_group_once(nodes: int) -> None:
    where = placement(DGX, nodes, 8)
    planned = schedule(where, request())
    assert_nothing_shared(planned)
    scheduled = Counter((g.tier, g.variant, g.ranks) for w in planned.waves for g in w.groups)
    asked = Counter((g.tier, g.variant, g.ranks) for g in groups(where, ALL_TIERS, True, True))
    asked.update((g.tier, g.variant, g.ranks) for g in gpu_groups(where, together=True))
    assert scheduled == asked
    assert set(scheduled.values()) == {1}
    assert [w.number for w in planned.waves] == list(range(len(planned.waves)))


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [
        # the island, then its 28 NVLink pairs (through NVSwitches: no link shared) in 7
        # rounds of 4; copies: each GPU alone, then all 8; PCIe pairs (P2P off) one a wave
        (1, {"default": 1 + 7 + 9, "p2p-off": 29}),
        (2, {"default": 3 + 7 + 9, "p2p-off": 29, "network": 2}),  # + node pair, 16 GPUs
        (3, {"default": 8 + 9 + 1 + 3 + 1, "p2p-off": 29, "network": 1 + 3 + 1}),  # odd: N
        (16, {"default": 8 + 9 + 1 + 15 + 1, "p2p-off": 29, "network": 1 + 15 + 1}),
    ],
)
def test_every_nodes_intra_node_groups_take_as_many_waves_as_one_nodes(
    nodes: int, expected: dict[str, int]
) -> None:
    assert waves_per_set(schedule(placement(DGX, nodes, 8), request())) == expected


def test_a_thousand_nodes_take_n_minus_1_waves_of_node_pairs() -> None:
    where = placement(CPU, 1024, 2)
    planned = schedule(where, request(tiers=("cpu", "internode"), force_network=False))
    # every node's two ranks at once; then one rank per node, the node pairs, everyone
    assert waves_per_set(planned) == {"default": 1 + 1 + 1023 + 1}
    pair_waves = [w for w in planned.waves if len(w.groups[0].ranks) == 2 and w.number > 1]
    assert all(len(w.groups) == 512 for w in pair_waves)


@pytest.mark.parametrize("nodes", [2, 3, 4, 5, 6, 16])
def test_node_pairs_meet_once_by_the_circle_method_and_no_node_twice_a_wave(nodes: int) -> None:
    planned = schedule(placement(CPU, nodes, 1), request(tiers=("internode",)))
    pair_waves = [[g.ranks for g in w.groups if len(g.ranks) == 2] for w in planned.waves]
    pair_waves = [pairs for pairs in pair_waves if pairs]
    assert len(pair_waves) == nodes - 1 + nodes % 2  # odd: each node sits one wave out
    met = [pair for pairs in pair_waves for pair in pairs]
    assert sorted(met) == [(a, b) for a in range(nodes) for b in range(a + 1, nodes)]
    for pairs in pair_waves:
        ranks = [r for pair in pairs for r in pair]
        assert len(ranks) == len(set(ranks))
        assert len(pairs) == nodes // 2  # every round as full as the circle method makes it


def test_concurrent_pairs_share_a_node_in_circle_rounds() -> None:
    where = expected_placement("gloo", replicated(recorded_node(CPU), 1), [4])
    isolated = schedule(where, request(tiers=("cpu",)))
    together = schedule(where, request(tiers=("cpu",), concurrent=True))
    assert [len(w.groups) for w in isolated.waves] == [1] * 7  # all four, then 6 pairs alone
    assert [len(w.groups) for w in together.waves] == [1, 2, 2, 2]


def test_series_say_why_an_operation_cannot_run_and_probe_with_auto() -> None:
    where = placement(DGX, 1, 8)
    planned = schedule(where, request(ops=resolve(("all_reduce", "all_to_all:hierarchical"))))
    island = planned.waves[0].groups[0]
    by_op = {s.op: s for s in planned.series(island)}
    assert by_op["all_to_all:hierarchical"].skipped is not None
    assert by_op["all_reduce"].skipped is None
    assert by_op["all_reduce"].counts == (4, 512, 2**19)  # bfloat16 elements
    auto = schedule(where, request(ops=[REGISTRY["all_reduce"]], auto=True))
    (series,) = auto.series(auto.waves[0].groups[0])
    assert series.probe
    pair = auto.waves[1].groups[0]
    assert auto.series(pair) is auto.series(auto.waves[2].groups[0])  # shared by shape


def test_waves_estimate_below_one_group_at_a_time_and_equal_for_one_group() -> None:
    many = schedule(placement(DGX, 16, 8), request())
    found = estimate(many, CostModel())
    assert 0 < found.waves_s < found.serial_s / 5
    one = schedule(placement(CPU, 1, 2), request(tiers=("cpu",)))
    alone = estimate(one, CostModel().with_overheads(open_per_rank_s=0.0, wave_open_s=0.0))
    assert alone.waves_s == pytest.approx(alone.serial_s)
    # one group, three sizes each; the copies (skipped) the smallest and largest
    copies = [c for c in resolve(("all", "p2p*")) if c.traits.per_gpu is not None]
    assert alone.points == (len(resolve(("all", "p2p*"))) - len(copies)) * 3 + len(copies) * 2


def test_sweeper_plan_prints_waves_of_a_recorded_topology_with_no_cluster(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sweeper.cli import app

    args = ["plan", "--topology", str(CPU), "--nodes", "4", "--tiers", "cpu,internode"]
    result = CliRunner().invoke(app, [*args, "--max-size", "1K", "--format", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert (found["nodes"], found["ranks"], found["groups"]) == (4, 8, 4 + 1 + 6 + 1)
    waves = found["actor_sets"][0]["waves"]
    assert [w["groups"] for w in waves] == [4, 1, 1, 2, 2, 2]  # cpu; firsts, all; node pairs
    assert 0 < found["estimated_s"] < found["serial_s"]
    human = CliRunner().invoke(app, args)
    assert "wave 0: cpu:n0r0,1, cpu:n1r0,1, cpu:n2r0,1, cpu:n3r0,1" in human.stdout
    missing = CliRunner().invoke(app, ["plan", "--topology", str(tmp_path / "none.json")])
    assert missing.exit_code == 2
    assert missing.stderr.count("\n") == 1
    assert "--topology" in missing.stderr


def test_the_nccl_env_grid_runs_every_default_group_on_an_actor_set_per_combination() -> None:
    where = placement(DGX, 1, 8)
    swept = {"NCCL_PROTO": ("LL", "Simple"), "NCCL_MAX_NCHANNELS": ("1", "4")}
    planned = schedule(where, request(tiers=("nvlink",), nccl_env=swept))
    names = [actors.variant for actors in planned.actor_sets]
    assert names == [
        "default",
        "proto=LL,max_nchannels=1",
        "proto=LL,max_nchannels=4",
        "proto=Simple,max_nchannels=1",
        "proto=Simple,max_nchannels=4",
    ]
    ranks = {
        a.variant: {g.ranks for w in a.waves for g in w.groups if g.tier != Tier.GPU}
        for a in planned.actor_sets
    }
    assert all(found == ranks["default"] for found in ranks.values())
    # copies call no NCCL: their groups are the default set's only
    tiers = {a.variant: {g.tier for w in a.waves for g in w.groups} for a in planned.actor_sets}
    assert Tier.GPU in tiers["default"]
    assert not any(Tier.GPU in found for variant, found in tiers.items() if variant != "default")
    assert_nothing_shared(planned)


def test_a_grid_variant_skips_what_it_cannot_run_or_would_only_repeat() -> None:
    where = placement(DGX, 1, 8)
    ops = resolve(("all_reduce", "all_gather", "all_to_all"))
    swept = {"NCCL_ALGO": ("Tree", "NVLS"), "NCCL_PROTO": ("LL",)}
    planned = schedule(where, request(tiers=("nvlink",), ops=ops, nccl_env=swept))
    skipped = {
        (actors.variant, s.op): s.skipped
        for actors in planned.actor_sets
        for s in planned.series(actors.waves[0].groups[0])
    }
    assert skipped[("algo=Tree,proto=LL", "all_reduce")] is None
    assert "no algorithm of it implements AllGather" in str(
        skipped[("algo=Tree,proto=LL", "all_gather")]
    )
    assert "not a protocol of AllReduce" in str(skipped[("algo=NVLS,proto=LL", "all_reduce")])
    assert "changes nothing" in str(skipped[("algo=Tree,proto=LL", "all_to_all")])
    assert "(as algo=Tree,proto=LL)" not in str(skipped[("algo=NVLS,proto=LL", "all_to_all")])
    assert skipped[("default", "all_to_all")] is None


def test_on_cpu_ranks_every_grid_series_says_nccl_variables_are_inert() -> None:
    where = placement(CPU, 1, 2)
    swept = {"NCCL_PROTO": ("LL", "Simple")}
    planned = schedule(where, request(tiers=("cpu",), nccl_env=swept))
    assert [a.variant for a in planned.actor_sets] == ["default", "proto=LL", "proto=Simple"]
    for actors in planned.actor_sets[1:]:
        for series in planned.series(actors.waves[0].groups[0]):
            assert "inert on CPU ranks (gloo)" in str(series.skipped)


ONE_H200 = TOPOLOGIES / "h200x1.json"


def _recorded(topology: Path, **options: object) -> Plan:
    spec = SweepSpec(max_size="1M", **options)  # type: ignore[arg-type]
    return plan_recorded(spec, topology, resolve(spec.ops))


def test_one_gpu_runs_every_collective_at_world_1_and_says_pairs_need_two() -> None:
    found = _recorded(ONE_H200)
    (group,) = found.schedule.waves[0].groups
    assert (group.tier, group.ranks) == ("local", (0,))
    running = {s.op for s in found.schedule.series(group) if s.skipped is None}
    assert {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"} <= running
    assert not any(op.startswith("p2p") for op in running)  # pairs only
    assert nothing_to_measure(found.schedule, found.spec.tiers) is None
    assert alone(found.placement) == ONE_GPU
    assert alone(_recorded(TOPOLOGIES / "h200x4-nvswitch.json").placement) is None


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (
            {"tiers": ("nvlink", "pcie"), "ops": ("all_reduce",)},
            "--tiers nvlink,pcie gives no group on 1 GPU",
        ),
        ({"ops": ("p2p",)}, "no operation asked for runs on 1 GPU"),
    ],
)
def test_one_gpu_with_nothing_it_can_measure_says_why(options: dict[str, object], why: str) -> None:
    found = _recorded(ONE_H200, **options)
    assert nothing_to_measure(found.schedule, found.spec.tiers) == (
        f"nothing to measure: {why}; collectives between GPUs need two"
    )


def test_series_skipped_with_a_reason_are_something_to_measure() -> None:
    # their rows say why (an algorithm this cluster cannot run), as every skipped row does
    found = _recorded(DGX, ops=("all_to_all:hierarchical",), tiers=("nvlink",), pairs="none")
    (series,) = found.schedule.series(found.schedule.waves[0].groups[0])
    assert series.skipped is not None
    assert nothing_to_measure(found.schedule, found.spec.tiers) is None


H200X4 = TOPOLOGIES / "h200x4-nvswitch.json"
COPIES = {"d2d", "h2d", "d2h", "h2d+d2h", "h2d:pageable", "d2h:pageable", "h2d+d2h:pageable"}


def test_copies_in_all_run_on_gpu_groups_each_gpu_alone_then_the_node_at_once() -> None:
    sizes = (8, 2**20, 2**30)
    planned = schedule(
        placement(H200X4, 2, 4), request(tiers=("world",), ops=resolve(("all",)), sizes=sizes)
    )
    assert_nothing_shared(planned)
    copying = [[g for g in w.groups if g.tier == Tier.GPU] for w in planned.waves]
    # node 0's GPU k and node 1's GPU k copy at once (wave k), then each node's four together
    assert [[g.ranks for g in w] for w in copying if w] == [
        [(0,), (4,)],
        [(1,), (5,)],
        [(2,), (6,)],
        [(3,), (7,)],
        [(0, 1, 2, 3), (4, 5, 6, 7)],
    ]
    for wave in planned.waves:
        for group in wave.groups:
            ops = {s.op: s for s in planned.series(group)}
            if group.tier != Tier.GPU:
                assert not set(ops) & COPIES
                continue
            # the memory roof alone: GPUs at once share nothing of it
            assert set(ops) == (COPIES if group.world_size == 1 else COPIES - {"d2d"})
            assert {s.counts for s in ops.values()} == {(4, 2**27)}  # bfloat16: 8 B, 256 MiB
            assert not any(s.probe or s.skipped for s in ops.values())


def test_copies_asked_by_name_take_every_size_to_256_mib_under_auto_never_probed() -> None:
    ops = resolve(("h2d", "all"))
    by_name = {c.name: c.traits.all_sizes for c in ops if c.traits.per_gpu is not None}
    assert by_name == {name: name == "h2d" for name in COPIES}
    one = placement(ONE_H200, 1, 1)
    grid = schedule(one, request(tiers=("world",), ops=ops, sizes=(8, 2**20, 2**30)))
    auto = schedule(
        one, request(tiers=("world",), ops=ops, sizes=(8, 2**20, 2**28, 2**30), auto=True)
    )
    for planned, counts in ((grid, (4, 2**19, 2**29)), (auto, (4, 2**19, 2**27))):
        copying = [g for w in planned.waves for g in w.groups if g.tier == Tier.GPU]
        assert [g.ranks for g in copying] == [(0,)]  # one GPU: alone only
        series = {s.op: s for s in planned.series(copying[0])}
        assert series["h2d"].counts == counts
        assert series["h2d:pageable"].counts == (4, 2**27)  # by `all`: smallest, 256 MiB
        assert not any(s.probe for s in series.values())
    only = schedule(one, request(tiers=("world",), ops=resolve(("h2d*",))))
    assert {g.tier for w in only.waves for g in w.groups} == {Tier.GPU}  # no idle world group


def test_copies_on_cpu_ranks_are_skipped_on_the_sweeps_groups_with_the_reason() -> None:
    cpu = schedule(placement(CPU, 1, 2), request(tiers=("cpu",), ops=resolve(("h2d*", "d2*"))))
    (group,) = [g for w in cpu.waves for g in w.groups]
    assert group.tier == "cpu"
    reasons = {s.op: s.skipped for s in cpu.series(group)}
    assert set(reasons) == COPIES
    assert reasons["d2d"] == "device-local copies need a GPU: CPU ranks have no device memory"
    assert {reasons[op] for op in COPIES - {"d2d"}} == {
        "host<->device copies need a GPU: CPU ranks have no device memory"
    }


def test_topo_lists_the_groups_a_run_schedules() -> None:
    """`sweeper topo` and `sweeper run` ask the spec for groups in one place."""
    spec = SweepSpec(tiers=("all",), ops=("all_reduce", "broadcast"), nccl_algos=("ring",))
    where = placement(DGX, 2, 8)
    run = resolve_plan(spec, Backend.NCCL)
    planned = schedule(where, run.request(resolve(spec.ops)))
    scheduled = [g for wave in planned.waves for g in wave.groups]
    assert sorted(run.tier_groups(where)) == sorted(scheduled)


@pytest.mark.parametrize(
    ("path", "nodes", "per_node", "changes"),
    [
        (DGX, 4, 8, {}),
        (DGX, 3, 8, {"pairs": False, "force_network": False}),
        (DGX, 2, 8, {"nccl_env": {"NCCL_PROTO": ("LL", "Simple")}}),
        (TOPOLOGIES / "a100x4-nvlink-pairs.json", 3, 4, {}),
        (CPU, 5, 3, {"tiers": ("world", *ALL_TIERS)}),
    ],
)
def test_the_group_bound_counted_before_planning_is_never_below_what_is_planned(
    path: Path, nodes: int, per_node: int, changes: dict[str, object]
) -> None:
    asked = request(**changes)
    planned = schedule(placement(path, nodes, per_node), asked)
    assert planned.n_groups <= groups_bound(asked, nodes, per_node)


def test_a_fleet_of_1024_nodes_of_8_gpus_with_every_tier_is_within_a_plans_groups() -> None:
    assert groups_bound(request(), 1024, 8) <= GROUPS_LIMIT < groups_bound(request(), 4096, 8)


def test_an_nvswitch_nodes_disjoint_pairs_run_together_and_pcie_pairs_apart() -> None:
    planned = schedule(placement(DGX, 1, 8), request(tiers=("nvlink", "pcie")))
    nvlink = [w for w in planned.waves if w.groups[0].tier == Tier.NVLINK]
    assert [len(w.groups) for w in nvlink] == [1] + [4] * 7  # the island, then 7 rounds
    pcie = [w for w in planned.waves if w.groups[0].tier == Tier.PCIE]
    assert {len(w.groups) for w in pcie} == {1}
    assert apart(planned) == {
        Tier.PCIE: "their paths share the node's PCIe switches and host bridge"
    }
    assert_nothing_shared(planned)
    # a node whose pairs have no NVLink of their own: its pairs one at a time
    pairs = schedule(placement(A100_PAIRS, 1, 4), request(tiers=("pcie",)))
    assert not any(linked_pair(pairs.placement, g) for w in pairs.waves for g in w.groups)
    assert {len(w.groups) for w in pairs.waves} == {1}


def test_curves_run_on_a_sample_and_every_other_group_measures_its_bandwidth_alone() -> None:
    where = placement(DGX, 16, 8)
    swept = {"NCCL_PROTO": ("LL", "Simple")}
    asked = request(
        tiers=("nvlink", "internode"),
        force_network=False,
        nccl_env=swept,
        ops=resolve(("p2p:bi", "all")),
    )
    every = schedule(where, asked)
    sampled = schedule(where, replace(asked, curves=2))
    node_pairs = [
        g
        for w in sampled.waves
        for g in w.groups
        if g.tier == Tier.INTERNODE and len(g.ranks) == 2 and g.variant == "default"
    ]
    assert len(node_pairs) == 16 * 15 // 2  # every node pair still measured
    full = [g for g in node_pairs if len(sampled.series(g)) > 1]
    assert len(full) == 2
    assert sampled.series(full[0]) == every.series(full[0])
    alone = [sampled.series(g) for g in node_pairs if g not in full]
    assert {(s.op, s.counts, s.probe) for (s,) in alone} == {
        ("p2p:bi", (2**20 // 2,), False)  # the largest size up to 1 GiB, in bfloat16
    }
    big = schedule(where, replace(asked, curves=2, sizes=(8, BANDWIDTH_BYTES, 2**31)))
    assert {s.counts for g in node_pairs if g not in full for s in big.series(g)} == {
        (BANDWIDTH_BYTES // 2,)
    }
    # the swept variable: its curves' groups alone, where every default group ran before
    variant = {a.variant: a for a in sampled.actor_sets}["proto=LL"]
    assert 0 < sum(len(w.groups) for w in variant.waves) <= 2 * 4
    assert (
        sum(len(w.groups) for w in {a.variant: a for a in every.actor_sets}["proto=LL"].waves) > 100
    )
