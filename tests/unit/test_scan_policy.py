"""The scan's policy: the waves of each strategy, disjoint groups, every pair of nodes in one
screen group, a failing group bisected to the pair, suspects confirmed beside known-good
partners that are themselves checked, a node that does not answer out of later waves, a
slow gate isolated GPU by GPU, gate failures kept out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import combinations
from math import ceil, isqrt, log2

import pytest

from sweeper.scan.fleet import (
    Fleet,
    FleetNode,
    GroupOutcome,
    MemberReading,
    Result,
    ScanWave,
    Stage,
)
from sweeper.scan.judge import judge
from sweeper.scan.policy import (
    CONFIRMS,
    STRATEGIES,
    Internode,
    ScanPolicy,
    Scheme,
    Strategy,
    affine,
    excluded,
    left_gpus,
    next_wave,
    screens,
    smallest_prime,
)
from sweeper.scan.simulate import Costs, Fault, Oracle, Planted, fleet_of
from sweeper.scan.thresholds import Thresholds
from sweeper.scan.verdict import Health, Subject

THRESHOLDS = Thresholds()


def run(
    fleet: Fleet,
    strategy: str,
    planted: tuple[Planted, ...] = (),
    seed: int = 0,
    pair_rounds: int | None = None,
) -> tuple[list[ScanWave], list[GroupOutcome]]:
    """Every wave the policy asks for, measured by the simulation's oracle."""
    oracle = Oracle(planted, Costs(), seed)
    chosen = replace(Strategy.parse(strategy, seed=seed), pair_rounds=pair_rounds)
    policy = ScanPolicy(fleet, chosen, THRESHOLDS)
    waves: list[ScanWave] = []
    outcomes: list[GroupOutcome] = []
    wave = policy.next()
    while wave is not None:
        waves.append(wave)
        got = [oracle.measure(fleet, g) for g in wave.groups]
        outcomes += got
        wave = policy.next(got)
    return waves, outcomes


def internode(waves: list[ScanWave]) -> list[ScanWave]:
    return [w for w in waves if w.stage not in (Stage.GATE, Stage.ISOLATE)]


def assert_disjoint(wave: ScanWave) -> None:
    counts = Counter(n for g in wave.groups for n in g.nodes)
    assert max(counts.values()) == 1, f"wave {wave.index} repeats {counts.most_common(1)}"


@pytest.mark.parametrize(
    ("strategy", "expected"), [("ring", 2), ("bisect", 1), ("random:3", 3), ("all", 15)]
)
def test_each_fixed_strategy_runs_its_number_of_waves_of_disjoint_pairs(
    strategy: str, expected: int
) -> None:
    waves, _ = run(fleet_of(16, 2), strategy)
    assert waves[0].stage is Stage.GATE
    assert len(internode(waves)) == expected
    for wave in internode(waves):
        assert_disjoint(wave)
        assert all(len(g.nodes) == 2 for g in wave.groups)


def test_all_pairs_meets_every_pair_exactly_once() -> None:
    fleet = fleet_of(10, 1)
    waves, _ = run(fleet, "all")
    pairs = Counter(frozenset(g.nodes) for w in internode(waves) for g in w.groups)
    assert set(pairs) == {frozenset(p) for p in combinations(fleet.ids, 2)}
    assert set(pairs.values()) == {1}


def test_ring_pairs_each_node_with_both_neighbours() -> None:
    fleet = fleet_of(8, 1)
    waves, _ = run(fleet, "ring")
    pairs = {frozenset(g.nodes) for w in internode(waves) for g in w.groups}
    ids = fleet.ids
    assert pairs == {frozenset((ids[i], ids[(i + 1) % 8])) for i in range(8)}


def test_random_matchings_follow_the_seed() -> None:
    fleet = fleet_of(32, 1)

    def matchings(seed: int) -> list[set[frozenset[str]]]:
        waves, _ = run(fleet, "random:2", seed=seed)
        return [{frozenset(g.nodes) for g in w.groups} for w in internode(waves)]

    assert matchings(7) == matchings(7)
    assert matchings(7) != matchings(8)
    assert all(len(m) == 16 for m in matchings(7))  # perfect: every node once


@pytest.mark.parametrize("nodes", range(2, 90))
def test_the_affine_screen_puts_every_pair_of_nodes_in_exactly_one_group_in_q_plus_1_waves(
    nodes: int,
) -> None:
    ids = [f"n{i}" for i in range(nodes)]
    classes = affine(ids)
    q = smallest_prime(isqrt(nodes - 1) + 1)
    assert q * q >= nodes
    assert q < 2 * isqrt(nodes - 1) + 3  # a prime between k and 2k: q < 2 sqrt(N) + 2
    assert len(classes) <= q + 1
    met = Counter(
        frozenset(p) for lines in classes for line in lines for p in combinations(line, 2)
    )
    assert set(met) == {frozenset(p) for p in combinations(ids, 2)}
    assert set(met.values()) == {1}
    for lines in classes:
        members = [n for line in lines for n in line]
        assert len(members) == len(set(members))  # a class's groups are disjoint: one wave
        assert all(len(line) <= q for line in lines)


def test_adaptive_on_a_healthy_fleet_is_the_gate_and_the_screen_of_all_to_all_groups() -> None:
    fleet = fleet_of(64, 8)
    waves, outcomes = run(fleet, "adaptive")
    # q = 11; then every pair alone, the circle method's 63 rounds (a capped path's test),
    # and the pairs that passed within MARGIN of their threshold once more, a wave or two
    stages = [w.stage for w in waves]
    assert stages[:76] == [Stage.GATE] + [Stage.SCREEN] * 12 + [Stage.PAIRS] * 63
    assert set(stages[76:]) <= {Stage.PAIRS}
    assert len(stages[76:]) <= 2
    assert [g.nodes for g in waves[0].groups] == [(n,) for n in fleet.ids]
    for wave in waves[1:]:
        assert_disjoint(wave)
        assert {g.op for g in wave.groups} == {"all_to_all"}
    assert {o.op for o in outcomes if o.group.stage is Stage.SCREEN} == {"all_to_all"}
    screen = [g for w in waves if w.stage is Stage.SCREEN for g in w.groups]
    pairs = {frozenset(p) for g in screen for p in combinations(g.nodes, 2)}
    assert len(pairs) == 64 * 63 // 2


def test_adaptive_screens_one_domain_each_when_nodes_carry_a_label() -> None:
    nodes = tuple(
        FleetNode(id=f"n{i:02d}", host=f"h{i:02d}", gpus=4, domain=f"rack{i // 6}")
        for i in range(24)
    )
    waves, _ = run(Fleet(nodes=nodes), "adaptive")
    screen = waves[1]
    assert [{nodes[int(n[1:])].domain for n in g.nodes} for g in screen.groups] == [
        {f"rack{r}"} for r in range(4)
    ]


def test_a_slow_node_is_confirmed_beside_different_known_good_partners_and_the_rest_again() -> None:
    fleet = fleet_of(64, 8)
    waves, outcomes = run(fleet, "adaptive", (Planted(fault=Fault.SLOW_NODE, nodes=("n0021",)),))
    screen = [g for w in waves if w.stage is Stage.SCREEN for g in w.groups]
    failing = [g for g in screen if "n0021" in g.nodes]
    assert len(failing) == 12  # every one of its groups
    # the rest of each of them again, for a fault the slow node hid
    again = {g.nodes for w in waves if w.stage is Stage.BISECT for g in w.groups}
    assert {tuple(n for n in g.nodes if n != "n0021") for g in failing} <= again
    confirm = [g for w in waves if w.stage is Stage.CONFIRM for g in w.groups]
    partners = [g.partners for g in confirm if g.tested == ("n0021",)]
    assert len(partners) == CONFIRMS
    assert len({p for ps in partners for p in ps}) == CONFIRMS  # different partners
    passed = Counter(n for o in outcomes if o.group.stage is Stage.SCREEN for n in o.group.nodes)
    assert all(passed[p] >= 2 for ps in partners for p in ps)  # known good: passed twice


def test_a_slow_pair_anywhere_is_bisected_from_its_one_screen_group_down_to_the_pair() -> None:
    fleet = fleet_of(121, 1)  # q = 11: groups of 11 nodes
    link = Planted(fault=Fault.SLOW_LINK, nodes=("n0000", "n0120"))
    waves, outcomes = run(fleet, "adaptive", (link,))
    held = [o.group for o in outcomes if {"n0000", "n0120"} <= set(o.group.nodes)]
    assert [g.stage for g in held].count(Stage.SCREEN) == 1
    (screen,) = [g.nodes for g in held if g.stage is Stage.SCREEN]
    bisect = [g for w in waves if w.stage is Stage.BISECT for g in w.groups]
    assert all(set(g.nodes) <= set(screen) for g in bisect)
    # halving: each level two halves or two of the four quarters across them, not the 55 pairs
    assert len(bisect) <= 4 * ceil(log2(11))
    confirm = [g.nodes for w in waves if w.stage is Stage.CONFIRM for g in w.groups]
    assert ("n0000", "n0120") in confirm


def test_a_pad_a_confirmation_failed_beside_pads_no_more_and_is_tested_beside_two_others() -> None:
    """Known-good is checked, not trusted: the partner of a probe that failed may be the
    fault (a flaky node, an end of another slow pair), so it is tested again."""
    fleet = fleet_of(64, 8)
    waves, _ = run(fleet, "adaptive", (Planted(fault=Fault.SLOW_NODE, nodes=("n0021",)),))
    confirm = [(g.tested, g.partners) for w in waves if w.stage is Stage.CONFIRM for g in w.groups]
    pads = [p for t, (p,) in confirm if t == ("n0021",)]
    assert len(pads) == CONFIRMS
    for pad in pads:
        after = confirm[confirm.index((("n0021",), (pad,))) + 1 :]
        assert not [p for _, p in after if pad in p]  # no pad again
        partners = [p for t, (p,) in after if t == (pad,)]
        assert len(set(partners)) == 2
        assert not set(partners) & {"n0021", *pads}


def test_a_node_that_does_not_answer_leaves_every_later_wave() -> None:
    fleet = fleet_of(64, 8)
    oracle = Oracle((), Costs(), 0)
    policy = ScanPolicy(fleet, Strategy.parse("adaptive"), THRESHOLDS)
    waves: list[ScanWave] = []
    wave = policy.next()
    while wave is not None:
        waves.append(wave)
        got = [oracle.measure(fleet, g) for g in wave.groups]
        if len(waves) == 3:  # the screen's second wave: n0040 hangs
            i = next(i for i, g in enumerate(wave.groups) if "n0040" in g.nodes)
            got[i] = replace(
                got[i], result=Result.FAILED, unanswered=("n0040",), reason="timed out"
            )
        wave = policy.next(got)
    assert not [g for w in waves[3:] for g in w.groups if "n0040" in g.nodes]
    assert len([w for w in waves if w.stage is Stage.SCREEN]) == 12


def test_a_node_whose_gate_is_slow_is_isolated_gpu_by_gpu_and_in_disjoint_gpu_pairs() -> None:
    fleet = fleet_of(16, 4)
    waves, _ = run(fleet, "adaptive", (Planted(fault=Fault.SLOW_GPU, nodes=("n0009",), gpu=2),))
    inside = [w for w in waves if w.stage is Stage.ISOLATE]
    assert len(inside) == 1 + 3  # each GPU alone, then 3 rounds of 2 disjoint pairs
    assert {g.nodes for w in inside for g in w.groups} == {("n0009",)}
    assert [g.gpus for g in inside[0].groups] == [(0,), (1,), (2,), (3,)]
    pairs = [g.gpus for w in inside[1:] for g in w.groups]
    assert sorted(pairs) == sorted(combinations(range(4), 2))
    for wave in inside[1:]:
        assert len({g for group in wave.groups for g in group.gpus}) == 4  # disjoint


def test_a_gate_under_a_threshold_a_fleet_finding_waived_is_isolated_all_the_same() -> None:
    """One node of 4 H200 whose GPUs are all slow: its gate misses the reference, which the
    fleet finding waives, and its GPUs are still held against each other in pairs."""
    fleet = fleet_of(1, 4, "NVIDIA H200")
    oracle = Oracle((), Costs(), 0, shift=0.5)
    policy = ScanPolicy(fleet, Strategy.parse("adaptive"), THRESHOLDS)
    gate = policy.next()
    assert gate is not None
    inside = []
    wave = policy.next([oracle.measure(fleet, g) for g in gate.groups])
    while wave is not None:
        inside.append(wave)
        wave = policy.next([oracle.measure(fleet, g) for g in wave.groups])
    assert [w.stage for w in inside] == [Stage.ISOLATE] * 4  # each GPU alone, 3 pair rounds
    assert sorted(g.gpus for w in inside[1:] for g in w.groups) == list(combinations(range(4), 2))


def test_a_node_that_fails_its_gate_stays_out_and_one_with_a_slow_gpu_goes_on_without_it() -> None:
    fleet = fleet_of(16, 4)
    planted = (
        Planted(fault=Fault.DEAD_NODE, nodes=("n0003",)),
        Planted(fault=Fault.SLOW_GPU, nodes=("n0009",), gpu=2),
    )
    for strategy in ("adaptive", "ring", "all"):
        waves, outcomes = run(fleet, strategy, planted)
        groups = [g for w in internode(waves) for g in w.groups]
        assert not any("n0003" in g.nodes for g in groups), strategy
        held = [g.subsets[g.nodes.index("n0009")] for g in groups if "n0009" in g.nodes]
        assert held, strategy
        assert set(held) == {(0, 1, 3)}, strategy
    out = excluded(fleet, outcomes, THRESHOLDS)
    assert set(out) == {"n0003"}
    assert "did not start" in out["n0003"]


@pytest.mark.parametrize(
    ("gpu", "flag", "out", "left"),
    [
        (1, "xid 79", {}, {"n0001": (1,)}),
        (
            None,
            "NIC mlx5_3 at 200 of 400 Gb/s",
            {"n0001": "gate failed: NIC mlx5_3 at 200 of 400 Gb/s"},
            {},
        ),
    ],
    ids=["a-gpu", "the-node"],
)
def test_nvml_evidence_at_a_gate_leaves_its_gpu_out_or_keeps_its_node_out(
    gpu: int | None, flag: str, out: dict[str, str], left: dict[str, tuple[int, ...]]
) -> None:
    """Evidence against one GPU condemns that GPU, and its node goes on across nodes without
    it; evidence against the node itself keeps it out."""
    fleet = fleet_of(4, 2)
    _, outcomes = run(fleet, "ring")
    gate = [
        GroupOutcome(
            group=o.group,
            result=Result.OK,
            busbw_gb_per_s=o.busbw_gb_per_s,
            readings=(MemberReading(node=o.group.nodes[0], gpu=gpu, flags=(flag,)),),
        )
        if o.group.nodes == ("n0001",)
        else o
        for o in outcomes
        if o.group.stage is Stage.GATE
    ]
    assert excluded(fleet, gate, THRESHOLDS) == out
    assert left_gpus(fleet, gate, THRESHOLDS) == left


def test_replaying_the_rows_so_far_gives_the_wave_the_running_policy_gave() -> None:
    fleet = fleet_of(64, 8)
    planted = (
        Planted(fault=Fault.SLOW_NODE, nodes=("n0040",)),
        Planted(fault=Fault.SLOW_LINK, nodes=("n0011", "n0012")),
    )
    waves, outcomes = run(fleet, "adaptive", planted)
    strategy = Strategy.parse("adaptive")
    for wave in waves:
        before = [o for o in outcomes if o.group.wave < wave.index]
        assert next_wave(fleet, before, strategy, THRESHOLDS) == wave
    assert next_wave(fleet, outcomes, strategy, THRESHOLDS) is None


@pytest.mark.parametrize("text", ["random", "random:0", "ring:2", "spiral"])
def test_a_strategy_that_does_not_parse_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"strateg|is not a valid"):
        Strategy.parse(text)


def test_on_seven_nodes_with_one_gone_the_slow_node_is_confirmed_and_the_gone_one_is_not() -> None:
    """A node that leaves after its gate brings nothing back: there is nothing to confirm of
    it, and the few known-good nodes of a small fleet partner the slow node instead."""
    fleet = fleet_of(7, 1)
    oracle = Oracle((Planted(fault=Fault.SLOW_NODE, nodes=("n0002",)),), Costs(), 0)
    policy = ScanPolicy(fleet, Strategy.parse("adaptive"), THRESHOLDS)
    waves: list[ScanWave] = []
    wave = policy.next()
    while wave is not None:
        waves.append(wave)
        got = [
            GroupOutcome(group=g, result=Result.MISSING, reason="it left")
            if g.stage is not Stage.GATE and "n0006" in g.nodes
            else oracle.measure(fleet, g)
            for g in wave.groups
        ]
        wave = policy.next(got)
    confirm = [g for w in waves if w.stage is Stage.CONFIRM for g in w.groups]
    assert not [g for g in confirm if g.tested == ("n0006",)]
    partners = {p for g in confirm if g.tested == ("n0002",) for p in g.partners}
    assert len(partners) >= 2


def test_every_strategy_is_one_entry_of_the_table_whose_function_gives_its_waves_of_groups() -> (
    None
):
    fleet = fleet_of(6, 1)
    assert set(STRATEGIES) == set(Scheme)
    for kind, strategist in STRATEGIES.items():
        strategy = Strategy.parse("random:2" if kind is Scheme.RANDOM else str(kind))
        at = Internode(
            fleet=fleet,
            strategy=strategy,
            thresholds=THRESHOLDS,
            history=[],
            nodes=fleet.ids,
            start=5,
        )
        first = next(strategist(at))  # the adaptive one's next waves need its outcomes
        assert first.index == 5
        assert first.groups
        assert {g.wave for g in first.groups} == {5}
        # on a healthy fleet the scan's first wave after its gate is the table's
        waves, _ = run(fleet, str(strategy))
        assert internode(waves)[0].groups == tuple(replace(g, wave=1) for g in first.groups)


def test_a_fixed_strategy_may_give_groups_of_any_size() -> None:
    def triples(strategy: Strategy, nodes: Sequence[str]) -> list[list[tuple[str, ...]]]:
        return [[tuple(nodes[i : i + 3]) for i in range(0, len(nodes), 3)]]

    fleet = fleet_of(6, 1)
    at = Internode(
        fleet=fleet,
        strategy=Strategy.parse("ring"),
        thresholds=THRESHOLDS,
        history=[],
        nodes=fleet.ids,
        start=1,
    )
    (wave,) = screens(triples)(at)
    assert [g.nodes for g in wave.groups] == [fleet.ids[:3], fleet.ids[3:]]
    assert wave.stage is Stage.SCREEN


def run_with(
    fleet: Fleet,
    override: Callable[[ScanWave, list[GroupOutcome]], list[GroupOutcome]],
    pair_rounds: int | None = None,
) -> tuple[list[ScanWave], list[GroupOutcome]]:
    """A healthy fleet's adaptive scan, each wave's outcomes as `override` makes them."""
    oracle = Oracle((), Costs(), 0)
    policy = ScanPolicy(fleet, Strategy(kind=Scheme.ADAPTIVE, pair_rounds=pair_rounds), THRESHOLDS)
    waves: list[ScanWave] = []
    outcomes: list[GroupOutcome] = []
    wave = policy.next()
    while wave is not None:
        waves.append(wave)
        got = override(wave, [oracle.measure(fleet, g) for g in wave.groups])
        outcomes += got
        wave = policy.next(got)
    return waves, outcomes


def test_a_failing_screen_group_is_run_again_whole_and_one_that_passes_is_not_bisected() -> None:
    """One slow block in one screen group (0.6% of recorded GPU points are 25-79% slow): the
    group is run again whole before anything is bisected; it passes, so nothing is bisected
    or confirmed and no one is condemned; its members carry a transient note."""
    fleet = fleet_of(64, 8)

    def one_slow_block(wave: ScanWave, got: list[GroupOutcome]) -> list[GroupOutcome]:
        if wave.index == 2:  # the screen's second wave: its first group 35% slow, once
            busbw = got[0].busbw_gb_per_s
            assert busbw is not None
            got[0] = replace(got[0], busbw_gb_per_s=busbw * 0.65)
        return got

    waves, outcomes = run_with(fleet, one_slow_block)
    slow = waves[2].groups[0].nodes
    later = [g for w in waves[3:] if w.stage not in (Stage.SCREEN, Stage.PAIRS) for g in w.groups]
    assert later[0].nodes == slow
    # then no bisection: at most its members, each beside one known-good partner, while
    # the sequential test is in doubt over their one failure in 13 tests
    assert all(g.stage is Stage.CONFIRM and len(g.partners) == 1 for g in later[1:])
    assert {n for g in later[1:] for n in g.tested} <= set(slow)
    verdicts = judge(fleet, outcomes, THRESHOLDS)
    assert not [v.name for v in verdicts if v.health is not Health.HEALTHY]
    noted = {v.nodes[0] for v in verdicts if v.subject is Subject.NODE and v.notes}
    assert noted == set(slow)
    (note,) = next(v.notes for v in verdicts if v.name == slow[0])
    assert note.startswith(f"transient: {len(slow)} nodes in wave 2 (screen) failed")


def test_a_gate_slow_once_whose_isolation_names_nothing_is_run_again_and_not_condemned() -> None:
    fleet = fleet_of(16, 4)

    def slow_gate(wave: ScanWave, got: list[GroupOutcome]) -> list[GroupOutcome]:
        if wave.index == 0:
            i = fleet.ids.index("n0009")
            got[i] = replace(got[i], busbw_gb_per_s=(got[i].busbw_gb_per_s or 0) * 0.6)
        return got

    waves, outcomes = run_with(fleet, slow_gate)
    gates = [w for w in waves if w.stage is Stage.GATE]
    assert [g.nodes for g in gates[1].groups] == [("n0009",)]
    assert gates[1].index == 1 + len([w for w in waves if w.stage is Stage.ISOLATE])
    verdicts = {v.name: v for v in judge(fleet, outcomes, THRESHOLDS)}
    assert not [n for n, v in verdicts.items() if v.health is not Health.HEALTHY]
    (note,) = verdicts["n0009"].notes
    assert note.startswith("transient: its gate in wave 0 all_reduce busbw")
    assert any("n0009" in g.nodes for w in waves if w.stage is Stage.SCREEN for g in w.groups)


def test_a_gpu_pair_low_once_is_run_again_and_its_nvlink_is_not_condemned_when_it_passes() -> None:
    """n0009's pair gpu1-gpu2 runs one slow block in its isolation (its gate slow once too,
    so the node is isolated): the pair is run again, passes, and its GPUs carry a transient
    note; nothing is condemned."""
    fleet = fleet_of(16, 4)

    def slow_once(wave: ScanWave, got: list[GroupOutcome]) -> list[GroupOutcome]:
        for i, o in enumerate(got):
            first = wave.index == 0 and o.group.nodes == ("n0009",)
            pair = o.group.nodes == ("n0009",) and o.group.gpus == (1, 2) and wave.index < 5
            if first or pair:
                got[i] = replace(o, busbw_gb_per_s=(o.busbw_gb_per_s or 0) * 0.6)
        return got

    waves, outcomes = run_with(fleet, slow_once)
    pairs = [w.index for w in waves for g in w.groups if g.gpus == (1, 2)]
    assert len(pairs) == 2
    assert pairs[1] == max(w.index for w in waves if w.stage is Stage.ISOLATE)  # the last
    verdicts = {v.name: v for v in judge(fleet, outcomes, THRESHOLDS)}
    assert not [n for n, v in verdicts.items() if v.health is not Health.HEALTHY]
    for gpu in (1, 2):
        assert any("transient: NVLink gpu1-gpu2" in n for n in verdicts[f"n0009/gpu{gpu}"].notes)


def test_a_node_failing_one_test_in_five_is_flaky_by_its_sequential_test_its_partners_not() -> None:
    """n0005 fails every fifth test across nodes with an error (its partners' as well): the
    groups run again pass, so each failure is transient, and the sequential test over them
    calls n0005 flaky with its pass ratio; no partner is blamed, no group left unconfirmed."""
    fleet = fleet_of(64, 8)
    seen = Counter[str]()

    def one_in_five(wave: ScanWave, got: list[GroupOutcome]) -> list[GroupOutcome]:
        for i, o in enumerate(got):
            if "n0005" in o.group.nodes and o.group.stage not in (Stage.GATE, Stage.ISOLATE):
                seen["n0005"] += 1
                if seen["n0005"] % 5 == 1:
                    got[i] = replace(o, result=Result.FAILED, reason="NCCL error: remote closed")
        return got

    _, outcomes = run_with(fleet, one_in_five)
    verdicts = {v.name: v for v in judge(fleet, outcomes, THRESHOLDS)}
    flaky = verdicts["n0005"]
    assert flaky.health is Health.FLAKY
    assert flaky.pass_ratio is not None
    assert 0.7 < flaky.pass_ratio < 0.9
    assert "a sequential test of one failure in 5" in flaky.evidence
    assert [v.name for v in verdicts.values() if v.health is not Health.HEALTHY] == ["n0005"]


def test_two_slow_pairs_sharing_a_node_are_each_bisected_and_named() -> None:
    """n0003 is an end of two slow pairs at 49 nodes: it fails two screen groups beside
    different partners, so it is first taken for a slow node; its confirmations clear it, and
    each of its failing groups is then run again and bisected to its pair."""
    fleet = fleet_of(49, 8)
    links = (("n0003", "n0012"), ("n0003", "n0013"))
    planted = tuple(Planted(fault=Fault.SLOW_LINK, nodes=link) for link in links)
    _, outcomes = run(fleet, "adaptive", planted)
    verdicts = judge(fleet, outcomes, THRESHOLDS)
    condemned = sorted(v.nodes for v in verdicts if v.condemned)
    assert condemned == sorted(links)
    assert all(v.subject is Subject.LINK for v in verdicts if v.condemned)
    assert not [v.name for v in verdicts if v.health is Health.UNCONFIRMED]


def test_a_slow_pair_whose_bisection_a_chance_failure_misled_is_bisected_again_and_named() -> None:
    """n0001-n0092's screen group of 11 fails; the first half its bisection tries, holding
    one end of the pair, runs one slow block, so the bisection goes down that half and finds
    nothing there (no pairs stage tests every pair: the bisection alone).
    The group, run whole again, still fails: it is bisected anew to the pair, and no
    unconfirmed group of its healthy members is left."""
    fleet = fleet_of(144, 8)
    link = ("n0001", "n0092")
    planted = (Planted(fault=Fault.SLOW_LINK, nodes=link),)
    oracle = Oracle(planted, Costs(), 0)
    misled: list[tuple[str, ...]] = []

    def one_slow_half(wave: ScanWave, got: list[GroupOutcome]) -> list[GroupOutcome]:
        got = [oracle.measure(fleet, g) for g in wave.groups]
        for i, o in enumerate(got):
            ends = set(link) & set(o.group.nodes)
            if not misled and o.group.stage is Stage.BISECT and len(ends) == 1 < len(o.group.nodes):
                misled.append(o.group.nodes)
                got[i] = replace(o, busbw_gb_per_s=(o.busbw_gb_per_s or 0) * 0.65)
        return got

    _, outcomes = run_with(fleet, one_slow_half, pair_rounds=0)
    assert misled == [("n0001", "n0014", "n0027", "n0040", "n0053", "n0066")]
    verdicts = judge(fleet, outcomes, THRESHOLDS)
    assert [v.nodes for v in verdicts if v.condemned] == [link]
    assert not [v.name for v in verdicts if v.health is Health.UNCONFIRMED]


def test_a_hubs_three_slow_pairs_two_in_one_screen_group_are_each_named() -> None:
    """n0001 is an end of three slow pairs at 144 nodes (no pairs stage: the bisection alone),
    two of them, to n0040 and n0092, in one screen group: once the first is found, the rest
    of the group is tested without either end, and the one without n0040 fails on the
    second pair, which is bisected and named too."""
    fleet = fleet_of(144, 8)
    links = (("n0001", "n0029"), ("n0001", "n0040"), ("n0001", "n0092"))
    planted = tuple(Planted(fault=Fault.SLOW_LINK, nodes=link) for link in links)
    _, outcomes = run(fleet, "adaptive", planted, pair_rounds=0)
    verdicts = judge(fleet, outcomes, THRESHOLDS)
    assert sorted(v.nodes for v in verdicts if v.condemned) == sorted(links)
    assert all(v.subject is Subject.LINK for v in verdicts if v.condemned)
    assert not [v.name for v in verdicts if v.health is Health.UNCONFIRMED]
