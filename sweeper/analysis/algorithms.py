"""Ways to perform one operation, side by side: which is fastest at each size.

A candidate is an (algorithm, variant) pair of rows with the same `op`, named
`label(op, algorithm)`, plus ` [variant]` when the variant is not the default: e.g.
`all_reduce`, `all_reduce (reduce_scatter+all_gather)`, `all_reduce [algo=Ring]`. The
default is what a user gets without asking: algorithm `native`, variant `default`.
Candidates compete within one tier, group size, dtype and size. Where a tier has several
groups of that size (the pairs of an island), a candidate's bandwidth is their median.
Each point counts in its preferred launch mode (`launches.preferred`: graph where it was
timed both ways), so candidates compete on their CUDA-graph times where they have them.
"""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.launches import preferred
from sweeper.analysis.summary import label, launch_modes
from sweeper.wire import Status

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
    return name if variant == "default" else f"{name} [{variant}]"


def candidates(df: pd.DataFrame, op: str) -> pd.DataFrame:
    """Bus bandwidth of every candidate for `op` at every point, from `ok` rows.

    Columns: tier, world_size, dtype, size_bytes, candidate, busbw_gb_per_s, launch (the
    launch modes it was read from, `summary.launch_modes`), in the order the candidates were
    first measured."""
    rows = preferred(df[df["op"] == op])
    rows = rows[rows["status"] == Status.OK]
    columns = [*KEYS, "candidate", "busbw_gb_per_s", "launch"]
    if rows.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=columns)
        return empty
    named = rows.assign(
        candidate=[
            candidate(op, str(a), str(v))
            for a, v in zip(rows["algorithm"], rows["variant"], strict=True)
        ]
    )
    order = list(dict.fromkeys(named["candidate"]))
    out = named.groupby([*KEYS, "candidate"], as_index=False, sort=False).agg(
        busbw_gb_per_s=("busbw_gb_per_s", "median"), launch=("launch", launch_modes)
    )
    out["candidate"] = pd.Categorical(out["candidate"], categories=order, ordered=True)
    out = out.sort_values([*KEYS, "candidate"], kind="stable")
    out["candidate"] = out["candidate"].astype(str)
    out["world_size"] = out["world_size"].astype("int64")
    out["size_bytes"] = out["size_bytes"].astype("int64")
    table: pd.DataFrame = out[columns].reset_index(drop=True)
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
    default = candidate(op, "native", "default")
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
