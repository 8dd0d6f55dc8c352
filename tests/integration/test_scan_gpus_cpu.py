"""`sweeper scan` on a real fake Ray cluster of five nodes of two gloo ranks each, one rank
slow in every collective it is in (`tests.plugins.slow_gpu`): its node's own pair of GPUs
cannot tell which of the two is slow, so each is tested beside a proven GPU of another node,
and the slow one is named as the GPU, its node's other GPU healthy, and its node's paths
across nodes tested with the slow GPU left out (issue 52, item 5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ray.cluster_utils import Cluster

from sweeper.driver import cluster
from sweeper.driver.scan import scan_fleet
from sweeper.planning.profile import build_spec
from sweeper.scan.document import Scanned
from sweeper.scan.fleet import ScanWave, Stage
from sweeper.scan.policy import Strategy
from sweeper.scan.settings import ScanSettings
from sweeper.scan.thresholds import Thresholds
from sweeper.scan.verdict import Health, Subject
from tests.conftest import cluster_nodes, registry_kept

pytestmark = pytest.mark.own_cluster

NODES = 5


class _Quiet:
    def wave(self, wave: ScanWave) -> None:
        pass


@pytest.fixture(scope="module")
def scanned(
    cluster_head: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[str], Scanned]]:
    """Five nodes of two CPUs each beside a head with none: two gloo ranks a node, a point's
    call timed once; the thresholds of test_scan_cpu (a slowed group is tens of times below
    the others on CPU ranks, a healthy one within a few times)."""
    nodes = [{"num_cpus": 2} for _ in range(NODES)]
    with cluster_nodes(cluster_head, *nodes), registry_kept():
        order = [slot.node_id for slot in cluster.choose_nodes("gloo", NODES, 2)]
        out = tmp_path_factory.mktemp("scan-gpus")
        spec = build_spec(
            backend="gloo",
            gpus_per_node=2,
            iters=1,
            warmup=1,
            blocks=3,
            timeout=60,
            results=out,
            plugins=["tests.plugins.slow_gpu"],
        )
        settings = ScanSettings(
            strategy=Strategy.parse("adaptive"),
            thresholds=Thresholds(sigmas=0, min_ratio=0.1),
            op="slow_gpu",
            sizes=(8, 64 << 10),
        )
        yield order, scan_fleet(spec, settings, _Quiet())


def test_a_slow_rank_of_a_node_of_two_is_named_as_its_gpu_and_its_other_gpu_healthy(
    scanned: tuple[list[str], Scanned],
) -> None:
    from tests.plugins.slow_gpu import SLOW_GPU, SLOW_NODE

    order, scan = scanned
    node = order[SLOW_NODE]
    gpus = {v.gpu: v for v in scan.verdicts if v.subject is Subject.GPU and v.nodes == (node,)}
    assert gpus[SLOW_GPU].health is Health.SLOW, gpus[SLOW_GPU].evidence
    assert "beside proven GPUs of other nodes" in gpus[SLOW_GPU].evidence
    assert gpus[1 - SLOW_GPU].health is Health.HEALTHY, gpus[1 - SLOW_GPU].evidence
    condemned = [(v.subject, v.nodes, v.gpu) for v in scan.verdicts if v.condemned]
    assert condemned == [(Subject.GPU, (node,), SLOW_GPU)]
    (verdict,) = (v for v in scan.verdicts if v.subject is Subject.NODE and v.nodes == (node,))
    assert verdict.health is Health.HEALTHY, verdict.evidence
    across = [o.group for o in scan.outcomes if o.group.stage is Stage.SCREEN]
    held = [g.subsets[g.nodes.index(node)] for g in across if node in g.nodes]
    assert held, "its paths across nodes were not tested"
    assert set(held) == {(1 - SLOW_GPU,)}
