"""The share of slow nodes a fleet's groups give: (1 - d)^g of the groups of g nodes hold
none of them."""

from __future__ import annotations

import random

import pytest

from sweeper.scan.scattered import slow_share


def groups(share: float, sizes: dict[int, int], seed: int) -> list[tuple[int, bool]]:
    """Groups of each size (count of each), passing where no member is slow, of a fleet
    `share` of whose nodes are slow, drawn from `seed`."""
    rng = random.Random(seed)
    return [
        (g, not any(rng.random() < share for _ in range(g)))
        for g, count in sizes.items()
        for _ in range(count)
    ]


def test_none_passing_is_the_whole_fleet_and_all_passing_is_none_of_it() -> None:
    assert slow_share([(32, False)] * 40) == 1.0
    assert slow_share([(32, True)] * 40) == 0.0
    assert slow_share([]) == 1.0


@pytest.mark.parametrize("share", [0.02, 0.1, 0.2, 1 / 3])
def test_the_share_is_read_back_from_groups_of_several_sizes(share: float) -> None:
    """1024 nodes' screen (1056 groups of 32) and its pairs (512): within 0.03 of the share
    planted, over 20 draws each."""
    for seed in range(20):
        got = slow_share(groups(share, {32: 1056, 2: 512}, seed))
        assert got == pytest.approx(share, abs=0.03)


def test_a_fifth_of_256_nodes_is_read_from_the_few_clean_groups_of_16() -> None:
    """3.5% of groups of 16 hold no slow node where a fifth is slow: 9 of 272."""
    got = slow_share([(16, True)] * 9 + [(16, False)] * 263)
    assert got == pytest.approx(0.2, abs=0.01)
