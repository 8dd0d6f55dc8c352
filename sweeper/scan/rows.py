"""A group's rows -> its scan `GroupOutcome`: the judged operation's busbw at the bandwidth size and
its time at the smallest, each GPU's host copies and the NVML evidence its rows carry. A point
asked for that has no row is missing; one that failed fails the group. Pure: rows are
mappings of the schema's columns (one made now, through `results.writer.columns`, or one read
back), so a real scan, a resumed one and the tests fold them alike.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.scan.fleet import GroupOutcome, MemberReading, Result, ScanGroup
from sweeper.wire import Kind, Status

Row = Mapping[str, Any]
HOST_COPIES = ("h2d", "d2h")  # a GPU's own copies the gate judges (the slower of the two)
DEVICE_COPY = "d2d"  # and its copy within its own memory: what a job beside it slows
# Power within 3% of the enforced limit is at the cap (analysis.why's rule for the report).
CAP_SHARE = 0.97
_FINE = (Status.OK, Status.SKIPPED)
# The NVLink counters that hold a GPU against it: replays (the link sent again) and
# recoveries (it retrained). CRC errors alone are what those correct, and healthy links count
# some (docs/measurements/h200-x4-2026-11-27.md, one-node scans): they are noted, not held.
_NVLINK_ERRORS = {
    "nvlink_replay_delta": "NVLink replays",
    "nvlink_recovery_delta": "NVLink recoveries",
}
_NVLINK_NOTED = {"nvlink_crc_delta": "NVLink CRC errors"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Asked:
    """What a scan measures on every group: its judged operation (the rows' `op`) at the
    smallest size (latency) and at one bandwidth size."""

    op: str = "all_reduce"
    latency_bytes: int
    bandwidth_bytes: int


def outcome(
    group: ScanGroup,
    rows: Sequence[Row],
    expected: Collection[tuple[str, int]],
    asked: Asked,
    gpus: Mapping[str, tuple[str, int]] | None = None,
    silent: Collection[str] = (),
) -> GroupOutcome:
    """The group's outcome from its rows. `expected`: the (op, size_bytes) points it was asked
    for; `gpus`: each GPU's node and index by UUID (none on CPU ranks: no readings);
    `silent`: the nodes whose ranks did not answer a point that timed out."""
    got = {(r["op"], r["size_bytes"]) for r in rows}
    absent = [point for point in expected if point not in got]
    if not rows or absent:
        reason = "no row came back" if not rows else f"{len(absent)} point(s) had no row"
        return GroupOutcome(group=group, result=Result.MISSING, reason=reason)
    readings = _readings(rows, gpus or {}, asked)
    misconfigured = "; ".join(sorted({flag for r in rows if (flag := r.get("transport_flag"))}))
    failed = [r for r in rows if Status(r["status"]) not in _FINE]
    if failed:
        first = failed[0]
        reason = f"{first['op']} at {first['size_bytes']} B: {first['error'] or first['status']}"
        return GroupOutcome(
            group=group,
            result=Result.FAILED,
            op=asked.op,
            readings=readings,
            reason=reason,
            unanswered=tuple(n for n in group.nodes if n in silent),
            misconfigured=misconfigured,
        )
    judged = [r for r in rows if r["op"] == asked.op and Status(r["status"]) is Status.OK]
    return GroupOutcome(
        group=group,
        result=Result.OK,
        op=asked.op,
        busbw_gb_per_s=_best(judged, asked.bandwidth_bytes, "busbw_gb_per_s"),
        latency_us=_fastest(judged, asked.latency_bytes),
        size_bytes=asked.bandwidth_bytes,
        readings=readings,
        misconfigured=misconfigured,
        start_s=_slowest_start(rows),
    )


def _slowest_start(rows: Sequence[Row]) -> float | None:
    """The longest its communicators took to start (any engine, the slowest rank's)."""
    known = [float(s) for r in rows if (s := r.get("comm_start_s")) is not None]
    return max((s for s in known if not math.isnan(s)), default=None)  # NaN: read back null


def _best(rows: Sequence[Row], size: int, column: str) -> float | None:
    """The highest figure of the point (an engine or launch mode each row); None where the
    group has one rank (an all_reduce of one moves nothing: its busbw factor is 0)."""
    values = [r[column] for r in rows if r["size_bytes"] == size and r["world_size"] > 1]
    known = [float(v) for v in values if v is not None]
    return max(known) if known else None


def _fastest(rows: Sequence[Row], size: int) -> float | None:
    known = [float(r["time_us"]) for r in rows if r["size_bytes"] == size and r["time_us"]]
    return min(known) if known else None


def _readings(
    rows: Sequence[Row], gpus: Mapping[str, tuple[str, int]], asked: Asked
) -> tuple[MemberReading, ...]:
    """Per GPU: its slower host copy and its device copy (rows of one GPU each), what NVML
    said against it around any of its points, the most other processes it listed on it, and
    under load (the judged operation at the bandwidth size) its SM clock and whether the
    power cap held it."""
    copies: dict[str, float] = {}
    device: dict[str, float] = {}
    others: dict[str, int] = {}
    flags: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    clocks: dict[str, float] = {}
    capped: set[str] = set()
    for r in rows:
        uuids = list(r.get("gpu_uuids") or ())
        copy = r["kind"] == Kind.COPY and r["op"] in HOST_COPIES and r["status"] == Status.OK
        if copy and len(uuids) == 1 and r["algbw_gb_per_s"] is not None:
            uuid, rate = uuids[0], float(r["algbw_gb_per_s"])
            copies[uuid] = min(copies.get(uuid, rate), rate)
        own = r["kind"] == Kind.COPY and r["op"] == DEVICE_COPY and r["status"] == Status.OK
        if own and len(uuids) == 1 and r["busbw_gb_per_s"] is not None:
            device[uuids[0]] = float(r["busbw_gb_per_s"])
        loaded = r["op"] == asked.op and r["size_bytes"] == asked.bandwidth_bytes
        for i, uuid in enumerate(uuids):
            for flag in _flags(r, i):
                if flag not in flags.setdefault(uuid, []):
                    flags[uuid].append(flag)
            for note in _counted(r, i, _NVLINK_NOTED):
                if note not in notes.setdefault(uuid, []):
                    notes[uuid].append(note)
            if (count := _at(r, "other_processes", i)) is not None:
                others[uuid] = max(others.get(uuid, 0), int(count))
            if loaded and (clock := _at(r, "sm_clock_mhz", i)):
                clocks[uuid] = min(clocks.get(uuid, clock), float(clock))
            if loaded and _capped(r, i):
                capped.add(uuid)
    out = []
    for uuid in dict.fromkeys([*copies, *device, *flags, *notes, *clocks, *others]):
        if uuid in gpus:
            node, index = gpus[uuid]
            out.append(
                MemberReading(
                    node=node,
                    gpu=index,
                    copy_gb_per_s=copies.get(uuid),
                    d2d_gb_per_s=device.get(uuid),
                    flags=tuple(flags.get(uuid, ())),
                    notes=tuple(notes.get(uuid, ())),
                    sm_clock_mhz=clocks.get(uuid),
                    at_power_cap=uuid in capped,
                    other_processes=others.get(uuid),
                )
            )
    return tuple(sorted(out, key=lambda r: (r.node, r.gpu or 0)))


def _capped(row: Row, i: int) -> bool:
    """The power cap held the GPU: NVML's reason, or a draw within CAP_SHARE of its limit."""
    if "sw_power_cap" in (_at(row, "throttle_reasons", i) or ()):
        return True
    power, limit = _at(row, "power_w", i), _at(row, "power_limit_w", i)
    return bool(power and limit and power >= CAP_SHARE * limit)


def _at(row: Row, column: str, i: int) -> Any:
    values = row.get(column)
    return None if values is None or i >= len(values) else values[i]


def _counted(row: Row, i: int, counters: Mapping[str, str]) -> list[str]:
    """The row's i-th GPU's counters among `counters` that counted something, in words."""
    return [
        f"{count} {what} over one point"
        for column, what in counters.items()
        if (count := _at(row, column, i))
    ]


def _flags(row: Row, i: int) -> list[str]:
    """What the telemetry of the row's i-th GPU holds against it: uncorrected ECC errors, XIDs,
    NVLink replays and recoveries counted over the point (a healthy link counts none), a PCIe
    link trained below its max under load, hardware slowdowns, and a thermal slowdown with the
    temperature it was read at."""
    out = []
    if ecc := _at(row, "ecc_uncorrected_delta", i):
        out.append(f"{ecc} uncorrected ECC errors")
    out += [f"xid {code}" for code in _at(row, "xid_codes", i) or ()]
    out += _counted(row, i, _NVLINK_ERRORS)
    gen, top = _at(row, "pcie_gen", i), _at(row, "pcie_max_gen", i)
    width, widest = _at(row, "pcie_width", i), _at(row, "pcie_max_width", i)
    if gen and top and width and widest and (gen < top or width < widest):
        out.append(f"PCIe Gen{gen} x{width} of Gen{top} x{widest}")
    temperature = _at(row, "temperature_c", i)
    for reason in _at(row, "throttle_reasons", i) or ():
        if "thermal" in reason and temperature is not None:
            out.append(f"{reason} at {temperature} C")
        elif reason.startswith("hw_") or "thermal" in reason:
            out.append(reason)
    return out
