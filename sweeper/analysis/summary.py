"""Per-operation summaries of a run: peak bus bandwidth, smallest latency, probing time; and
how rows are named to people (operations, tiers, launch modes)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from sweeper.results.schema import PROBED
from sweeper.wire import DEFAULT_VARIANT, Launch, Status


def missing(value: object) -> bool:
    """A cell with no value: None, pandas' NA, or NaN (a null read back from Parquet)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def figure(value: float | None) -> str:
    """A measured figure as a table shows it: three significant digits, whole numbers from
    100 up (988, 12,346, 0.512: never 987.65 nor 1.23e+04); '-' for none."""
    if value is None or missing(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def label(op: str, algorithm: str) -> str:
    """How an (op, algorithm) pair is named to people: all_reduce, all_reduce (ring), ..."""
    return op if algorithm == "native" else f"{op} ({algorithm})"


@dataclass(frozen=True)
class OpSummary:
    tier: str  # with the variant, when not the default: pcie/p2p-off
    world_size: int
    label: str
    launch: str  # graph or eager (copies: eager)
    engine: str  # torch or nccl
    points: int
    failed: int
    skipped: int
    peak_busbw_gb_per_s: float | None
    peak_size_bytes: int | None
    min_time_us: float | None
    min_time_size_bytes: int | None


def tier_name(tier: str, variant: str) -> str:
    return tier if variant == DEFAULT_VARIANT else f"{tier}/{variant}"


def launch_modes(launches: Iterable[str]) -> str:
    """The launch modes among `launches`, graph first: 'graph', 'eager' or 'graph, eager'."""
    seen = set(launches)
    return ", ".join(mode for mode in Launch if mode in seen)


class Row(Protocol):
    """What a summary reads of a row, by field: the driver's typed rows as they are measured,
    or a frame's rows read back (`DataFrame.itertuples`)."""

    @property
    def tier(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def world_size(self) -> int: ...
    @property
    def op(self) -> str: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def launch(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def time_us(self) -> float | None: ...
    @property
    def busbw_gb_per_s(self) -> float | None: ...
    @property
    def probe_s(self) -> float | None: ...


def summarize(rows: Iterable[Row]) -> list[OpSummary]:
    """Peak bus bandwidth and smallest latency per tier, group size, operation, engine and
    launch mode (the groups of one tier and size, such as its pairs, together), in the order first
    seen."""
    by_key: dict[tuple[str, int, str, str, str], list[Row]] = {}
    for row in rows:
        key = (
            tier_name(row.tier, row.variant),
            row.world_size,
            label(row.op, row.algorithm),
            row.launch,
            row.engine,
        )
        by_key.setdefault(key, []).append(row)
    out = []
    for (tier, world_size, name, launch, engine), group in by_key.items():
        ok = [r for r in group if r.status == Status.OK]
        peak = max(ok, key=lambda r: r.busbw_gb_per_s or 0.0, default=None)
        fastest = min(ok, key=lambda r: r.time_us or math.inf, default=None)
        out.append(
            OpSummary(
                tier=tier,
                world_size=world_size,
                label=name,
                launch=launch,
                engine=engine,
                points=len(group),
                failed=sum(r.status not in (Status.OK, Status.SKIPPED) for r in group),
                skipped=sum(r.status == Status.SKIPPED for r in group),
                peak_busbw_gb_per_s=peak.busbw_gb_per_s if peak else None,
                peak_size_bytes=peak.size_bytes if peak else None,
                min_time_us=fastest.time_us if fastest else None,
                min_time_size_bytes=fastest.size_bytes if fastest else None,
            )
        )
    return out


def probe_seconds(rows: Iterable[Row]) -> float:
    """Time spent finding --max-size auto bounds: each series' probe time, counted once."""
    series = {tuple(getattr(r, c) for c in PROBED): r.probe_s or 0.0 for r in rows}
    return float(sum(series.values()))


def at_bound(rows: pd.DataFrame) -> pd.Series:
    """Whether each row is the point at the size --max-size auto found to be the largest that
    fits (its series probed: `probe_s` set, and the row at `max_size_bytes`); a frame of
    medians over groups carries it as its column `at_bound`. False for a fixed --max-size."""
    found: pd.Series
    if "at_bound" in rows:
        found = rows["at_bound"].fillna(False).astype(bool)
    elif {"probe_s", "max_size_bytes"} <= set(rows):
        found = rows["probe_s"].notna() & (rows["size_bytes"] == rows["max_size_bytes"])
    else:
        found = pd.Series(False, index=rows.index, dtype=bool)
    return found
