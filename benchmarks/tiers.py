"""Every tier of one host: busbw per tier at one size (256 MiB by default).

1. The host as one node: the NVLink island and its pairs, and the host/PCIe path forced
   (NCCL_P2P_DISABLE=1) over the same groups.
2. The host as two Ray nodes, its GPUs split between them (each raylet is started with half
   of CUDA_VISIBLE_DEVICES): internode groups, and the same with P2P and SHM off so NCCL
   takes the network transport (--force-network).

Prints busbw per tier, group and operation, and writes the rows under --out.

    python3 benchmarks/tiers.py --size 256M --ops all_reduce,all_gather,all_to_all,send_recv
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd
import ray
from ray.cluster_utils import Cluster

import sweeper


def two_nodes_on_this_host(gpus: int, cpus: int) -> Cluster:
    """A head and one more raylet, each owning half of this host's GPUs."""
    visible = os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    half = [str(i) for i in range(gpus)]
    nodes = None
    try:
        for part in (half[: gpus // 2], half[gpus // 2 :]):
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(part)  # the raylet inherits it
            if nodes is None:
                nodes = Cluster(
                    initialize_head=True, head_node_args={"num_gpus": len(part), "num_cpus": cpus}
                )
            else:
                nodes.add_node(num_gpus=len(part), num_cpus=cpus)
    finally:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        if visible is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = visible
    assert nodes is not None
    nodes.wait_for_nodes()
    return nodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="256M")
    parser.add_argument(
        "--ops", default="all_reduce,all_gather,reduce_scatter,all_to_all,send_recv"
    )
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs of this host")
    parser.add_argument("--backend", default="nccl")
    parser.add_argument("--out", default="tiers-results")
    args = parser.parse_args()
    out = Path(args.out)
    common = {
        "ops": args.ops,
        "dtypes": args.dtype,
        "min_size": args.size,
        "max_size": args.size,
        "output": out / "results",
        "backend": args.backend,
    }
    one = sweeper.run(tiers="world,nvlink,pcie", **common)
    nodes = two_nodes_on_this_host(args.gpus, cpus=max(4, args.gpus))
    try:
        two = sweeper.run(
            address=nodes.address, nodes=2, tiers="internode", force_network=True, **common
        )
    finally:
        ray.shutdown()
        nodes.shutdown()
    rows = pd.concat([one.rows, two.rows], ignore_index=True)
    failed = (~rows["status"].isin(["ok", "skipped"])).sum()
    rows["tier"] = rows["tier"] + rows["variant"].map(lambda v: "" if v == "default" else f"/{v}")
    table = rows.pivot_table(
        index=["tier", "group_id"], columns="op", values="busbw_gb_per_s", aggfunc="max", sort=False
    )
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(f"busbw GB/s at {args.size}, {args.dtype}:")
        print(table.round(1).to_string())
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
