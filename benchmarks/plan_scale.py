"""Planning at fleet scale: N nodes x 8 GPUs (recorded DGX H100 topology), no Ray.

For each node count and each sweep (`--tiers all`, and the weekly profile): groups, waves,
planning time, and the estimated duration in waves against one group at a time (the driver
before waves), with the default cost model. Goals: the weekly profile at 1024 nodes plans
in under 5 s, and is estimated at 8 h or less (a night).

    python benchmarks/plan_scale.py [--nodes 16 128 1024]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sweeper.commands.plan_estimate import plan_recorded
from sweeper.ops.registry import resolve
from sweeper.planning.estimate import duration
from sweeper.planning.profile import build_spec, load_profile

ROOT = Path(__file__).parents[1]
RECORD = ROOT / "tests" / "data" / "topologies" / "dgx-h100-nvswitch.json"
WEEKLY = ROOT / "jobs" / "weekly.yaml"
GOAL_S = 5.0
NIGHT_S = 8 * 3600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[16, 128, 1024])
    args = parser.parse_args()
    sweeps = {
        "--tiers all": build_spec(tiers="all"),
        "weekly": build_spec(load_profile(WEEKLY)),
    }
    print("| nodes | sweep | groups | waves | planning s | estimated | one group at a time |")
    print("|---|---|---|---|---|---|---|")
    slow = []
    for nodes in args.nodes:
        for name, base in sweeps.items():
            spec = base.model_copy(update={"nodes": nodes})
            found = plan_recorded(spec, RECORD, resolve(spec.ops))
            print(
                f"| {nodes} | {name} | {found.schedule.n_groups} | {len(found.schedule.waves)} "
                f"| {found.planning_s:.2f} | {duration(found.estimate.waves_s)} "
                f"| {duration(found.estimate.serial_s)} |",
                flush=True,
            )
            if name == "weekly" and nodes >= 1024 and found.planning_s > GOAL_S:
                slow.append(f"{nodes} nodes: planned in {found.planning_s:.2f} s")
            if name == "weekly" and nodes >= 1024 and found.estimate.waves_s > NIGHT_S:
                slow.append(f"{nodes} nodes: {duration(found.estimate.waves_s)} estimated")
    if slow:
        raise SystemExit(
            f"the weekly profile past {GOAL_S:g} s of planning or 8 h: {'; '.join(slow)}"
        )


if __name__ == "__main__":
    main()
