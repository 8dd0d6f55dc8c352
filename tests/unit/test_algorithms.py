"""Pure parts of the algorithms: schedules, grids, MoE routing and layouts."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest

from sweeper.ops.algorithms import all_to_all, moe
from sweeper.planning.placement import Group, Shape, rounds
from sweeper.wire import MoeLayer


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9])
def test_round_robin_has_no_rank_twice_in_a_round_and_every_pair_once(n: int) -> None:
    pairs = [Group("nvlink", "default", p) for p in combinations(range(n), 2)]
    schedule = rounds(pairs)
    assert len(schedule) == (n - 1 if n % 2 == 0 else n)
    for together in schedule:
        ranks = [r for g in together for r in g.ranks]
        assert len(ranks) == len(set(ranks))
    scheduled = Counter(g.ranks for together in schedule for g in together)
    assert scheduled == Counter(p.ranks for p in pairs)


def test_round_robin_schedules_only_the_pairs_asked_for() -> None:
    crossing = [Group("pcie", "default", p) for p in [(0, 2), (0, 3), (1, 2), (1, 3)]]
    schedule = rounds(crossing)
    assert sorted(g.ranks for together in schedule for g in together) == [
        (0, 2), (0, 3), (1, 2), (1, 3)]  # fmt: skip
    assert max(len(together) for together in schedule) == 2


@pytest.mark.parametrize(
    ("n", "grid"),
    [
        (4, (2, 2)),
        (6, (2, 3)),
        (8, (2, 4)),
        (9, (3, 3)),
        (12, (3, 4)),
        (2, None),
        (3, None),
        (7, None),
    ],
)
def test_mesh_grid_is_the_most_square_factoring(n: int, grid: tuple[int, int] | None) -> None:
    assert all_to_all.grid_of(n) == grid
    reason = all_to_all.mesh2d_why_not(Shape(n, (0,) * n, "gloo", False))
    assert (reason is None) == (grid is not None)


@pytest.mark.parametrize(
    ("nodes", "runs"),
    [((0, 0, 1, 1), True), ((0, 0, 0, 0), False), ((0, 0, 0, 1), False), ((0, 1, 0, 1), False)],
)
def test_hierarchical_needs_equal_ranks_on_several_nodes(nodes: tuple[int, ...], runs: bool
                                                         ) -> None:  # fmt: skip
    assert (all_to_all.hierarchical_why_not(Shape(4, nodes, "gloo", False)) is None) == runs


def test_moe_routing_sends_every_token_to_top_k_experts_reproducibly() -> None:
    spec = MoeLayer(tokens=1000, top_k=3, experts=12, zipf=1.1, seed=7)
    routed = moe.routing(spec, 4)
    assert (routed.sum(axis=1) == 1000 * 3).all()
    moe.routing.cache_clear()
    assert np.array_equal(moe.routing(spec, 4), routed)
    assert not np.array_equal(moe.routing(replace(spec, seed=8), 4), routed)


def test_moe_skew_loads_the_first_experts_rank() -> None:
    flat = moe.routing(MoeLayer(tokens=4000, experts=16, zipf=0.0), 4).sum(axis=0)
    skewed = moe.routing(MoeLayer(tokens=4000, experts=16, zipf=2.0), 4).sum(axis=0)
    assert flat.max() / flat.min() < 1.1
    assert list(skewed) == sorted(skewed, reverse=True)  # rank 0 holds expert 0, the hottest
    assert skewed[0] > 1.5 * skewed[1]


@pytest.mark.parametrize("combine", [False, True])
def test_moe_splits_agree_between_sender_and_receiver(combine: bool) -> None:
    spec, n = MoeLayer(tokens=50, hidden=4, top_k=2, experts=6, zipf=1.0), 3
    layouts = [moe.layout(spec, combine, n, r) for r in range(n)]
    for lay in layouts:
        assert lay.recv == sum(s.length for s in lay.expected)
        for span in lay.expected:  # what rank `source` put at that index, for me
            sender = layouts[span.source]
            assert span.index + span.length <= sender.send
    assert sum(lay.send for lay in layouts) == sum(lay.recv for lay in layouts)
    assert max(lay.send for lay in layouts) == moe.busiest(spec, n, combine)
