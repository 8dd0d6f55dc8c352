"""The scan's actor set starts again without the nodes whose actors did not start, and stops
where a failure names no node; the rank set's boundary is a fake that fails as told."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from sweeper.driver import cluster
from sweeper.driver.scan import Started, started
from sweeper.errors import InfrastructureError

SLOTS = [cluster.NodeSlot(f"n{i}", f"host{i}", 1) for i in range(4)]
ALIVE = {s.node_id for s in SLOTS}


class _RankSets:
    """Each start fails with the next of `failures` (None: it starts), and says which nodes
    it was asked for."""

    def __init__(self, *failures: Exception | None) -> None:
        self.failures = list(failures)
        self.asked: list[list[str]] = []

    def __call__(self, slots: Sequence[cluster.NodeSlot]) -> Started:
        self.asked.append([s.node_id for s in slots])
        failure = self.failures.pop(0)
        if failure is not None:
            raise failure
        ranks: Any = "ranks"
        return ranks, []


def test_the_nodes_whose_actors_did_not_start_are_out_with_why_and_the_rest_start() -> None:
    failed = cluster.StartFailed("host2: boom", {"n2": "RuntimeError: boom"})
    rank_sets, lost = _RankSets(failed, None), {"n3": "it left the cluster"}
    started(SLOTS, lost, rank_sets, lambda: ALIVE)
    assert rank_sets.asked == [["n0", "n1", "n2"], ["n0", "n1"]]
    assert lost == {
        "n3": "it left the cluster",
        "n2": "its actors did not start: RuntimeError: boom",
    }


def test_a_node_gone_from_ray_is_out_when_the_failure_names_none() -> None:
    rank_sets, lost = _RankSets(InfrastructureError("cannot place"), None), {}
    started(SLOTS, lost, rank_sets, lambda: ALIVE - {"n1"})
    assert rank_sets.asked == [["n0", "n1", "n2", "n3"], ["n0", "n2", "n3"]]
    assert list(lost) == ["n1"]
    assert "cannot place" in lost["n1"]


def test_a_failure_that_names_no_node_stops_the_scan() -> None:
    lost: dict[str, str] = {}
    with pytest.raises(InfrastructureError, match="the ranks did not start: NCCL refused"):
        started(SLOTS, lost, _RankSets(cluster.StartFailed("NCCL refused")), lambda: ALIVE)
    assert lost == {}


def test_no_node_left_to_start_stops_the_scan() -> None:
    every = cluster.StartFailed("all", {s.node_id: "no answer within 1 s" for s in SLOTS})
    with pytest.raises(InfrastructureError, match="no node of the scan could start"):
        started(SLOTS, {}, _RankSets(every), lambda: ALIVE)
