"""The scan's actor set goes on without the nodes whose actors did not start, or that left:
the other nodes' actors join again without them, and only where they cannot does a set start
again; it stops where a failure names no node. The rank set's boundary is a fake that fails
as told. And the scan's nodes as named (`--nodes host,id`), the command a condemned verdict
carries to re-test its subject, and the line a stopped scan, or one whose head is lost,
leaves: the run's own, naming `sweeper scan --resume`."""

from __future__ import annotations

import signal
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from sweeper.driver import cluster
from sweeper.driver.run import RunState
from sweeper.driver.scan_ranks import named, started
from sweeper.driver.stops import Stopped
from sweeper.errors import InfrastructureError
from sweeper.planning.profile import build_spec
from sweeper.results.writer import ResultWriter
from sweeper.scan.fleet import Stage
from sweeper.scan.retest import retest
from sweeper.scan.verdict import Health, Subject, Verdict
from sweeper.wire import RankInfo

SLOTS = [cluster.NodeSlot(f"n{i}", f"host{i}", 1) for i in range(4)]
ALIVE = {s.node_id for s in SLOTS}


class _Set:
    """A rank set on `slots` whose start and drop fail with the next of its sets' `failures`
    (None: it succeeds)."""

    def __init__(self, sets: _RankSets, slots: Sequence[cluster.NodeSlot]) -> None:
        self.sets, self.nodes, self.closed = sets, [s.node_id for s in slots], False

    def _next(self, how: str) -> list[RankInfo]:
        self.sets.asked.append(self.nodes)
        self.sets.how.append(how)
        failure = self.sets.failures.pop(0)
        if failure is not None:
            raise failure
        return []

    def start(self) -> list[RankInfo]:
        return self._next("start")

    def drop(self, nodes: Collection[str]) -> list[RankInfo]:
        self.nodes = [n for n in self.nodes if n not in nodes]
        return self._next("drop")

    def close(self) -> None:
        self.closed = True


class _RankSets:
    """Makes the fake sets, and says which nodes each start or drop was on, and which it was."""

    def __init__(self, *failures: Exception | None) -> None:
        self.failures = list(failures)
        self.asked: list[list[str]] = []
        self.how: list[str] = []
        self.made: list[_Set] = []

    def __call__(self, slots: Sequence[cluster.NodeSlot]) -> _Set:
        self.made.append(_Set(self, slots))
        return self.made[-1]


def test_the_nodes_whose_actors_did_not_start_are_out_with_why_and_the_rest_start() -> None:
    failed = cluster.StartFailed("host2: boom", {"n2": "RuntimeError: boom"})
    rank_sets, lost = _RankSets(failed, None), {"n3": "it left the cluster"}
    started(SLOTS, lost, rank_sets, lambda: ALIVE)
    assert rank_sets.asked == [["n0", "n1", "n2"], ["n0", "n1"]]
    assert lost == {
        "n3": "it left the cluster",
        "n2": "its actors did not start: RuntimeError: boom",
    }


def test_the_actors_that_started_join_without_the_nodes_whose_actors_did_not() -> None:
    failed = cluster.StartFailed("host2: boom", {"n2": "RuntimeError: boom"})
    rank_sets = _RankSets(failed, None)
    ranks, _ = started(SLOTS, {}, rank_sets, lambda: ALIVE)
    assert rank_sets.how == ["start", "drop"]
    assert rank_sets.made == [ranks]  # one set, no actor started twice
    assert not ranks.closed


def test_a_set_that_lost_a_node_goes_on_with_the_others_ranks() -> None:
    rank_sets = _RankSets(None, None)
    ranks, _ = started(SLOTS, {}, rank_sets, lambda: ALIVE)
    lost = {"n1": "it left the cluster during the scan"}
    again, _ = started(SLOTS, lost, rank_sets, lambda: ALIVE - {"n1"}, ranks)
    assert again is ranks
    assert rank_sets.how == ["start", "drop"]
    assert rank_sets.asked[-1] == ["n0", "n2", "n3"]
    assert lost == {"n1": "it left the cluster during the scan"}


def test_a_set_whose_others_cannot_join_again_starts_again_without_the_lost_node() -> None:
    rank_sets = _RankSets(None, cluster.StartFailed("the ranks left could not join"), None)
    ranks, _ = started(SLOTS, {}, rank_sets, lambda: ALIVE)
    lost = {"n1": "it left the cluster during the scan"}
    again, _ = started(SLOTS, lost, rank_sets, lambda: ALIVE - {"n1"}, ranks)
    assert rank_sets.how == ["start", "drop", "start"]
    assert rank_sets.asked[-1] == ["n0", "n2", "n3"]
    assert ranks.closed
    assert rank_sets.made == [ranks, again]
    assert not again.closed
    assert list(lost) == ["n1"]


def test_a_node_gone_from_ray_is_out_when_the_failure_names_none() -> None:
    rank_sets, lost = _RankSets(InfrastructureError("cannot place"), None), {}
    started(SLOTS, lost, rank_sets, lambda: ALIVE - {"n1"})
    assert rank_sets.asked == [["n0", "n1", "n2", "n3"], ["n0", "n2", "n3"]]
    assert list(lost) == ["n1"]
    assert "cannot place" in lost["n1"]


def test_a_failure_that_names_no_node_stops_the_scan() -> None:
    lost: dict[str, str] = {}
    rank_sets = _RankSets(cluster.StartFailed("NCCL refused"))
    with pytest.raises(InfrastructureError, match="the ranks did not start: NCCL refused"):
        started(SLOTS, lost, rank_sets, lambda: ALIVE)
    assert lost == {}
    assert [ranks.closed for ranks in rank_sets.made] == [True]


def test_no_node_left_to_start_stops_the_scan() -> None:
    every = cluster.StartFailed("all", {s.node_id: "no answer within 1 s" for s in SLOTS})
    with pytest.raises(InfrastructureError, match="no node of the scan could start"):
        started(SLOTS, {}, _RankSets(every), lambda: ALIVE)


def test_nodes_named_by_host_or_ray_id_come_in_the_order_named_and_unknown_names_are_said() -> None:
    twins = [*SLOTS, cluster.NodeSlot("n4", "host1", 1)]  # two Ray nodes of one host
    chosen, unknown = named(twins, ["n3", "host1", "nowhere", "n1"])
    assert [s.node_id for s in chosen] == ["n3", "n1", "n4"]  # each once, a host's every node
    assert unknown == ["nowhere"]


def test_a_condemned_node_is_re_tested_beside_the_partners_it_was_judged_beside() -> None:
    slow = Verdict(
        subject=Subject.NODE,
        nodes=("n2",),
        health=Health.SLOW,
        stage=Stage.CONFIRM,
        partners=("n0", "n3"),
    )
    command = retest(slow, {"n2": "gpu-2", "n0": "gpu-0"}, ["--results", "/data/my results"])
    assert command == "sweeper scan --nodes gpu-2,gpu-0,n3 --results '/data/my results'"


class _Connected:
    """The connection a run asks how many GPUs its cluster has, and nothing else here."""

    watch = None

    def gpus(self) -> int:
        return 0


def test_a_scan_stopped_or_whose_head_is_lost_says_to_resume_it_with_sweeper_scan(
    tmp_path: Path,
) -> None:
    spec = build_spec(backend="gloo", results=tmp_path)
    scanning = RunState(spec, None, "scan", _Connected(), command="scan")  # type: ignore[arg-type]
    scanning.writer = ResultWriter(tmp_path, scanning.run_id, "2026-11-27")  # its first row
    try:
        again = f"sweeper scan --resume {scanning.run_id} --results {tmp_path}"
        assert scanning.lost("10.0.0.1:6379") == (
            f"lost the Ray head at 10.0.0.1:6379 mid-run: 0 rows written, resume with: {again}"
        )
        stop = Stopped(signal.SIGINT)
        scanning.told(stop)
        assert stop.line().endswith(f"its rows kept in {tmp_path}; resume with: {again}")
    finally:
        scanning.writer.close()
