"""nccl-tests and sweeper side by side: the same operations, sizes, dtype, ranks and
iteration counts, eager and from CUDA graphs, in one table.

1. Builds nccl-tests (`make MPI=0`, only the binaries needed, for this machine's GPUs) from
   the checkout given into --build-dir, against the NCCL of torch's pip packages
   (site-packages/nvidia/nccl), the library torch runs on.
2. Runs each operation's binary twice, eager (-n iters) and from CUDA graphs replayed as
   sweeper replays them (-n graph_unit(iters) -G launches: graphs of at most 100 iterations,
   launched back to back until they cover iters; a single launch would add its latency to
   every iteration of a short graph), with -b/-e/-f/-g/-d, -w and -a 3 (max over ranks, as
   sweeper), reading the JSON it writes with -J. nccl-tests' sizes are
   sweeper's S: the same -b/-e/-f grid, bytes counted the same way (chunks aligned down to
   16 bytes; nccl-tests lets a chunk below that become 0 bytes, sweeper keeps one element).
3. Runs sweeper in process on the same operations, sizes, dtype and world, with the same
   --iters and --warmup and --launch graph,eager; then, with --default-run, as a user runs
   it for the same points (adaptive iterations, default launch mode and engine, its
   report), for its wall time.
   Both sides call from the same CPU cores, their other threads on the rest
   (benchmarks/pinning.py; with --threads, nccl-tests' every thread on those cores). With
   --repeats, nccl-tests' runs and sweeper's take turns that many times, and each side's
   figure for a point is its run of median time: a launch-bound eager call moves between
   host speeds in spells, which one run of each side compares at random.
4. Prints per operation, size and launch mode nccl-tests' time (its in-place figure where
   sweeper's row is in place, else its out-of-place one), sweeper's time, their ratio up to
   64 KiB and the busbw ratio (algbw where the bus factor is 0: one rank) from 256 MiB, then
   the wall times of both (and of the default run). Writes nccl_tests.md and nccl_tests.json
   (every figure) under --out, beside each nccl-tests run's JSON and output and sweeper's rows.

Exits 1 if an nccl-tests run or a sweeper point failed; the ratios are figures, not a gate.

On a one-GPU machine (world 1; 9 operations, 8 B to 2 GiB: about 3 minutes, the build
included), with the nccl-tests checkout carried as .nccl-tests:

    source .whl/gpu-env.sh && python3 benchmarks/nccl_tests.py --nccl-tests .nccl-tests \\
        --world 1 --max-size 2G --out nccl-tests-out
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from pinning import Pinner, pinned, rank_cores

import sweeper
from sweeper.fabric.multicast import MULTICAST_OFF
from sweeper.planning.dtypes import DTYPES, canonical_dtype
from sweeper.planning.sizes import format_size, parse_size
from sweeper.rank.timing import graph_unit

Row = Mapping[str, Any]
T = TypeVar("T")

# sweeper's operation -> the nccl-tests binary that performs it
BINARIES = {
    "all_reduce": "all_reduce_perf",
    "reduce": "reduce_perf",
    "broadcast": "broadcast_perf",
    "all_gather": "all_gather_perf",
    "gather": "gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "scatter": "scatter_perf",
    "all_to_all": "alltoall_perf",
    "send_recv": "sendrecv_perf",
}
# sweeper's dtype -> nccl-tests' -d name (src/common.cu, test_typenames)
NCCL_TESTS_DTYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "half",
    "bfloat16": "bfloat16",
    "int8": "int8",
    "uint8": "uint8",
    "int32": "int32",
    "int64": "int64",
    "float8_e4m3fn": "f8e4m3",
    "float8_e5m2": "f8e5m2",
}
JSON_VERSION = 3  # nccl-tests' -J format (src/util.cu, JSON_FILE_VERSION)
TIME_UP_TO_BYTES = 64 * 2**10  # time ratios: where launch and latency decide
BANDWIDTH_FROM_BYTES = 256 * 2**20  # bandwidth ratios: where the links decide


@dataclass(frozen=True)
class Figure:
    """One measurement of one size: nccl-tests' (one placement) or sweeper's row."""

    time_us: float
    algbw_gb_per_s: float
    busbw_gb_per_s: float


@dataclass(frozen=True)
class Record:
    """One size of an nccl-tests run, both placements."""

    requested_bytes: int  # the -b/-e/-f grid point
    size_bytes: int  # S as nccl-tests counted it
    out_of_place: Figure
    in_place: Figure


@dataclass(frozen=True)
class Run:
    """One nccl-tests run, from the document its -J option writes."""

    ranks: int
    graph_launches: int  # -G; 0: eager
    dtype: str  # nccl-tests' name
    iters: int
    warmup_iters: int
    nccl_version: int  # NCCL's version code, e.g. 22809
    records: tuple[Record, ...]

    @property
    def launch(self) -> str:
        return "graph" if self.graph_launches else "eager"

    @property
    def settings(self) -> tuple[int, str, int, int, int]:
        """What it ran with: ranks, dtype, iterations, warm-up, graph launches. nccl-tests
        runs on after some mistakes (an unknown -d is float, with a line on stdout)."""
        return (self.ranks, self.dtype, self.iters, self.warmup_iters, self.graph_launches)


def _figure(placement: Mapping[str, Any]) -> Figure:
    # nccl-tests writes a NaN as the string "nan", which float() reads
    return Figure(float(placement["time"]), float(placement["alg_bw"]), float(placement["bus_bw"]))


def parse_run(document: Mapping[str, Any]) -> Run:
    """A run from nccl-tests' JSON document (util.cu: `config`, then one `results` entry per
    size, out-of-place then in-place, time in us, bandwidths in GB/s). Its sizes are the
    grid's points in order: minimum_bytes x step_factor^i (nccl-tests may stop early when
    memory is short); `size` is S after nccl-tests' rounding."""
    if document.get("version") != JSON_VERSION:
        raise ValueError(f"nccl-tests JSON version {document.get('version')}, not {JSON_VERSION}")
    config = document["config"]
    if "step_factor" not in config:
        raise ValueError("nccl-tests ran with a step in bytes (-i), not a factor (-f)")
    results = document["results"]
    dtypes = {r["type"] for r in results} or {""}
    if len(dtypes) != 1:
        raise ValueError(f"one dtype per run, not {sorted(dtypes)}")
    first, factor = int(config["minimum_bytes"]), int(config["step_factor"])
    return Run(
        ranks=int(config["nthreads"]) * int(config["ngpus"]),
        graph_launches=int(config["graph"]),
        dtype=dtypes.pop(),
        iters=int(config["iterations"]),
        warmup_iters=int(config["warmup_iters"]),
        nccl_version=int(document["nccl_version"]),
        records=tuple(
            Record(
                first * factor**i,
                int(r["size"]),
                _figure(r["out_of_place"]),
                _figure(r["in_place"]),
            )
            for i, r in enumerate(results)
        ),
    )


def _of_median_time(measured: Iterable[T], time_us: Callable[[T], float]) -> T:
    """The measurement of median time (the lower one of an even count): one that was taken,
    not a mix of several."""
    ordered = sorted(measured, key=time_us)
    return ordered[(len(ordered) - 1) // 2]


def _time(figure: Figure) -> float:
    return figure.time_us


def median_run(runs: Sequence[Run]) -> Run:
    """Repeated runs of one binary and launch mode as one: per size and placement, the
    repeat of median time. The runs must have measured the same grid with the same settings."""
    grids = {(run.settings, tuple(r.requested_bytes for r in run.records)) for run in runs}
    if len(grids) != 1:
        raise ValueError("repeated nccl-tests runs measured different points")
    records = tuple(
        replace(
            same[0],
            out_of_place=_of_median_time((r.out_of_place for r in same), _time),
            in_place=_of_median_time((r.in_place for r in same), _time),
        )
        for same in zip(*(run.records for run in runs), strict=True)
    )
    return replace(runs[0], records=records)


def median_rows(repeats: Sequence[Sequence[Row]]) -> list[Row]:
    """Repeated sweeper runs as one: per point (operation, engine, launch mode, dtype, size),
    the row of median time among the repeats that measured it, else the first repeat's."""
    points: dict[tuple[Any, ...], list[Row]] = defaultdict(list)
    for rows in repeats:
        for row in rows:
            names = ("op", "algorithm", "engine", "launch", "dtype", "size_bytes")
            points[tuple(row.get(name) for name in names)].append(row)
    chosen = []
    for same in points.values():
        ok = [r for r in same if r["status"] == "ok"]
        chosen.append(_of_median_time(ok, lambda r: float(r["time_us"])) if ok else same[0])
    return chosen


@dataclass(frozen=True)
class Line:
    """One sweeper row beside the nccl-tests record of the same point."""

    name: str
    engine: str  # sweeper's: torch (torch.distributed) or nccl (NCCL called directly)
    launch: str
    size_bytes: int  # sweeper's S
    in_place: bool
    status: str  # sweeper's
    sweeper: Figure | None  # None: the point did not run (status says why)
    nccl_tests: Figure | None  # the row's placement; None: no nccl-tests record
    nccl_tests_size_bytes: int | None

    @property
    def time_ratio(self) -> float | None:
        """sweeper's time over nccl-tests', up to TIME_UP_TO_BYTES."""
        if self.sweeper is None or self.nccl_tests is None or self.size_bytes > TIME_UP_TO_BYTES:
            return None
        if self.nccl_tests_size_bytes == 0:  # nccl-tests rounded every chunk to nothing
            return None
        return self.sweeper.time_us / self.nccl_tests.time_us

    @property
    def bw_ratio(self) -> float | None:
        """sweeper's busbw over nccl-tests', from BANDWIDTH_FROM_BYTES; algbw's where the bus
        factor is 0 (one rank)."""
        if self.sweeper is None or self.nccl_tests is None:
            return None
        if self.size_bytes < BANDWIDTH_FROM_BYTES:
            return None
        if self.nccl_tests.busbw_gb_per_s == 0:
            return self.sweeper.algbw_gb_per_s / self.nccl_tests.algbw_gb_per_s
        return self.sweeper.busbw_gb_per_s / self.nccl_tests.busbw_gb_per_s

    def figures(self) -> dict[str, Any]:
        return {**asdict(self), "time_ratio": self.time_ratio, "bw_ratio": self.bw_ratio}


def match(
    rows: Iterable[tuple[str, Row]],
    runs: Mapping[tuple[str, str], Run],
    count_of: Callable[[str, int], int],
) -> list[Line]:
    """A line per sweeper row (operation name, row), beside the record of the nccl-tests run
    of the same operation and launch mode whose requested size gives the row's element count
    (`count_of(name, requested_bytes)`, sweeper's rounding; two grid points that round to
    one count: the smaller's record)."""
    records: dict[tuple[str, str, int], Record] = {}
    for (name, launch), run in runs.items():
        for record in run.records:
            records.setdefault((name, launch, count_of(name, record.requested_bytes)), record)
    lines = []
    for name, row in rows:
        found = records.get((name, row["launch"], int(row["count_elems"])))
        in_place = bool(row["in_place"])
        lines.append(
            Line(
                name=name,
                engine=row.get("engine") or "torch",
                launch=row["launch"],
                size_bytes=int(row["size_bytes"]),
                in_place=in_place,
                status=row["status"],
                sweeper=(
                    Figure(row["time_us"], row["algbw_gb_per_s"], row["busbw_gb_per_s"])
                    if row["status"] == "ok"
                    else None
                ),
                nccl_tests=(
                    None if found is None else found.in_place if in_place else found.out_of_place
                ),
                nccl_tests_size_bytes=None if found is None else found.size_bytes,
            )
        )
    return lines


COLUMNS = (
    "operation",
    "S",
    "nccl-tests S",
    "engine",
    "launch",
    "place",
    "nccl-tests us",
    "sweeper us",
    "time s/n",
    "nccl-tests busbw",
    "sweeper busbw",
    "bw s/n",
)


def cells(line: Line) -> list[str]:
    def number(value: float | None, digits: int, missing: str = "-") -> str:
        return missing if value is None else f"{value:.{digits}f}"

    nt, sw, nt_size = line.nccl_tests, line.sweeper, line.nccl_tests_size_bytes
    return [
        line.name,
        format_size(line.size_bytes),
        "-" if nt_size is None else format_size(nt_size),
        line.engine,
        line.launch,
        "in" if line.in_place else "out",
        number(nt.time_us if nt else None, 2),
        number(sw.time_us if sw else None, 2, line.status),
        number(line.time_ratio, 3, ""),
        number(nt.busbw_gb_per_s if nt else None, 2),
        number(sw.busbw_gb_per_s if sw else None, 2, line.status),
        number(line.bw_ratio, 3, ""),
    ]


def text_table(lines: Sequence[Line]) -> list[str]:
    widths = (16, 7, 13, 7, 7, 6, 14, 12, 10, 17, 15, 8)
    rows = [list(COLUMNS), *(cells(line) for line in lines)]
    return [
        "".join(
            f"{c:<{w}}" if i == 0 else f"{c:>{w}}"
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def markdown_table(lines: Sequence[Line]) -> list[str]:
    rows = [list(COLUMNS), ["---"] * len(COLUMNS), *(cells(line) for line in lines)]
    return ["| " + " | ".join(row) + " |" for row in rows]


def nccl_version(code: int) -> str:
    """NCCL's version code (major x 10000 + minor x 100 + patch) as 2.28.9."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def replays(launch: str, iters: int) -> tuple[int, int]:
    """nccl-tests' -n and -G for sweeper's `iters` in a launch mode. Eager: the iterations, no
    graph. Graph: sweeper's structure, graphs of graph_unit(iters) iterations launched back to
    back until they cover `iters`; nccl-tests -G times as many launches of its -n iterations."""
    if launch == "eager":
        return iters, 0
    unit = graph_unit(iters)
    return unit, math.ceil(iters / unit)


def command(
    binary: Path, args: argparse.Namespace, world: int, launch: str, json_path: Path
) -> list[str]:
    """nccl-tests' command line for the points sweeper measures."""
    iters, launches = replays(launch, args.iters)
    return [
        str(binary),
        *("-b", str(args.min_size), "-e", str(args.max_size), "-f", str(args.step_factor)),
        *(("-t", str(world), "-g", "1") if args.threads else ("-g", str(world))),
        *("-d", NCCL_TESTS_DTYPES[args.dtype]),
        *("-n", str(iters), "-w", str(args.warmup), "-a", "3"),
        *("-G", str(launches), "-J", str(json_path)),
        *(("-R", "1") if args.register_buffers else ()),
    ]


def child_env(environ: Mapping[str, str], libraries: Sequence[Path]) -> dict[str, str]:
    """The environment of nccl-tests' build and runs: this process's, NVLink multicast off
    whatever it says (as in sweeper's actors), and `libraries` first on LD_LIBRARY_PATH."""
    paths = [str(p) for p in libraries] + [
        p for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p
    ]
    return {**environ, **MULTICAST_OFF, "LD_LIBRARY_PATH": ":".join(paths)}


def nccl_package() -> Path:
    """site-packages/nvidia/nccl: the NCCL that torch's pip packages ship and torch runs on."""
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("no nvidia.nccl package: torch's NCCL comes from pip (nvidia-nccl-cu*)")
    return Path(next(iter(spec.submodule_search_locations)))


def nccl_home(nccl: Path, build_dir: Path) -> Path:
    """An NCCL_HOME for the build: the package's headers, and its library under the name the
    linker's -lnccl looks for (the wheel ships only libnccl.so.2)."""
    libraries = sorted((nccl / "lib").glob("libnccl.so*"))
    if not libraries:
        raise SystemExit(f"no libnccl.so* in {nccl / 'lib'}")
    home = build_dir / "nccl"
    (home / "lib").mkdir(parents=True, exist_ok=True)
    for link, target in (
        (home / "include", nccl / "include"),
        (home / "lib" / "libnccl.so", libraries[0]),
    ):
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    return home


def cuda_home(environ: Mapping[str, str]) -> Path:
    """$CUDA_HOME, else the toolkit of the nvcc on PATH (through its links), else
    /usr/local/cuda."""
    if "CUDA_HOME" in environ:
        return Path(environ["CUDA_HOME"])
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else Path("/usr/local/cuda")


def gencode() -> str:
    """nvcc's -gencode for this machine's GPUs only: nccl-tests' default builds for six
    architectures, several times longer."""
    query = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]
    capabilities = subprocess.run(query, capture_output=True, text=True, check=True).stdout
    archs = sorted({cap.replace(".", "") for cap in capabilities.split()})
    return " ".join(f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs)


def build(
    checkout: Path,
    build_dir: Path,
    binaries: Sequence[str],
    nccl: Path,
    cuda: Path,
    env: Mapping[str, str],
) -> None:
    """nccl-tests' binaries, built (or brought up to date) in `build_dir` against the NCCL
    package `nccl` with the CUDA toolkit `cuda`. NVCC_GENCODE in the environment wins over
    this machine's architectures, as in nccl-tests' own build."""
    if not (cuda / "bin" / "nvcc").exists():
        raise SystemExit(f"no nvcc in {cuda}/bin: set CUDA_HOME or put nvcc on PATH")
    argv = [
        "make",
        "-C",
        str(checkout / "src"),
        f"-j{os.cpu_count() or 1}",
        "MPI=0",
        f"BUILDDIR={build_dir}",
        f"NCCL_HOME={nccl_home(nccl, build_dir)}",
        f"CUDA_HOME={cuda}",
        *([] if "NVCC_GENCODE" in env else [f"NVCC_GENCODE={gencode()}"]),
        *(str(build_dir / binary) for binary in binaries),
    ]
    subprocess.run(argv, env=env, check=True)


def run_nccl_tests(
    argv: list[str], env: Mapping[str, str], json_path: Path, timeout_s: float
) -> tuple[Run | None, float, str | None]:
    """One nccl-tests run: what it measured, its wall seconds, and what went wrong, if
    anything. Its output goes beside its JSON."""
    json_path.unlink(missing_ok=True)  # nccl-tests never overwrites: it would write .json.0
    log = json_path.with_suffix(".txt")
    clock = time.monotonic()
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as exc:  # its output is bytes, whatever text= said
        log.write_bytes((exc.stdout or b"") + (exc.stderr or b""))
        return None, time.monotonic() - clock, f"timed out after {timeout_s:.0f} s; see {log}"
    seconds = time.monotonic() - clock
    log.write_text(done.stdout + done.stderr)
    problem = f"exit status {done.returncode}; see {log}" if done.returncode else None
    try:
        return parse_run(json.loads(json_path.read_text())), seconds, problem
    except (OSError, ValueError, KeyError) as exc:
        return None, seconds, f"{problem or 'no results'}: {exc!r}; see {log}"


def run_all(
    args: argparse.Namespace,
    names: Sequence[str],
    world: int,
    env: Mapping[str, str],
    out: Path,
    cores: set[int],
) -> tuple[dict[tuple[str, str], Run], float, list[str]]:
    """Each operation's binary eager, then from graphs, on `cores`: the runs by (operation,
    launch mode), their wall seconds in all, and what failed."""
    runs: dict[tuple[str, str], Run] = {}
    seconds = 0.0
    failed = []
    for name in names:
        for launch in ("eager", "graph"):
            iters, launches = replays(launch, args.iters)
            json_path = out / f"{BINARIES[name]}-{launch}.json"
            argv = command(args.build_dir / BINARIES[name], args, world, launch, json_path)
            if args.threads:  # its ranks are threads: the whole process on the ranks' cores
                argv = pinned(argv, cores)
            run, took, problem = run_nccl_tests(argv, env, json_path, args.timeout)
            seconds += took
            asked = (world, NCCL_TESTS_DTYPES[args.dtype], iters, args.warmup, launches)
            if run is not None and run.settings != asked:
                problem = f"ran with {run.settings}, not {asked}"
                run = None
            print(f"{json_path.stem}: {took:.1f} s {problem or ''}", file=sys.stderr)
            if problem:
                failed.append(f"{json_path.stem}: {problem}")
            if run is not None:
                runs[(name, run.launch)] = run
    return runs, seconds, failed


def default_options(
    args: argparse.Namespace, names: Sequence[str], world: int, output: Path
) -> dict[str, Any]:
    """`sweeper run`'s options for the points nccl-tests measured, as a user gives them: what
    to measure, nothing about how."""
    return {
        "ops": ",".join(names),
        "dtypes": args.dtype,
        "min_size": args.min_size,
        "max_size": args.max_size,
        "step_factor": args.step_factor,
        "world": world,
        "output": output,
    }


def sweeper_options(
    args: argparse.Namespace, names: Sequence[str], world: int, output: Path
) -> dict[str, Any]:
    """The same points measured as nccl-tests measures them: its iterations, both launch
    modes, the engines asked for."""
    return {
        **default_options(args, names, world, output),
        "iters": args.iters,
        "warmup": args.warmup,
        "launch": "graph,eager",
        "engine": args.engine,
        "register_buffers": args.register_buffers,
        "report": False,
    }


def run_sweeper(options: Mapping[str, Any]) -> list[Row]:
    return sweeper.run(**options).rows.to_dict("records")


def take_turns(
    args: argparse.Namespace,
    names: Sequence[str],
    world: int,
    env: Mapping[str, str],
    cores: set[int],
) -> tuple[dict[tuple[str, str], Run], list[list[Row]], float, float, list[str]]:
    """nccl-tests' runs, then sweeper's, --repeats times, both sides on `cores`: each binary
    and launch mode's run of median time per size, every repeat's sweeper rows, both sides'
    wall seconds, and what failed on nccl-tests' side."""
    repeated: dict[tuple[str, str], list[Run]] = defaultdict(list)
    repeats: list[list[Row]] = []
    nccl_tests_s = sweeper_s = 0.0
    failed: list[str] = []
    for repeat in range(args.repeats):
        out = args.out / "nccl-tests" / str(repeat)
        out.mkdir(parents=True, exist_ok=True)
        runs, seconds, problems = run_all(args, names, world, env, out, cores)
        nccl_tests_s += seconds
        failed += problems
        for key, run in runs.items():
            repeated[key].append(run)
        clock = time.monotonic()
        options = sweeper_options(args, names, world, args.out / "results")
        repeats.append(run_sweeper(options))
        sweeper_s += time.monotonic() - clock
    runs = {key: median_run(same) for key, same in repeated.items()}
    return runs, repeats, nccl_tests_s, sweeper_s, failed


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nccl-tests", required=True, type=Path, help="nccl-tests checkout")
    parser.add_argument(
        "--build-dir", default=Path(tempfile.gettempdir()) / "sweeper-nccl-tests", type=Path
    )
    parser.add_argument("--ops", default=",".join(BINARIES), help="sweeper operation names")
    parser.add_argument("--min-size", default=8, type=parse_size)
    parser.add_argument("--max-size", default=4 * 2**30, type=parse_size)
    parser.add_argument("--step-factor", default=4, type=int, help="a whole factor, as -f")
    parser.add_argument("--dtype", default="bfloat16", type=canonical_dtype)
    parser.add_argument("--engine", default="torch,nccl", help="sweeper's engines: torch, nccl")
    parser.add_argument("--world", default=None, type=int, help="ranks (-g); default all GPUs")
    parser.add_argument(
        "--threads",
        action="store_true",
        help="nccl-tests with a thread per GPU (-t world -g 1), not one thread for all (-g)",
    )
    parser.add_argument(
        "--register-buffers",
        action="store_true",
        help="buffers registered with NCCL on both sides (nccl-tests -R 1, sweeper's option)",
    )
    parser.add_argument("--iters", default=500, type=int, help="timed iterations, both sides")
    parser.add_argument("--warmup", default=5, type=int, help="warm-up iterations (-w)")
    parser.add_argument("--repeats", default=1, type=int, help="runs of each side, in turn")
    parser.add_argument("--timeout", default=300.0, type=float, help="seconds per nccl-tests run")
    parser.add_argument("--out", default=None, type=Path, help="directory for tables and figures")
    parser.add_argument(
        "--default-run",
        action="store_true",
        help="then time a default `sweeper run` of the same points",
    )
    args = parser.parse_args()
    args.names = args.ops.split(",")
    if unknown := [name for name in args.names if name not in BINARIES]:
        parser.error(f"--ops: nccl-tests has no {', '.join(unknown)}; it has {', '.join(BINARIES)}")
    if args.step_factor < 2 or args.iters < 1 or args.repeats < 1:
        parser.error("--step-factor must be at least 2, --iters and --repeats at least 1")
    args.build_dir = args.build_dir.resolve()
    args.out = args.out or Path(tempfile.mkdtemp(prefix="nccl-tests-"))
    return args


def main() -> int:
    args = arguments()
    names: list[str] = args.names
    import torch

    from sweeper.ops import registry

    world = args.world or torch.cuda.device_count()
    nccl, cuda = nccl_package(), cuda_home(os.environ)
    env = child_env(os.environ, [nccl / "lib", cuda / "lib64"])

    clock = time.monotonic()
    binaries = [BINARIES[name] for name in names]
    build(args.nccl_tests.resolve(), args.build_dir, binaries, nccl, cuda, env)
    build_s = time.monotonic() - clock
    cores = rank_cores(world)
    nccl_tests_calls = () if args.threads else (f"{args.build_dir}/".encode(),)
    pinner = Pinner(cores, prefixes=nccl_tests_calls).away()
    try:
        runs, repeats, nccl_tests_s, sweeper_s, failed = take_turns(args, names, world, env, cores)
        default_s = None
        if args.default_run:
            clock = time.monotonic()
            default = run_sweeper(default_options(args, names, world, args.out / "default"))
            default_s = time.monotonic() - clock
            failed += [
                f"default run {row['op']} {format_size(row['size_bytes'])}: {row['status']}"
                for row in default
                if row["status"] not in ("ok", "skipped")
            ]
    finally:
        pinner.close()
    pinner.check()
    rows = median_rows(repeats)

    label = registry.names()
    named = [(label[(row["op"], row["algorithm"])], row) for row in rows]
    failed += [
        f"sweeper {label[(row['op'], row['algorithm'])]} {format_size(row['size_bytes'])} "
        f"{row['launch']}: {row['status']}: {row['error']}"
        for rows_of_one in repeats
        for row in rows_of_one
        if row["status"] not in ("ok", "skipped")
    ]
    itemsize = DTYPES[args.dtype].itemsize
    lines = match(
        named, runs, lambda name, size: registry.REGISTRY[name].count(size, itemsize, world)
    )

    versions = {
        "nccl-tests": sorted({nccl_version(run.nccl_version) for run in runs.values()}),
        "sweeper": sorted({str(row["nccl_version"]) for row in rows}),
    }
    heading = (
        f"nccl-tests (NCCL {', '.join(versions['nccl-tests'])}) against sweeper (NCCL "
        f"{', '.join(versions['sweeper'])}): {world} ranks on cores {sorted(cores)}, "
        f"{args.dtype}, {args.repeats} runs each in turn (the median's figures), {args.iters} "
        f"iterations after {args.warmup} warm-up; graph: graphs of {graph_unit(args.iters)} "
        f"iterations, nccl-tests -n {' -G '.join(map(str, replays('graph', args.iters)))}"
    )
    legend = (
        f"time s/n: sweeper / nccl-tests time up to {format_size(TIME_UP_TO_BYTES)}; bw s/n: "
        f"sweeper / nccl-tests busbw (algbw on one rank) from {format_size(BANDWIDTH_FROM_BYTES)}"
    )
    walls = (
        f"wall: nccl-tests {nccl_tests_s:.1f} s ({2 * len(names) * args.repeats} runs; build "
        f"{build_s:.1f} s), "
        f"sweeper {sweeper_s:.1f} s"
        + ("" if default_s is None else f"; a default `sweeper run` of them {default_s:.1f} s")
    )
    problems = [f"FAILED {problem}" for problem in failed]
    print("\n".join([heading, *text_table(lines), legend, walls, *problems]))
    markdown = [heading, "", *markdown_table(lines), "", legend, "", walls, "", *problems]
    (args.out / "nccl_tests.md").write_text("\n".join(markdown) + "\n")
    figures = {
        "world_size": world,
        "dtype": args.dtype,
        "iters": args.iters,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "cores": sorted(cores),
        "graph": dict(zip(("iters", "launches"), replays("graph", args.iters), strict=True)),
        "nccl_version": versions,
        "wall_s": {
            "build": build_s,
            "nccl_tests": nccl_tests_s,
            "sweeper": sweeper_s,
            "default_run": default_s,
        },
        "lines": [line.figures() for line in lines],
        "failed": failed,
    }
    (args.out / "nccl_tests.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(f"tables and figures: {args.out}/nccl_tests.md, nccl_tests.json", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
