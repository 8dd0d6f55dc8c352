"""The simulated scan: the adaptive policy names every planted fault and condemns no healthy
node at 64 and 1024 nodes of 8 GPUs, within the issue's 15 minutes of the cost model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results import scans
from sweeper.scan.deadline import STALL_FLOOR_S, stall_s
from sweeper.scan.fleet import Fleet, GroupOutcome, ScanGroup, Stage
from sweeper.scan.judge import judge
from sweeper.scan.policy import ScanPolicy, Scheme, Strategy, affine
from sweeper.scan.simulate import (
    DEFAULT_FAULTS,
    Costs,
    Fault,
    Oracle,
    Planted,
    Simulation,
    cycle,
    fleet_of,
    plant,
    run,
    simulate,
)
from sweeper.scan.thresholds import Finding, Thresholds, findings
from sweeper.scan.verdict import Health, Subject, Verdict
from sweeper.wire import Tier

FIFTEEN_MINUTES = 15 * 60


def assert_exact(sim: Simulation) -> None:
    named = sorted(v.name for v in sim.verdicts if v.condemned)
    assert sim.score.recall == 1.0, (sim.planted, named)
    assert sim.score.precision == 1.0, (sim.planted, named)
    assert not sim.score.healthy_condemned


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_adaptive_at_64_nodes_names_the_default_three_faults_and_no_healthy_node(
    seed: int,
) -> None:
    sim = simulate(nodes=64, gpus_per_node=8, faults=DEFAULT_FAULTS, seed=seed)
    assert_exact(sim)
    assert [f.fault for f in sim.planted] == list(DEFAULT_FAULTS)
    assert sim.seconds < FIFTEEN_MINUTES


@pytest.mark.parametrize("faults", [0, 1, 3])
def test_adaptive_at_1024_nodes_of_8_gpus_is_exact_within_15_minutes(faults: int) -> None:
    """Without the pairs stage (the stages it follows; with it, a healthy scan under every
    size's noise: test_scan_reproduce)."""
    strategy = Strategy(kind=Scheme.ADAPTIVE, seed=11, pair_rounds=0)
    sim = simulate(nodes=1024, gpus_per_node=8, faults=cycle(faults), seed=11, strategy=strategy)
    assert_exact(sim)
    assert sim.seconds < FIFTEEN_MINUTES, f"{sim.seconds / 60:.1f} min"
    assert sim.stages()[str(Stage.GATE)] == 1
    if faults:
        assert sim.stages()[str(Stage.CONFIRM)] >= 1


def test_a_slow_nic_and_a_slow_gpu_are_named_with_their_evidence() -> None:
    sim = simulate(nodes=64, faults=(Fault.SLOW_NIC, Fault.SLOW_GPU), seed=4)
    assert_exact(sim)
    nic, gpu = sim.planted
    by_name = {v.name: v for v in sim.verdicts}
    assert "NIC mlx5_3 at 200 of 400 Gb/s" in by_name[nic.nodes[0]].evidence
    assert by_name[f"{gpu.nodes[0]}/gpu{gpu.gpu}"].health is Health.SLOW
    # its paths across nodes tested with its slow GPU left out (issue 52, item 5)
    assert by_name[gpu.nodes[0]].health is Health.HEALTHY
    assert (
        f"its gpu{gpu.gpu} (slow) left out of its groups across nodes"
        in by_name[gpu.nodes[0]].notes
    )


def test_a_flapping_node_is_flaky_with_its_pass_ratio_under_a_fixed_strategy_too() -> None:
    sim = simulate(nodes=64, faults=(Fault.FLAPPING,), strategy=Strategy.parse("random:6"), seed=3)
    (flapping,) = sim.planted
    verdict = next(v for v in sim.verdicts if v.name == flapping.nodes[0])
    assert verdict.health is Health.FLAKY
    assert verdict.pass_ratio is not None
    assert 0 < verdict.pass_ratio < 1


def scanned(fleet: Fleet, *planted: Planted, seed: int = 0, **options: Any) -> Simulation:
    return run(fleet, planted, strategy=Strategy.parse("adaptive"), seed=seed, **options)


def verdicts(sim: Simulation) -> dict[str, Verdict]:
    return {v.name: v for v in sim.verdicts}


def test_a_gpu_slow_in_collectives_is_named_as_its_gpu_with_its_pairs_and_telemetry() -> None:
    """Issue 41's H200: one GPU shared with another process, its clock down at its power
    cap: its node's gate is slow, and its copies are not."""
    fleet = fleet_of(16, 8)
    sim = scanned(fleet, Planted(fault=Fault.SLOW_GPU, nodes=("n0005",), gpu=3))
    got = verdicts(sim)
    gpu = got["n0005/gpu3"]
    assert gpu.health is Health.SLOW
    assert gpu.stage is Stage.ISOLATE
    assert "in 7 of its 7 pairs" in gpu.evidence
    assert "SM clock 1683 MHz against its peers' 1980, at its power cap" in gpu.evidence
    assert gpu.threshold_source == "85% of the median of its node's pairs"
    for g in set(range(8)) - {3}:
        other = got[f"n0005/gpu{g}"]
        assert other.health is Health.HEALTHY
        assert "in pairs with each other GPU of its node" in other.evidence
        assert other.busbw_gb_per_s is not None
    assert not got["n0005"].condemned
    assert sorted(v.name for v in sim.verdicts if v.condemned) == ["n0005/gpu3"]


class Unclocked(Oracle):
    """The oracle as issue 41's real H200 showed it: the GPU held back by a second process
    reads at the gate like its peers (no clock or power-cap disagreement), so only its slow
    gate can send its node to isolation."""

    def gate(self, fleet: Fleet, node: str, group: ScanGroup) -> GroupOutcome:
        o = super().gate(fleet, node, group)
        quiet = [replace(r, sm_clock_mhz=None, at_power_cap=False) for r in o.readings]
        return replace(o, readings=tuple(quiet))


def one_node(oracle: Oracle) -> tuple[list[GroupOutcome], dict[str, Verdict], list[Finding]]:
    """An adaptive scan of one node of 4 H200 (the reference's own shape), as the oracle
    measures it: its outcomes, verdicts and findings."""
    fleet = fleet_of(1, 4, "NVIDIA H200")
    thresholds = Thresholds()
    policy = ScanPolicy(fleet, Strategy.parse("adaptive"), thresholds)
    outcomes: list[GroupOutcome] = []
    wave = policy.next()
    while wave is not None:
        got = [oracle.measure(fleet, g) for g in wave.groups]
        outcomes += got
        wave = policy.next(got)
    got = {v.name: v for v in judge(fleet, outcomes, thresholds)}
    return outcomes, got, findings(fleet, outcomes, thresholds)


def test_a_lone_node_under_the_reference_is_isolated_and_its_slow_gpu_named_by_its_pairs() -> None:
    """Issue 41 on 4 H200, one GPU hogged by a matmul loop: the gate's 162 GB/s against the
    reference's 289 is the whole fleet's miss (a fleet finding), which excuses condemning the
    node on that threshold but not holding its GPUs against each other."""
    planted = (Planted(fault=Fault.SLOW_GPU, nodes=("n0000",), gpu=2),)
    outcomes, got, found = one_node(Unclocked(planted, Costs(), seed=0))
    (gate,) = [f for f in found if f.off]
    assert gate.kind == "gate"
    pairs = {o.group.gpus: o.busbw_gb_per_s or 0.0 for o in outcomes if len(o.group.gpus) == 2}
    assert sorted(pairs) == sorted(combinations(range(4), 2))  # every pair, in isolation
    with_it = [v for p, v in pairs.items() if 2 in p]
    assert max(with_it) < min(v for p, v in pairs.items() if 2 not in p)
    gpu = got["n0000/gpu2"]
    assert gpu.health is Health.SLOW
    assert gpu.stage is Stage.ISOLATE
    assert "in 3 of its 3 pairs (with gpu 0, 1, 3)" in gpu.evidence
    for g in (0, 1, 3):
        other = got[f"n0000/gpu{g}"]
        assert other.health is Health.HEALTHY
        assert "in pairs with each other GPU of its node" in other.evidence
    node = got["n0000"]
    assert node.health is Health.UNCONFIRMED  # not healthy: its GPU is condemned
    assert "left out of the internode stages: its gpu2" in node.evidence
    assert "a threshold the fleet misses as a whole" in node.evidence
    assert sorted(v.name for v in got.values() if v.condemned) == ["n0000/gpu2"]


def test_a_lone_node_uniformly_under_the_reference_is_a_fleet_finding_and_condemns_nothing() -> (
    None
):
    outcomes, got, found = one_node(Oracle((), Costs(), seed=0, shift=0.5))
    (gate,) = [f for f in found if f.off]
    assert "no node is condemned on it alone" in gate.evidence
    assert any(o.group.stage is Stage.ISOLATE for o in outcomes)  # isolated all the same
    assert not [v for v in got.values() if v.condemned]
    for g in range(4):
        alike = got[f"n0000/gpu{g}"]
        assert alike.health is Health.HEALTHY
        assert alike.stage is Stage.ISOLATE  # on its pairs, not on the gate that missed
    assert got["n0000"].health is Health.HEALTHY
    assert "a fleet finding" in got["n0000"].evidence


def test_a_gpu_of_a_node_whose_gate_passed_is_healthy_on_the_gate_with_its_figures() -> None:
    sim = scanned(fleet_of(8, 4))
    gpu = verdicts(sim)["n0002/gpu1"]
    assert gpu.health is Health.HEALTHY
    assert "its node's gate, all_reduce with its peers at" in gpu.evidence
    assert "host copies" in gpu.evidence


@pytest.mark.parametrize("seed", range(4))
def test_a_slow_pair_with_its_ends_far_apart_is_named_as_the_pair_and_both_ends_are_healthy(
    seed: int,
) -> None:
    fleet = fleet_of(64, 8)
    sim = simulate(nodes=64, faults=(Fault.SLOW_LINK,), seed=seed)
    (link,) = sim.planted
    a, b = link.nodes
    assert int(a[1:]) // 8 != int(b[1:]) // 8  # different blocks of sqrt(N)
    got = verdicts(sim)
    assert got[f"{a}-{b}"].health is Health.SLOW
    assert got[a].health is got[b].health is Health.HEALTHY
    assert [v.name for v in sim.verdicts if v.condemned] == [f"{a}-{b}"]
    assert fleet.ids == tuple(v.nodes[0] for v in sim.verdicts if v.subject is Subject.NODE)


@pytest.mark.parametrize("fault", [Fault.HUNG_ONCE, Fault.HUNG])
def test_a_node_that_hangs_once_or_always_is_named_as_the_node_not_its_partners_link(
    fault: Fault,
) -> None:
    fleet = fleet_of(64, 8)
    for seed in range(6):
        sim = scanned(fleet, Planted(fault=fault, nodes=("n0030",)), seed=seed)
        node = verdicts(sim)["n0030"]
        assert node.health is Health.FAILED
        assert "did not answer" in node.evidence
        assert sorted(
            v.name for v in sim.verdicts if v.condemned and v.subject is not Subject.GPU
        ) == ["n0030"]
        hung = [o for o in sim.outcomes if o.unanswered]
        assert [o.unanswered for o in hung] == [("n0030",)]  # one timeout, then out
        after = [o for o in sim.outcomes if o.group.wave > hung[0].group.wave]
        assert not [o for o in after if "n0030" in o.group.nodes]
        assert sum(w.hung for w in sim.waves) == 1


def test_a_hang_holds_its_wave_for_its_stall_deadline_not_the_whole_timeout() -> None:
    fleet = fleet_of(16, 8)
    hung = Planted(fault=Fault.HUNG, nodes=("n0003",))
    sim = scanned(fleet, hung)
    (wave,) = [w for w in sim.waves if w.hung]
    # its point takes about a second on a healthy fleet: the deadline's floor, not 300 s
    assert wave.stall_s == STALL_FLOOR_S
    assert STALL_FLOOR_S < wave.seconds < STALL_FLOOR_S + 10
    (timed_out,) = [o for o in sim.outcomes if o.unanswered]
    assert timed_out.reason.startswith(f"timed out after {STALL_FLOOR_S:.0f} s")
    assert sim.seconds_at(300) == pytest.approx(sim.seconds + 300 - STALL_FLOOR_S)
    # --timeout stays the most any point is given
    short = scanned(fleet, hung, costs=Costs(timeout_s=12))
    assert [w.stall_s for w in short.waves if w.hung] == [12]


def test_a_stall_deadline_is_ten_times_the_expected_time_within_its_floor_and_the_timeout() -> None:
    assert stall_s(0.5, 300) == STALL_FLOOR_S
    assert stall_s(6.0, 300) == pytest.approx(10 * 6.0)
    assert stall_s(60.0, 300) == 300
    assert stall_s(0.5, 20) == 20


def test_the_oracle_slows_a_pair_only_where_traffic_flows_between_its_two_nodes() -> None:
    fleet = fleet_of(8, 2)
    oracle = Oracle((Planted(fault=Fault.SLOW_LINK, nodes=("n0000", "n0002")),), Costs(), 0)

    a2a = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=("n0000", "n0001", "n0002"))
    ring = ScanGroup(wave=1, stage=Stage.CROSS_DOMAIN, nodes=("n0000", "n0001", "n0002", "n0003"))
    apart = ScanGroup(wave=1, stage=Stage.CROSS_DOMAIN, nodes=("n0000", "n0002", "n0001", "n0003"))
    healthy = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=("n0004", "n0005", "n0006"))
    figure = {g: oracle.measure(fleet, g).busbw_gb_per_s or 0 for g in (a2a, ring, apart, healthy)}
    assert figure[a2a] == pytest.approx(0.5 * figure[healthy], rel=0.05)  # all_to_all: always
    assert figure[ring] == pytest.approx(Costs().internode_busbw_gb_per_s, rel=0.05)
    assert figure[apart] == pytest.approx(0.5 * Costs().internode_busbw_gb_per_s, rel=0.05)


def test_a_slow_gpu_slows_its_nodes_collectives_and_not_its_copies() -> None:
    fleet = fleet_of(4, 4)
    oracle = Oracle((Planted(fault=Fault.SLOW_GPU, nodes=("n0001",), gpu=2),), Costs(), 0)
    gate = oracle.measure(fleet, ScanGroup(wave=0, stage=Stage.GATE, nodes=("n0001",)))
    assert (gate.busbw_gb_per_s or 0) < 0.6 * Costs().island_busbw_gb_per_s
    copies = [r.copy_gb_per_s or 0 for r in gate.readings]
    assert min(copies) > 0.9 * Costs().copy_gb_per_s
    across = oracle.measure(fleet, ScanGroup(wave=1, stage=Stage.SCREEN, nodes=("n0000", "n0001")))
    assert (across.busbw_gb_per_s or 0) < 0.6 * 2 * Costs().internode_a2a_gb_per_s


@pytest.mark.parametrize("seed", range(3))
def test_mixed_faults_placed_at_random_are_each_named_and_no_healthy_node_condemned(
    seed: int,
) -> None:
    fleet = fleet_of(100, 4)
    faults = (
        Fault.SLOW_NODE,
        Fault.SLOW_GPU,
        Fault.SLOW_LINK,
        Fault.FLAPPING,
        Fault.HUNG_ONCE,
        Fault.HUNG,
        Fault.DEAD_NODE,
    )
    sim = run(fleet, plant(fleet, faults, seed), strategy=Strategy.parse("adaptive"), seed=seed)
    assert_exact(sim)


def test_a_fleet_off_as_a_whole_condemns_no_node_and_is_a_finding() -> None:
    shifted = simulate(nodes=64, faults=(), shift=0.7)
    assert shifted.score.condemned == 0
    gate, off = sorted((f for f in shifted.findings if f.off), key=lambda f: f.kind)
    assert (gate.kind, off.kind) == ("gate", "internode")
    assert gate.threshold_gb_per_s == 0.8 * 370.0  # 8 H100's ring, NCCL's algorithm unknown
    assert off.threshold_gb_per_s == 0.8 * 45.0  # the reference's share
    # each node's best group, the best of its screen's and of the pair that settled the
    # fleet as off (`_Adaptive.off_or_part`): a maximum of noisy figures, a little above
    assert off.figure_gb_per_s == pytest.approx(0.7 * 45.0, rel=0.03)
    assert "no node is condemned on it alone" in off.evidence
    assert [w.largest for w in shifted.waves if w.stage is Stage.SCREEN][-1] == 2
    floor = Thresholds(min_busbw_gb_per_s={Tier.INTERNODE: 60.0})
    above = simulate(nodes=64, faults=(), thresholds=floor)
    assert above.score.condemned == 0
    (finding,) = [f for f in above.findings if f.off]
    assert finding.source == "the flag's 60 GB/s for internode"
    assert (finding.below, finding.nodes) == (64, 64)


def test_a_fleet_with_no_reference_says_a_shift_could_not_show() -> None:
    sim = simulate(nodes=32, faults=(), shift=0.7, gpu_model="MI300X")
    assert sim.score.condemned == 0
    assert sim.findings
    assert all(not f.off and "no reference figure for MI300X" in f.evidence for f in sim.findings)


def test_a_healthy_nodes_verdict_carries_its_figures_and_their_threshold() -> None:
    sim = simulate(nodes=32, faults=())
    node = verdicts(sim)["n0004"]
    assert node.health is Health.HEALTHY
    assert node.busbw_gb_per_s is not None
    assert node.threshold_gb_per_s is not None
    assert node.threshold_source.startswith("the fleet's median")
    assert "all_to_all through each GPU's NIC" in node.evidence


@pytest.mark.parametrize(("strategy", "waves"), [("ring", 2), ("bisect", 1), ("random:5", 5)])
def test_fixed_strategies_run_after_the_gate_and_feed_the_same_judge(
    strategy: str, waves: int
) -> None:
    sim = simulate(nodes=64, faults=(), strategy=Strategy.parse(strategy))
    assert sim.stages() == {"gate": 1, "screen": waves}
    assert sim.score.condemned == 0
    assert all(v.health is Health.HEALTHY for v in sim.verdicts)


def test_the_same_seed_gives_the_same_scan() -> None:
    def once() -> tuple[object, ...]:
        sim = simulate(nodes=64, faults=cycle(4), seed=5)
        return sim.planted, sim.waves, sim.verdicts

    assert once() == once()


# the verdicts of a scan of 256 nodes with 26 slow ones, seed 1, in a process of its own
SAME_IN_ANY_PROCESS = """
import hashlib
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Fault, fleet_of, plant, run
fleet = fleet_of(256, 8, seed=1)
planted = plant(fleet, (Fault.SLOW_NODE,) * 26, 1, slowdown=0.3)
sim = run(fleet, planted, strategy=Strategy.parse("adaptive", seed=1), seed=1)
said = repr([(v.name, str(v.health), v.evidence) for v in sim.verdicts])
print(hashlib.sha256(said.encode()).hexdigest())
"""


def test_the_same_seed_gives_the_same_scan_whatever_the_processs_string_hashes() -> None:
    """Culprits tied on their share and count were taken in the order a set of node ids gave,
    which PYTHONHASHSEED changes: three processes gave three scans of this fleet."""
    said = {
        subprocess.run(
            [sys.executable, "-c", SAME_IN_ANY_PROCESS],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(said) == 1


def test_the_cost_model_grows_with_the_groups_ranks_and_the_fleet() -> None:
    costs = Costs()
    assert costs.comm_s(256) > costs.comm_s(16) > costs.comm_s(8)
    small = simulate(nodes=16, faults=())
    large = simulate(nodes=256, faults=())
    assert large.start_s > small.start_s
    assert large.seconds > small.seconds


def test_the_entry_point_prints_json_with_the_stages_and_the_score() -> None:
    args = ["scan", "--simulate", "--nodes", "32", "--gpus-per-node", "4", "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output  # it condemns its planted faults
    report = json.loads(result.stdout)
    assert report["stages"]["gate"] == 1
    assert report["precision"] == 1.0
    assert report["recall"] == 1.0
    assert {v["health"] for v in report["verdicts"]} >= {"slow", "unreachable"}


def test_a_simulated_fleet_under_a_floor_keeps_its_fleet_finding_in_its_summary(
    tmp_path: Path,
) -> None:
    args = ["scan", "--simulate", "--nodes", "16", "--gpus-per-node", "2", "--faults", "0"]
    floor = ["--min-busbw", "internode=60", "--results", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, *floor])
    assert result.exit_code == 0, result.output  # no node condemned on the floor alone
    (kept,) = (tmp_path / "_runs").glob("*.scan.json")
    summary = scans.load(tmp_path, kept.name.removesuffix(".scan.json"))
    assert summary is not None
    (finding,) = [f for f in summary["findings"] if f["off"]]
    assert finding["source"] == "the flag's 60 GB/s for internode"
    assert (finding["below"], finding["nodes"]) == (16, 16)
    assert summary["condemned"] == []


def test_two_slow_pairs_in_one_screen_group_one_across_the_others_halves_are_both_named() -> None:
    fleet = fleet_of(64, 2)
    line = max((g for wave in affine(list(fleet.ids)) for g in wave), key=len)
    assert len(line) >= 5  # its first half holds the one pair and an end of the other
    inside = Planted(fault=Fault.SLOW_LINK, nodes=(line[0], line[1]))
    across = Planted(fault=Fault.SLOW_LINK, nodes=(line[2], line[-1]))
    sim = scanned(fleet, inside, across)
    condemned = sorted(v.name for v in sim.verdicts if v.condemned)
    assert condemned == sorted("-".join(p.nodes) for p in (inside, across))


@pytest.mark.parametrize(("nodes", "slow"), [(100, 33), (256, 51)])
def test_a_third_or_a_fifth_of_the_fleet_slow_scattered_is_named_node_by_node(
    nodes: int, slow: int
) -> None:
    """A third of 100 nodes, a fifth of 256, 50% slow and scattered: most healthy nodes never
    sat in a clean screen group, so the median of the nodes' best groups was a slow node's
    and a fleet finding waived the floor (none named); read from the share of groups that
    held no slow node (`scattered.slow_share`), the fleet is not off, and each slow node is
    named, also those each of whose groups held another (4-6 of 51 were left unconfirmed)."""
    fleet = fleet_of(nodes, 8, seed=0)
    planted = plant(fleet, (Fault.SLOW_NODE,) * slow, 0, slowdown=0.5)
    sim = run(fleet, planted, strategy=Strategy.parse("adaptive", seed=0), seed=0, costs=Costs())
    assert not [f for f in sim.findings if f.off]
    assert (sim.score.named, sim.score.condemned) == (slow, slow)
    assert not [v for v in sim.verdicts if v.health is Health.UNCONFIRMED]


def test_a_third_of_1024_nodes_slow_is_named_node_by_node_within_15_minutes() -> None:
    """341 of 1024 nodes 50% slow, scattered: each screen group of 28 holds nine, and bisecting
    them found them one after another (659 waves, 19.1 min, 10 left unconfirmed: seed 0 on
    e1408f7). Each node beside proven partners (`each_node`) names all 341. (With the pairs
    stage, of the 683 nodes left, the test takes 42 s of this box: left out.)"""
    fleet = fleet_of(1024, 8, seed=0)
    planted = plant(fleet, (Fault.SLOW_NODE,) * 341, 0, slowdown=0.5)
    strategy = Strategy(kind=Scheme.ADAPTIVE, seed=0, pair_rounds=0)
    sim = run(fleet, planted, strategy=strategy, seed=0, costs=Costs())
    assert not [f for f in sim.findings if f.off]
    assert (sim.score.named, sim.score.condemned) == (341, 341)
    assert not [v for v in sim.verdicts if v.health is Health.UNCONFIRMED]
    assert sim.seconds < FIFTEEN_MINUTES, f"{sim.seconds / 60:.1f} min"


@pytest.mark.parametrize("nodes", [2, 3])
def test_a_fleet_too_small_for_two_matchings_runs_no_screen_group_twice(nodes: int) -> None:
    """At 2 nodes the screen's one group fails whatever is slow, so its share reads as the
    whole fleet; the two matchings of `each_node` were then that same pair twice more."""
    fleet = fleet_of(nodes, 8, seed=0)
    planted = plant(fleet, (Fault.SLOW_NODE,), 0, slowdown=0.5)
    sim = run(fleet, planted, strategy=Strategy.parse("adaptive", seed=0), seed=0, costs=Costs())
    screened = [o.group.nodes for o in sim.outcomes if o.group.stage is Stage.SCREEN]
    assert len(screened) == len(set(screened))


def test_a_screen_group_of_two_nodes_failing_one_test_in_ten_names_those_two_not_28() -> None:
    """Seed 3 of the envelope's flaky cell (1 in 10, under the recorded noise): two of the four
    flaky nodes shared a screen group whose error never failed apart, and the sequential test
    leans their way without deciding. The verdict was the group's 28 nodes, three times (once
    a whole run of it); it is now one, naming the two whose failures the noise does not give."""
    fleet = fleet_of(1024, 8, seed=3)
    planted = plant(fleet, (Fault.FLAPPING,) * 4, 3, fails=0.1)
    # without the pairs stage, whose 1023 tests of each node decide them (the test below)
    strategy = Strategy(kind=Scheme.ADAPTIVE, seed=3, pair_rounds=0)
    sim = run(fleet, planted, strategy=strategy, seed=3, costs=Costs())
    (group,) = [v for v in sim.verdicts if v.health is Health.UNCONFIRMED]
    assert (group.subject, group.nodes) == (Subject.GROUP, ("n0487", "n0607"))
    assert {p.nodes[0] for p in planted} >= set(group.nodes)
    assert "flaky or not, not yet told" in group.evidence
    assert sim.score.condemned == sim.score.true_positives


def test_four_nodes_failing_one_test_in_ten_are_each_flaky_on_their_pairs_tests() -> None:
    """The same fleet with every pair tested alone (the default at 1024 nodes): each node's
    1023 pairs give the sequential test some 100 more failures at one in ten, and each of the
    four is `flaky`, where without them two were one unconfirmed verdict and two were missed
    (flaky at 1 in 10: 56 of 120 over 30 seeds)."""
    fleet = fleet_of(1024, 8, seed=3)
    planted = plant(fleet, (Fault.FLAPPING,) * 4, 3, fails=0.1)
    sim = run(fleet, planted, strategy=Strategy.parse("adaptive", seed=3), seed=3, costs=Costs())
    flaky = sorted(v.nodes for v in sim.verdicts if v.health is Health.FLAKY)
    assert flaky == sorted(p.nodes for p in planted)
    assert sim.score.condemned == 4
    assert not [v for v in sim.verdicts if v.health is Health.UNCONFIRMED]
    assert sim.seconds < FIFTEEN_MINUTES, f"{sim.seconds / 60:.1f} min"
