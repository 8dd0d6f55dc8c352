"""NCCL's view at world 2, and what the observer costs a call there, through sweeper's own rank
code (`rank.nccl.NcclComm`, `rank.nccl_view.NcclViews`, `rank.timing`): pairs of rank processes
run all_reduce over sizes, eagerly and replayed from a CUDA graph, alternately with sweeper's
observing tuner and with NCCL_TUNER_PLUGIN=none; it prints the observer/none ratio per size and
launch, and NCCL's choice and prediction beside each measured time. On a machine of one GPU the
two ranks share it, told apart as two hosts by NCCL_HOSTID (NCCL then runs its network path,
sockets over loopback), so NCCL tunes a communicator of two where one GPU is all there is.

    python benchmarks/nccl_view_pair.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIZES = tuple(8 * 8**i for i in range(5))  # 8 B to 32 KiB: NCCL's sockets are slow
MODES = ("observer", "none")
KEY = ("pair", "nccl")


def _uid(rank: int, where: Path) -> str:
    """Rank 0 makes the communicator's id and leaves it in `where`; rank 1 waits for it."""
    from sweeper.rank.nccl import unique_id

    if rank == 0:
        uid = unique_id()
        (where.parent / "uid.tmp").write_text(uid)
        (where.parent / "uid.tmp").rename(where)
        return uid
    deadline = time.monotonic() + 60
    while not where.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("rank 0 never wrote the communicator's id")
        time.sleep(0.01)
    return where.read_text()


def _chosen(view: Any) -> dict[str, Any] | None:
    """NCCL's choice for the step's one call: the pair of least predicted time."""
    if view is None or not view.calls:
        return None
    call = view.calls[0]
    name, us = min(call.costs_us, key=lambda pair: pair[1])
    return {"function": call.function, "chosen": name, "predicted_us": us}


def child(rank: int, mode: str, uid_file: Path, calls: int, replays: int) -> None:
    """One rank: the pair's communicator, then each size's first call (observed), an eager
    block and a graph's replays, timed with CUDA events on the rank's stream."""
    import torch

    from sweeper.rank.nccl import NcclComm
    from sweeper.rank.nccl_view import NcclViews
    from sweeper.rank.timing import CudaTimer, Eager, Graph

    views = NcclViews.start() if mode == "observer" else None
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    stream = torch.cuda.Stream(device)
    uid = _uid(rank, uid_file)
    since = views.opening() if views is not None else 0
    started = time.perf_counter()
    comm = NcclComm(uid, rank, 2, (0, 1), stream)
    start_s = time.perf_counter() - started
    if views is not None:
        views.opened(KEY, since)
    timer = CudaTimer(device)
    points = []
    with torch.cuda.stream(stream):
        for size in SIZES:
            data = torch.ones(size // 4, dtype=torch.float32, device=device)
            step = comm.all_reduce(data)
            marks = views.mark(KEY) if views is not None else ()
            step()
            view = views.view(marks) if views is not None else None
            for _ in range(10):
                step()
            eager = timer.time(Eager(step), calls, samples=False)
            graph = Graph(step, calls, stream)
            graph.run()
            replayed = timer.time(graph, replays, samples=False)
            graph.close()
            if rank == 0:
                print(f"{mode} {size} B: {time.perf_counter() - started:.1f} s", file=sys.stderr)
            points.append(
                {
                    "size": size,
                    "eager_us": eager.per_iter * 1e6,
                    "graph_us": replayed.per_iter * 1e6,
                    "view": _chosen(view),
                    "partial": None if view is None else view.partial,
                }
            )
    comm.destroy()
    if rank == 0:
        print(json.dumps({"mode": mode, "start_s": start_s, "points": points}))


def _env(rank: int, mode: str, shared: bool) -> dict[str, str]:
    """The rank's environment: this one's (NVLink multicast stays as the machine set it), plus
    what makes two ranks of one GPU two hosts to NCCL, and the mode's tuner."""
    env = dict(os.environ)
    if shared:
        env |= {"NCCL_HOSTID": f"sweeper-pair-{rank}", "NCCL_SOCKET_IFNAME": "lo"}
    if mode == "none":
        env["NCCL_TUNER_PLUGIN"] = "none"
    return env


def pair(mode: str, shared: bool, calls: int, replays: int) -> dict[str, Any]:
    """One pair of fresh rank processes (NCCL loads its tuner once a process)."""
    with tempfile.TemporaryDirectory() as scratch:
        uid_file = Path(scratch) / "uid"
        argv = [sys.executable, __file__, "--child", mode, str(uid_file), str(calls), str(replays)]
        ranks = [
            subprocess.Popen(
                [*argv, str(rank)],
                env=_env(rank, mode, shared),
                stdout=subprocess.PIPE,
                text=True,
            )
            for rank in (0, 1)
        ]
        outputs = [rank.communicate(timeout=300) for rank in ranks]
    for rank in ranks:
        if rank.returncode != 0:
            raise RuntimeError(f"a rank failed ({rank.returncode}): its stderr is above")
    return dict(json.loads(outputs[0][0].strip().splitlines()[-1]))


def _ratio(runs: dict[str, list[dict[str, Any]]], index: int, launch: str) -> tuple[float, ...]:
    """observer/none of each repeat's medians at one size: (median, low, high) over repeats."""
    ratios = [
        o["points"][index][launch] / n["points"][index][launch]
        for o, n in zip(runs["observer"], runs["none"], strict=True)
    ]
    return statistics.median(ratios), min(ratios), max(ratios)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, uid_file, calls, replays, rank = sys.argv[2:7]
        child(int(rank), mode, Path(uid_file), int(calls), int(replays))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="pairs per mode, alternated")
    parser.add_argument("--calls", type=int, default=100, help="eager calls; graph's captured")
    parser.add_argument("--replays", type=int, default=5)
    args = parser.parse_args()
    import torch

    shared = torch.cuda.device_count() < 2
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    began = time.perf_counter()
    for repeat in range(args.repeats):
        for mode in MODES if repeat % 2 == 0 else MODES[::-1]:
            runs[mode].append(pair(mode, shared, args.calls, args.replays))
            print(f"pair {repeat} {mode}: {time.perf_counter() - began:.1f} s", file=sys.stderr)
    where = "one GPU, two hosts to NCCL (NCCL_HOSTID)" if shared else "two GPUs"
    print(f"world 2 on {where}; {args.repeats} pairs per mode, alternated")
    starts = {m: statistics.median(r["start_s"] for r in runs[m]) for m in MODES}
    print(
        f"communicator start, median: observer {starts['observer']:.3f} s, "
        f"none {starts['none']:.3f} s"
    )
    print(
        f"{'size':>10} {'choice':>16} {'pred us':>9} {'eager us':>9} {'graph us':>9} "
        f"{'graph/pred':>9} {'obs/none eager':>18} {'obs/none graph':>18}"
    )
    for index, size in enumerate(SIZES):
        first = runs["observer"][0]["points"][index]
        view = first["view"] or {}
        eager = statistics.median(r["points"][index]["eager_us"] for r in runs["observer"])
        graph = statistics.median(r["points"][index]["graph_us"] for r in runs["observer"])
        predicted = view.get("predicted_us")
        over = f"{graph / predicted:9.2f}" if predicted else f"{'-':>9}"
        re, rg = _ratio(runs, index, "eager_us"), _ratio(runs, index, "graph_us")
        print(
            f"{size:>10} {view.get('chosen', first['partial'] or '-'):>16} "
            f"{predicted or 0:9.1f} {eager:9.1f} {graph:9.1f} {over} "
            f"{re[0]:6.3f} [{re[1]:.3f},{re[2]:.3f}] {rg[0]:6.3f} [{rg[1]:.3f},{rg[2]:.3f}]"
        )
    print(json.dumps(runs))


if __name__ == "__main__":
    main()
