from __future__ import annotations

from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import series_counts


def test_counts_are_rounded_per_operation_deduplicated_and_ascending() -> None:
    sizes = [64, 8, 16, 32, 16]
    assert series_counts(REGISTRY["all_reduce"], 4, 4, sizes) == [2, 4, 8, 16]
    # 8 B is below one float per rank: 16 B, as for 16 B itself
    assert series_counts(REGISTRY["all_gather"], 4, 4, sizes) == [4, 8, 16]


def test_a_pair_operation_has_no_counts_on_a_group_of_another_size() -> None:
    assert series_counts(REGISTRY["p2p"], 4, 4, [8, 16]) == []
    assert series_counts(REGISTRY["p2p"], 4, 2, [8, 16]) == [2, 4]


def test_an_operation_that_sets_its_own_size_has_one_count() -> None:
    moe = REGISTRY["moe:dispatch"]
    assert moe.traits.fixed_count is not None
    assert series_counts(moe, 2, 4, [8, 2**20]) == [moe.traits.fixed_count(4)]
