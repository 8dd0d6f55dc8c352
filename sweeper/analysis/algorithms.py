"""Ways to perform one operation, side by side: which is fastest at each size.

A candidate is an (algorithm, variant) pair of rows with one `op`, named by `label`. Candidates
compete within one tier, group size, dtype and size, each point in its preferred launch mode.
The best is named only where it beats the others by more than their own blocks vary (`ties`);
docs/ARCHITECTURE.md, "Inside the rooms", says how candidates are named and counted."""

from __future__ import annotations

import math

import pandas as pd

from sweeper.analysis.launches import preferred
from sweeper.analysis.summary import label, launch_modes, missing
from sweeper.wire import DEFAULT_VARIANT, Status

KEYS = ["tier", "world_size", "dtype", "size_bytes"]
BEST_COLUMNS = (
    *KEYS,
    "best",
    "best_busbw_gb_per_s",
    "default_busbw_gb_per_s",
    "speedup",
)


def candidate(op: str, algorithm: str, variant: str) -> str:
    """How one way of performing `op` is named in an algorithm table."""
    name = label(op, algorithm)
    return name if variant == DEFAULT_VARIANT else f"{name} [{variant}]"


def _named(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """The `ok` rows of `op` in their preferred launch mode, each with its candidate's name."""
    rows = preferred(df[df["op"] == op])
    rows = rows[rows["status"] == Status.OK]
    names = [
        candidate(op, str(a), str(v))
        for a, v in zip(rows["algorithm"], rows["variant"], strict=True)
    ]
    named: pd.DataFrame = rows.assign(candidate=pd.Series(names, index=rows.index, dtype=object))
    return named


def _per_point(named: pd.DataFrame, out: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """One row per point and candidate, candidates in the order first measured."""
    order = list(dict.fromkeys(named["candidate"]))
    out["candidate"] = pd.Categorical(out["candidate"], categories=order, ordered=True)
    out = out.sort_values([*KEYS, "candidate"], kind="stable")
    out["candidate"] = out["candidate"].astype(str)
    out["world_size"] = out["world_size"].astype("int64")
    out["size_bytes"] = out["size_bytes"].astype("int64")
    table: pd.DataFrame = out[columns].reset_index(drop=True)
    return table


def candidates(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """Bus bandwidth of every candidate for `op` at every point, from `ok` rows.

    Columns: tier, world_size, dtype, size_bytes, candidate, busbw_gb_per_s, launch (the
    launch modes it was read from, `summary.launch_modes`), in the order the candidates were
    first measured."""
    named = _named(df, op)
    columns = [*KEYS, "candidate", "busbw_gb_per_s", "launch"]
    if named.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=columns)
        return empty
    out = named.groupby([*KEYS, "candidate"], as_index=False, sort=False).agg(
        busbw_gb_per_s=("busbw_gb_per_s", "median"), launch=("launch", launch_modes)
    )
    return _per_point(named, out, columns)


def spreads(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """How far each candidate's bus bandwidth varies at each point: the lowest and highest
    busbw of any of its timed blocks (a block's busbw is its row's x time_us / the block's
    time), over its rows there (its groups); a row without blocks, its own busbw.

    Columns: KEYS, candidate, busbw_low_gb_per_s, busbw_high_gb_per_s."""
    named = _named(df, op)
    columns = [*KEYS, "candidate", "busbw_low_gb_per_s", "busbw_high_gb_per_s"]
    if named.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=columns)
        return empty
    blocks = [
        [busbw] if missing(times) or missing(t) else [busbw * t / b for b in times if b > 0]
        for busbw, t, times in zip(
            named["busbw_gb_per_s"], named["time_us"], named["time_us_blocks"], strict=True
        )
    ]
    each = named.assign(
        low=[min(b, default=math.nan) for b in blocks],
        high=[max(b, default=math.nan) for b in blocks],
    )
    out = each.groupby([*KEYS, "candidate"], as_index=False, sort=False).agg(
        busbw_low_gb_per_s=("low", "min"), busbw_high_gb_per_s=("high", "max")
    )
    return _per_point(named, out, columns)


def ties(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """At each point, the candidates the best does not clearly beat: those whose fastest
    block reaches the best's slowest (`spreads`). A best with none is clear; one with some
    is a tie, the difference within what its own blocks vary.

    Columns: KEYS, best, tied (a tuple of candidate names in measuring order; empty where
    the best is clear)."""
    best = best_per_size(df, op)[[*KEYS, "best"]]
    spread = spreads(df, op).merge(best, on=KEYS)
    low = spread[spread["candidate"] == spread["best"]][[*KEYS, "busbw_low_gb_per_s"]]
    spread = spread.merge(low, on=KEYS, suffixes=("", "_best"))
    reach = spread[
        (spread["candidate"] != spread["best"])
        & (spread["busbw_high_gb_per_s"] >= spread["busbw_low_gb_per_s_best"])
    ]
    tied = reach.groupby(KEYS, sort=False)["candidate"].agg(tuple).rename("tied")
    out = best.merge(tied.reset_index(), on=KEYS, how="left")
    out["tied"] = [() if missing(t) else t for t in out["tied"]]
    table: pd.DataFrame = out[[*KEYS, "best", "tied"]]
    return table


def best_per_size(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """The fastest candidate for `op` at each tier, group size, dtype and size.

    Columns (`BEST_COLUMNS`): tier, world_size, dtype, size_bytes; `best` (the candidate's
    name), `best_busbw_gb_per_s`; `default_busbw_gb_per_s`, the default's bandwidth (NaN
    where the default did not run there); `speedup` = best / default (NaN likewise; 1.0
    where the default is the best). Ties go to the candidate measured first."""
    table = candidates(df, op)
    if table.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=list(BEST_COLUMNS))
        return empty
    default = candidate(op, "native", DEFAULT_VARIANT)
    points = table.groupby(KEYS, sort=False)
    best = table.loc[points["busbw_gb_per_s"].idxmax()].rename(
        columns={"candidate": "best", "busbw_gb_per_s": "best_busbw_gb_per_s"}
    )
    defaults = table[table["candidate"] == default].rename(
        columns={"busbw_gb_per_s": "default_busbw_gb_per_s"}
    )[[*KEYS, "default_busbw_gb_per_s"]]
    out = best.merge(defaults, on=KEYS, how="left")
    out["speedup"] = out["best_busbw_gb_per_s"] / out["default_busbw_gb_per_s"]
    best_table: pd.DataFrame = out[list(BEST_COLUMNS)].reset_index(drop=True)
    return best_table
