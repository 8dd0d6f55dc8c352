"""Planning at cluster scale: 1024 nodes x 8 GPUs (recorded DGX H100 topology), no Ray.

Plans every tier with and without pairs, prints the number of groups per tier and the time,
and the ratio against an anchor measured in the same run: enumerating the same rank tuples
with itertools alone (the least any planner must do). Goal: under 2 s with pairs.

    python benchmarks/plan_scale.py [--nodes 1024]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from itertools import combinations
from pathlib import Path

from sweeper.plan import expected_placement, groups
from sweeper.topology import Node

RECORD = Path(__file__).parents[1] / "tests" / "data" / "topologies" / "dgx-h100-nvswitch.json"


def anchor(nodes: int, gpus: int, pairs: bool) -> list[tuple[int, ...]]:
    """The same rank tuples, from itertools alone: islands and their pairs, then the p2p-off
    variant of them, then internode (one per node, node pairs, all) and its network variant."""
    out: list[tuple[int, ...]] = []
    for _variant in range(2):
        for n in range(nodes):
            island = tuple(range(n * gpus, (n + 1) * gpus))
            out.append(island)
            out.extend(combinations(island, 2) if pairs else ())
    firsts = tuple(range(0, nodes * gpus, gpus))
    for _variant in range(2):
        out.append(firsts)
        out.extend(combinations(firsts, 2) if pairs else ())
        out.append(tuple(range(nodes * gpus)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1024)
    args = parser.parse_args()
    record = json.loads(RECORD.read_text())
    nodes = tuple(
        Node.from_record({**record, "node_id": f"n{i}", "host": f"dgx{i:04d}"})
        for i in range(args.nodes)
    )
    placement = expected_placement("nccl", nodes, [8] * args.nodes)
    tiers = ("nvlink", "pcie", "internode")
    for pairs in (True, False):
        start = time.perf_counter()
        found = groups(placement, tiers, pairs=pairs, force_network=True)
        planned = time.perf_counter() - start
        start = time.perf_counter()
        expected = len(anchor(args.nodes, 8, pairs))
        floor = time.perf_counter() - start
        counts = Counter(f"{g.tier}/{g.variant}" for g in found)
        print(
            f"{args.nodes} nodes x 8 GPUs, pairs={'all' if pairs else 'none'}: "
            f"{len(found)} groups in {planned:.2f} s (anchor {expected} tuples in "
            f"{floor:.2f} s, ratio {planned / floor:.1f}x; goal < 2 s)"
        )
        for tier, count in sorted(counts.items()):
            print(f"    {tier:<20}{count:>9}")
        assert len(found) == expected, (len(found), expected)


if __name__ == "__main__":
    main()
