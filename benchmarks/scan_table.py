"""The fleet scan's simulation table (docs/PERFORMANCE.md, "The fleet scan"): the adaptive scan
of a simulated fleet against each fault class alone, against mixes of them, and against a
fleet that is off as a whole, over many seeds (each seed places the faults anew, at random:
a slow pair's ends in different blocks of ~sqrt(N) nodes, any node a partner the policy may
pick). For each row: recall (planted faults condemned as themselves: the node, the GPU, the
pair of nodes) and precision (condemned verdicts that were planted), pooled over the seeds;
the seeds that missed something or condemned something healthy; and the estimated scan time
by the simulation's cost model (`sweeper.scan.simulate.Costs`, actor start included), its
median and its maximum, with a hang holding its wave for its point's stall deadline (ten
times its expected time, at least 30 s: `sweeper.scan.deadline`) and, for comparison, for
the whole of `--timeout`. The fleet rows count the nodes condemned and the seeds with a
fleet finding. `--jobs` simulates that many seeds at once.

    python benchmarks/scan_table.py --nodes 1024 --gpus-per-node 8 --seeds 100 --jobs 2
    python benchmarks/scan_table.py --nodes 256 --seeds 10 --rows slow-node,mix-10
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from statistics import median

from sweeper.scan.judge import Subject
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Costs, Fault, Simulation, fleet_of, plant, run
from sweeper.scan.thresholds import Thresholds
from sweeper.wire import Tier

CLASSES = {
    "slow-node": Fault.SLOW_NODE,
    "slow-gpu": Fault.SLOW_GPU,
    "slow-pair": Fault.SLOW_LINK,
    "flaky-node": Fault.FLAPPING,
    "hung-once": Fault.HUNG_ONCE,
    "hung-always": Fault.HUNG,
    "dead-node": Fault.DEAD_NODE,
}


def mix(count: int) -> tuple[Fault, ...]:
    """`count` faults, the classes in turn."""
    order = tuple(CLASSES.values())
    return tuple(order[i % len(order)] for i in range(count))


@dataclass(frozen=True)
class Row:
    name: str
    faults: tuple[Fault, ...]
    shift: float = 1.0
    floor: bool = False  # an absolute threshold above every group's figure


ROWS = (
    *(Row(name, (fault,)) for name, fault in CLASSES.items()),
    Row("mix-10", mix(10)),
    Row("mix-40", mix(40)),
    Row("healthy", ()),
    Row("fleet-30%-slow", (), shift=0.7),
    Row("floor-above-all", (), floor=True),
)
# above every healthy group: 45 GB/s through each GPU's NIC across nodes, 361 in a node
FLOORS = {Tier.INTERNODE: 60.0, Tier.NVLINK: 500.0}


def simulated(row: Row, nodes: int, gpus: int, costs: Costs, seed: int) -> Simulation:
    fleet = fleet_of(nodes, gpus)
    return run(
        fleet,
        plant(fleet, row.faults, seed),
        strategy=Strategy.parse("adaptive", seed=seed),
        seed=seed,
        thresholds=Thresholds(min_busbw_gb_per_s=FLOORS) if row.floor else None,
        costs=costs,
        shift=row.shift,
    )


def line(row: Row, sims: Sequence[Simulation], costs: Costs) -> str:
    planted = sum(s.score.planted for s in sims)
    named = sum(s.score.named for s in sims)
    condemned = sum(s.score.condemned for s in sims)
    hits = sum(s.score.true_positives for s in sims)
    missed = sum(s.score.named < s.score.planted for s in sims)
    wrong = sum(s.score.true_positives < s.score.condemned for s in sims)
    found = sum(any(f.off for f in s.findings) for s in sims)
    minutes = [s.seconds / 60 for s in sims]
    flat = [s.seconds_at(costs.timeout_s) / 60 for s in sims]

    def spread(values: Sequence[float]) -> str:
        return f"{median(values):.1f} ({max(values):.1f})"

    recall = f"{named / planted:.3f}" if planted else "-"
    precision = f"{hits / condemned:.3f}" if condemned else "-"
    return (
        f"| {row.name} | {len(row.faults)} | {recall} | {precision} | {missed} | {wrong} | "
        f"{condemned} | {found} | {spread(minutes)} | {spread(flat)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=Costs().timeout_s, help="s a hang holds")
    parser.add_argument("--rows", default=",".join(r.name for r in ROWS))
    parser.add_argument("--jobs", type=int, default=1, help="seeds simulated at once")
    args = parser.parse_args()
    costs = Costs(timeout_s=args.timeout)
    chosen = [r for r in ROWS if r.name in args.rows.split(",")]
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(
        f"{args.nodes} nodes x {args.gpus_per_node} GPUs, adaptive, seeds {seeds.start}-"
        f"{seeds.stop - 1}; minutes: median (max), a hang held for its stall deadline, and "
        f"for a flat {args.timeout:.0f} s\n\n"
        "| faults | count | recall | precision | seeds missing one | seeds condemning a healthy "
        "subject | condemned | seeds with a fleet finding | minutes | minutes, hangs held "
        f"{args.timeout:.0f} s |\n|---|---|---|---|---|---|---|---|---|---|",
        flush=True,
    )
    pool = ProcessPoolExecutor(args.jobs) if args.jobs > 1 else None
    for row in chosen:
        started = time.perf_counter()
        one = partial(simulated, row, args.nodes, args.gpus_per_node, costs)
        sims = list(pool.map(one, seeds) if pool else map(one, seeds))
        print(line(row, sims, costs), flush=True)
        report(sims, lambda s: s.score.named < s.score.planted, "missed")
        report(sims, lambda s: s.score.true_positives < s.score.condemned, "condemned wrongly")
        took = time.perf_counter() - started
        print(f"<!-- {row.name}: {len(sims)} scans simulated in {took:.0f} s -->", flush=True)
    if pool is not None:
        pool.shutdown()


def report(sims: Sequence[Simulation], bad: Callable[[Simulation], bool], what: str) -> None:
    """The seeds a row got wrong, as HTML comments under it: where to look."""
    for s in sims:
        if not bad(s):
            continue
        truth = {p.subject for p in s.planted}
        condemned = {(v.subject, v.nodes, v.gpu) for v in s.verdicts if v.condemned}
        missed = [p.nodes for p in s.planted if p.subject not in condemned]
        down = {v.nodes for v in s.verdicts if v.subject is Subject.NODE and v.condemned}
        wrong = [
            v.name
            for v in s.verdicts
            if v.condemned
            and (v.subject, v.nodes, v.gpu) not in truth
            and not (v.subject in (Subject.GPU, Subject.NVLINK) and v.nodes in down)
        ]
        print(f"<!-- seed {s.seed} {what}: missed {missed}, wrongly {wrong[:5]} -->")


if __name__ == "__main__":
    main()
