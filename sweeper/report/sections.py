"""The report's sections, each built from one run's rows (and its record, and a baseline's
rows where given). A section appears when its data exists: a function returns None
otherwise. Pure, apart from building plotly figure objects.

Where a point was timed both ways (`--launch graph,eager`), the figures and tables show its
CUDA-graph time (`analysis.preferred`), and each says which launch mode it shows; the
eager times are in the launch cost section.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd

from sweeper.analysis import (
    RegressionRule,
    best_per_size,
    candidate,
    candidates,
    fits,
    knobs,
    label,
    launch_costs,
    launch_modes,
    mad_outliers,
    pair_matrices,
    pair_table,
    point_changes,
    preferred,
    summarize,
    tier_name,
    why,
)
from sweeper.analysis.host_copies import host_table
from sweeper.analysis.launches import SMALL_BYTES
from sweeper.analysis.p2p import METRICS, PairMatrix, pair_rows
from sweeper.analysis.summary import EAGER, GRAPH, missing
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Code, Facts, Figure, Section, Table, Text
from sweeper.results.records import RunRecord
from sweeper.topology import Gpu, Node

# The link a tier's traffic crosses, and the Gpu field holding its one-direction peak.
_LINKS = {"nvlink": ("NVLink", "nvlink_gb_per_s"), "pcie": ("PCIe", "pcie_gb_per_s")}
_LINK_LEGEND = (
    "NV#: joined by # NVLinks (directly or through NVSwitches); PIX: one PCIe switch; "
    "PXB: several PCIe switches; PHB: a PCIe host bridge; NODE: host bridges of one NUMA "
    "node; SYS: across NUMA nodes."
)
_MOST_ROWS = 100  # longer tables are cut, saying so
_LAUNCH_WORDS = {GRAPH: "CUDA-graph replays (graph)", EAGER: "eager calls from Python (eager)"}
_ERROR_CHARS = 160
SIG = "sig"  # our own format: 3 significant digits, and whole numbers from 100 up


def _fmt(value: object, spec: str) -> str:
    if missing(value):
        return "-"
    if spec != SIG:
        return format(value, spec)
    number = float(value)  # type: ignore[arg-type]
    return f"{number:,.0f}" if abs(number) >= 100 else f"{number:.3g}"


def _num(value: object, spec: str, css: str = "") -> Cell:
    return Cell(_fmt(value, spec), f"num {css}".strip())


def _size(value: object) -> Cell:
    return Cell("-" if missing(value) else figures.size_label(float(value)), "num")  # type: ignore[arg-type]


def _size_range(sizes: pd.Series) -> str:
    low, high = (figures.size_label(float(s)) for s in (sizes.min(), sizes.max()))
    return low if low == high else f"{low} to {high}"


def _short(message: object) -> Cell:
    full = "" if missing(message) else str(message)
    if len(full) <= _ERROR_CHARS:
        return Cell(full, "wrap")
    return Cell(full[: _ERROR_CHARS - 1] + "…", "wrap", title=full)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], frame.to_dict("records"))


def _labels(frame: pd.DataFrame) -> pd.Series:
    return pd.Series(
        [label(str(o), str(a)) for o, a in zip(frame["op"], frame["algorithm"], strict=True)],
        index=frame.index,
        dtype=object,
    )


def _tier_names(frame: pd.DataFrame) -> pd.Series:
    return pd.Series(
        [tier_name(str(t), str(v)) for t, v in zip(frame["tier"], frame["variant"], strict=True)],
        index=frame.index,
        dtype=object,
    )


def collective_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of operations over a group, swept over sizes (kinds collective and composite):
    not the pair matrices (p2p, copy) nor experiments (MoE), which have sections of theirs."""
    rows: pd.DataFrame = df[df["kind"].isin(["collective", "composite"])]
    return rows


def _table(columns: Iterable[str], rows: Iterable[tuple[Cell, ...]], caption: str = "") -> Table:
    listed = list(rows)
    if len(listed) > _MOST_ROWS:
        caption = f"{caption} (first {_MOST_ROWS} of {len(listed)} rows)".strip()
        listed = listed[:_MOST_ROWS]
    return Table(tuple(columns), tuple(listed), caption)


def _launch_line(launches: pd.Series, names: pd.Series) -> Text:
    """Which launch mode the times shown are, with the names of what is eager where the rest
    are graph replays (copies, a graph capture that failed): 'Times: CUDA-graph replays
    (graph); eager calls from Python (eager) for copy uni.'"""
    graph = (launches == GRAPH).to_numpy(dtype=bool)
    if not graph.any():
        return Text(f"Times: {_LAUNCH_WORDS[EAGER]}.", "muted")
    partly = set(names[graph])
    eager = [
        f"{name} (at some points)" if name in partly else str(name)
        for name in dict.fromkeys(names[~graph])
    ]
    rest = f"; {_LAUNCH_WORDS[EAGER]} for {', '.join(eager)}" if eager else ""
    return Text(f"Times: {_LAUNCH_WORDS[GRAPH]}{rest}.", "muted")


def _table_section(
    id_: str, title: str, columns: Iterable[str], rows: Iterable[tuple[Cell, ...]], intro: str
) -> Section:
    return Section(id_, title, (_table(columns, rows),), intro)


# Run header


def run_header(df: pd.DataFrame, record: RunRecord | None) -> Section:
    first = df.iloc[0]
    started = first["run_started_at"]
    took = (df["measured_at"].max() - started).total_seconds()
    gpus = sorted({u for uuids in df["gpu_uuids"] for u in (uuids if uuids is not None else [])})
    hosts = sorted({h for group in df["hosts"] for h in (group if group is not None else [])})
    facts = [
        ("run", str(first["run_id"])),
        ("kind", str(first["run_kind"])),
        ("started", f"{started:%Y-%m-%d %H:%M:%S} UTC"),
        ("measuring took", f"{took:.0f} s"),
        ("cluster", str(first["cluster_name"])),
        ("hosts", ", ".join(hosts)),
        ("backend", str(first["backend"])),
        ("GPUs", f"{len(gpus)} x {first['gpu_model']}" if gpus else "none (CPU ranks)"),
        ("points", str(len(df))),
        ("launch modes", launch_modes(df["launch"])),
        ("buffers", _buffers(df)),
        ("command", record.command if record else "not recorded"),
    ]
    versions = [
        ("sweeper", first["sweeper_version"]),
        ("Ray", first["ray_version"]),
        ("torch", first["torch_version"]),
        ("NCCL", first["nccl_version"]),
        ("CUDA", first["cuda_version"]),
        ("driver", first["driver_version"]),
    ]
    blocks: list[Block] = [
        Facts(tuple(facts), code=frozenset({"command", "run"})),
        Table(("software", "version"), tuple((Cell(n), Cell(_fmt(v, ""))) for n, v in versions)),
        _nccl_env(df),
        _inventory(record, hosts),
    ]
    if record is not None:
        blocks.append(Code("every option of the run", json.dumps(record.options, indent=1)))
    return Section("run", "Run", tuple(blocks))


def _buffers(df: pd.DataFrame) -> str:
    """Where the points' buffers came from: NCCL's allocator and registered
    (--register-buffers, as nccl-tests' are), or torch's, as a PyTorch program's."""
    if df["gpu_model"].isna().all():
        return "host memory (CPU ranks)"
    if df["registered"].eq(True).any():
        return "NCCL's allocator, registered with each group's communicators"
    return "torch's caching allocator"


def _nccl_env(df: pd.DataFrame) -> Table:
    rows = []
    for variant, group in df.groupby("variant", sort=False):
        env = group["nccl_env"].iloc[0]
        pairs = [f"{k}={v}" for k, v in (env if env is not None else [])]
        rows.append((Cell(str(variant)), Cell(" ".join(pairs) or "none set", "code wrap")))
    return Table(("actor set", "NCCL variables"), tuple(rows), "NCCL variables of each actor set")


def _inventory(record: RunRecord | None, hosts: list[str]) -> Block:
    if record is None:
        return Text(
            "No run record (topology, command line) was saved for this run; hosts from the rows: "
            + ", ".join(hosts)
        )
    gpu_columns = ("GPU", "model", "memory", "PCI bus", "NUMA", "NVLink GB/s", "PCIe GB/s")
    any_gpus = any(node.gpus for node in record.nodes)
    columns = ("node", "host", "CPUs", *(gpu_columns if any_gpus else ("GPUs",)))
    rows: list[tuple[Cell, ...]] = []
    for position, node in enumerate(record.nodes):
        where = (Cell(f"n{position}"), Cell(node.host), _num(node.cpus, "d"))
        if not node.gpus:
            reason = Cell(f"none: no NVML ({node.reason})" if node.reason else "none")
            rows.append((*where, reason, *(Cell("") for _ in columns[len(where) + 1 :])))
        for gpu in node.gpus:
            rows.append(
                (
                    *where,
                    Cell(f"GPU{gpu.index}", title=gpu.uuid),
                    Cell(gpu.name),
                    Cell(f"{gpu.memory_total_bytes / 2**30:.0f} GiB", "num"),
                    Cell(gpu.pci_bus_id, "code"),
                    Cell(_fmt(gpu.numa_node, "")),
                    _num(gpu.nvlink_gb_per_s, ".0f"),
                    _num(gpu.pcie_gb_per_s, ".0f"),
                )
            )
    return Table(columns, tuple(rows), "nodes and GPUs (NVML)")


# Status


def status(df: pd.DataFrame) -> Section:
    counts = df["status"].value_counts()
    unchecked = int(((df["status"] == "ok") & df["n_wrong"].isna()).sum())
    facts = [(str(s), str(int(n))) for s, n in counts.items()]
    if unchecked:
        facts.append(("ok but not checked", str(unchecked)))
    failed = df[df["status"] != "ok"]
    if failed.empty:
        return Section(
            "status",
            "Status",
            (Facts(tuple(facts)), Text(f"Every one of the {len(df)} points ran and was exact.")),
        )
    failed = failed.assign(operation=_labels(failed), error=failed["error"].fillna(""))
    keys = ["group_id", "operation", "dtype", "status", "error"]
    rows = [
        (
            Cell(str(group_id)),
            Cell(str(operation)),
            Cell(str(dtype)),
            Cell(str(state), "bad"),
            _num(len(part), "d"),
            Cell(_size_range(part["size_bytes"])),
            _short(error),
        )
        for (group_id, operation, dtype, state, error), part in failed.groupby(keys, sort=False)
    ]
    columns = ("group", "operation", "dtype", "status", "points", "sizes", "why")
    return Section("status", "Status", (Facts(tuple(facts)), _table(columns, rows)))


# Topology


def topology(record: RunRecord | None) -> Section | None:
    if record is None:
        return None
    blocks: list[Block] = []
    for position, node in enumerate(record.nodes):
        if not node.gpus:
            reason = f" ({node.reason})" if node.reason else ""
            blocks.append(Text(f"n{position} {node.host}: no GPUs seen by NVML{reason}."))
            continue
        names = tuple(f"GPU{gpu.index}" for gpu in node.gpus)
        rows = tuple(
            (Cell(name, "head"), *(Cell(link, _link_css(link)) for link in links))
            for name, links in zip(names, node.links, strict=True)
        )
        blocks.append(Table(("", *names), rows, f"n{position} {node.host}"))
    if any(node.gpus for node in record.nodes):
        blocks.append(Text(_LINK_LEGEND, "muted"))
    return Section(
        "topology", "Topology", tuple(blocks), "Links between GPUs, as nvidia-smi topo -m"
    )


def _link_css(link: str) -> str:
    kind = "nv" if link.startswith("NV") else link.lower()
    return f"link link-{kind}"


def _nodes(record: RunRecord | None) -> tuple[Node, ...]:
    return record.nodes if record else ()


def _gpu_names(df: pd.DataFrame, record: RunRecord | None) -> dict[str, str]:
    """'n0 GPU3' for each GPU the record knows, else the start of its UUID."""
    names = {
        gpu.uuid: f"n{position} GPU{gpu.index}"
        for position, node in enumerate(_nodes(record))
        for gpu in node.gpus
    }
    for uuids in df["gpu_uuids"]:
        for uuid in uuids if uuids is not None else ():
            names.setdefault(str(uuid), str(uuid)[:12])
    return names


def _why_cell(evidence: Sequence[why.Evidence] | None) -> Cell:
    if not evidence:
        return Cell("like its peers", "muted")
    return Cell("; ".join(map(str, evidence)), "bad wrap why")


# GPUs against their peers


def gpus(
    df: pd.DataFrame, record: RunRecord | None, health: why.Health | None = None
) -> Section | None:
    """Each GPU's state over the run (NVML, read around every point) and, for a GPU that
    differs from the others, the evidence."""
    health = health or why.Health.of(df)
    states, evidence = health.states, health.evidence
    if not states:
        return None
    names = _gpu_names(df, record)
    order = sorted(states, key=lambda uuid: (names[uuid], uuid))
    lines = [
        (
            Cell(names[uuid], title=uuid),
            _num(states[uuid].points, "d"),
            _num(states[uuid].sm_clock_mhz, ".0f"),
            _num(states[uuid].power_w, ".0f"),
            _num(states[uuid].power_limit_w, ".0f"),
            _num(states[uuid].temperature_c, ".0f"),
            Cell(states[uuid].link()),
            _why_cell(evidence.get(uuid)),
        )
        for uuid in order
    ]
    columns = ("GPU", "points", "SM clock MHz", "power W", "cap W", "°C", "PCIe link", "why")
    return Section(
        "gpus",
        "GPUs against their peers",
        (_table(columns, lines, "medians over the points that read each GPU"),),
        "What NVML read of each GPU around the points (medians; the PCIe link at the best it "
        "trained to, against the most the GPU and its slot allow) and, where a GPU differs from "
        f"the others, why: an SM clock under {why.CLOCK_SHARE:.0%} of theirs, a throttle reason, "
        f"power at its cap, {why.HOTTER_C:.0f} °C hotter, error counts (NVLink replays, CRC "
        "errors, recoveries, ECC, XIDs), a link trained below its max.",
    )


# Host <-> device


def host(
    df: pd.DataFrame, record: RunRecord | None, health: why.Health | None = None
) -> Section | None:
    table = host_table(df)
    if table.empty:
        return None
    names = _gpu_names(df, record)
    health = health or why.Health.of(df)
    states, evidence = health.states, health.evidence
    table = table.assign(
        name=table["gpu_uuid"].map(names),
        # a GPU whose pinned copies fall short of the other GPUs' in the same direction
        outlier=mad_outliers(table["pinned_gb_per_s"], table["copy"], "low"),
    ).sort_values(["name"], kind="stable")

    def why_cell(uuid: str, outlier: bool) -> Cell:
        """The link's evidence where it has some; else, for a copy that falls short, the
        GPU's whole line (or that nothing NVML reads explains it)."""
        found = evidence.get(uuid, [])
        link = [e for e in found if e.topic == "pcie"]
        if link or not outlier:
            return _why_cell(link)
        if found:
            return _why_cell(found)
        return Cell("slower than the other GPUs; nothing NVML reads differs", "bad wrap why")

    lines = [
        (
            Cell(str(r["name"]), title=str(r["gpu_uuid"])),
            Cell(str(r["copy"])),
            _size(r["size_bytes"]),
            _num(r["alongside"], "d"),
            _num(r["pinned_gb_per_s"], SIG, "bad" if r["outlier"] else ""),
            _num(r["pinned_pct_of_peak"], ".0f", "bad" if r["outlier"] else ""),
            _num(r["pageable_gb_per_s"], SIG),
            _num(r["pageable_pct_of_peak"], ".0f"),
            Cell(states[r["gpu_uuid"]].link() if r["gpu_uuid"] in states else "-"),
            why_cell(str(r["gpu_uuid"]), bool(r["outlier"])),
        )
        for r in _records(table)
    ]
    columns = (
        "GPU",
        "copy",
        "size",
        "alongside",
        "pinned GB/s",
        "% of PCIe peak",
        "pageable GB/s",
        "% of PCIe peak",
        "PCIe link",
        "why",
    )
    return _table_section(
        "host",
        "Host <-> device",
        columns,
        lines,
        "Each GPU's copies to and from host memory at the largest size, pinned (the copy "
        "engines read it directly) and pageable (staged through a bounce buffer): algorithm "
        "bandwidth and its share of the GPU's PCIe peak (NVML's max generation x width, one "
        "direction); alongside: other GPUs of its group copying at the same time. The link is "
        "as trained during the points, against the most the GPU and its slot allow.",
    )


# Per operation


def _series(rows: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Lines of a figure: one per group, and per dtype where the run has several."""
    several = rows["dtype"].nunique() > 1
    for (group_id, dtype), part in rows.groupby(["group_id", "dtype"], sort=False):
        name = f"{group_id} {dtype}" if several else str(group_id)
        yield name, part.sort_values("size_bytes")


def operations(df: pd.DataFrame, record: RunRecord | None = None) -> Section | None:
    rows = preferred(collective_rows(df))
    rows = rows[rows["status"] == "ok"]
    if rows.empty:
        return None
    rows = rows.assign(operation=_labels(rows))
    blocks: list[Block] = [
        _launch_line(rows["launch"], rows["operation"]),
        *(
            Figure(figures.series_figure(list(_series(part)), str(operation)))
            for operation, part in rows.groupby("operation", sort=False)
        ),
    ]
    off = why.off_neighbours(rows, _gpu_names(df, record))
    if not off.empty:
        lines = [
            (
                Cell(str(r["group_id"])),
                Cell(str(r["operation"])),
                Cell(str(r["dtype"])),
                Cell(str(r["launch"])),
                _size(r["size_bytes"]),
                _num(r["time_us"], SIG, "bad"),
                _num(r["expected_us"], SIG),
                Cell(str(r["why"]), "wrap why"),
            )
            for r in _records(off)
        ]
        columns = ("group", "operation", "dtype", "launch", "size", "time us", "neighbours' us")
        caption = (
            f"points more than {why.OFF_FACTOR:g}x off the line through their neighbours "
            "(log axes); why: their GPUs' readings against those at the neighbouring sizes"
        )
        blocks.append(_table((*columns, "why"), lines, caption))
    return Section(
        "operations",
        "Bandwidth and latency by operation",
        tuple(blocks),
        "Bus bandwidth (nccl-tests' busbw) and time per operation against size S, one line "
        "per group; log axes. Failed points are left out (see Status).",
    )


# Peaks


@dataclass(frozen=True)
class _Link:
    name: str
    peak_gb_per_s: float | None


def _link_peaks(df: pd.DataFrame, record: RunRecord | None) -> dict[tuple[str, int], _Link]:
    """The link each tier and group size crosses, and its one-direction peak: that of the
    slowest GPU of its groups (NVLink: all its links together; PCIe: generation x width)."""
    by_uuid: dict[str, Gpu] = {
        gpu.uuid: gpu for node in (record.nodes if record else ()) for gpu in node.gpus
    }
    out: dict[tuple[str, int], _Link] = {}
    keys = ["tier", "variant", "world_size"]
    for _, part in df.groupby(keys, sort=False):
        tier, variant, world_size = (part[key].iloc[0] for key in keys)
        if str(tier) not in _LINKS:
            continue
        name, field = _LINKS[str(tier)]
        uuids = {u for uuids in part["gpu_uuids"] for u in (uuids if uuids is not None else [])}
        speeds = [getattr(by_uuid[u], field) for u in uuids if u in by_uuid]
        known = [s for s in speeds if s]
        peak = min(known) if known and len(known) == len(uuids) else None
        out[(tier_name(str(tier), str(variant)), int(world_size))] = _Link(name, peak)
    return out


def peaks(df: pd.DataFrame, record: RunRecord | None) -> Section | None:
    rows = collective_rows(df)
    if rows.empty:
        return None
    links = _link_peaks(rows, record)
    known = any(link.peak_gb_per_s for link in links.values())  # else no link columns
    table = []
    for s in summarize(_records(preferred(rows))):
        link = links.get((s.tier, s.world_size))
        peak = link.peak_gb_per_s if link else None
        share = (
            100 * s.peak_busbw_gb_per_s / peak
            if peak and s.peak_busbw_gb_per_s is not None
            else None
        )
        against = (Cell(link.name if link else "-"), _num(peak, ".0f"), _num(share, ".0f"))
        table.append(
            (
                Cell(s.tier),
                _num(s.world_size, "d"),
                Cell(s.label),
                Cell(s.launch),
                _num(s.points, "d"),
                _num(s.failed, "d", "bad" if s.failed else ""),
                _num(s.peak_busbw_gb_per_s, SIG),
                _size(s.peak_size_bytes),
                *(against if known else ()),
                _num(s.min_time_us, SIG),
                _size(s.min_time_size_bytes),
            )
        )
    measured = ("tier", "ranks", "operation", "launch", "points", "failed", "peak busbw GB/s", "at")
    link_columns = ("link", "link peak GB/s", "% of link") if known else ()
    return _table_section(
        "peaks",
        "Peaks",
        (*measured, *link_columns, "min time us", "at"),
        table,
        "Peak bus bandwidth and smallest time per tier, group size and operation, from its "
        "CUDA-graph replays where a point was timed both ways. The link "
        "peak is one direction of the slowest GPU's link as NVML reports it (NVLink: links x "
        "speed; PCIe: generation x width), where known.",
    )


# Launch cost


def launch_cost(df: pd.DataFrame) -> Section | None:
    table = launch_costs(df)
    if table.empty:
        return None
    lines = [
        (
            Cell(str(r["tier"])),
            _num(r["world_size"], "d"),
            Cell(str(r["operation"])),
            _size(r["size_bytes"]),
            _num(r["graph_time_us"], SIG),
            _num(r["eager_time_us"], SIG),
            _num(r["cost_us"], SIG),
            _num(r["small_cost_us"], SIG),
            _num(r["small_sizes"], "d"),
        )
        for r in _records(table)
    ]
    small = figures.size_label(SMALL_BYTES)
    columns = ("tier", "ranks", "operation", "size", "graph us", "eager us", "eager - graph us")
    return _table_section(
        "launch",
        "Launch cost",
        (*columns, f"median to {small} us", f"sizes to {small}"),
        lines,
        "What issuing each call from Python adds to its time: the eager time minus the "
        "CUDA-graph replay's, for the points timed both ways (--launch graph,eager). At the "
        f"smallest such size, and the median over the sizes up to {small}, where this fixed "
        "cost is most of an operation's time; the groups of a tier and size by their median.",
    )


# Peer to peer


def _rank_labels(df: pd.DataFrame, record: RunRecord | None) -> dict[int, str]:
    """'n0 GPU3' for each rank whose GPU the record knows, else 'rank 5'."""
    where = {
        gpu.uuid: f"n{position} GPU{gpu.index}"
        for position, node in enumerate(record.nodes if record else ())
        for gpu in node.gpus
    }
    out: dict[int, str] = {}
    for rank_column, uuid_column in (("src_rank", "src_gpu_uuid"), ("dst_rank", "dst_gpu_uuid")):
        for rank, uuid in zip(df[rank_column], df[uuid_column], strict=True):
            if not missing(rank):
                out.setdefault(int(rank), where.get(str(uuid), f"rank {int(rank)}"))
    return out


def _matrix_title(matrix: PairMatrix) -> str:
    how = "concurrently" if matrix.concurrent else "one pair at a time"
    what = "bandwidth (GB/s)" if matrix.metric == "bandwidth" else "latency (us)"
    size = figures.size_label(matrix.size_bytes)
    return f"{matrix.op} {matrix.algorithm}, {how}: {what} at {size}"


def p2p(
    df: pd.DataFrame, record: RunRecord | None, health: why.Health | None = None
) -> Section | None:
    rows = pair_rows(df)
    if rows.empty:
        return None
    names = _rank_labels(rows, record)
    shown = preferred(rows)
    transfers = shown["op"].astype(str) + " " + shown["algorithm"].astype(str)
    blocks: list[Block] = [_launch_line(shown["launch"], transfers)]
    for matrix in pair_matrices(rows):
        labels = [names.get(int(rank), f"rank {rank}") for rank in matrix.values.index]
        blocks.append(Figure(figures.heatmap(matrix, labels, _matrix_title(matrix)), half=True))
    outliers = []
    gpu_names, nodes = _gpu_names(df, record), _nodes(record)
    evidence = (health or why.Health.of(df)).evidence
    uuid_of = {
        int(rank): str(uuid)
        for column in ("src", "dst")
        for rank, uuid in zip(rows[f"{column}_rank"], rows[f"{column}_gpu_uuid"], strict=True)
        if not missing(rank) and not missing(uuid)
    }
    for (op, algorithm), part in rows.groupby(["op", "algorithm"], sort=True):
        for metric in METRICS:
            table = pair_table(part, str(op), str(algorithm), metric)
            median = table.groupby(["tier", "concurrent"])["value"].transform("median")
            routes = [
                why.route_label(nodes, uuid_of.get(int(a), ""), uuid_of.get(int(b), ""))
                for a, b in zip(table["src_rank"], table["dst_rank"], strict=True)
            ]
            for index in table.index[table["outlier"]]:
                pair = table.loc[index]
                same_tier = table["tier"] == pair["tier"]
                line = why.pair_line(
                    nodes,
                    uuid_of.get(int(pair["src_rank"]), ""),
                    uuid_of.get(int(pair["dst_rank"]), ""),
                    [r for r, same in zip(routes, same_tier, strict=True) if same],
                    evidence,
                    gpu_names,
                )
                outliers.append(
                    (
                        Cell(f"{op} {algorithm}"),
                        Cell(metric),
                        Cell(f"{names[int(pair['src_rank'])]} -> {names[int(pair['dst_rank'])]}"),
                        Cell(str(pair["tier"])),
                        Cell("yes" if pair["concurrent"] else "no"),
                        _num(pair["value"], SIG, "bad"),
                        _num(median[index], SIG),
                        Cell(line, "wrap why"),
                    )
                )
    columns = ("transfer", "metric", "pair", "tier", "concurrent", "value", "tier median", "why")
    if outliers:
        blocks.append(_table(columns, outliers, "outliers: more than 3 MADs worse than their tier"))
    else:
        blocks.append(Text("No pair is more than 3 MADs worse than the median of its tier."))
    for fan in why.fanouts(rows, nodes):
        size = figures.size_label(fan.size_bytes)
        blocks.append(Text(why.fanout_sentence(fan, gpu_names, size), "why"))
    return Section(
        "p2p",
        "Peer to peer",
        tuple(blocks),
        "Every ordered pair of GPUs: bandwidth at the largest size and latency at the smallest, "
        "for each kind of transfer. Outliers (ringed in red) are more than 3 MADs worse than "
        "the median of their tier.",
    )


# Algorithms


def _way(op: str, name: str) -> str:
    """A candidate's name without its operation, which the table's caption gives:
    native, native [algo=Ring], reduce_scatter+all_gather."""
    rest = name.removeprefix(op).strip()
    if not rest or rest.startswith("["):
        return f"native {rest}".strip()
    return rest.removeprefix("(").replace(")", "", 1)


def algorithms(df: pd.DataFrame) -> Section | None:
    rows = collective_rows(df)
    blocks: list[Block] = []
    compared = []
    for op in dict.fromkeys(rows["op"]):
        table = candidates(rows, str(op))
        if table["candidate"].nunique() < 2:
            continue
        compared.append(op)
        best = best_per_size(rows, str(op)).set_index(["tier", "world_size", "dtype", "size_bytes"])
        for (tier, world_size, dtype), part in table.groupby(
            ["tier", "world_size", "dtype"], sort=False
        ):
            wide = part.pivot_table(
                index="size_bytes", columns="candidate", values="busbw_gb_per_s", sort=False
            )
            names = list(dict.fromkeys(part["candidate"]))
            short = {name: _way(str(op), name) for name in names}
            lines = []
            for size, values in wide[names].iterrows():
                winner = best.loc[(tier, world_size, dtype, size)]
                # the answer first: with many ways the table scrolls sideways
                lines.append(
                    (
                        _size(size),
                        Cell(short[str(winner["best"])]),
                        _num(winner["speedup"], ".2f"),
                        *(
                            _num(values[n], SIG, "best" if n == winner["best"] else "")
                            for n in names
                        ),
                    )
                )
            caption = f"{op} on {tier} x{world_size}, {dtype}: bus bandwidth (GB/s)"
            headers = ("size", "best", "speedup", *(short[n] for n in names))
            blocks.append(_table(headers, lines, caption))
    if not blocks:
        return None
    shown = preferred(rows[rows["op"].isin(compared)])
    shown = shown[shown["status"] == "ok"]
    ways = pd.Series(
        [
            candidate(str(o), str(a), str(v))
            for o, a, v in zip(shown["op"], shown["algorithm"], shown["variant"], strict=True)
        ],
        index=shown.index,
        dtype=object,
    )
    return Section(
        "algorithms",
        "Algorithms",
        (_launch_line(shown["launch"], ways), *blocks),
        "Every way an operation was performed, side by side, the fastest per size marked; "
        "speedup is the best's bus bandwidth over the default's (torch.distributed's own "
        "call, NCCL's choice of algorithm).",
    )


# Swept NCCL variables


def nccl_variables(df: pd.DataFrame) -> list[Section]:
    """A section per swept NCCL variable (--nccl-env): for each operation, busbw against size
    with a line per value and NCCL's default, and at the judged sizes the best value and its
    gain over the default."""
    rows = preferred(collective_rows(df))
    rows = rows[rows["status"] == "ok"]
    sets = knobs.swept(rows)
    found = []
    for variable in dict.fromkeys(sets["variable"]):
        curves = knobs.lines(rows, sets, str(variable))
        blocks: list[Block] = [_launch_line(rows["launch"], rows["op"])]
        for (operation, tier, world_size, dtype), curve in curves.groupby(
            knobs.LINE_KEYS, sort=False
        ):
            if curve["line"].nunique() < 2:  # every value skipped here: nothing to compare
                continue
            where = f"{operation} on {tier} x{world_size}, {dtype}"
            series = [
                (str(line), part.sort_values("size_bytes"))
                for line, part in curve.groupby("line", sort=False)
            ]
            blocks.append(Figure(figures.series_figure(series, f"{variable}: {where}")))
            table = [
                (
                    _size(r["size_bytes"]),
                    Cell(str(r["best"]), "code"),
                    _num(r["busbw_gb_per_s"], SIG),
                    _num(r["default_busbw_gb_per_s"], SIG),
                    _num(r["gain"], ".2f", "good" if r["gain"] > 1 else "bad"),
                )
                for r in _records(knobs.best_values(curve))
            ]
            columns = ("size", "best value", "busbw GB/s", "default busbw GB/s", "gain")
            blocks.append(_table(columns, table, f"{variable}: {where}"))
        if len(blocks) > 1:
            found.append(
                Section(
                    f"nccl-{str(variable).removeprefix('NCCL_').lower().replace('_', '-')}",
                    f"NCCL variable {variable}",
                    tuple(blocks),
                    f"Bus bandwidth against size with {variable} at each value swept "
                    "(--nccl-env), each on an actor set of its own, and NCCL's default "
                    "(nothing set); other swept variables' values in brackets. The tables "
                    "give, at sizes 16x apart, the best value and its gain: its busbw over "
                    "the default's (below 1, NCCL's own choice was faster). Medians over the "
                    "groups of a tier and size.",
                )
            )
    return found


# Composites


def composites(df: pd.DataFrame) -> Section | None:
    rows = collective_rows(df)
    rows = rows[rows["status"] == "ok"]
    built = rows[rows["kind"] == "composite"]
    if built.empty:
        return None
    # against the native call in the same launch mode, and the graph pair where both ran
    keys = ["group_id", "op", "dtype", "size_bytes", "launch"]
    native = rows[(rows["kind"] == "collective") & (rows["algorithm"] == "native")]
    native = native[[*keys, "busbw_gb_per_s"]]
    joined = preferred(built.merge(native, on=keys, suffixes=("", "_native")))
    if joined.empty:
        return None
    joined = joined.assign(
        ratio=joined["busbw_gb_per_s"] / joined["busbw_gb_per_s_native"],
        operation=_labels(joined),
    )
    several = joined["dtype"].nunique() > 1
    series = [
        (
            f"{operation} {group_id}" + (f" {dtype}" if several else ""),
            part.sort_values("size_bytes"),
        )
        for (operation, group_id, dtype), part in joined.groupby(
            ["operation", "group_id", "dtype"], sort=False
        )
    ]
    figure = figures.ratio_figure(series, "composites against native", "busbw / native busbw")
    return Section(
        "composites",
        "Composites against native",
        (_launch_line(joined["launch"], joined["operation"]), Figure(figure)),
        "An operation built from two others (all_reduce as reduce_scatter then all_gather, or "
        "reduce then broadcast), as a fraction of the native call's bus bandwidth at each size, "
        "both in the same launch mode: below 1, the native call is faster.",
    )


# MoE and other experiments with parameters


def experiments(df: pd.DataFrame) -> Section | None:
    rows = preferred(df[df["kind"] == "experiment"])
    if rows.empty:
        return None
    rows = rows.assign(
        operation=_labels(rows),
        knobs=[" ".join(f"{k}={v}" for k, v in sorted(p or ())) for p in rows["params"]],
    )
    lines = [
        (
            Cell(str(r["group_id"])),
            Cell(str(r["operation"])),
            Cell(str(r["knobs"]), "code"),
            Cell(str(r["dtype"])),
            _size(r["size_bytes"]),
            Cell(str(r["launch"])),
            _num(r["time_us"], SIG),
            _num(r["busbw_gb_per_s"], SIG),
            Cell(str(r["status"]), "" if r["status"] == "ok" else "bad"),
        )
        for r in _records(rows.sort_values(["operation", "group_id", "knobs", "size_bytes"]))
    ]
    columns = (
        "group",
        "operation",
        "parameters",
        "dtype",
        "size",
        "launch",
        "time us",
        "busbw GB/s",
        "status",
    )
    return _table_section(
        "experiments",
        "Mixture-of-experts and other experiments",
        columns,
        lines,
        "Operations measured with parameters of their own (MoE dispatch and combine: tokens, "
        "hidden size, top-k, experts, routing skew, seed).",
    )


# Largest sizes


def max_sizes(df: pd.DataFrame) -> Section | None:
    rows = collective_rows(df)
    if rows["max_size_bytes"].isna().all():
        return None
    rows = rows.assign(operation=_labels(rows), tier=_tier_names(rows))
    per_series = rows.groupby(["tier", "world_size", "operation", "dtype", "group_id"], sort=False)
    series = per_series.agg(
        limit=("max_size_bytes", "min"),
        probe_s=("probe_s", "max"),  # each row: the series' probing so far
        largest_ok=("size_bytes", lambda s: s[rows.loc[s.index, "status"] == "ok"].max()),
    ).reset_index()
    lines = [
        (
            Cell(str(tier)),
            _num(world_size, "d"),
            Cell(str(operation)),
            Cell(str(dtype)),
            _size(part["limit"].min()),
            _size(part["largest_ok"].min()),
            _num(part["probe_s"].sum(min_count=1), SIG),
        )
        for (tier, world_size, operation, dtype), part in series.groupby(
            ["tier", "world_size", "operation", "dtype"], sort=False
        )
    ]
    columns = ("tier", "ranks", "operation", "dtype", "limit", "largest ok", "probing s")
    return _table_section(
        "max-size",
        "Largest sizes",
        columns,
        lines,
        "Each series' limit (with --max-size auto: the largest S that fits every rank's memory, "
        "probed), the largest size that ran, and the time the probing took; the smallest over "
        "the groups of a tier and size.",
    )


# Fits


def alpha_beta(df: pd.DataFrame) -> Section | None:
    table = fits(collective_rows(df))
    if table.empty:
        return None
    lines = [
        (
            Cell(str(r["tier"])),
            _num(r["world_size"], "d"),
            Cell(str(r["operation"])),
            Cell(str(r["launch"])),
            _num(r["alpha_us"], SIG),
            _num(r["beta_gb_per_s"], SIG)
            if math.isfinite(r["beta_gb_per_s"])
            else Cell("-", "num"),
            _num(100 * r["rel_error"], ".0f"),
            _num(r["points"], "d"),
        )
        for r in _records(table)
    ]
    columns = (
        "tier",
        "ranks",
        "operation",
        "launch",
        "alpha us",
        "beta GB/s",
        "median error %",
        "points",
    )
    return _table_section(
        "fits",
        "Latency and bandwidth fits",
        columns,
        lines,
        "time = alpha + S / beta, fitted per tier, group size and operation (robust, on "
        "relative error) to its CUDA-graph replays where a point was timed both ways: alpha "
        "is the fixed cost of a call, beta the rate the time grows with S (algorithm "
        "bandwidth, not busbw).",
    )


# Baseline


def baseline(base: pd.DataFrame, new: pd.DataFrame) -> Section:
    rule = RegressionRule()
    changes = point_changes(base, new, rule)
    changes = changes.assign(operation=_labels(changes))
    several = changes["launch"].nunique() > 1  # then each point's launch mode is named
    both = changes[changes["present"] == "both"]
    facts = (
        ("baseline run", str(base["run_id"].iloc[0])),
        ("points compared", str(len(both))),
        ("regressions", str(int(changes["regression"].sum()))),
        ("improvements", str(int(changes["improvement"].sum()))),
        ("only in the baseline", str(int((changes["present"] == "base").sum()))),
        ("only in this run", str(int((changes["present"] == "new").sum()))),
    )
    blocks: list[Block] = [
        Facts(facts, code=frozenset({"baseline run"})),
        Text(
            f"Launch modes: {launch_modes(changes['launch'])}; each point is compared with the "
            "baseline's point of the same launch mode.",
            "muted",
        ),
    ]
    plotted = both[both["busbw_change"].notna()]
    if several:
        plotted = plotted.assign(operation=plotted["operation"] + ", " + plotted["launch"])
    if not plotted.empty:
        blocks.append(Figure(figures.change_figure(plotted)))
    notable = changes[changes["regression"] | changes["improvement"]]
    # Worst first; changes equal to a tenth of a percent read as one, then in a stable order.
    notable = notable.assign(order=notable["busbw_change"].round(3)).sort_values(
        ["order", "operation", "group_id", "dtype", "size_bytes"], na_position="first"
    )
    lines = [
        (
            Cell(str(r["group_id"])),
            Cell(str(r["operation"])),
            Cell(str(r["dtype"])),
            _size(r["size_bytes"]),
            *((Cell(str(r["launch"])),) if several else ()),
            _num(r["base_busbw_gb_per_s"], SIG),
            _num(r["new_busbw_gb_per_s"], SIG),
            _num(100 * r["busbw_change"], "+.1f", "bad" if r["regression"] else "good"),
            _num(r["p_value"], ".2g"),
            Cell(
                f"{r['base_status']} -> {r['new_status']}",
                "" if r["new_status"] == "ok" else "bad",
            ),
        )
        for r in _records(notable)
    ]
    if lines:
        point = ("group", "operation", "dtype", "size", *(("launch",) if several else ()))
        columns = (*point, "base busbw", "busbw", "change %", "p", "status")
        blocks.append(_table(columns, lines, "regressions and improvements"))
    else:
        blocks.append(Text("No point regressed or improved beyond the threshold."))
    return Section(
        "baseline",
        "Against the baseline",
        tuple(blocks),
        "Each point's bus bandwidth against the same point of the baseline run. A regression "
        f"lost at least {rule.threshold:.0%} of it (and, where both runs kept samples, a "
        f"Mann-Whitney test gives p < {rule.alpha:g}), or failed only now.",
    )


def build(df: pd.DataFrame, record: RunRecord | None, base: pd.DataFrame | None) -> list[Section]:
    """Every section that has data, in reading order."""
    health = why.Health.of(df)  # every GPU's readings, read once for the sections that show them
    found = [
        run_header(df, record),
        status(df),
        topology(record),
        gpus(df, record, health),
        operations(df, record),
        peaks(df, record),
        launch_cost(df),
        p2p(df, record, health),
        host(df, record, health),
        algorithms(df),
        *nccl_variables(df),
        composites(df),
        experiments(df),
        max_sizes(df),
        alpha_beta(df),
        baseline(base, df) if base is not None else None,
    ]
    return [section for section in found if section is not None]
