"""The scan's policy: the waves of each strategy, disjoint groups, every node screened, halves
padded back to their group's shape with known-good nodes, gate failures kept out."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import pytest

from sweeper.scan.fleet import Fleet, Node, Outcome, Reading, Result, Stage, Wave
from sweeper.scan.policy import Policy, Strategy, excluded, next_wave
from sweeper.scan.simulate import Costs, Fault, Oracle, Planted, fleet_of
from sweeper.scan.thresholds import Thresholds

THRESHOLDS = Thresholds()


def run(
    fleet: Fleet, strategy: str, planted: tuple[Planted, ...] = (), seed: int = 0
) -> tuple[list[Wave], list[Outcome]]:
    """Every wave the policy asks for, measured by the simulation's oracle."""
    oracle = Oracle(planted, Costs(), seed)
    policy = Policy(fleet, Strategy.parse(strategy, seed=seed), THRESHOLDS)
    waves: list[Wave] = []
    outcomes: list[Outcome] = []
    wave = policy.next()
    while wave is not None:
        waves.append(wave)
        got = [oracle.measure(fleet, g) for g in wave.groups]
        outcomes += got
        wave = policy.next(got)
    return waves, outcomes


def internode(waves: list[Wave]) -> list[Wave]:
    return [w for w in waves if w.stage is not Stage.GATE]


def assert_disjoint(wave: Wave) -> None:
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


def test_adaptive_on_a_healthy_fleet_screens_every_node_and_joins_one_of_each_group() -> None:
    fleet = fleet_of(64, 8)
    waves, _ = run(fleet, "adaptive")
    assert [w.stage for w in waves] == [Stage.GATE, Stage.SCREEN, Stage.CROSS_DOMAIN]
    assert [g.nodes for g in waves[0].groups] == [(n,) for n in fleet.ids]
    screen = waves[1]
    assert_disjoint(screen)
    assert sorted(n for g in screen.groups for n in g.nodes) == sorted(fleet.ids)
    assert {len(g.nodes) for g in screen.groups} == {8}  # sqrt(64)
    (cross,) = waves[2].groups
    assert cross.nodes == tuple(g.nodes[0] for g in screen.groups)


def test_adaptive_screens_one_domain_each_when_nodes_carry_a_label() -> None:
    nodes = tuple(
        Node(id=f"n{i:02d}", host=f"h{i:02d}", gpus=4, domain=f"rack{i // 6}") for i in range(24)
    )
    waves, _ = run(Fleet(nodes=nodes), "adaptive")
    screen = waves[1]
    assert [{nodes[int(n[1:])].domain for n in g.nodes} for g in screen.groups] == [
        {f"rack{r}"} for r in range(4)
    ]


def test_bisection_pads_halves_to_the_shape_with_known_good_nodes_and_confirms_twice() -> None:
    fleet = fleet_of(64, 8)
    slow = Planted(fault=Fault.SLOW_NODE, nodes=("n0021",))
    waves, _ = run(fleet, "adaptive", (slow,))
    screen = waves[1]
    failing = next(g for g in screen.groups if "n0021" in g.nodes)
    passing = {n for g in screen.groups if g is not failing for n in g.nodes}
    bisect = [w for w in waves if w.stage is Stage.BISECT]
    assert len(bisect) == 4  # 8 -> 4 -> 2 -> 1, then the other 7 again
    for wave in bisect:
        assert_disjoint(wave)
        for group in wave.groups:
            assert len(group.nodes) == len(failing.nodes)
            assert set(group.partners) <= passing
            assert set(group.tested) <= set(failing.nodes)
    confirm = [g for w in waves if w.stage is Stage.CONFIRM for g in w.groups]
    partners = [g.partners for g in confirm if "n0021" in g.nodes]
    assert len(partners) == 2
    assert len({p for ps in partners for p in ps}) == 2  # two different partners
    assert {p for ps in partners for p in ps} <= passing


def test_the_pads_of_a_group_that_failed_with_an_error_pad_no_more_and_are_confirmed() -> None:
    """A slow node explains slowness, not an error: the known-good nodes padding a half that
    failed with one may hold a node that fails one time in two, so each is confirmed."""
    fleet = fleet_of(64, 8)
    oracle = Oracle((Planted(fault=Fault.SLOW_NODE, nodes=("n0021",)),), Costs(), 0)
    policy = Policy(fleet, Strategy.parse("adaptive"), THRESHOLDS)
    doubted: tuple[str, ...] = ()
    waves: list[Wave] = []
    wave = policy.next()
    while wave is not None:
        waves.append(wave)
        got = [oracle.measure(fleet, g) for g in wave.groups]
        if not doubted and (first := next((g for g in wave.groups if g.partners), None)):
            doubted = first.partners
            i = wave.groups.index(first)
            got[i] = Outcome(group=first, result=Result.FAILED, reason="NCCL error")
        wave = policy.next(got)
    after = waves[next(i for i, w in enumerate(waves) if w.stage is Stage.BISECT) + 1 :]
    assert doubted
    assert not {p for w in after for g in w.groups for p in g.partners} & set(doubted)
    confirm = [g for w in waves if w.stage is Stage.CONFIRM for g in w.groups]
    for node in doubted:
        partners = [g.partners for g in confirm if g.tested == (node,)]
        assert len({p for ps in partners for p in ps}) == 2


def test_a_node_that_fails_its_gate_stays_out_of_every_internode_group() -> None:
    fleet = fleet_of(16, 4)
    planted = (
        Planted(fault=Fault.DEAD_NODE, nodes=("n0003",)),
        Planted(fault=Fault.SLOW_GPU, nodes=("n0009",), gpu=2),
    )
    for strategy in ("adaptive", "ring", "all"):
        waves, outcomes = run(fleet, strategy, planted)
        inside = {n for w in internode(waves) for g in w.groups for n in g.nodes}
        assert not inside & {"n0003", "n0009"}, strategy
    out = excluded(fleet, outcomes, THRESHOLDS)
    assert set(out) == {"n0003", "n0009"}
    assert "did not start" in out["n0003"]
    assert "gpu 2 copies" in out["n0009"]


def test_a_gate_with_nvml_evidence_keeps_the_node_out() -> None:
    fleet = fleet_of(4, 2)
    _, outcomes = run(fleet, "ring")
    gate = [
        Outcome(
            group=o.group,
            result=Result.OK,
            busbw_gb_per_s=o.busbw_gb_per_s,
            readings=(Reading(node=o.group.nodes[0], gpu=1, flags=("xid 79",)),),
        )
        if o.group.nodes == ("n0001",)
        else o
        for o in outcomes
        if o.group.stage is Stage.GATE
    ]
    assert excluded(fleet, gate, THRESHOLDS) == {"n0001": "gate failed: gpu 1: xid 79"}


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
