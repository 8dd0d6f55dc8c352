"""Group-phase wall time on fake multi-node Ray clusters (ray.cluster_utils, gloo): how the
executor's waves scale with the number of nodes.

For each node count: a cluster of that many nodes of 2 CPUs, a sweep of `--tiers
cpu,internode --pairs all --ops all_reduce` to 1K with 2 iterations, and from its rows the
groups, waves and the group phase (first point started to last point ended). The box's
cores bound the absolute figures: every rank actor and raylet shares them.

    RAY_AUTH_MODE=disabled python benchmarks/waves.py [--nodes 1 2 4 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

import sweeper
from sweeper.driver.measurement import ResultRow
from sweeper.driver.observer import Finished, Started
from sweeper.driver.sweep import run
from sweeper.planning.profile import build_spec


class _Quiet:
    def started(self, run: Started) -> None: ...

    def point(self, row: ResultRow) -> None: ...

    def finished(self, run: Finished) -> None: ...


def measure(nodes: int, out: Path) -> str:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(nodes):
        cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        spec = build_spec(
            backend="gloo",
            nodes=nodes,
            gpus_per_node=2,
            tiers="cpu,internode",
            pairs="all",
            ops="all_reduce",
            max_size="1K",
            iters=2,
            warmup=1,
            report=False,
            results=out,
        )
        start = time.monotonic()
        run(spec, _Quiet())
        wall = time.monotonic() - start
    finally:
        ray.shutdown()
        cluster.shutdown()
    rows = sweeper.load(out)
    phase = (rows["ended_at"].max() - rows["started_at"].min()).total_seconds()
    groups, waves = rows["group_id"].nunique(), rows["wave"].nunique()
    cells = [nodes, groups, waves, f"{phase:.2f}", f"{phase / groups * 1e3:.0f}"]
    cells += [f"{phase / waves * 1e3:.0f}", f"{wall:.1f}"]
    return "| " + " | ".join(map(str, cells)) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8])
    args = parser.parse_args()
    # Waves grow as N + 2: with a core per rank, a constant time per wave is linear growth.
    print("| nodes | groups | waves | group phase s | per group ms | per wave ms | sweep wall s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as out:
        for nodes in args.nodes:
            print(measure(nodes, Path(out) / str(nodes)), flush=True)


if __name__ == "__main__":
    main()
