"""Why an outlier is one: for each GPU, pair or point that stands out, the evidence that differs
from its peers, as one line a person can act on.

The NVML readings every GPU row carries (`sweeper.telemetry`) are gathered per GPU (`State`). A
GPU is compared with the run's others (`GpuHealth`), a matrix pair with its tier (`pair_line`),
a point with its series' neighbours (`off_neighbours`), and a fan-out's destinations with each
other (`fanout_sentence`). Each threshold below states its reason; docs/PERFORMANCE.md, "Why an
outlier is one", lists them. Pure: DataFrames in, text out; no Ray, no torch."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

import numpy as np
import pandas as pd

from sweeper.analysis.launches import preferred
from sweeper.analysis.summary import label, missing
from sweeper.results.schema import CURVE
from sweeper.telemetry import COLUMNS
from sweeper.topology import Node
from sweeper.wire import Status

# A clock this far below its peers' median is evidence: healthy GPUs of one model under the
# same load boost to within a few tens of MHz of each other (a 1.98 GHz H200 against 1.41).
CLOCK_SHARE = 0.95
# Power within 3% of the enforced limit is at the cap: the SW power cap then holds clocks.
CAP_SHARE = 0.97
# Hotter than its peers by this much: a fan, an airflow or a heatsink problem in the making.
HOTTER_C = 10.0
# A throttle reason counts when active in at least half a GPU's points (and fewer of its
# peers'): one reading just after a burst can catch a transient reason.
REASON_SHARE = 0.5
# A point this many times slower than the line through its neighbours (log axes) is off:
# NCCL's protocol and algorithm changes bend the curve, they do not double it.
OFF_FACTOR = 2.0
# gpu_idle says the GPU had nothing to do when read (between short points): not evidence.
_NOT_EVIDENCE = frozenset({"gpu_idle"})
# NVML's throttle reasons (telemetry.THROTTLE_REASONS) in words.
REASON_WORDS = {
    "sw_power_cap": "power cap",
    "hw_slowdown": "hardware slowdown",
    "sync_boost": "sync boost (held to a slower GPU of its group)",
    "sw_thermal_slowdown": "thermal (software)",
    "hw_thermal_slowdown": "thermal (hardware)",
    "hw_power_brake_slowdown": "power brake",
    "applications_clocks_setting": "application clocks set",
    "display_clock_setting": "display clock",
}
# nvidia-smi topo -m's labels (topology.Node.links) as the route a pair's traffic takes.
ROUTE_WORDS = {
    "PIX": "PCIe through one switch, no NVLink",
    "PXB": "PCIe through several switches, no NVLink",
    "PHB": "PCIe through the host bridge, no NVLink",
    "NODE": "PCIe between host bridges of one NUMA node, no NVLink",
    "SYS": "PCIe and the link between CPU sockets, no NVLink",
}
# The telemetry columns read as evidence: all but the memory clock, which no evidence here
# compares.
TELEMETRY = [c for c in COLUMNS if c != "mem_clock_mhz"]
READING_COLUMNS = ["row", "gpu_uuid", *TELEMETRY]
_COUNTER_COLUMNS = {  # State field: the per-point column it sums
    "nvlink_replays": "nvlink_replay_delta",
    "nvlink_crc": "nvlink_crc_delta",
    "nvlink_recoveries": "nvlink_recovery_delta",
    "ecc_corrected": "ecc_corrected_delta",
    "ecc_uncorrected": "ecc_uncorrected_delta",
}
# Error counters (State fields) by what counts them, each with its singular and plural.
_COUNTERS = {
    "NVLink": (
        ("nvlink_replays", "replay", "replays"),
        ("nvlink_crc", "CRC error", "CRC errors"),
        ("nvlink_recoveries", "recovery", "recoveries"),
    ),
    "ECC": (
        ("ecc_corrected", "corrected error", "corrected errors"),
        ("ecc_uncorrected", "uncorrected error", "uncorrected errors"),
    ),
}


def readings(rows: pd.DataFrame) -> pd.DataFrame:
    """One record per (row, GPU) that has a reading: the row's index (`row`), the GPU's
    UUID and each telemetry column's value for it. Rows without telemetry (CPU ranks, failed
    points, copy-engine rows) and ranks whose GPU is unknown give none. Built a column at a
    time: a run of 100k rows on 8 GPUs is 800k readings."""
    frame = rows[["gpu_uuids", *TELEMETRY]]
    frame = frame[frame["gpu_uuids"].notna() & frame[TELEMETRY].notna().any(axis=1)]
    widths = [len(uuids) for uuids in frame["gpu_uuids"]]
    columns: dict[str, Any] = {
        "row": np.repeat(frame.index.to_numpy(), widths),
        "gpu_uuid": [str(uuid) for uuids in frame["gpu_uuids"] for uuid in uuids],
    }
    for column in TELEMETRY:
        columns[column] = [
            value
            for cell, width in zip(frame[column], widths, strict=True)
            for value in _spread(cell, width)
        ]
    found = pd.DataFrame(columns).reindex(columns=READING_COLUMNS)
    kept: pd.DataFrame = found.dropna(subset=TELEMETRY, how="all").reset_index(drop=True)
    return kept


def _spread(cell: Any, width: int) -> list[Any]:
    """A per-rank list cell as `width` values (None where the row has none, or is short;
    a rank Parquet read back as NaN stays NaN: the readers take both as missing)."""
    if missing(cell):
        return [None] * width
    values = list(cell)
    return values if len(values) == width else (values + [None] * width)[:width]


def _numbers(values: pd.Series) -> pd.Series:
    """A column of readings as floats, NaN where a rank could not read it."""
    return pd.to_numeric(values, errors="coerce").astype("float64")


def _median(values: pd.Series) -> float | None:
    found = _numbers(values).median()
    return None if pd.isna(found) else float(found)


def _total(values: pd.Series) -> int:
    return int(_numbers(values).sum())


def _best(values: pd.Series) -> int | None:
    found = _numbers(values).max()
    return None if pd.isna(found) else int(found)


@dataclass(frozen=True)
class State:
    """What NVML read of one GPU over some points (one point, or a whole run): medians of
    its state, the share of points each throttle reason was active in, its error counters
    summed, and its PCIe link at the best it trained to against the most it could."""

    points: int
    sm_clock_mhz: float | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: float | None
    reasons: Mapping[str, float]  # reason -> share of the points it was active in
    nvlink_replays: int
    nvlink_crc: int
    nvlink_recoveries: int
    ecc_corrected: int
    ecc_uncorrected: int
    xids: tuple[int, ...]
    counted_points: Mapping[str, int]  # counter (a field above) -> points in which it gained
    # the best the link trained to over the points: an idle GPU trains its generation down
    # between points, so a single low reading is not a link that came up short
    pcie_gen: int | None
    pcie_width: int | None
    pcie_max_gen: int | None
    pcie_max_width: int | None

    @property
    def at_cap(self) -> bool:
        if self.power_w is None or not self.power_limit_w:
            return False
        return self.power_w >= CAP_SHARE * self.power_limit_w

    def link(self) -> str:
        """'Gen5 x8 of Gen5 x16', or what of it is known; '-' where nothing is."""
        now = _link(self.pcie_gen, self.pcie_width)
        most = _link(self.pcie_max_gen, self.pcie_max_width)
        if now and most:
            return f"{now} of {most}"
        return now or most or "-"


def _link(gen: int | None, width: int | None) -> str:
    return " ".join(p for p in (f"Gen{gen}" if gen else "", f"x{width}" if width else "") if p)


def state(gpu_readings: pd.DataFrame) -> State:
    """One GPU's State over the readings given (records of `readings`)."""
    reasons: dict[str, float] = {}
    lists = [r for r in gpu_readings["throttle_reasons"] if not missing(r)]
    for names in lists:
        for name in names:
            reasons[str(name)] = reasons.get(str(name), 0.0) + 1 / len(lists)
    codes = [c for c in gpu_readings["xid_codes"] if not missing(c)]
    xids = sorted({int(x) for raised in codes for x in raised})
    return State(
        points=len(gpu_readings),
        sm_clock_mhz=_median(gpu_readings["sm_clock_mhz"]),
        power_w=_median(gpu_readings["power_w"]),
        power_limit_w=_median(gpu_readings["power_limit_w"]),
        temperature_c=_median(gpu_readings["temperature_c"]),
        reasons=reasons,
        xids=tuple(xids),
        **{field: _total(gpu_readings[column]) for field, column in _COUNTER_COLUMNS.items()},
        counted_points={
            field: int((_numbers(gpu_readings[column]) > 0).sum())
            for field, column in _COUNTER_COLUMNS.items()
        },
        pcie_gen=_best(gpu_readings["pcie_gen"]),
        pcie_width=_best(gpu_readings["pcie_width"]),
        pcie_max_gen=_best(gpu_readings["pcie_max_gen"]),
        pcie_max_width=_best(gpu_readings["pcie_max_width"]),
    )


def states(rows: pd.DataFrame) -> dict[str, State]:
    """Each GPU's State over every row of `rows` that read it, by UUID."""
    found = readings(rows)
    return {str(uuid): state(part) for uuid, part in found.groupby("gpu_uuid", sort=False)}


def _peer_median(peers: Sequence[State], field: str) -> float | None:
    known = [float(v) for p in peers if (v := getattr(p, field)) is not None]
    return median(known) if known else None


def _ghz(mhz: float) -> str:
    return f"{mhz / 1e3:.2f} GHz"


Topic = Literal["clock", "throttle", "power", "temperature", "errors", "pcie"]


@dataclass(frozen=True)
class Evidence:
    """One thing that sets a GPU apart, and what it bears on (a host copy reads `pcie`)."""

    topic: Topic
    text: str

    def __str__(self) -> str:
        return self.text


def differences(this: State, peers: Sequence[State]) -> list[Evidence]:
    """The evidence that sets `this` apart from `peers` (other GPUs, or the same GPU at
    other points): clock, throttle reasons, power, temperature, error counts, PCIe link, in
    that order; empty where nothing does. With no peers (one GPU), only what is wrong on its
    own: a reason, a cap, a count, a link below its max."""
    found: list[Evidence] = []
    clock = _peer_median(peers, "sm_clock_mhz")
    if this.sm_clock_mhz is not None and clock and this.sm_clock_mhz < CLOCK_SHARE * clock:
        found.append(Evidence("clock", f"SM clock {_ghz(this.sm_clock_mhz)} against {_ghz(clock)}"))
    reasons = [
        REASON_WORDS.get(name, name)
        for name, share in this.reasons.items()
        if name not in _NOT_EVIDENCE
        and share >= REASON_SHARE
        and (not peers or median(p.reasons.get(name, 0.0) for p in peers) < REASON_SHARE)
    ]
    if reasons:
        found.append(Evidence("throttle", "throttle: " + ", ".join(reasons)))
    if this.at_cap and not (peers and median(float(p.at_cap) for p in peers) >= REASON_SHARE):
        cap = f"power {this.power_w:.0f} W at its {this.power_limit_w:.0f} W cap"
        found.append(Evidence("power", cap))
    hot = _peer_median(peers, "temperature_c")
    if this.temperature_c is not None and hot is not None and this.temperature_c >= hot + HOTTER_C:
        found.append(Evidence("temperature", f"{this.temperature_c:.0f} °C against {hot:.0f}"))
    found.extend(_counted(this, peers))
    xids = [x for x in this.xids if not peers or median(x in p.xids for p in peers) < REASON_SHARE]
    if xids:
        found.append(Evidence("errors", "XID " + ", ".join(str(x) for x in xids)))
    # a link trained below its max, and below its peers' (a slot wired narrower is no news)
    for field, spelled in (
        ("pcie_width", "PCIe link x{} of x{}"),
        ("pcie_gen", "PCIe Gen{} of Gen{}"),
    ):
        trained, best = getattr(this, field), getattr(this, field.replace("pcie_", "pcie_max_"))
        usual = _peer_median(peers, field)
        if trained and best and trained < best and (usual is None or trained < usual):
            found.append(Evidence("pcie", spelled.format(trained, best)))
    return found


def _rate(state_: State, field: str) -> float:
    return float(getattr(state_, field)) / max(state_.points, 1)


def _counted(this: State, peers: Sequence[State]) -> list[Evidence]:
    """'NVLink: 41 replays, 1 recovery' for the counters that gained more per point here than
    at the median peer (a healthy GPU counts none; one the neighbours count as much is not
    what sets this point apart), over how many points where more than one."""
    out = []
    for what, counters in _COUNTERS.items():
        counts, points = [], 0
        for field, one, many in counters:
            count = int(getattr(this, field))
            usual = median(_rate(p, field) for p in peers) if peers else 0.0
            if count and _rate(this, field) > usual:
                counts.append(f"{count} {one if count == 1 else many}")
                points = max(points, this.counted_points.get(field, 0))
        if counts:
            within = f" in {points} of {this.points} points" if this.points > 1 else ""
            out.append(Evidence("errors", f"{what}: {', '.join(counts)}{within}"))
    return out


@dataclass(frozen=True)
class GpuHealth:
    """Every GPU's State over a run and the evidence of those that differ, by UUID: read once
    (a row per rank and point), shown by several sections."""

    states: Mapping[str, State]
    evidence: Mapping[str, Sequence[Evidence]]

    @classmethod
    def of(cls, rows: pd.DataFrame) -> GpuHealth:
        every = states(rows)
        return cls(every, evidence_of(every))


def evidence_of(every: Mapping[str, State]) -> dict[str, list[Evidence]]:
    """Each GPU's evidence against the others of `every` (empty lists left out)."""
    out = {}
    for uuid, mine in every.items():
        found = differences(mine, [s for other, s in every.items() if other != uuid])
        if found:
            out[uuid] = found
    return out


def line(name: str, evidence: Sequence[Evidence]) -> str:
    """'n0 GPU2: SM clock 1.41 GHz against 1.98 GHz; throttle: power cap'."""
    return f"{name}: {'; '.join(map(str, evidence))}"


# Routes


def _where(nodes: Sequence[Node], uuid: str) -> tuple[int, int] | None:
    for number, node in enumerate(nodes):
        for position, gpu in enumerate(node.gpus):
            if gpu.uuid == uuid:
                return number, position
    return None


def route_label(nodes: Sequence[Node], src_uuid: str, dst_uuid: str) -> str | None:
    """The topology's label for the pair (NV18, PIX, PHB, SYS, ...); 'NET' between nodes;
    None where the topology does not know a GPU."""
    a, b = _where(nodes, src_uuid), _where(nodes, dst_uuid)
    if a is None or b is None:
        return None
    if a[0] != b[0]:
        return "NET"
    return nodes[a[0]].links[a[1]][b[1]]


def route_words(label_: str | None) -> str:
    """A route label in words: 'NVLink (18 links)', 'PCIe through the host bridge, no NVLink'."""
    if label_ is None:
        return "not in the topology"
    if label_.startswith("NV"):
        return f"NVLink ({label_[2:]} links)"
    if label_ == "NET":
        return "the network (GPUs of different nodes)"
    return ROUTE_WORDS.get(label_, label_)


def pair_line(
    nodes: Sequence[Node],
    src_uuid: str,
    dst_uuid: str,
    tier_labels: Sequence[str | None],
    evidence: Mapping[str, Sequence[Evidence]],
    names: Mapping[str, str],
) -> str:
    """A weak pair's line: its route (and the route most pairs of its tier take, where that
    differs), then each of its GPUs' evidence against the other GPUs."""
    mine = route_label(nodes, src_uuid, dst_uuid)
    parts = [f"route: {route_words(mine)}"]
    known = [t for t in tier_labels if t is not None]
    usual = max(set(known), key=known.count) if known else None
    if usual is not None and mine is not None and mine != usual:
        parts[0] += f", where most pairs of its tier take {route_words(usual)}"
    for uuid in dict.fromkeys((src_uuid, dst_uuid)):
        if evidence.get(uuid):
            parts.append(line(names.get(uuid, uuid), evidence[uuid]))
    if len(parts) == 1:
        parts.append("Both GPUs read like their peers")
    return ". ".join(parts)  # '; ' separates one GPU's items


# Points far off their neighbours

SERIES = list(CURVE)


def off_neighbours(rows: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """The points of swept series (ok rows, each point in its preferred launch mode) whose
    time is more than OFF_FACTOR times off the line through the sizes either side (log-log),
    each with why: its GPUs' readings against theirs at the neighbouring points.

    Columns: group_id, operation, dtype, launch, size_bytes, time_us, expected_us, why."""
    columns = ["group_id", "operation", "dtype", "launch", "size_bytes", "time_us", "expected_us"]
    ok = preferred(rows)
    ok = ok[(ok["status"] == Status.OK) & ok["time_us"].notna() & (ok["time_us"] > 0)]
    # a point has neighbours in a series of three or more: a fleet scan's 2,500 groups of two
    # sizes each took seconds of a report to go through one by one
    ok = ok[ok.groupby(SERIES, sort=False, dropna=False)["size_bytes"].transform("size") > 2]
    found: list[dict[str, Any]] = []
    for _, unsorted in ok.groupby(SERIES, sort=False, dropna=False):
        series = unsorted.sort_values("size_bytes")
        sizes = np.log(series["size_bytes"].to_numpy(dtype=float))
        times = np.log(series["time_us"].to_numpy(dtype=float))
        for i in range(1, len(series) - 1):
            if sizes[i + 1] == sizes[i - 1]:
                continue
            w = (sizes[i] - sizes[i - 1]) / (sizes[i + 1] - sizes[i - 1])
            expected = times[i - 1] + w * (times[i + 1] - times[i - 1])
            # slower only: a point next to a slow one sits below the line through it
            if times[i] - expected <= math.log(OFF_FACTOR):
                continue
            here = series.iloc[i]
            neighbours = series.iloc[[i - 1, i + 1]]
            found.append(
                {
                    "group_id": here["group_id"],
                    "operation": label(str(here["op"]), str(here["algorithm"])),
                    "dtype": here["dtype"],
                    "launch": here["launch"],
                    "size_bytes": int(here["size_bytes"]),
                    "time_us": float(here["time_us"]),
                    "expected_us": float(math.exp(expected)),
                    "why": _against_neighbours(series.iloc[[i]], neighbours, names),
                }
            )
    out: pd.DataFrame = pd.DataFrame.from_records(found, columns=[*columns, "why"])
    return out


def _against_neighbours(
    point: pd.DataFrame, neighbours: pd.DataFrame, names: Mapping[str, str]
) -> str:
    here, around = readings(point), readings(neighbours)
    if here.empty:
        return "no GPU readings at this point (CPU ranks, or NVML not readable)"
    parts = []
    for uuid, mine in here.groupby("gpu_uuid", sort=False):
        theirs = around[around["gpu_uuid"] == uuid]
        peers = [state(theirs[theirs["row"] == r]) for r in dict.fromkeys(theirs["row"])]
        found = differences(state(mine), peers)
        if found:
            parts.append(line(names.get(str(uuid), str(uuid)), found))
    return ". ".join(parts) or "its GPUs read as at the neighbouring sizes"


# Fan-out


@dataclass(frozen=True)
class Fanout:
    """One source's copies to every other GPU at once, each on its own stream."""

    src_uuid: str
    size_bytes: int
    destinations: tuple[tuple[str, float, str | None], ...]  # (UUID, time us, route label)


def fanouts(rows: pd.DataFrame, nodes: Sequence[Node]) -> list[Fanout]:
    """The fan-out copies at their largest size, per source, destinations in rank order."""
    fan = rows[
        (rows["op"] == "copy") & (rows["algorithm"] == "fanout") & (rows["status"] == Status.OK)
    ]
    out = []
    for src, part in fan.groupby("src_gpu_uuid", sort=True):
        at = part[part["size_bytes"] == part["size_bytes"].max()]
        at = at.sort_values(["dst_rank", "dst_gpu_uuid"])
        out.append(
            Fanout(
                str(src),
                int(at["size_bytes"].iloc[0]),
                tuple(
                    (str(dst), float(t), route_label(nodes, str(src), str(dst)))
                    for dst, t in zip(at["dst_gpu_uuid"], at["time_us"], strict=True)
                ),
            )
        )
    return out


def _duration(time_us: float) -> str:
    return f"{time_us / 1e3:.3g} ms" if time_us >= 1e3 else f"{time_us:.3g} us"


def fanout_sentence(fan: Fanout, names: Mapping[str, str], size: str) -> str:
    """'n0 GPU0 copied 256 MiB to n0 GPU1, n0 GPU2 and n0 GPU3 at once: to n0 GPU1 in
    4.3 ms over NVLink (12 links); to n0 GPU3 in 53.3 ms over PCIe and the link between CPU
    sockets, no NVLink.'"""

    def name(uuid: str) -> str:
        return names.get(uuid, uuid)

    targets = [name(dst) for dst, _, _ in fan.destinations]
    listed = targets[0] if len(targets) == 1 else f"{', '.join(targets[:-1])} and {targets[-1]}"
    each = "; ".join(
        f"to {name(dst)} in {_duration(t)} over {route_words(route)}"
        for dst, t, route in fan.destinations
    )
    return f"{name(fan.src_uuid)} copied {size} to {listed} at once: {each}."
