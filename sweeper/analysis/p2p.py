"""Peer-to-peer and copy-engine matrices: one value per (source, destination) rank, and the
pairs that are weak for their tier.

A matrix pivots one metric of the pair rows (kind `p2p` or `copy`) at one size: sources are
rows, destinations columns. A pair more than 3 MADs worse than its tier's median is an outlier:
pairs of one tier should be alike, and one that is not points at a degraded link, a misplaced
GPU or a neighbour's traffic. A pair's CUDA-graph row counts where it has one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from sweeper.analysis.launches import preferred
from sweeper.analysis.summary import tier_name
from sweeper.wire import Kind, Status

PAIR_KINDS = (Kind.P2P, Kind.COPY)  # the rows of pairs: a matrix each
OUTLIER_MADS = 3.0
# When more than half the pairs measure the same, the MAD is 0 and any difference would be
# infinitely many MADs; a floor of 1% of the median keeps such noise from counting.
MAD_FLOOR = 0.01

Metric = Literal["bandwidth", "latency"]
# bandwidth: bus bandwidth at the largest size (for p2p, busbw = algbw); latency: time at
# the smallest size. Each with the direction that is worse.
METRICS: dict[Metric, tuple[str, Literal["low", "high"]]] = {
    "bandwidth": ("busbw_gb_per_s", "low"),
    "latency": ("time_us", "high"),
}


def mad_outliers(
    values: pd.Series,
    tiers: pd.Series,
    worse: Literal["low", "high"],
    mads: float = OUTLIER_MADS,
) -> pd.Series:
    """Whether each value is more than `mads` MADs worse than the median of its tier.

    `worse` says which side is bad: "low" for bandwidths, "high" for times. Missing
    values are never outliers."""
    values = values.astype("float64")
    median = values.groupby(tiers).transform("median")
    mad = (values - median).abs().groupby(tiers).transform("median")
    spread = np.maximum(mad, MAD_FLOOR * median.abs())
    distance = (median - values) if worse == "low" else (values - median)
    return (distance > mads * spread).fillna(False).astype(bool)


def pair_table(df: pd.DataFrame, op: str, algorithm: str, metric: Metric) -> pd.DataFrame:
    """One row per measured pair: src_rank, dst_rank, tier, concurrent, size_bytes, value,
    status, outlier; for `metric` at its size (the largest or smallest of the rows), each
    pair in its preferred launch mode."""
    column, worse = METRICS[metric]
    rows = preferred(df[(df["op"] == op) & (df["algorithm"] == algorithm)])
    columns = ["src_rank", "dst_rank", "tier", "concurrent", "size_bytes", "value", "status"]
    if rows.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=[*columns, "outlier"])
        return empty
    size = rows["size_bytes"].max() if metric == "bandwidth" else rows["size_bytes"].min()
    at = rows[rows["size_bytes"] == size]
    out = pd.DataFrame(
        {
            "src_rank": at["src_rank"].astype("int64"),
            "dst_rank": at["dst_rank"].astype("int64"),
            "tier": [
                tier_name(str(t), str(v)) for t, v in zip(at["tier"], at["variant"], strict=True)
            ],
            "concurrent": at["concurrent"].fillna(False).astype(bool),
            "size_bytes": at["size_bytes"].astype("int64"),
            "value": at[column].where(at["status"] == Status.OK).astype("float64"),
            "status": at["status"].astype(str),
        }
    )
    out["outlier"] = mad_outliers(
        out["value"], out["tier"] + "|" + out["concurrent"].astype(str), worse
    )
    table: pd.DataFrame = out.reset_index(drop=True)
    return table


@dataclass(frozen=True)
class PairMatrix:
    """One metric of one kind of transfer as an N x N matrix (NaN: not measured or failed)."""

    op: str
    algorithm: str
    concurrent: bool
    metric: Metric
    size_bytes: int
    values: pd.DataFrame  # index src_rank, columns dst_rank
    outliers: pd.DataFrame  # bool, same shape


def pair_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of pairs: a source and a destination (host<->device copies, kind `copy`
    too, have neither: each is one GPU's own)."""
    rows: pd.DataFrame = df[df["kind"].isin(PAIR_KINDS) & df["src_rank"].notna()]
    return rows


def pair_matrices(df: pd.DataFrame) -> list[PairMatrix]:
    """Every matrix the rows of pairs hold: per op (p2p, copy), algorithm (uni, bi, fanout),
    whether measured alone or concurrently, bandwidth and latency. Square over every rank seen."""
    out = []
    matrix_rows = pair_rows(df)
    for (op, algorithm), rows in matrix_rows.groupby(["op", "algorithm"], sort=True):
        for metric in METRICS:
            table = pair_table(rows, str(op), str(algorithm), metric)
            ranks = sorted(set(table["src_rank"]) | set(table["dst_rank"]))
            for concurrent, part in table.groupby("concurrent", sort=True):
                values = part.pivot_table(
                    index="src_rank", columns="dst_rank", values="value", aggfunc="median"
                )
                outliers = part.pivot_table(
                    index="src_rank", columns="dst_rank", values="outlier", aggfunc="any"
                )
                out.append(
                    PairMatrix(
                        op=str(op),
                        algorithm=str(algorithm),
                        concurrent=bool(concurrent),
                        metric=metric,
                        size_bytes=int(part["size_bytes"].iloc[0]),
                        values=values.reindex(index=ranks, columns=ranks).astype("float64"),
                        outliers=outliers.reindex(index=ranks, columns=ranks)
                        .fillna(False)
                        .astype(bool),
                    )
                )
    return out
