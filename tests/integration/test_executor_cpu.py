"""The executor on real rank actors (the session's Ray, gloo), with waves written by hand:
shapes of schedule and failures that a sweep through the CLI does not give on CPU ranks.

The tests share one set of four rank actors (starting them costs more than the tests'
points), each test with an executor of its own in a world of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from sweeper.driver import cluster
from sweeper.driver.executor import Executor
from sweeper.driver.outcome import PointResult
from sweeper.fabric import node
from sweeper.fabric.multicast import MULTICAST_OFF
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import Group, Placement
from sweeper.planning.schedule import Series, Wave
from sweeper.wire import Timing
from tests.conftest import start_ray_session
from tests.processes import parent

pytestmark = pytest.mark.usefixtures("ray_session")

COUNTS = (1, 256)  # float32 elements: 4 B and 1 KiB


@pytest.fixture(scope="module")
def four() -> Iterator[tuple[cluster.RankSet, Placement]]:
    """Four gloo rank actors (the widest test's groups) and where they sit, in the environment
    a sweep gives them where the driver's keeps NVLink multicast off (Ray is up already: its
    workers did not inherit these values)."""
    start_ray_session()
    slots = cluster.choose_nodes("gloo", 1, 4)
    env = cluster.actor_env(environ={**os.environ, **MULTICAST_OFF})
    ranks = cluster.RankSet("gloo", slots, {"CPU": 1.0}, env)
    try:
        yield ranks, cluster.placement("gloo", cluster.discover(slots), ranks.start())
    finally:
        ranks.close()


Run = tuple[Executor, cluster.RankSet, list[PointResult]]


@pytest.fixture
def executor(four: tuple[cluster.RankSet, Placement]) -> Run:
    """An executor over the four actors, every group running all_reduce at COUNTS; the rows
    it hands on, in order. The actors join a new world first: an earlier test's groups are
    gone from it, and an actor that test killed is new."""
    ranks, placement = four
    ranks.replace_ranks(())
    measured: list[PointResult] = []
    run = Executor(
        ranks=ranks,
        placement=placement,
        series_of=lambda group: [Series("all_reduce", "float32", COUNTS)],
        collectives={"all_reduce": REGISTRY["all_reduce"]},
        timing=Timing(iters=2, warmup=1, blocks=1),
        timeout_s=30,
        max_size_bytes=1024,
        emit=measured.append,
    )
    return run, ranks, measured


def _rows(measured: list[PointResult]) -> list[tuple[Group, int, str]]:
    return [(m.group, m.point.count, m.outcome.status) for m in measured]


def _every(
    groups: tuple[Group, ...], status: Callable[[Group], str]
) -> list[tuple[Group, int, str]]:
    return [(group, count, status(group)) for group in groups for count in COUNTS]


def test_two_groups_of_the_same_ranks_in_one_world_both_run(executor: Run) -> None:
    """As a node's NVLink island and then its GPUs' copies at once (`--tiers all` on nodes of
    NVSwitch): the second group of ranks 0 and 1 opens in a new world, for torch would find
    the first one's rendezvous in the old world's store under the same name (the worker
    refuses to open it there)."""
    island, again = Group("cpu", "default", (0, 1)), Group("world", "default", (0, 1))
    between = Group("cpu", "default", (1, 2))
    run, _, measured = executor
    run.run([Wave(0, (island,)), Wave(1, (between,)), Wave(2, (again,))])
    assert _rows(measured) == _every((island, between, again), lambda _: "ok")


def _loads(pid: int, library: str) -> bool:
    return library in Path(f"/proc/{pid}/maps").read_text()


def _pid(actor: Any) -> int:
    return int(ray.get(actor.__ray_call__.remote(lambda _: os.getpid())))


def test_a_rank_runs_without_ray_and_its_actor_without_torch(executor: Run) -> None:
    """Each rank runs in a process of its own (forked by its node's template), with no Ray in
    it; the actor carries the rank's results pickled (actor.Relayed), so only the rank's
    process loads torch."""
    pair = Group("cpu", "default", (0, 1))
    run, ranks, measured = executor
    run.run([Wave(0, (pair,))])
    actors = [_pid(actor) for actor in ranks.actors]  # replaced ranks' too
    for rank, actor in zip((info.pid for info in ranks.infos), actors, strict=True):
        assert _loads(rank, "libtorch")
        assert not _loads(rank, "_raylet")
        assert _loads(actor, "_raylet")
        assert not _loads(actor, "libtorch")
    assert _rows(measured) == _every((pair,), lambda _: "ok")


def test_the_drivers_multicast_off_reaches_every_actor_rank_and_template_unchanged(
    executor: Run,
) -> None:
    """sweeper sets none of these; it hands the driver's values on, so a machine's "off"
    holds in every process a run starts there: each actor, each rank (the NCCL variables
    its rows record) and the template each rank was forked from (its own environment)."""
    _, ranks, _ = executor
    for actor, info in zip(ranks.actors, ranks.infos, strict=True):
        env = ray.get(actor.__ray_call__.remote(lambda _: dict(os.environ)))
        assert {name: env.get(name) for name in MULTICAST_OFF} == MULTICAST_OFF
        assert ("NCCL_NVLS_ENABLE", "0") in info.nccl_env
        template = parent(info.pid)
        assert template != _pid(actor)  # forked, not a fresh interpreter of the actor's
        raw = Path(f"/proc/{template}/environ").read_bytes().split(b"\0")
        assert {f"{k}={v}".encode() for k, v in MULTICAST_OFF.items()} <= set(raw)


def test_each_nodes_network_offer_is_read_on_it_for_the_actors_environment(
    four: tuple[cluster.RankSet, Placement],
) -> None:
    ranks, _ = four
    (offer,) = cluster.offers(ranks.slots, {"NCCL_IB_DISABLE": "1"})
    assert offer.ports == node.ports()  # one node: this machine's /sys
    assert ("NCCL_IB_DISABLE", "1") in offer.variables


def test_a_group_whose_actor_died_while_idle_fails_its_points_and_the_wave_goes_on(
    executor: Run,
) -> None:
    """Rank 1's actor dies between waves: its next group does not open, each of that group's
    points is an error row saying so, the wave's other group measures every point, and the
    rank's new actor works in the next wave."""
    dead, alive, after = (Group("cpu", "default", r) for r in ((1, 2), (0, 3), (1, 3)))
    run, ranks, measured = executor
    run.run_wave(Wave(0, (Group("cpu", "default", (0, 1)),)))
    measured.clear()
    ray.kill(ranks.actors[1], no_restart=True)
    run.run_wave(Wave(1, (dead, alive)))
    run.run_wave(Wave(2, (after,)))
    assert sorted(_rows(measured)) == sorted(
        _every((dead, alive, after), lambda g: "error" if g == dead else "ok")
    )
    errors = {m.outcome.error for m in measured if m.group == dead}
    assert len(errors) == 1
    assert errors.pop().startswith("the group did not open: ActorDiedError: The actor died")
    assert not any(m.outcome.launched for m in measured if m.group == dead)
