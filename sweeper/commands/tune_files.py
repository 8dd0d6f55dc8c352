"""`sweeper tune`'s work: from runs' regret (`analysis.regret`), an NCCL tuner configuration in
the CSV NCCL's example tuner plugin reads (plugins/tuner/example: `collective, min_bytes,
max_bytes, algorithm, protocol, channels, nNodes, nRanks, numPipeOps, regBuff`; `#` comments;
the first line that matches a call wins), and the best per size as crossover thresholds in
JSON, as vLLM keeps them per GPU model and world size. A line is written only for a winner
beyond noise that every engine, dtype and tier of its key agreed on, and that the CSV can
say: an algorithm and protocol (pinned by the winner, or as NCCL chose them under it) and a
channel count; what it cannot say is a comment, so the file stays loadable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sweeper.analysis.algorithms import KEYS, best_per_size, candidates
from sweeper.analysis.nightly import json_value
from sweeper.analysis.regret import configurations, configured, regret
from sweeper.analysis.summary import missing
from sweeper.errors import BadInput
from sweeper.ops.registry import REGISTRY
from sweeper.planning.sizes import format_size
from sweeper.results.files import write_text
from sweeper.results.load import resolve, run_rows
from sweeper.wire import DEFAULT_VARIANT, Launch

CSV_NAME = (
    "nccl_tuner.conf"  # the name the example plugin reads where NCCL_TUNER_CONFIG_FILE is unset
)
JSON_NAME = "crossovers.json"
# The example plugin reads a line with fgets into 256 bytes: a longer one is cut, and its rest
# read as a line of its own (plugin.c, MAX_LINE_LENGTH)
MAX_LINE = 255
ANY = -1  # the plugin's wildcard for channels (keep NCCL's), nodes, ranks, pipelined ops, regBuff
# NCCL_ALGO's and the TUNING lines' names -> the example plugin's (parseAlgorithm)
ALGORITHMS = {
    "ring": "ring",
    "tree": "tree",
    "collnetdirect": "collnet_direct",
    "collnet_direct": "collnet_direct",
    "collnetchain": "collnet_chain",
    "collnet_chain": "collnet_chain",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "nvls_tree": "nvls_tree",
    "pat": "pat",
}
PROTOCOLS = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
# The key of a line: the plugin matches a call by its collective, size, nodes, ranks, regBuff
LINE_KEY = ["collective", "n_nodes", "world_size", "reg_buff"]


def collectives() -> dict[tuple[str, str], str]:
    """The example plugin's collective name of each operation that is one NCCL collective
    call (its descriptor's one kernel: AllReduce -> allreduce); others (send/recv, the
    all-to-alls, composites) are not tuned by a collective's line."""
    return {
        (c.op, c.algorithm): next(iter(c.nccl_kernels)).lower()
        for c in REGISTRY.values()
        if len(c.nccl_kernels) == 1
    }


@dataclass(frozen=True)
class Choice:
    """What a line sets: the plugin's algorithm and protocol names and a channel count."""

    algorithm: str | None  # None: neither pinned nor said by NCCL's rows
    protocol: str | None
    channels: int  # ANY: NCCL's own count (the example plugin then uses one: docs/TUNING.md)

    def why_not(self) -> str | None:
        if self.algorithm is None or self.protocol is None:
            return "which algorithm and protocol NCCL chose is not in the rows"
        return None


def _single(value: object, names: Mapping[str, str]) -> str | None:
    """One NCCL name (`Ring`, `LL128`, `RING`) in the plugin's spelling; None for a list, an
    exclusion (`^NVLS`), a per-function form (`allreduce:tree`) or several calls (`+`)."""
    if value is None or missing(value):
        return None
    return names.get(str(value).strip().lower())


def choice(settings: Mapping[str, str], rows: pd.DataFrame) -> Choice:
    """A winner's line: what it pins, else what NCCL chose under it at that size (its rows'
    `nccl_algo`, `nccl_proto`); its channels where it pins them (NCCL_MIN_NCHANNELS =
    NCCL_MAX_NCHANNELS), else its communicators' (`nccl_channels`)."""
    said = rows.dropna(subset=["nccl_algo"]) if "nccl_algo" in rows else rows.iloc[:0]
    algorithm = _single(settings.get("NCCL_ALGO"), ALGORITHMS) or next(
        (a for a in (_single(v, ALGORITHMS) for v in said["nccl_algo"]) if a), None
    )
    protocol = _single(settings.get("NCCL_PROTO"), PROTOCOLS) or next(
        (p for p in (_single(v, PROTOCOLS) for v in said.get("nccl_proto", [])) if p), None
    )
    low, high = settings.get("NCCL_MIN_NCHANNELS"), settings.get("NCCL_MAX_NCHANNELS")
    channels = ANY
    if low is not None and low == high and low.isdigit():
        channels = int(low)
    else:
        known = [int(c) for c in rows["nccl_channels"] if not missing(c)]
        channels = max(known, default=ANY)
    return Choice(algorithm, protocol, channels)


@dataclass(frozen=True)
class Tuning:
    """What `sweeper tune` writes: the CSV's text, the JSON document, what it left out."""

    csv: str
    crossovers: dict[str, Any]
    lines: int
    left_out: tuple[str, ...]


def _reg_buff(launch: str, registered: bool) -> int:
    """NCCL's regBuff for a call: registered buffers, or a graph's capture (NCCL registers
    what a graph captures unless NCCL_GRAPH_REGISTER=0)."""
    return int(bool(registered) or launch == Launch.GRAPH)


def _keyed(table: pd.DataFrame) -> pd.DataFrame:
    names = collectives()
    kind = pd.Series(
        [names.get((str(o), str(a))) for o, a in zip(table["op"], table["algorithm"], strict=True)],
        index=table.index,
        dtype=object,
    )
    keyed = table.assign(
        collective=kind,
        reg_buff=[
            _reg_buff(str(launch), bool(r))
            for launch, r in zip(table["launch"], table["registered"], strict=True)
        ],
    )
    out: pd.DataFrame = keyed[keyed["collective"].notna()]
    return out


def _bounds(sizes: Sequence[int], first: int, last: int) -> tuple[int, int]:
    """The bytes a run of measured sizes `sizes[first..last]` covers: to the geometric middle
    of each neighbouring measured size, the ends of the sweep themselves."""
    low = sizes[first] if first == 0 else math.isqrt(sizes[first - 1] * sizes[first]) + 1
    high = sizes[last] if last == len(sizes) - 1 else math.isqrt(sizes[last] * sizes[last + 1])
    return low, high


def _winner(at: pd.DataFrame) -> str | None:
    """A size's winner: the one `best` every row of the key agrees on, where it is clear
    and not the default."""
    best = set(at["best"])
    if len(best) != 1 or not at["clear"].all() or best == {DEFAULT_VARIANT}:
        return None
    return str(next(iter(best)))


def lines(rows: pd.DataFrame, table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """The CSV's lines (each after a comment saying what it is) and what it could not say.
    Sizes in a row with one winner and one choice make one line."""
    configs = configurations(rows)
    settings = {c.name: dict(c.settings) for c in configs}
    each = configured(rows, configs)
    written: list[str] = []
    left_out: list[str] = []
    for key, part in _keyed(table).groupby(LINE_KEY, sort=True):
        collective, n_nodes, world_size, reg_buff = key
        sizes: list[int] = []
        picks: list[tuple[str, Choice] | None] = []
        for size, at in part.groupby("size_bytes", sort=True):
            sizes.append(int(str(size)))
            winner = _winner(at)
            mine = each[
                (each["config"] == winner)
                & each["op"].isin(at["op"])
                & (each["world_size"] == world_size)
                & (each["size_bytes"] == size)
            ]
            picks.append(None if winner is None else (winner, choice(settings[winner], mine)))
        start = 0
        for end in range(1, len(sizes) + 1):
            if end < len(sizes) and picks[end] == picks[start]:
                continue
            pick = picks[start]
            if pick is not None:
                winner, made = pick
                low, high = _bounds(sizes, start, end - 1)
                what = (
                    f"{collective} {format_size(low)}-{format_size(high)} nodes {n_nodes} "
                    f"ranks {world_size} regBuff {reg_buff}: {winner}"
                )
                why = made.why_not()
                if why is not None:
                    left_out.append(f"{what} ({why})")
                else:
                    measured = part[part["size_bytes"].between(sizes[start], sizes[end - 1])]
                    low_r, high_r = measured["regret"].min(), measured["regret"].max()
                    written.append(f"# {what}, regret {low_r:.2f}-{high_r:.2f}")
                    written.append(
                        f"{collective},{low},{high},{made.algorithm},{made.protocol},"
                        f"{made.channels},{n_nodes},{world_size},{ANY},{reg_buff}"
                    )
            start = end
    return written, left_out


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE else f"{line[: MAX_LINE - 3]}..."


def csv_text(
    runs: Sequence[str], written: Sequence[str], left_out: Sequence[str], compared: bool = True
) -> str:
    head = [
        "# NCCL tuner configuration from sweeper tune: the example plugin's CSV",
        "# collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,"
        "numPipeOps,regBuff",
        f"# runs: {', '.join(runs)}",
        "# the example plugin runs each call no line matches on one channel (docs/TUNING.md):",
        "# measure the tuned variant on every operation you run, beside the default",
    ]
    if not compared:
        head.append("# no NCCL setting was measured beside the default: no line")
    elif not written:
        head.append("# no NCCL setting beat the default beyond noise: no line")
    tail = [f"# not written: {line}" for line in left_out]
    return "\n".join(_clip(line) for line in (*head, *written, *tail)) + "\n"


def _crossovers(points: Iterable[tuple[int, str]]) -> list[dict[str, Any]]:
    """Sizes in order with the best at each -> the largest size of each run of one best."""
    out: list[dict[str, Any]] = []
    for size, best in points:
        if out and out[-1]["use"] == best:
            out[-1]["up_to_bytes"] = size
        else:
            out.append({"up_to_bytes": size, "use": best})
    return out


def algorithm_crossovers(rows: pd.DataFrame, runs: Sequence[str]) -> dict[str, Any]:
    """vLLM-style thresholds for the ways to perform an operation (its algorithms, in the
    first run's default variant): per group, the largest size up to which each wins."""
    first = rows["run_id"] == runs[0]
    default = rows[first & (rows["variant"] == DEFAULT_VARIANT)]
    algorithms: dict[str, list[dict[str, Any]]] = {}
    for op in sorted(set(default["op"])):
        if default[default["op"] == op]["algorithm"].nunique() < 2:
            continue
        # only sizes two ways measured: near the memory bound each way stops at its own size
        ways = candidates(default, op).groupby(KEYS)["candidate"].nunique().rename("ways")
        best = best_per_size(default, op).merge(ways.reset_index(), on=KEYS)
        best = best[best["ways"] > 1]
        for key, part in best.groupby(["tier", "world_size", "dtype"], sort=True):
            tier, world_size, dtype = key
            points = zip(part["size_bytes"], part["best"], strict=True)
            algorithms.setdefault(op, []).append(
                {
                    "tier": str(tier),
                    "world_size": int(str(world_size)),
                    "dtype": str(dtype),
                    "crossovers": _crossovers((int(s), str(b)) for s, b in points),
                }
            )
    return algorithms


def crossovers(rows: pd.DataFrame, table: pd.DataFrame, runs: Sequence[str]) -> dict[str, Any]:
    """The JSON document: the algorithms' thresholds and, per operation and group, the
    largest size up to which each NCCL configuration is the regret's `best`."""
    nccl: dict[str, list[dict[str, Any]]] = {}
    keys = ["tier", "world_size", "n_nodes", "dtype", "engine", "launch"]
    for (op, algorithm), part in table.groupby(["op", "algorithm"], sort=True):
        name = str(op) if algorithm == "native" else f"{op}:{algorithm}"
        for key, line in part.groupby(keys, sort=True):
            ordered = line.sort_values("size_bytes")
            points = zip(ordered["size_bytes"], ordered["best"], strict=True)
            nccl.setdefault(name, []).append(
                {
                    **{k: json_value(v) for k, v in zip(keys, key, strict=True)},
                    "crossovers": _crossovers((int(s), str(b)) for s, b in points),
                }
            )
    model = rows["gpu_model"].dropna()
    version = rows["nccl_version"].dropna()
    return {
        "gpu_model": str(model.iloc[0]) if len(model) else None,
        "nccl_version": str(version.iloc[0]) if len(version) else None,
        "runs": list(runs),
        "algorithms": algorithm_crossovers(rows, runs),
        "nccl": nccl,
    }


def tune(results: Path, run_ids: Sequence[str]) -> Tuning:
    """The tuning the runs' rows give; BadInput where they hold no alternative to NCCL's
    default (a run of its defaults alone)."""
    runs = list(dict.fromkeys(resolve(results, r) for r in run_ids))
    rows = pd.concat([run_rows(results, r) for r in runs], ignore_index=True)
    table = regret(rows)
    if table.empty and not algorithm_crossovers(rows, runs):
        raise BadInput(
            f"sweeper tune {' '.join(runs)}: nothing to choose between: no NCCL configuration "
            "beside the default measured the same points, and no operation several ways",
            hint="run an --nccl-env or --nccl-algos grid, or give the runs of each setting",
        )
    written, left_out = lines(rows, table) if not table.empty else ([], [])
    return Tuning(
        csv=csv_text(runs, written, left_out, compared=not table.empty),
        crossovers=crossovers(rows, table, runs),
        lines=sum(1 for line in written if not line.startswith("#")),
        left_out=tuple(left_out),
    )


def write(tuning: Tuning, out: Path) -> tuple[Path, Path]:
    """The CSV and the JSON, each written whole (`results.files.write_text`)."""
    csv = write_text(out / CSV_NAME, tuning.csv)
    document = write_text(out / JSON_NAME, json.dumps(tuning.crossovers, indent=1) + "\n")
    return csv, document
