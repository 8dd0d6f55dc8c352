"""Fidelity: does sweeper's harness cost time or bandwidth? sweeper against a bare
torch.distributed loop, point by point, in both launch modes.

In one command: `sweeper run --launch graph,eager` in process (Ray actors, the whole harness)
over the given operations and sizes, beside the bare loop of bare.py (no Ray, no sweeper code:
one resident process per GPU, plain torch.distributed calls, CUDA events). The two take turns
point by point: after each of sweeper's points the bare loop times the same one (operation,
count, dtype, launch mode, iterations, warm-up, blocks) while sweeper's actors wait, so a slow
spell of a shared machine falls on both sides of a ratio; whole runs taken in turn differed by
up to 2x on the same small eager point. Both sides' ranks call from the same CPU cores, their
other threads and this process run on the rest (benchmarks/pinning.py): an eager call's cost
depends on the core it is issued from. Graph rows replay graphs of graph_unit(iters)
iterations, what sweeper captures when given --iters. Adaptive sweeper sizes its graphs from a
first timing (a quarter of a block, at most 100 iterations), which a row does not record:
where a step takes under 50 us both sides replay graphs of 100, and above that the bare loop's
graphs may be longer, which saves a launch gap per replay on steps of 50 us or more.

Each repeat gives a point a pair of times taken back to back: sweeper's median block (each
block's slowest rank, as its row's time_us) and the bare loop's. The point's ratio is the
median of its pairs' ratios, the usual estimator of a paired comparison: a launch-bound eager
call moves between two host speeds on both sides (25 or 38-40 us for one reduce_scatter on
one H100, in spells), and a pair's two halves share a spell where two whole sides need not.
Each side's fastest block is shown too, for information: that ratio is decided by whichever
side caught a rare fast spell (one bare block of 33 us among 44-47 us), not by the harness.

Prints per operation, size and launch mode sweeper's time, the bare loop's and their ratio,
and from --floor up the bandwidth ratio: busbw, or algbw where the bus factor is 0 (one
rank). Exits 1 when an eager time ratio is above --max-time-ratio at any size, a bandwidth
ratio from --floor up is below --min-ratio in either mode, or a sweeper point failed (or fell
back to eager). In-place operations on one rank move nothing (NCCL returns at once), so their
bandwidth is not gated. Writes fidelity.txt and fidelity.json (every figure) under --out.

On a one-GPU machine (world 1; 11 operations, 8 B to 1 GiB by x8, five repeats, both launch
modes: about 5 minutes; eager alone, 30 s a repeat):

    source .whl/gpu-env.sh && python3 benchmarks/fidelity.py --world 1 --step-factor 8 \\
        --max-size 1G --out fidelity-out
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from bare import FACTORS, bare_step, free_port, init_bare, time_blocks
from pinning import Pinner, rank_cores

from sweeper import collectives
from sweeper.cluster import MULTICAST_OFF
from sweeper.collectives import resolve
from sweeper.console import HumanConsole
from sweeper.spec import format_size, parse_size
from sweeper.sweep import Finished, Observer, Started

Row = Mapping[str, Any]
Key = tuple[str, int, str]  # operation, size_bytes, launch


@dataclass(frozen=True)
class BarePoint:
    """One sweeper row as the bare loop runs it."""

    name: str
    count: int
    dtype: str
    launch: str
    iters: int
    warmup: int
    blocks: int


@dataclass(frozen=True)
class Compared:
    """One point in one launch mode: both sides' blocks (us per iteration), repeat by repeat;
    the bare loop timed each repeat's point right after sweeper did."""

    name: str
    size_bytes: int
    launch: str
    iters: int
    warmup_iters: int
    moves_data: bool  # False: in place on one rank, where NCCL has nothing to move
    sweeper_factor: float  # busbw factors: the row's, and the bare loop's own table's
    bare_factor: float
    sweeper_repeats_us: tuple[tuple[float, ...], ...]  # each repeat's blocks
    bare_repeats_us: tuple[tuple[float, ...], ...]

    @property
    def pairs(self) -> list[tuple[float, float]]:
        """Each repeat's (sweeper, bare) median block."""
        return [
            (median(s), median(b))
            for s, b in zip(self.sweeper_repeats_us, self.bare_repeats_us, strict=True)
        ]

    @property
    def sweeper_time_us(self) -> float:
        return median(s for s, _ in self.pairs)

    @property
    def bare_time_us(self) -> float:
        return median(b for _, b in self.pairs)

    @property
    def time_ratio(self) -> float:
        """The median over repeats of sweeper's time over the bare loop's."""
        return median(s / b for s, b in self.pairs)

    @property
    def fastest_ratio(self) -> float:
        """Each side's fastest block over all repeats, one over the other (information)."""
        return min(map(min, self.sweeper_repeats_us)) / min(map(min, self.bare_repeats_us))

    @property
    def bw_ratio(self) -> float:
        """sweeper's busbw over the bare loop's; where the bare factor is 0 (one rank: no
        bus, but the data still moves in memory), algbw's."""
        if self.bare_factor == 0:
            return 1 / self.time_ratio
        return self.sweeper_factor / self.bare_factor / self.time_ratio

    def busbw_gb_per_s(self, time_us: float, factor: float) -> float:
        return self.size_bytes / time_us / 1e3 * factor

    def figures(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "sweeper_time_us": self.sweeper_time_us,
            "bare_time_us": self.bare_time_us,
            "sweeper_busbw_gb_per_s": self.busbw_gb_per_s(
                self.sweeper_time_us, self.sweeper_factor
            ),
            "bare_busbw_gb_per_s": self.busbw_gb_per_s(self.bare_time_us, self.bare_factor),
            "time_ratio": self.time_ratio,
            "fastest_ratio": self.fastest_ratio,
            "bw_ratio": self.bw_ratio,
        }


@dataclass(frozen=True)
class Gate:
    """When sweeper's harness costs too much against the bare loop."""

    floor_bytes: int = 256 * 2**20  # bandwidth ratios count from here
    max_time_ratio: float = 1.10  # eager: what the harness may add to a call, at any size
    min_bw_ratio: float = 0.97  # either mode

    def counts_bandwidth(self, point: Compared) -> bool:
        return point.size_bytes >= self.floor_bytes and point.moves_data

    def problems(self, point: Compared) -> list[str]:
        where = f"{point.name} {format_size(point.size_bytes)} {point.launch}"
        found = []
        if point.launch == "eager" and point.time_ratio > self.max_time_ratio:
            found.append(f"{where}: time ratio {point.time_ratio:.3f} > {self.max_time_ratio}")
        if self.counts_bandwidth(point) and point.bw_ratio < self.min_bw_ratio:
            found.append(f"{where}: bandwidth ratio {point.bw_ratio:.3f} < {self.min_bw_ratio}")
        return found

    def failures(self, points: Sequence[Compared], failed: Sequence[str]) -> list[str]:
        """Why the run fails the gate (empty: it passes): sweeper's failed points, then each
        point's ratios."""
        return [*failed, *(problem for point in points for problem in self.problems(point))]


def table(points: Sequence[Compared], gate: Gate) -> list[str]:
    lines = [
        f"{'operation':<26}{'size':>6}{'launch':>7}{'iters':>7}{'sweeper us':>12}"
        f"{'bare us':>11}{'time s/b':>10}{'fastest':>9}{'bw s/b':>8}"
    ]
    for p in points:
        bw = f"{p.bw_ratio:>8.3f}" if gate.counts_bandwidth(p) else f"{'':>8}"
        lines.append(
            f"{p.name:<26}{format_size(p.size_bytes):>6}{p.launch:>7}{p.iters:>7}"
            f"{p.sweeper_time_us:>12.2f}{p.bare_time_us:>11.2f}{p.time_ratio:>10.3f}"
            f"{p.fastest_ratio:>9.3f}{bw}" + ("  <- fails" if gate.problems(p) else "")
        )
    return lines


def compare(
    rows: Mapping[Key, Row],
    sweeper_us: Mapping[Key, Sequence[Sequence[float]]],
    bare_us: Mapping[Key, Sequence[Sequence[float]]],
) -> list[Compared]:
    """Points timed on both sides, from each point's first row and every repeat's blocks
    (`*_us[key][repeat]`)."""
    return [
        Compared(
            name=key[0],
            size_bytes=key[1],
            launch=key[2],
            iters=int(row["iters"]),
            warmup_iters=int(row["warmup_iters"]),
            moves_data=not (row["world_size"] == 1 and row["in_place"]),
            sweeper_factor=float(row["busbw_factor"]),
            bare_factor=FACTORS[key[0]](int(row["world_size"])),
            sweeper_repeats_us=tuple(tuple(blocks) for blocks in sweeper_us[key]),
            bare_repeats_us=tuple(tuple(blocks) for blocks in bare_us[key]),
        )
        for key, row in rows.items()
        if bare_us.get(key)
    ]


def bare_point(key: Key, row: Row) -> BarePoint:
    return BarePoint(
        key[0],
        int(row["count_elems"]),
        row["dtype"],
        key[2],
        int(row["iters"]),
        int(row["warmup_iters"]),
        len(row["time_us_blocks"]),
    )


def bare_worker(rank: int, n: int, port: int, requests: Any, results: Any) -> None:
    """A resident rank of the bare loop: times each point it is sent until it gets None."""
    init_bare(rank, n, port)
    device = torch.device("cuda", rank)
    while (p := requests.get()) is not None:
        step = bare_step(p.name, p.count, getattr(torch, p.dtype), rank, n)
        mine = time_blocks(step, p.launch, p.iters, p.warmup, p.blocks, device)
        slowest = torch.tensor(mine, dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:  # as sweeper's time_us_blocks: each block's slowest rank
            results.put(slowest.tolist())
        del step
        torch.cuda.empty_cache()
    dist.destroy_process_group()


class BareRanks:
    """The bare loop, one resident process per GPU beside sweeper's actors, timing one point
    whenever asked: sweeper and the bare loop take turns point by point, so a slow spell of
    the machine falls on both sides of a ratio rather than on one side's whole run."""

    def __init__(self, n: int, timeout_s: float = 600.0):
        context = mp.get_context("spawn")
        self.requests = [context.Queue() for _ in range(n)]
        self.results = context.Queue()
        port = free_port()
        self.ranks = [
            context.Process(
                target=bare_worker,
                args=(r, n, port, self.requests[r], self.results),
                daemon=True,
            )
            for r in range(n)
        ]
        for rank in self.ranks:
            rank.start()
        self.timeout_s = timeout_s

    def seconds(self, point: BarePoint) -> list[float]:
        """Seconds per iteration of the point on the bare loop, block by block."""
        for queue in self.requests:
            queue.put(point)
        try:
            return [float(s) for s in self.results.get(timeout=self.timeout_s)]
        except Exception as exc:
            dead = [r for r, p in enumerate(self.ranks) if not p.is_alive()]
            raise RuntimeError(f"bare loop: no time for {point} (dead ranks {dead})") from exc

    def close(self) -> None:
        for queue in self.requests:
            queue.put(None)
        for rank in self.ranks:
            rank.join(timeout=60)
            if rank.is_alive():
                rank.kill()


class Interleaved:
    """sweeper's observer: after each of sweeper's points, the bare loop times the same point
    (operation, count, dtype, launch mode, iterations, warm-up, blocks) while sweeper's
    actors wait for their next one."""

    def __init__(self, bare: BareRanks, progress: Observer):
        self.bare = bare
        self.progress = progress
        self.label = collectives.names()
        self.timed: list[tuple[Key, Row, list[float]]] = []  # ok points, the bare loop's blocks

    def started(self, run: Started) -> None:
        self.progress.started(run)

    def point(self, row: Row) -> None:
        self.progress.point(row)
        if row["status"] != "ok":
            return
        key = (self.label[(row["op"], row["algorithm"])], int(row["size_bytes"]), row["launch"])
        self.timed.append((key, row, self.bare.seconds(bare_point(key, row))))

    def finished(self, run: Finished) -> None:
        self.progress.finished(run)


def run_sweeper(
    args: argparse.Namespace, names: list[str], world: int, observer: Observer
) -> list[Row]:
    from sweeper.spec import build_spec
    from sweeper.sweep import run

    spec = build_spec(
        ops=",".join(names),
        dtypes=args.dtype,
        min_size=args.min_size,
        max_size=args.max_size,
        step_factor=args.step_factor,
        launch=args.launch,
        world=world,
        iters=args.iters,
        warmup=args.warmup,
        blocks=args.blocks,
        output=Path(args.out) / "results",
        report=False,
    )
    return list(run(spec, observer).rows)


def measure(
    args: argparse.Namespace, names: list[str], world: int
) -> tuple[list[Compared], list[str]]:
    """Runs of sweeper with the bare loop timing each point right after it: the points both
    timed, and why sweeper points failed."""
    label = collectives.names()
    rows: dict[Key, Row] = {}  # each point's row from the first run that timed it
    sweeper_us: dict[Key, list[list[float]]] = defaultdict(list)
    bare_us: dict[Key, list[list[float]]] = defaultdict(list)
    failed: list[str] = []
    pinner = Pinner(rank_cores(world)).away()
    bare = BareRanks(world)
    pinner.watch(rank.pid for rank in bare.ranks if rank.pid is not None)
    try:
        for _ in range(args.repeats):
            observer = Interleaved(bare, HumanConsole(sys.stderr))
            for row in run_sweeper(args, names, world, observer):
                key = (label[(row["op"], row["algorithm"])], int(row["size_bytes"]), row["launch"])
                where = f"{key[0]} {format_size(key[1])} {key[2]}"
                if row.get("launch_note"):
                    failed.append(f"{where}: {row['launch_note']}")
                if row["status"] not in ("ok", "skipped"):
                    failed.append(f"{where}: sweeper {row['status']}: {row['error']}")
            for key, row, seconds in observer.timed:
                rows.setdefault(key, row)
                sweeper_us[key].append([float(us) for us in row["time_us_blocks"]])
                bare_us[key].append([s * 1e6 for s in seconds])
    finally:
        pinner.close()
        bare.close()
    pinner.check()
    return compare(rows, sweeper_us, bare_us), list(dict.fromkeys(failed))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default="all", help="sweeper names or patterns; all: the core")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--min-size", default="8")
    parser.add_argument("--max-size", default="4G")
    parser.add_argument("--step-factor", default=2.0, type=float)
    parser.add_argument("--launch", default="graph,eager")
    parser.add_argument("--world", default=None, type=int, help="ranks; default all GPUs")
    parser.add_argument("--iters", default=None, type=int, help="default adaptive")
    parser.add_argument("--warmup", default=None, type=int, help="default adaptive")
    parser.add_argument("--blocks", default=3, type=int)
    parser.add_argument("--repeats", default=5, type=int, help="sweeper runs: pairs per point")
    defaults = Gate()
    parser.add_argument("--floor", default=defaults.floor_bytes, type=parse_size)
    parser.add_argument("--max-time-ratio", default=defaults.max_time_ratio, type=float)
    parser.add_argument("--min-ratio", default=defaults.min_bw_ratio, type=float)
    parser.add_argument("--out", default=None, help="directory for rows, table and figures")
    args = parser.parse_args()
    # collectives only: a copy has no torch.distributed loop to compare with
    names = [c.name for c in resolve(args.ops.split(",")) if c.kind != "copy"]
    if unknown := [name for name in names if name not in FACTORS]:
        parser.error(f"--ops: the bare loop has no {', '.join(unknown)}")
    out = Path(args.out or tempfile.mkdtemp(prefix="fidelity-"))
    args.out = str(out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(MULTICAST_OFF)  # the bare loop's processes inherit it, as actors get it
    world = args.world or torch.cuda.device_count()
    gate = Gate(args.floor, args.max_time_ratio, args.min_ratio)

    clock = time.monotonic()
    compared, failed = measure(args, names, world)
    failures = gate.failures(compared, failed)
    wall_s = time.monotonic() - clock
    lines = [
        f"fidelity on {world} ranks, {args.dtype}, {args.repeats} runs, each point "
        "timed by the bare loop right after sweeper "
        f"({wall_s:.0f} s): sweeper against the bare torch.distributed loop",
        *table(compared, gate),
        f"time s/b: median over runs of sweeper / bare median block (eager must be <= "
        f"{gate.max_time_ratio}); fastest: each side's fastest block, one over the other; bw s/b: "
        f"sweeper / bare bandwidth from {format_size(gate.floor_bytes)} (>= {gate.min_bw_ratio}"
        "; in-place operations on one rank move nothing and have none)",
        *(f"FAIL {reason}" for reason in failures),
        "passed" if not failures else f"failed: {len(failures)} reasons",
    ]
    text = "\n".join(lines)
    print(text)
    (out / "fidelity.txt").write_text(text + "\n")
    figures = {
        "world_size": world,
        "dtype": args.dtype,
        "repeats": args.repeats,
        "wall_s": wall_s,
        "gate": asdict(gate),
        "points": [p.figures() for p in compared],
        "failures": failures,
    }
    (out / "fidelity.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(f"rows under {out}/results; table and figures: {out}/fidelity.txt, fidelity.json")
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
