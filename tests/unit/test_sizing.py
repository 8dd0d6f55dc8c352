"""Footprints per operation (hand table), the bound from unequal budgets, and bisection."""

from __future__ import annotations

import pytest

from sweeper.ops.registry import REGISTRY
from sweeper.planning.sizes import parse_mem_limit
from sweeper.planning.sizing import bisect, fits, footprint_bytes, largest_count, scratch_bytes

# Per-rank buffer bytes for S = 1 MiB, as (root, another rank), by hand: c is S, b = S/n.
HAND = {
    "all_reduce": lambda n: (1.0, 1.0),
    "reduce": lambda n: (1.0, 1.0),
    "broadcast": lambda n: (1.0, 1.0),
    "all_gather": lambda n: (1 + 1 / n, 1 + 1 / n),  # input b, output c
    "gather": lambda n: (1 + 1 / n, 1 / n),  # the root holds the gathered output
    "reduce_scatter": lambda n: (1 + 1 / n, 1 + 1 / n),
    "scatter": lambda n: (1 + 1 / n, 1 / n),  # only the root holds the whole input
    "all_to_all": lambda n: (2.0, 2.0),
    "send_recv": lambda n: (2.0, 2.0),
    "reduce_scatter+all_gather": lambda n: (1.0, 1.0),  # in place, chunk by chunk
    "reduce+broadcast": lambda n: (1.0, 1.0),
}
MIB = 2**20


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("name", list(HAND))
def test_footprint_matches_the_hand_table(name: str, n: int) -> None:
    collective = REGISTRY[name]
    count = collective.count(MIB, 1, n)
    assert count == MIB
    for rank, ratio in zip((0, 1), HAND[name](n), strict=True):
        buffers = int(ratio * MIB)
        expected = buffers + scratch_bytes("cuda", buffers)
        assert footprint_bytes(collective, count, n, rank, 1, "cuda") == expected


def test_the_bound_is_set_by_the_poorest_rank_and_fits_everyone() -> None:
    collective = REGISTRY["all_gather"]
    budgets = [8 * 2**30, 2**30, 8 * 2**30, 8 * 2**30]  # rank 1 has far less
    count = largest_count(collective, 2, budgets, "cuda")
    assert count is not None
    assert fits(collective, count, 2, budgets, "cuda")
    larger = collective.count((count + 4 * 16) * 2, 2, 4)  # the next valid size up
    assert not fits(collective, larger, 2, budgets, "cuda")
    # rank 1's buffers: 1.25 S plus the scratch, within its GiB
    assert count * 2 == pytest.approx((2**30 - scratch_bytes("cuda", 2**30)) / 1.25, rel=1e-3)


@pytest.mark.parametrize("name", list(HAND))
def test_every_operation_gets_a_bound_that_fits(name: str) -> None:
    budgets = [64 * MIB, 48 * MIB]
    count = largest_count(REGISTRY[name], 4, budgets, "cpu")
    assert count is not None
    assert fits(REGISTRY[name], count, 4, budgets, "cpu")


def test_no_bound_when_not_even_one_element_fits() -> None:
    assert largest_count(REGISTRY["all_reduce"], 4, [1, 1], "cpu") is None


def test_bisection_narrows_to_the_tolerance_on_valid_sizes() -> None:
    collective = REGISTRY["all_to_all"]
    good, bad, tried = 4 * 1000, 4 * 2000, []
    while (mid := bisect(collective, 1, 4, good, bad)) is not None:
        tried.append(mid)
        assert good < mid < bad
        assert collective.count(mid, 1, 4) == mid  # a size every rank can hold whole
        good, bad = (mid, bad) if mid <= 6000 else (good, mid)  # pretend 6000 is the edge
    assert 6000 - 0.01 * bad <= good <= 6000
    assert len(tried) <= 7


def test_mem_limit_takes_bytes_or_a_percentage() -> None:
    assert parse_mem_limit("8G").of(100 * 2**30) == 8 * 2**30
    assert parse_mem_limit("25%").of(100 * 2**30) == 25 * 2**30
    assert str(parse_mem_limit("12.5%")) == "12.5%"
    with pytest.raises(ValueError, match="percentage"):
        parse_mem_limit("150%")
