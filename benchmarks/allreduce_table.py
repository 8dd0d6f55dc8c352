"""vLLM's all-reduce table from sweeper's rows: every way sweeper performs an all-reduce, at
the tensor-parallel sizes vLLM's device-communicator benchmark uses, best per size with its
speedup over NCCL, beside vLLM's published H100 TP=2 figures.

vLLM's benchmark (benchmarks/kernels/benchmark_device_communicators.py) all-reduces bf16
tensors of (rows, 8192) on TP ranks, captured in CUDA graphs. Here: sizes 512 KiB to 64 MiB
by x2 (rows 32 to 4096), bfloat16, graph launches, on every GPU of this machine (TP=2 on
two), through one `sweeper run` of NCCL's all_reduce on both engines (the nccl engine is
NCCL called directly, as vLLM's pynccl calls it: the table's baseline), the composites
reduce_scatter+all_gather and reduce+broadcast, and torch symmetric memory one-shot and
two-shot. NVLink multicast stays off (gpu-env.sh, and every actor set), so vLLM's multimem
column has no counterpart. Where an operation has rows of both placements, its out-of-place
row counts (vLLM's communicators return a new tensor).

Writes allreduce_table.md and the run's rows under --out. Exits 1 if a point failed.

    source .whl/gpu-env.sh && python3 benchmarks/allreduce_table.py --out allreduce-out
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import sweeper
from sweeper.analysis.summary import label
from sweeper.ops.registry import REGISTRY, names
from sweeper.planning.sizes import format_size
from sweeper.wire import Engine

HIDDEN = 8192  # vLLM's benchmark: (rows, hidden) bf16 tensors
ITEMSIZE = 2
OPS = (
    "all_reduce",
    "reduce_scatter+all_gather",
    "reduce+broadcast",
    "all_reduce:symm_one_shot",
    "all_reduce:symm_two_shot",
)
BASELINE = "all_reduce [nccl]"
# vLLM's published H100 TP=2 figures (ms) for NCCL, by size in bytes (its benchmark's README)
VLLM_NCCL_MS = {512 * 2**10: 0.011, 16 * 2**20: 0.087, 64 * 2**20: 0.262}


def candidate(row: Mapping[str, Any]) -> str:
    """A way of all-reducing: the operation's name, and its engine where it has a direct NCCL
    form (the descriptor runs on the nccl engine), so that both engines' rows stand apart."""
    op, algorithm = str(row["op"]), str(row["algorithm"])
    direct = REGISTRY[names()[(op, algorithm)]].runs_on(Engine.NCCL)
    return f"{label(op, algorithm)} [{row['engine']}]" if direct else label(op, algorithm)


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Time (ms) per candidate and size from ok rows, out of place where both placements
    were timed, one column per candidate in the order they were measured."""
    ok = rows[rows["status"] == "ok"].copy()
    ok["candidate"] = [candidate(r) for r in ok.to_dict("records")]
    ok = ok.sort_values("in_place", kind="stable")  # out of place (False) first
    first = ok.drop_duplicates(["candidate", "size_bytes"])
    wide = first.pivot(index="size_bytes", columns="candidate", values="time_us") / 1e3
    order = list(dict.fromkeys(ok.sort_index()["candidate"]))
    return wide[[c for c in order if c in wide.columns]]


def lines(wide: pd.DataFrame) -> list[str]:
    columns = list(wide.columns)
    head = ["rows", "size", *columns, "best", "speedup over NCCL", "vLLM NCCL ms (H100)"]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for size, times in wide.iterrows():
        measured = times.dropna()
        best = str(measured.idxmin()) if not measured.empty else "-"
        base = times.get(BASELINE)
        speedup = (
            "-" if base is None or pd.isna(base) or best == "-" else f"{base / measured[best]:.2f}x"
        )
        published = VLLM_NCCL_MS.get(int(size))
        cells = [
            str(int(size) // (HIDDEN * ITEMSIZE)),
            format_size(int(size)),
            *("-" if pd.isna(t) else f"{t:.4f}" for t in times),
            best,
            speedup,
            "" if published is None else f"{published:.3f}",
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def options(args: argparse.Namespace, output: Path) -> dict[str, Any]:
    return {
        "ops": ",".join(OPS),
        "dtypes": "bfloat16",
        "min_size": 32 * HIDDEN * ITEMSIZE,
        "max_size": 4096 * HIDDEN * ITEMSIZE,
        "step_factor": 2,
        "launch": args.launch,
        "engine": args.engine,
        "world": args.world,
        "output": output,
        "report": False,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launch", default="graph", help="graph (vLLM's), or eager on CPUs")
    parser.add_argument("--engine", default="torch,nccl")
    parser.add_argument("--world", default=None, type=int, help="ranks; default every GPU")
    parser.add_argument("--out", default=None, type=Path)
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="allreduce-"))
    out.mkdir(parents=True, exist_ok=True)

    rows = sweeper.run(**options(args, out / "results")).rows
    failed = rows[~rows["status"].isin(["ok", "skipped"])]
    skipped = rows[rows["status"] == "skipped"].drop_duplicates(["op", "algorithm", "engine"])
    world = int(rows["world_size"].max())
    heading = (
        f"all-reduce at vLLM's TP sizes: {world} ranks, bfloat16 (rows x {HIDDEN}), "
        f"launch {args.launch}, time ms per call; baseline {BASELINE} (NCCL called directly)"
    )
    wide = table(rows)
    text = [heading, "", *lines(wide)]
    text += [f"skipped {candidate(r)}: {r['error']}" for r in skipped.to_dict("records")]
    text += [
        f"FAILED {candidate(r)} {format_size(int(r['size_bytes']))}: {r['error']}"
        for r in failed.to_dict("records")
    ]
    print("\n".join(text))
    (out / "allreduce_table.md").write_text("\n".join(text) + "\n")
    (out / "allreduce_table.json").write_text(
        wide.reset_index().to_json(orient="records", indent=1) + "\n"
    )
    print(json.dumps({"out": str(out)}), file=sys.stderr)
    return 1 if len(failed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
