"""The fleet scan's simulation table (docs/PERFORMANCE.md, "The fleet scan"): each strategy
against 0, 1, 3 and 10 planted faults on a simulated fleet, timed by the simulation's cost
model (`sweeper.scan.simulate.Costs`), with the waves, the groups, the estimated minutes
(actor start included), and the verdicts' precision and recall against the planted truth.
`healthy condemned` counts the nodes condemned where nothing was planted.

    python benchmarks/scan_table.py --nodes 1024 --gpus-per-node 8
    python benchmarks/scan_table.py --nodes 232 --strategies adaptive --faults 0,3
"""

from __future__ import annotations

import argparse
import time

from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import cycle, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--strategies", default="adaptive,ring,bisect,random:5,all")
    parser.add_argument("--faults", default="0,1,3,10")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(
        f"{args.nodes} nodes x {args.gpus_per_node} GPUs, seed {args.seed}\n\n"
        "| strategy | faults | waves | groups | minutes | precision | recall "
        "| healthy condemned |\n|---|---|---|---|---|---|---|---|"
    )
    for name in args.strategies.split(","):
        for count in (int(c) for c in args.faults.split(",")):
            started = time.perf_counter()
            sim = simulate(
                nodes=args.nodes,
                gpus_per_node=args.gpus_per_node,
                faults=cycle(count),
                strategy=Strategy.parse(name, seed=args.seed),
                seed=args.seed,
            )
            took = time.perf_counter() - started
            print(
                f"| {name} | {count} | {len(sim.waves)} | {sim.groups} | "
                f"{sim.seconds / 60:.1f} | {sim.score.precision:.2f} | {sim.score.recall:.2f} | "
                f"{len(sim.score.healthy_condemned)} |",
                flush=True,
            )
            if took > 60:
                print(f"<!-- {name} with {count} faults simulated in {took:.0f} s -->")


if __name__ == "__main__":
    main()
