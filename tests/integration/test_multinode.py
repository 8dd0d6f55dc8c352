"""A real multi-node Ray cluster on one machine (several raylets, fake GPU resources): the
session's `fake_nodes` (tests/conftest.py), four nodes of 2 GPUs, two of them with 3 CPUs."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from ray.cluster_utils import Cluster
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.driver import cluster
from sweeper.driver.sweep import survey
from sweeper.errors import InfrastructureError
from sweeper.planning.profile import build_spec
from tests.conftest import registry_kept

pytestmark = pytest.mark.own_cluster


def test_nodes_get_one_pinned_actor_per_gpu(fake_nodes: Cluster) -> None:
    slots = cluster.choose_nodes("nccl", 2, None)
    assert [slot.ranks for slot in slots] == [2, 2]
    assert len({slot.node_id for slot in slots}) == 2
    # gloo ranks holding GPU bundles: placement is proven without CUDA on this machine
    ranks = cluster.RankSet("gloo", slots, {"CPU": 1.0, "GPU": 1.0})
    try:
        infos = ranks.start()
    finally:
        ranks.close()
    assert [info.rank for info in infos] == [0, 1, 2, 3]
    assert [info.node_id for info in infos] == [s.node_id for s in slots for _ in range(2)]
    for slot in slots:
        gpus = [i.ray_gpu_ids for i in infos if i.node_id == slot.node_id]
        assert sorted(g for (g,) in gpus) == ["0", "1"]  # each actor one GPU, none shared


def test_a_node_lost_for_good_stops_a_rebuild_with_one_line_naming_it(fake_nodes: Cluster) -> None:
    """A rebuild after the node is gone: the new actors' bundles are pinned to it, so they never
    start, and the run stops with an infrastructure error (exit 3) instead of a traceback."""
    lost = fake_nodes.add_node(num_cpus=4)  # the most CPUs: chosen first
    try:
        fake_nodes.wait_for_nodes()
        (slot,) = cluster.choose_nodes("gloo", 1, 2)
        assert slot.node_id == lost.node_id
        ranks = cluster.RankSet("gloo", [slot], {"CPU": 1.0})
        try:
            ranks.start()  # within the default bound: a loaded machine starts ranks slowly
            # the rebuild's actors can never start: the shortest bound ends the wait soonest
            ranks.start_timeout_s = 1
            fake_nodes.remove_node(lost)
            with pytest.raises(InfrastructureError) as stopped:
                ranks.replace_ranks([0, 1])
        finally:
            ranks.close()
    finally:  # the other tests on fake_nodes count them
        if lost in fake_nodes.worker_nodes:
            fake_nodes.remove_node(lost)
    assert str(stopped.value).startswith(
        f"cannot restart the actors of rank(s) 0, 1 on {slot.host}: GetTimeoutError"
    )
    assert stopped.value.exit_code == 3


def test_too_many_nodes_or_gpus_exit_3_naming_what_the_cluster_has(
    fake_nodes: Cluster, tmp_path: Path
) -> None:
    for args, message in (
        (["--nodes", "5"], "asked for 5 node(s) with 1+ GPU each; the cluster has 4"),
        (["--gpus-per-node", "3"], "asked for 1 node(s) with 3+ GPU each; the cluster has 0"),
    ):
        result = CliRunner().invoke(app, ["run", *args, "--results", str(tmp_path / "r")])
        assert result.exit_code == 3, result.output
        assert message in result.stderr
    assert not (tmp_path / "r").exists()


def test_discovery_reports_cpu_nodes_as_such(fake_nodes: Cluster) -> None:
    found = survey(build_spec(backend="gloo", nodes=3, gpus_per_node=2, tiers="all"))
    assert [node.nvml for node in found.nodes] == [False, False, False]
    assert len({node.node_id for node in found.nodes}) == 3
    tiers = Counter(group.tier for group in found.groups)
    # each node's two ranks (their one pair is the same group); one rank per node, the three
    # node pairs, and all six ranks
    assert tiers == {"cpu": 3, "internode": 5}


def _sweep(tmp_path: Path, nodes: int, *args: str, exit_code: int = 0) -> pd.DataFrame:
    """A gloo sweep on `nodes` of the nodes, two ranks each; its rows."""
    out = tmp_path / "results"
    run = ["run", "--backend", "gloo", "--nodes", str(nodes), "--gpus-per-node", "2"]
    run += ["--iters", "2", "--warmup", "1", "--no-report"]  # exactness and placement
    result = CliRunner().invoke(app, [*run, *args, "--results", str(out)])
    assert result.exit_code == exit_code, result.output
    return sweeper.load(out)


@pytest.fixture(scope="module")
def two_nodes_of_two(fake_nodes: Cluster, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """One gloo sweep on two of the nodes, two ranks each, to 1K, for the two tests below
    (they only look): all_reduce, and all_to_all native, hierarchical and mesh2d, on each
    node's pair, on one rank of each node, and on all four ranks. Its actors take longer
    to start than its points to run, so the tests share them."""
    return _sweep(
        tmp_path_factory.mktemp("two-nodes"),
        2,
        *("--max-size", "1K", "--tiers", "cpu,internode", "--pairs", "none"),
        *("--ops", "all_reduce,all_to_all,all_to_all:hierarchical,all_to_all:mesh2d"),
    )


def _ok_and_exact(df: pd.DataFrame) -> None:
    assert (df["status"] == "ok").all()
    assert (df["n_wrong"] == 0).all()


def test_a_two_node_gloo_sweep_writes_internode_rows(two_nodes_of_two: pd.DataFrame) -> None:
    df = two_nodes_of_two[two_nodes_of_two["algorithm"] == "native"]
    assert set(df["op"]) == {"all_reduce", "all_to_all"}
    _ok_and_exact(df)
    groups = df.drop_duplicates("group_id").set_index("group_id")
    assert set(groups.index) == {
        "cpu:n0r0,1",
        "cpu:n1r0,1",
        "internode:n0r0+n1r0",
        "internode:n0r0,1+n1r0,1",
    }
    assert groups.loc["internode:n0r0,1+n1r0,1", "n_nodes"] == 2
    assert groups.loc["internode:n0r0,1+n1r0,1", "world_size"] == 4
    assert groups.loc["cpu:n1r0,1", "n_nodes"] == 1


def test_hierarchical_all_to_all_is_exact_across_two_nodes(
    two_nodes_of_two: pd.DataFrame,
) -> None:
    df = two_nodes_of_two[two_nodes_of_two["algorithm"].isin(["hierarchical", "mesh2d"])]
    every_rank = df["group_id"] == "internode:n0r0,1+n1r0,1"  # the ranks of --tiers world
    assert set(df.loc[every_rank, "algorithm"]) == {"hierarchical", "mesh2d"}
    assert (df.loc[every_rank, "n_nodes"] == 2).all()
    _ok_and_exact(df[every_rank])
    # the smaller groups run them exactly too, or say why not (one node; two ranks)
    others = df[~every_rank]
    assert set(others["status"]) == {"ok", "skipped"}
    assert (others.loc[others["status"] == "ok", "n_wrong"] == 0).all()


def _span(rows: pd.DataFrame) -> tuple[pd.Timestamp, pd.Timestamp]:
    return rows["started_at"].min(), rows["ended_at"].max()


@pytest.fixture(scope="module")
def one_wave(fake_nodes: Cluster, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """One gloo sweep of two test plugins on the four nodes, for the two tests below (they
    only look): each node's pair a group, the four in one wave. Each group runs
    `slow` first, which sleeps before every call, so the groups are seen running at once,
    and `die` after it, whose world rank 3 (node 1's second) exits at 2K. Sizes from 1K to
    the largest that fits --mem-limit 32K: 1K, 2K and that bound."""
    with registry_kept():
        return _sweep(
            tmp_path_factory.mktemp("one-wave"),
            4,
            *("--plugins", "tests.plugins.slow", "--plugins", "tests.plugins.die"),
            *("--ops", "slow,die", "--tiers", "cpu", "--blocks", "1", "--timeout", "20"),
            *("--min-size", "1K", "--max-size", "auto", "--mem-limit", "32K"),
            exit_code=4,  # die's point
        )


def test_a_waves_groups_run_at_once_and_probe_interleaved(one_wave: pd.DataFrame) -> None:
    df = one_wave[one_wave["algorithm"] == "slow"]
    assert (df["status"] == "ok").all()
    assert set(df["wave"]) == {0}  # each node's pair: one wave
    per_group = dict(list(df.groupby("group_id")))
    assert len(per_group) == 4
    spans = [_span(rows) for rows in per_group.values()]
    # every group started before any group ended: they ran at the same time
    assert max(start for start, _ in spans) < min(end for _, end in spans)
    # probing of different groups interleaves: rows in time order switch groups often
    ordered = df.sort_values("started_at")["group_id"].tolist()
    switches = sum(a != b for a, b in itertools.pairwise(ordered))
    assert switches >= len(ordered) // 2
    assert df.groupby("group_id")["max_size_bytes"].min().notna().all()


@pytest.mark.usefixtures("isolated_registry")  # importing the plugin registers its operation
def test_a_dead_actor_fails_its_point_and_the_waves_other_groups_complete(
    one_wave: pd.DataFrame,
) -> None:
    from tests.plugins.die import DIE_AT_BYTES

    df = one_wave[one_wave["algorithm"] == "die"]
    status = {(g, s): st for g, s, st in df[["group_id", "size_bytes", "status"]].itertuples(False)}
    dying = "cpu:n1r0,1"  # world ranks 2 and 3
    assert set(df["wave"]) == {0}  # the four groups ran in one wave
    assert status.pop((dying, DIE_AT_BYTES)) == "error"
    # its series resumed after the rebuild, and the other groups measured every size
    assert set(status.values()) == {"ok"}
    assert len(status) == 4 * df["size_bytes"].nunique() - 1
    failed = df[df["status"] == "error"]
    others = df[df["group_id"] != dying]
    assert (others["ended_at"] <= failed["ended_at"].max() + pd.Timedelta(seconds=20)).all()
