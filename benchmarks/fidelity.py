"""Fidelity: does sweeper's harness cost bandwidth? sweeper against a bare torch.distributed loop.

In one command: `sweeper run` over every operation and the given sizes (Ray actors, the
whole harness), then a bare loop with no Ray and no sweeper code (one process per GPU,
plain torch.distributed calls, CUDA events, the same warm-up and iteration counts as each
sweeper row), over the same operations and sizes. Prints sweeper busbw / bare busbw per
operation (geometric mean over sizes >= --floor) and per point, and exits 1 if an
operation's ratio is below --min-ratio. Runs alternate (sweeper, bare, sweeper, bare) and
each side keeps its best busbw per point, so a slow moment of a shared machine does not
decide the ratio.

    python3 benchmarks/fidelity.py --min-size 256M --max-size 4G --dtype bfloat16
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from bare import FACTORS, bare_step, free_port, init_bare


def bare_worker(rank: int, n: int, port: int, points: list[dict[str, object]], out: str) -> None:
    init_bare(rank, n, port)
    results = []
    for p in points:
        step = bare_step(str(p["name"]), int(p["count"]), getattr(torch, str(p["dtype"])), rank, n)
        for _ in range(int(p["warmup"])):
            step()
        dist.barrier(device_ids=[rank])
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(int(p["iters"])):
            step()
        end.record()
        end.synchronize()
        seconds = torch.tensor([start.elapsed_time(end) / 1e3 / int(p["iters"])], device=rank)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        results.append(float(seconds.item()))
        del step
        torch.cuda.empty_cache()
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def run_sweeper(args: argparse.Namespace, output: Path) -> list[dict[str, object]]:
    from sweeper.console import HumanConsole
    from sweeper.spec import build_spec
    from sweeper.sweep import run

    spec = build_spec(
        ops="all", dtypes=args.dtype, min_size=args.min_size, max_size=args.max_size, output=output
    )
    finished = run(spec, HumanConsole(sys.stderr))
    return [dict(row) for row in finished.rows]


def _bare(points: list[dict[str, object]], n: int, out: Path) -> list[float]:
    """Seconds per iteration of each point, max over ranks, from the bare loop."""
    result = out / "bare.json"
    mp.spawn(bare_worker, args=(n, free_port(), points, str(result)), nprocs=n, join=True)
    return [float(t) for t in json.loads(result.read_text())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-size", default="256M")
    parser.add_argument("--max-size", default="4G")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--floor", default=256 * 2**20, type=int, help="bytes; compare from here")
    parser.add_argument("--min-ratio", default=0.97, type=float)
    parser.add_argument("--repeats", default=2, type=int, help="alternate runs; best of each side")
    parser.add_argument("--out", default=None, help="directory for rows and the table")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    from sweeper.collectives import REGISTRY

    label = {(c.op, c.algorithm): c.name for c in REGISTRY.values()}
    best: dict[tuple[str, int], dict[str, float]] = {}
    points: list[dict[str, object]] = []
    n, failed = 0, 0
    for repeat in range(args.repeats):
        rows = run_sweeper(args, out / "results")
        n = int(rows[0]["world_size"])
        failed += sum(r["status"] != "ok" for r in rows)
        for r in rows:
            if r["status"] == "ok":
                key = (label[(r["op"], r["algorithm"])], int(r["size_bytes"]))
                entry = best.setdefault(key, {"sweeper": 0.0, "bare": 0.0})
                entry["sweeper"] = max(entry["sweeper"], float(r["busbw_gb_per_s"]))
                if repeat == 0:  # the bare loop runs each point as sweeper's first run did
                    points.append(
                        {
                            "name": key[0],
                            "size": key[1],
                            "count": r["count_elems"],
                            "dtype": r["dtype"],
                            "warmup": r["warmup_iters"],
                            "iters": r["iters"],
                        }
                    )
        for p, seconds in zip(points, _bare(points, n, out), strict=True):
            busbw = int(p["size"]) / seconds / 1e9 * FACTORS[str(p["name"])](n)
            entry = best[(str(p["name"]), int(p["size"]))]
            entry["bare"] = max(entry["bare"], busbw)

    lines = [
        f"fidelity on {n} GPUs, {args.dtype}, best of {args.repeats} alternating runs: "
        "sweeper busbw / bare torch.distributed busbw (GB/s)",
        f"{'operation':<28}{'size':>12}{'sweeper':>10}{'bare':>10}{'ratio':>8}",
    ]
    worst = float("inf")
    for name in dict.fromkeys(name for name, _ in best):
        ratios = []
        for (other, size), entry in best.items():
            if other != name or size < args.floor:
                continue
            ratios.append(entry["sweeper"] / entry["bare"])
            lines.append(
                f"{name:<28}{size:>12}{entry['sweeper']:>10.1f}{entry['bare']:>10.1f}"
                f"{ratios[-1]:>8.3f}"
            )
        ratio = math.prod(ratios) ** (1 / len(ratios))
        worst = min(worst, ratio)
        lines.append(f"{name:<28}{'geomean':>12}{'':>20}{ratio:>8.3f}")
    lines.append(f"worst per-operation ratio {worst:.3f} (must be >= {args.min_ratio})")
    table = "\n".join(lines)
    print(table)
    (out / "fidelity.txt").write_text(table + "\n")
    if failed:
        print(f"{failed} sweeper points failed; see {out}/results", file=sys.stderr)
    return 0 if worst >= args.min_ratio and not failed else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
