"""The fleet scan's cost-model figures that one machine can measure (sweeper/scan/simulate.py's
`Costs`): starting an actor set, creating a communicator, and writing a point's rows.

- `actor set`: sweeper's own `RankSet.start()` on an embedded Ray started for it: placing the
  bundles, starting one rank actor per GPU (each gets its rank process from its node's
  template), and joining the world; then `close()`. `first`: the first set on the Ray, which
  starts the node's template (one torch import), as a scan's first set does on every node;
  `again`: a second set, its ranks forked by the template already there. NCCL ranks where
  there are GPUs, else `--world` gloo ranks.
- `communicator`: in a plain process, world size 1, what NCCL (gloo on a CPU box) pays to
  make a communicator: `init_process_group` bound to the device (NCCL creates the world's
  communicator at once), then `new_group([0])` and its first 8-byte all_reduce (a group's
  communicator, made lazily by its first call, as a scan's groups are).
- `rows`: a `ResultWriter` journaling one point's rows (`--rows` rows, one fsync) in a fresh
  results directory, `--points` times, and the batch they become; then a scan's wave of
  `--wave-points` points as one write (one fsync), as a scan journals it. The rows are the
  recorded one-H200 run's (tests/data/results), every column.

Each figure is the median over `--repeats` (the first of each thrown away as warm-up) with
its fastest and slowest. Writes scan_costs.json under --out and prints a table.

    source .whl/gpu-env.sh && python3 benchmarks/scan_costs.py --out /tmp/costs
    RAY_AUTH_MODE=disabled python benchmarks/scan_costs.py --world 2 --out /tmp/costs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
import torch
import torch.distributed as dist

from sweeper.driver import cluster
from sweeper.driver.connection import connect
from sweeper.results.schema import COLUMNS
from sweeper.results.writer import ResultWriter
from sweeper.wire import Backend

RECORDED = Path(__file__).parent.parent / "tests/data/results/h200-x1-default-2026-12-02"
RECORDED_ROWS = RECORDED / "date=2026-12-02"


def actor_sets(backend: Backend, world: int, repeats: int) -> dict[str, list[float]]:
    """An actor set started and closed twice on an embedded Ray started for it: first as a
    scan's set starts (its node's rank template starts with it, importing torch once), then
    again (its ranks forked by that template, as a set that replaces one is)."""
    bundle = {"CPU": 1.0, "GPU": 1.0} if backend == Backend.NCCL else {"CPU": 1.0}
    first: list[float] = []
    again: list[float] = []
    for _ in range(repeats + 1):
        connection = connect(None, world)
        try:
            slots = cluster.choose_nodes(backend, 1, world)
            for times in (first, again):
                ranks = cluster.RankSet(backend, slots, bundle, env=cluster.actor_env())
                start = time.perf_counter()
                try:
                    ranks.start()
                finally:
                    ranks.close()
                times.append(time.perf_counter() - start)
        finally:
            connection.close()
    return {"first": first[1:], "again": again[1:]}


def communicator(backend: Backend, repeats: int) -> dict[str, list[float]]:
    """World size 1 in this process: the world's communicator, then a group's."""
    device = torch.device("cuda", 0) if backend == Backend.NCCL else torch.device("cpu")
    world: list[float] = []
    group: list[float] = []
    for _ in range(repeats + 1):
        with tempfile.TemporaryDirectory() as tmp:
            store = dist.FileStore(os.path.join(tmp, "store"), 1)
            start = time.perf_counter()
            bound = {"device_id": device} if backend == Backend.NCCL else {}
            dist.init_process_group(str(backend), store=store, rank=0, world_size=1, **bound)
            if backend != Backend.NCCL:
                dist.barrier()  # gloo connects when asked; NCCL bound above did already
            joined = time.perf_counter()
            sub = dist.new_group([0])
            dist.all_reduce(torch.ones(2, dtype=torch.float32, device=device), group=sub)
            if device.type == "cuda":
                torch.cuda.synchronize()
            done = time.perf_counter()
            dist.destroy_process_group()
        world.append(joined - start)
        group.append(done - joined)
    return {"world": world[1:], "group": group[1:]}


def recorded_rows() -> list[dict[str, object]]:
    """Real rows, every column: the one-H200 default run in tests/data/results."""
    table = pq.read_table(RECORDED_ROWS, partitioning=None)
    return [{k: v for k, v in row.items() if k in COLUMNS} for row in table.to_pylist()]


def rows(points: int, per_point: int, wave_points: int, repeats: int) -> dict[str, list[float]]:
    """A point's rows journaled (one fsync each), a scan's wave of `wave_points` points as
    one write (as driver/scan.py journals it), and the batch the points become."""
    recorded = recorded_rows()

    def take(count: int, run_id: str) -> list[dict[str, object]]:
        return [{**recorded[i % len(recorded)], "run_id": run_id} for i in range(count)]

    def one(run: int, root: Path) -> tuple[float, float, float]:
        run_id = f"20261125T000000Z-{run:06x}"
        writer = ResultWriter(root, run_id, "2026-11-25", batch_rows=10**9, batch_s=1e9)
        point, wave = take(per_point, run_id), take(per_point * wave_points, run_id)
        start = time.perf_counter()
        for _ in range(points):
            writer.extend(point)
        journaled = time.perf_counter()
        writer.flush()
        flushed = time.perf_counter()
        writer.extend(wave)
        waved = time.perf_counter()
        writer.close()
        return (journaled - start) / points, flushed - journaled, waved - flushed

    per_point_s: list[float] = []
    batch_s: list[float] = []
    wave_s: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(repeats + 1):
            point_s, flush_s, one_wave_s = one(run, Path(tmp))
            per_point_s.append(point_s)
            batch_s.append(flush_s)
            wave_s.append(one_wave_s)
    return {"point": per_point_s[1:], "batch": batch_s[1:], "wave": wave_s[1:]}


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=0, help="ranks (default: every GPU, or 2)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--points", type=int, default=200, help="points journaled per repeat")
    parser.add_argument("--rows", type=int, default=2, help="rows per point (launch modes)")
    parser.add_argument(
        "--wave-points", type=int, default=1024, help="points of a wave journaled as one write"
    )
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args()

    gpus = torch.cuda.device_count()
    backend = Backend.NCCL if gpus else Backend.GLOO
    world = args.world or gpus or 2
    figures: dict[str, dict[str, float]] = {}
    figures["communicator: world, 1 rank"], figures["communicator: a group, 1 rank"] = (
        _summary(v) for v in communicator(backend, args.repeats).values()
    )
    journal = rows(args.points, args.rows, args.wave_points, args.repeats)
    figures[f"rows: one point of {args.rows} journaled"] = _summary(journal["point"])
    figures[f"rows: {args.points} points as one batch"] = _summary(journal["batch"])
    figures[f"rows: a wave of {args.wave_points} points journaled"] = _summary(journal["wave"])
    sets = actor_sets(backend, world, args.repeats)
    figures[f"actor set: {world} {backend} ranks, first"] = _summary(sets["first"])
    figures[f"actor set: {world} {backend} ranks, again"] = _summary(sets["again"])

    device = torch.cuda.get_device_name(0) if gpus else "cpu"
    print(f"{device}, {backend}, {args.repeats} repeats after one warm-up")
    print(f"{'figure':44} {'median':>10} {'min':>10} {'max':>10}")
    for name, fig in figures.items():
        print(f"{name:44} " + " ".join(f"{fig[k] * 1e3:8.2f}ms" for k in ("median", "min", "max")))
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"device": device, "backend": str(backend), "world": world, "figures": figures}
    (args.out / "scan_costs.json").write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
