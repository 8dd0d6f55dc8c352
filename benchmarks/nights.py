"""Synthetic nightly histories in memory, for judging `analysis.regression` over many seeds:
eight nodes' all_reduce series, night-to-night noise as measured (docs/REGRESSIONS.md), one
node's bandwidth stepping down on one night, another node's noise doubled.

The noise is what identical runs moved on 4 H200 (tests/data/results/h200-x4-identical-
2026-11-27, and issue 42): 1% at the peak bandwidth's sizes, 10% for the time of the
smallest size. The values are drawn directly as the metrics (`run_metrics`' frame): the
Parquet round trip is tested elsewhere, and here 200 histories must judge in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweeper.analysis.regression import PEAK_BUSBW, SERIES, SMALLEST_TIME, Policy, detect

NODES = 8
BUSBW_NOISE = 0.01  # sigma / value, night to night
TIME_NOISE = 0.10
STEP = 0.10  # the stepping node's bandwidth: 10% less from its step on
STEPPING, NOISY = "nvlink:n0g0,1,2,3", "nvlink:n1g0,1,2,3"  # the stepping and noisy nodes


@dataclass(frozen=True)
class Nights:
    metrics: pd.DataFrame  # run_metrics' columns
    runs: list[str]  # oldest first
    step_night: int  # index into runs of the first night after the step


def group(node: int) -> str:
    return f"nvlink:n{node}g0,1,2,3"


def nights(seed: int, count: int = 14, step_night: int = 9, noisy: float = 2.0) -> Nights:
    """`count` nights of NODES nodes; STEPPING loses STEP of its bandwidth from night
    `step_night` (an index) on, NOISY varies `noisy` times as much as the others."""
    rng = np.random.default_rng(seed)
    runs = [f"2026-11-{night + 1:02d}" for night in range(count)]
    rows = []
    for node in range(NODES):
        name = group(node)
        scale = noisy if name == NOISY else 1.0
        busbw = 300 * (1 + scale * BUSBW_NOISE * rng.standard_normal(count))
        if name == STEPPING:
            busbw[step_night:] *= 1 - STEP
        time_us = 20 * np.exp(scale * TIME_NOISE * rng.standard_normal(count))
        for metric, values, size in ((PEAK_BUSBW, busbw, 2**30), (SMALLEST_TIME, time_us, 8)):
            rows += [
                {
                    "run_id": run,
                    "group_id": name,
                    "metric": metric.name,
                    "value": v,
                    "size_bytes": size,
                }
                for run, v in zip(runs, values, strict=True)
            ]
    fixed = {
        "tier": "nvlink",
        "variant": "default",
        "world_size": 4,
        "op": "all_reduce",
        "algorithm": "native",
        "dtype": "bfloat16",
        "in_place": True,
        "launch": "graph",
        "engine": "torch",
        "src_rank": pd.NA,
        "dst_rank": pd.NA,
        "concurrent": pd.NA,
        "rank": pd.NA,
        "params": "",
    }
    frame = pd.DataFrame(rows).assign(**fixed)
    metrics: pd.DataFrame = frame[["run_id", *SERIES, "size_bytes", "metric", "value"]]
    return Nights(metrics, runs, step_night)


def judged(history: Nights, policy: Policy) -> list[pd.DataFrame]:
    """Each night's findings, judged as it came: every night with enough history."""
    return [
        detect(history.metrics, history.runs[: tonight + 1], policy)
        for tonight in range(policy.min_history, len(history.runs))
    ]
