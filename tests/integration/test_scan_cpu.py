"""`sweeper scan` on a real multi-node Ray cluster on this machine (gloo ranks, one per node):
the policy's waves on the executor, the rows with their stage, and verdicts that name the
planted fault, whatever it is.

The faults are test plugins whose delay (50 ms a call) is many times a healthy 1 MiB
all_reduce on CPU ranks, judged against a quarter of the fleet's median: a healthy group
would have to run four times slower than the others to fail, a slowed one runs over ten
times slower.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.driver import cluster
from sweeper.driver.scan import ScanSettings, scan_fleet
from sweeper.plan.profile import build_spec
from sweeper.scan.fleet import Stage, Wave
from sweeper.scan.judge import Health, Subject
from sweeper.scan.policy import Strategy
from sweeper.scan.thresholds import Thresholds
from tests.conftest import cluster_nodes, registry_kept

pytestmark = pytest.mark.own_cluster

NODES = 6
TIMING = ("--iters", "3", "--warmup", "1", "--blocks", "3", "--timeout", "60")
LIMITS = ("--sigmas", "0", "--min-ratio", "0.25")


@pytest.fixture(scope="module")
def fleet(cluster_head: Cluster) -> Iterator[Cluster]:
    """Six nodes of one CPU each, beside a head with none: one gloo rank a node."""
    with cluster_nodes(cluster_head, *[{"num_cpus": 1}] * NODES) as nodes:
        yield nodes


def _order() -> list[str]:
    """The scan's nodes, in its order (the plugins name nodes by their place in it)."""
    return [slot.node_id for slot in cluster.choose_nodes("gloo", NODES, 1)]


def _scan(tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "results"
    run = ["scan", "--backend", "gloo", "--gpus-per-node", "1", *TIMING, *LIMITS]
    result = CliRunner().invoke(app, [*run, *args, "--output", str(out), "--format", "json"])
    assert result.exit_code == 1, result.output  # something condemned
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def _health(found: dict[str, Any], subject: Subject) -> dict[tuple[str, ...], str]:
    return {
        tuple(v["nodes"]): v["health"] for v in found["verdicts"] if v["subject"] == subject
    }


def test_a_node_that_slows_every_group_it_is_in_is_named_slow_with_its_evidence(
    fleet: Cluster, tmp_path: Path
) -> None:
    order = _order()
    with registry_kept():
        from tests.plugins.slow_node import SLOW_NODE

        found = _scan(tmp_path, "--plugin", "tests.plugins.slow_node", "--op", "slow_node")
    slow = order[SLOW_NODE]
    nodes = _health(found, Subject.NODE)
    assert nodes == {(n,): Health.SLOW if n == slow else Health.HEALTHY for n in order}
    assert found["condemned"] == [slow]
    (verdict,) = [v for v in found["verdicts"] if v["name"] == slow]
    assert verdict["stage"] in (Stage.BISECT, Stage.CONFIRM)
    assert len(verdict["partners"]) >= 2  # beside different known-good nodes
    assert verdict["busbw_gb_per_s"] < 0.25 * verdict["fleet_gb_per_s"]
    assert f"{slow}: all_reduce at 1 MiB" in verdict["evidence"]
    rows = sweeper.load(tmp_path / "results")
    assert set(rows["run_kind"]) == {"scan"}
    assert set(rows["stage"]) >= {Stage.GATE, Stage.SCREEN, Stage.BISECT, Stage.CONFIRM}
    assert (rows["status"] == "ok").all()


def test_a_link_slow_only_between_two_nodes_is_named_as_the_link(
    fleet: Cluster, tmp_path: Path
) -> None:
    order = _order()
    with registry_kept():
        from tests.plugins.slow_link import LINK

        found = _scan(tmp_path, "--plugin", "tests.plugins.slow_link", "--op", "slow_link")
    link = tuple(order[i] for i in LINK)
    assert _health(found, Subject.NODE) == {(n,): Health.HEALTHY for n in order}
    links = _health(found, Subject.LINK)
    assert links.pop(link) == Health.SLOW
    assert set(links.values()) <= {Health.HEALTHY}
    assert found["condemned"] == ["-".join(link)]


class _Leaves:
    """Removes a node from the cluster as the scan's first internode wave starts, and waits
    until Ray has it dead."""

    def __init__(self, head: Cluster, node: Any) -> None:
        self.head, self.node, self.left = head, node, False

    def wave(self, wave: Wave) -> None:
        if self.left or wave.stage is Stage.GATE:
            return
        self.head.remove_node(self.node)
        self.left = True
        deadline = time.monotonic() + 60
        while any(n["NodeID"] == self.node.node_id and n["Alive"] for n in ray.nodes()):
            assert time.monotonic() < deadline, "Ray still has the removed node alive"
            time.sleep(0.2)


def test_a_node_that_leaves_mid_scan_is_unreachable_and_the_others_get_their_verdicts(
    fleet: Cluster, tmp_path: Path
) -> None:
    extra = fleet.add_node(num_cpus=1)
    try:
        fleet.wait_for_nodes()
        spec = build_spec(
            backend="gloo", gpus_per_node=1, iters=3, warmup=1, blocks=3, output=tmp_path
        )
        settings = ScanSettings(
            strategy=Strategy.parse("adaptive"),
            thresholds=Thresholds(sigmas=0, min_ratio=0.25),
        )
        leaves = _Leaves(fleet, extra)
        scanned = scan_fleet(spec, settings, leaves)
    finally:
        if extra in fleet.worker_nodes:
            fleet.remove_node(extra)
    assert leaves.left
    nodes = {v.nodes[0]: v for v in scanned.verdicts if v.subject is Subject.NODE}
    assert len(nodes) == NODES + 1
    gone = nodes.pop(extra.node_id)
    assert gone.health is Health.UNREACHABLE
    assert "left the cluster" in gone.evidence
    assert {v.health for v in nodes.values()} == {Health.HEALTHY}
