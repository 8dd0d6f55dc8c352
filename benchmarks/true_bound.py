"""True bound: the largest size each operation really runs at, against `--max-size auto`.

In one command: `sweeper run --max-size auto` (Ray actors; each series warms up, reads its
ranks' budgets, runs the grid and then its bound), then a bare loop with no Ray and no
sweeper code (one process per GPU) that finds, per operation, the largest S whose buffers
allocate and whose collective runs, by bisection between sweeper's bound (or 0) and the
GPU's memory. Prints operation, auto bound, true bound, their ratio, nccl-tests' static
formula and sweeper's probing time; exits 1 if a ratio is below --min-ratio.

    python3 benchmarks/true_bound.py [--mem-limit 8G]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from bare import bare_step, free_port, init_bare

GIB = 2**30
TOLERANCE = 0.005  # bisection stops within 0.5% of the size


def nccl_tests_bound(total_bytes: int) -> int:
    """nccl-tests' static cap (src/common.cu): (memory - reserve - 1 GiB) / 3 with data check,
    the reserve being 1 GiB per 16 GiB installed, at most 4 GiB; the same for every operation."""
    reserve = min(-(-total_bytes // (16 * GIB)) * GIB, 4 * GIB)
    return (total_bytes - reserve - GIB) // 3


def _runs(name: str, count: int, dtype: torch.dtype, rank: int, n: int, flag: torch.Tensor) -> bool:
    """Whether every rank allocates `count` elements of S for `name` and the collective runs.

    Ranks first agree that all allocated (a MIN over a flag allocated up front), so no rank
    enters a collective a peer could not join."""
    step = None
    try:
        step = bare_step(name, count, dtype, rank, n)
        flag.fill_(1)
    except torch.OutOfMemoryError:
        flag.fill_(0)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    ok = bool(flag.item())
    if ok and step is not None:
        step()
        torch.cuda.synchronize()
    del step
    torch.cuda.empty_cache()
    return ok


def true_worker(
    rank: int, n: int, port: int, jobs: list[dict[str, object]], limit: int | None, out: str
) -> None:
    if limit is not None:
        total = torch.cuda.get_device_properties(rank).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), rank)
    init_bare(rank, n, port)
    flag = torch.ones(1, dtype=torch.int32, device=rank)
    total = torch.cuda.get_device_properties(rank).total_memory
    found = {}
    for job in jobs:
        name, dtype = str(job["name"]), getattr(torch, str(job["dtype"]))
        unit = n * max(1, 16 // dtype.itemsize)  # whole, 16-byte-aligned chunks for every rank
        good = (
            int(job["auto_count"]) // unit
            if _runs(name, int(job["auto_count"]), dtype, rank, n, flag)
            else 0
        )
        bad = (limit or total) // dtype.itemsize // unit + 1  # no buffer set of S > memory fits
        while bad - good > max(1, int(bad * TOLERANCE)):
            mid = (good + bad) // 2
            good, bad = (mid, bad) if _runs(name, mid * unit, dtype, rank, n, flag) else (good, mid)
        found[name] = good * unit * dtype.itemsize
    if rank == 0:
        Path(out).write_text(json.dumps(found))
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--ops", default="all")
    parser.add_argument("--min-size", default="1G", help="sweeper's grid starts here")
    parser.add_argument("--mem-limit", default=None)
    parser.add_argument("--min-ratio", default=0.95, type=float)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="true-bound-"))
    out.mkdir(parents=True, exist_ok=True)
    import sweeper
    from sweeper.ops.registry import names
    from sweeper.planning.sizes import parse_mem_limit

    clock = time.monotonic()
    finished = sweeper.run(
        ops=args.ops,
        dtypes=args.dtype,
        min_size=args.min_size,
        max_size="auto",
        mem_limit=args.mem_limit,
        iters=2,
        warmup=1,
        results=out / "results",
    )
    elapsed_s = time.monotonic() - clock
    name_of = names()
    auto: dict[str, dict[str, object]] = {}
    for row in finished.rows.to_dict("records"):
        name = name_of[(row["op"], row["algorithm"])]
        auto[name] = {
            "bound": row["max_size_bytes"],
            "probe_s": row["probe_s"],
            "n": row["world_size"],
            "statuses": f"{auto.get(name, {}).get('statuses', '')} {row['status']}".strip(),
        }
    n = int(finished.rows["world_size"].iloc[0])
    itemsize = torch.tensor([], dtype=getattr(torch, args.dtype)).element_size()
    jobs = [
        {"name": name, "dtype": args.dtype, "auto_count": int(a["bound"] or 0) // itemsize}
        for name, a in auto.items()
    ]
    limit = (
        parse_mem_limit(args.mem_limit).of(torch.cuda.get_device_properties(0).total_memory)
        if args.mem_limit
        else None
    )
    result = out / "true.json"
    mp.spawn(true_worker, args=(n, free_port(), jobs, limit, str(result)), nprocs=n, join=True)
    true = json.loads(result.read_text())

    total = limit or torch.cuda.get_device_properties(0).total_memory
    static = nccl_tests_bound(total)
    lines = [
        f"{n} GPUs, {args.dtype}, mem-limit {args.mem_limit or 'none'}: bounds in GiB "
        f"(sweeper run: {elapsed_s:.0f} s; each point's status)",
        f"{'operation':<28}{'auto':>9}{'true':>9}{'ratio':>8}{'nccl-tests':>12}"
        f"{'probe s':>9}  points",
    ]
    worst = float("inf")
    for name, a in auto.items():
        bound, found = int(a["bound"] or 0), int(true[name])
        ratio = bound / found if found else 0.0
        worst = min(worst, ratio)
        lines.append(
            f"{name:<28}{bound / GIB:>9.2f}{found / GIB:>9.2f}{ratio:>8.3f}"
            f"{static / GIB:>12.2f}{float(a['probe_s'] or 0):>9.2f}  {a['statuses']}"
        )
    probe = sum(float(a["probe_s"] or 0) for a in auto.values())
    lines.append(
        f"worst ratio {worst:.3f} (must be >= {args.min_ratio}); probing {probe:.1f} s "
        f"of {elapsed_s:.0f} s ({100 * probe / elapsed_s:.1f}%)"
    )
    table = "\n".join(lines)
    print(table)
    (out / "true_bound.txt").write_text(table + "\n")
    return 0 if worst >= args.min_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
