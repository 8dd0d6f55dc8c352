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
call moves between host speeds on both sides (25 or 38-40 us for one reduce_scatter on one
H100, in spells), and a pair's two halves share a spell where two whole sides need not.
Each side's fastest block is shown too, for information: that ratio is decided by whichever
side caught a rare fast spell (one bare block of 33 us among 44-47 us), not by the harness.

Spells also change within a pair, so a point's ratio is an estimate with an error, and the
gate asks it of every point (110 at world 1): on one H100, 12 pairs a point leave a typical
standard error of 3% and up to 10% on p2p points (send_recv at 44-101 us a call within one
point), enough for one point in 110 to land above 1.10 in each run where the geomean was
0.98-0.99. So each eager ratio carries the sign test's 95% interval (no assumption on how
the pairs' ratios spread), and points whose interval holds the bound are timed again, a run
at a time, up to --confirm runs (each of the operations and span of sizes still unclear),
before the gate reads their median over all pairs: the runs go where the answer is unclear,
not where it is over the bound. No run starts after --time-limit seconds, so a run with a
deadline still writes its table, and --with joins the pairs of earlier commands' fidelity.json
to this one's (a device command lasts 10 minutes at most; whole runs at world 1 take 35-40 s):
the runs of a later command go to the points the joined pairs leave unclear, and with
--repeats 0 --confirm 0 the stored pairs are read again without a GPU.

Prints per operation, size and launch mode sweeper's time, the bare loop's and their ratio,
and from --floor up the bandwidth ratio: busbw, or algbw where the bus factor is 0 (one
rank). Exits 1 when an eager time ratio is above --max-time-ratio at any size, a bandwidth
ratio from --floor up is below --min-ratio in either mode, or a sweeper point failed (or fell
back to eager). In-place operations on one rank move nothing (NCCL returns at once), so their
bandwidth is not gated. Writes fidelity.txt and fidelity.json (every figure) under --out.

On a one-GPU machine (world 1; 11 operations, 8 B to 1 GiB by x8, five repeats, both launch
modes: about 5 minutes; eager alone, 35-40 s a run, and as long for a run of unclear points
that span every operation and size):

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
from collections.abc import Mapping, Sequence, Set
from dataclasses import asdict, dataclass, field, fields, replace
from math import comb
from pathlib import Path
from statistics import median
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from bare import FACTORS, bare_step, free_port, init_bare, time_blocks
from pinning import Pinner, rank_cores

from sweeper.driver.console import HumanConsole
from sweeper.driver.measurement import ResultRow
from sweeper.driver.observer import Finished, Observer, Started
from sweeper.fabric.multicast import MULTICAST_OFF
from sweeper.ops import registry
from sweeper.ops.registry import resolve
from sweeper.planning.sizes import format_size, parse_size
from sweeper.results.writer import columns

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
    def ratios(self) -> list[float]:
        """Each pair's sweeper time over the bare loop's."""
        return [s / b for s, b in self.pairs]

    @property
    def time_ratio(self) -> float:
        """The median over repeats of sweeper's time over the bare loop's."""
        return median(self.ratios)

    @property
    def time_interval(self) -> tuple[float, float]:
        """Where time_ratio's true value lies with 95% confidence or more (the sign test's
        interval for a median: no assumption on how the pairs' ratios spread); below 6 pairs,
        their whole range."""
        return median_interval(self.ratios)

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
            "time_interval": self.time_interval,
            "fastest_ratio": self.fastest_ratio,
            "bw_ratio": self.bw_ratio,
        }


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The sign test's interval for the median of `values`: their order statistics after
    leaving out the most values at each end that keeps the chance of missing the median,
    2 P(Binomial(n, 1/2) <= left out), within 1 - confidence. Below 6 values none may go and
    the interval is their whole range."""
    ordered = sorted(values)
    n = len(ordered)

    def missed(cut: int) -> float:
        return 2 * sum(comb(n, i) for i in range(cut + 1)) / (1 << n)

    cut = 0
    while missed(cut + 1) <= 1 - confidence:
        cut += 1
    return ordered[cut], ordered[n - 1 - cut]


@dataclass(frozen=True)
class Gate:
    """When sweeper's harness costs too much against the bare loop."""

    floor_bytes: int = 256 * 2**20  # bandwidth ratios count from here
    max_time_ratio: float = 1.10  # eager: what the harness may add to a call, at any size
    min_bw_ratio: float = 0.97  # either mode

    def counts_bandwidth(self, point: Compared) -> bool:
        return point.size_bytes >= self.floor_bytes and point.moves_data

    def unclear(self, point: Compared) -> bool:
        """An eager point whose pairs cannot yet tell which side of max_time_ratio it is on:
        its interval holds the bound."""
        low, high = point.time_interval
        return point.launch == "eager" and low <= self.max_time_ratio < high

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
        f"{'bare us':>11}{'pairs':>6}{'time s/b':>10}{'95% interval':>14}{'fastest':>9}"
        f"{'bw s/b':>8}"
    ]
    for p in points:
        bw = f"{p.bw_ratio:>8.3f}" if gate.counts_bandwidth(p) else f"{'':>8}"
        low, high = p.time_interval
        lines.append(
            f"{p.name:<26}{format_size(p.size_bytes):>6}{p.launch:>7}{p.iters:>7}"
            f"{p.sweeper_time_us:>12.2f}{p.bare_time_us:>11.2f}{len(p.pairs):>6}"
            f"{p.time_ratio:>10.3f}{f'{low:.3f}-{high:.3f}':>14}{p.fastest_ratio:>9.3f}{bw}"
            + ("  <- fails" if gate.problems(p) else "")
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
    """sweeper's observer: after each of sweeper's points (those in `only`, where given), the
    bare loop times the same point (operation, count, dtype, launch mode, iterations, warm-up,
    blocks) while sweeper's actors wait for their next one."""

    def __init__(self, bare: BareRanks, progress: Observer, only: Set[Key] | None = None):
        self.bare = bare
        self.progress = progress
        self.only = only
        self.label = registry.names()
        self.timed: list[tuple[Key, Row, list[float]]] = []  # ok points, the bare loop's blocks

    def started(self, run: Started) -> None:
        self.progress.started(run)

    def point(self, row: ResultRow) -> None:
        self.progress.point(row)
        self.take(columns(row))

    def take(self, row: Row) -> None:
        """A row of sweeper's, by column: the bare loop times its point, where asked to."""
        key = (self.label[(row["op"], row["algorithm"])], int(row["size_bytes"]), row["launch"])
        if row["status"] != "ok" or (self.only is not None and key not in self.only):
            return
        self.timed.append((key, row, self.bare.seconds(bare_point(key, row))))

    def finished(self, run: Finished) -> None:
        self.progress.finished(run)


@dataclass
class Timed:
    """What sweeper and the bare loop timed so far: each point's row from the first run that
    timed it, both sides' blocks run by run, and why sweeper points failed."""

    rows: dict[Key, Row] = field(default_factory=dict)
    sweeper_us: defaultdict[Key, list[list[float]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    bare_us: defaultdict[Key, list[list[float]]] = field(default_factory=lambda: defaultdict(list))
    failed: list[str] = field(default_factory=list)

    def add(self, observer: Interleaved, rows: Sequence[Row]) -> None:
        """One run: sweeper's rows, and the points its observer had the bare loop time."""
        for row in rows:
            name = observer.label[(row["op"], row["algorithm"])]
            where = f"{name} {format_size(int(row['size_bytes']))} {row['launch']}"
            if row.get("launch_note"):
                self.failed.append(f"{where}: {row['launch_note']}")
            if row["status"] not in ("ok", "skipped"):
                self.failed.append(f"{where}: sweeper {row['status']}: {row['error']}")
        for key, row, seconds in observer.timed:
            self.rows.setdefault(key, row)
            self.sweeper_us[key].append([float(us) for us in row["time_us_blocks"]])
            self.bare_us[key].append([s * 1e6 for s in seconds])

    def points(self) -> list[Compared]:
        return compare(self.rows, self.sweeper_us, self.bare_us)


@dataclass(frozen=True)
class Unclear:
    """The eager points of the operations asked for whose pairs cannot yet tell which side of
    the bound they are on, and the runs that time them again: their operations over the span
    of their sizes."""

    keys: frozenset[Key]
    ops: tuple[str, ...]
    sizes: tuple[int, int]

    @classmethod
    def of(cls, points: Sequence[Compared], gate: Gate, names: Sequence[str]) -> Unclear | None:
        unclear = [p for p in points if gate.unclear(p) and p.name in names]
        if not unclear:
            return None
        sizes = [p.size_bytes for p in unclear]
        return cls(
            keys=frozenset((p.name, p.size_bytes, p.launch) for p in unclear),
            ops=tuple(name for name in names if any(p.name == name for p in unclear)),
            sizes=(min(sizes), max(sizes)),
        )


def run_sweeper(
    args: argparse.Namespace,
    names: Sequence[str],
    world: int,
    observer: Observer,
    sizes: tuple[int | str, int | str],
    launch: str,
) -> list[Row]:
    from sweeper.driver.sweep import run
    from sweeper.planning.profile import build_spec

    spec = build_spec(
        ops=",".join(names),
        dtypes=args.dtype,
        min_size=sizes[0],
        max_size=sizes[1],
        step_factor=args.step_factor,
        launch=launch,
        world=world,
        iters=args.iters,
        warmup=args.warmup,
        blocks=args.blocks,
        results=Path(args.out) / "results",
        report=False,
    )
    return [columns(row) for row in run(spec, observer).rows]


def join(*groups: Sequence[Compared]) -> list[Compared]:
    """Points from several commands as one: each point's pairs from all of them, in order,
    and its row's figures from the first that timed it. Each pair was taken back to back on
    one machine, so pairs from several machines of a kind estimate the same ratio."""
    joined: dict[Key, Compared] = {}
    for point in (point for group in groups for point in group):
        key = (point.name, point.size_bytes, point.launch)
        if (first := joined.get(key)) is None:
            joined[key] = point
            continue
        joined[key] = replace(
            first,
            sweeper_repeats_us=first.sweeper_repeats_us + point.sweeper_repeats_us,
            bare_repeats_us=first.bare_repeats_us + point.bare_repeats_us,
        )
    return list(joined.values())


def read_points(figures: Mapping[str, Any]) -> list[Compared]:
    """The points of a fidelity.json, pairs and all."""
    kept = {f.name for f in fields(Compared)}
    return [
        Compared(
            **{
                **{k: v for k, v in point.items() if k in kept},
                "sweeper_repeats_us": tuple(map(tuple, point["sweeper_repeats_us"])),
                "bare_repeats_us": tuple(map(tuple, point["bare_repeats_us"])),
            }
        )
        for point in figures["points"]
    ]


def measure(
    args: argparse.Namespace,
    names: list[str],
    world: int,
    gate: Gate,
    earlier: Sequence[Compared] = (),
) -> tuple[list[Compared], list[str], int]:
    """Runs of sweeper with the bare loop timing each point right after it: --repeats runs of
    every point, then up to --confirm runs of the points still unclear with the `earlier`
    commands' pairs joined (gate.unclear, asked again after each run, so the runs shrink as
    points clear), each over the operations and the span of sizes that hold them. No run
    starts after --time-limit seconds; the bare loop starts with the first run. The points,
    why sweeper points failed, and how many runs there were."""
    timed = Timed()
    started: tuple[Pinner, BareRanks] | None = None
    deadline = time.monotonic() + args.time_limit
    made = 0

    def run_once(
        ops: Sequence[str], sizes: tuple[int | str, int | str], launch: str, only: Set[Key] | None
    ) -> bool:
        nonlocal made, started
        if time.monotonic() > deadline:
            print(f"--time-limit: no more runs after {made}", file=sys.stderr)
            return False
        if started is None:
            pinner = Pinner(rank_cores(world)).away()
            started = pinner, BareRanks(world)
            pinner.watch(rank.pid for rank in started[1].ranks if rank.pid is not None)
        observer = Interleaved(started[1], HumanConsole(sys.stderr), only)
        timed.add(observer, run_sweeper(args, ops, world, observer, sizes, launch))
        made += 1
        return True

    try:
        for _ in range(args.repeats):
            if not run_once(names, (args.min_size, args.max_size), args.launch, None):
                break
        for more in range(args.confirm):
            if not (again := Unclear.of(join(earlier, timed.points()), gate, names)):
                break
            print(f"{len(again.keys)} points unclear: run {more + 1} more", file=sys.stderr)
            if not run_once(again.ops, again.sizes, "eager", again.keys):
                break
    finally:
        if started is not None:
            started[0].close()
            started[1].close()
    if started is not None:
        started[0].check()
    return join(earlier, timed.points()), list(dict.fromkeys(timed.failed)), made


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
    parser.add_argument(
        "--confirm", default=10, type=int, help="runs more, at most, of the unclear points"
    )
    parser.add_argument(
        "--time-limit", default=3600.0, type=float, help="seconds after which no run starts"
    )
    defaults = Gate()
    parser.add_argument("--floor", default=defaults.floor_bytes, type=parse_size)
    parser.add_argument("--max-time-ratio", default=defaults.max_time_ratio, type=float)
    parser.add_argument("--min-ratio", default=defaults.min_bw_ratio, type=float)
    parser.add_argument("--out", default=None, help="directory for rows, table and figures")
    parser.add_argument(
        "--with",
        dest="earlier",
        action="append",
        default=[],
        metavar="FIDELITY_JSON",
        help="an earlier command's fidelity.json whose pairs join this one's (repeatable)",
    )
    args = parser.parse_args()
    # collectives only: a copy has no torch.distributed loop to compare with
    names = [c.name for c in resolve(args.ops.split(",")) if c.kind != "copy"]
    if unknown := [name for name in names if name not in FACTORS]:
        parser.error(f"--ops: the bare loop has no {', '.join(unknown)}")
    try:
        earlier = [json.loads(Path(path).read_text()) for path in args.earlier]
    except (OSError, ValueError) as exc:
        parser.error(f"--with: {exc}")
    world = args.world or (earlier[0]["world_size"] if earlier else torch.cuda.device_count())
    for path, figures in zip(args.earlier, earlier, strict=True):
        if (figures["world_size"], figures["dtype"]) != (world, args.dtype):
            parser.error(
                f"--with {path}: {figures['world_size']} ranks of {figures['dtype']}, "
                f"not {world} of {args.dtype}"
            )
    out = Path(args.out or tempfile.mkdtemp(prefix="fidelity-"))
    args.out = str(out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(MULTICAST_OFF)  # the bare loop's processes inherit it, as actors get it
    gate = Gate(args.floor, args.max_time_ratio, args.min_ratio)

    clock = time.monotonic()
    compared, failed, made = measure(
        args, names, world, gate, join(*(read_points(figures) for figures in earlier))
    )
    failed = [*(f for figures in earlier for f in figures.get("sweeper_failures", [])), *failed]
    failures = gate.failures(compared, failed)
    wall_s = time.monotonic() - clock
    lines = [
        f"fidelity on {world} ranks, {args.dtype}, {made} runs (up to {args.repeats} of every "
        f"point, then of the unclear eager points), each point timed by the bare loop right after "
        f"sweeper ({wall_s:.0f} s): sweeper against the bare torch.distributed loop"
        + "".join(f"; with the pairs of {path}" for path in args.earlier),
        *table(compared, gate),
        f"time s/b: median over runs of sweeper / bare median block (eager must be <= "
        f"{gate.max_time_ratio}), and the sign test's 95% interval for it (unclear while it "
        "holds the bound: those points get more runs); fastest: each side's fastest block, one "
        "over the other; bw s/b: "
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
        "confirm": args.confirm,
        "runs": made,
        "wall_s": wall_s,
        "gate": asdict(gate),
        "with": args.earlier,
        "points": [p.figures() for p in compared],
        "sweeper_failures": failed,
        "failures": failures,
    }
    (out / "fidelity.json").write_text(json.dumps(figures, indent=1) + "\n")
    rows = f"; rows: {out}/results" if made else ""
    print(f"table and figures: {out}/fidelity.txt, fidelity.json{rows}")
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
