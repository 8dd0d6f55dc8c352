"""The executor on real rank actors (the session's Ray, gloo), with waves written by hand:
shapes of schedule that CPU ranks never get from the planner."""

from __future__ import annotations

import pytest

from sweeper import cluster
from sweeper.collectives import REGISTRY
from sweeper.executor import Executor, Measured
from sweeper.plan import Group, Timing
from sweeper.schedule import Series, Wave

pytestmark = pytest.mark.usefixtures("ray_session")


def test_two_groups_of_the_same_ranks_in_one_world_both_run() -> None:
    """As a node's NVLink island and then its GPUs' copies at once (`--tiers all` on nodes of
    NVSwitch): the second group of ranks 0 and 1 opens in a new world, for torch would find
    the first one's rendezvous in the old world's store under the same name (the worker
    refuses to open it there)."""
    slots = cluster.choose_nodes("gloo", 1, 3)
    ranks = cluster.RankSet("gloo", slots, {"CPU": 1.0})
    island, again = Group("cpu", "default", (0, 1)), Group("world", "default", (0, 1))
    waves = [Wave(0, (island,)), Wave(1, (Group("cpu", "default", (1, 2)),)), Wave(2, (again,))]
    measured: list[Measured] = []
    try:
        placement = cluster.placement("gloo", cluster.discover(slots), ranks.start())
        Executor(
            ranks,
            placement,
            lambda group: [Series("all_reduce", "float32", (1, 256))],
            {"all_reduce": REGISTRY["all_reduce"]},
            Timing(iters=2, warmup=1, blocks=1),
            timeout_s=30,
            max_size_bytes=1024,
            emit=measured.append,
        ).run(waves)
    finally:
        ranks.close()
    assert [(m.group, m.point.count, m.outcome.status) for m in measured] == [
        (group, count, "ok") for group in (island, waves[1].groups[0], again) for count in (1, 256)
    ]
