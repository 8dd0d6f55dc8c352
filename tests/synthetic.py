"""Synthetic nightly histories, written as real Parquet through `ResultWriter`.

Each night measures every series at a few sizes: time = base time x the night's slowdown
for that series x (1 + noise), and bus bandwidth follows from the time, as in a real run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from sweeper.results.writer import ResultWriter

SIZES = (8, 64 * 2**10, 256 * 2**20, 2**30)
GROUPS = (
    ("nvlink", "default", "nvlink:n0g0,1,2,3,4,5,6,7", 8),
    ("nvlink", "default", "nvlink:n0g0,1", 2),
    ("nvlink", "default", "nvlink:n0g2,3", 2),
    ("pcie", "p2p-off", "pcie:n0g0,1,2,3,4,5,6,7/p2p-off", 8),
    ("internode", "default", "internode:n0g0+n1g0", 2),
    ("internode", "network", "internode:n0g0+n1g0/network", 2),
    ("internode", "default", "internode:n0g0,1,2,3,4,5,6,7+n1g0,1,2,3,4,5,6,7", 16),
    ("nvlink", "default", "nvlink:n1g0,1,2,3,4,5,6,7", 8),
)
OPS = (
    ("all_reduce", "native"),
    ("all_reduce", "ring"),
    ("all_gather", "native"),
    ("reduce_scatter", "native"),
    ("all_to_all", "native"),
    ("all_to_all", "pairwise"),
    ("broadcast", "native"),
    ("reduce", "native"),
    ("gather", "native"),
    ("scatter", "native"),
)
DTYPES = ("bfloat16", "float32", "float16")


@dataclass(frozen=True)
class Series:
    tier: str
    variant: str
    group_id: str
    world_size: int
    op: str
    algorithm: str
    dtype: str
    src_rank: int | None = None  # point-to-point rows: who sends to whom
    dst_rank: int | None = None
    launch: str | None = None  # graph or eager; None: a row from before launch modes

    @property
    def name(self) -> str:
        algorithm = "" if self.algorithm == "native" else f" ({self.algorithm})"
        launch = " graph" if self.launch == "graph" else ""
        pair = "" if self.src_rank is None else f" {self.src_rank}->{self.dst_rank}"
        return f"{self.group_id} {self.op}{algorithm} {self.dtype}{launch}{pair}"


def every_series(groups: int = len(GROUPS), ops: int = len(OPS), dtypes: int = 3) -> list[Series]:
    return [
        Series(*group, op, algorithm, dtype)
        for group, (op, algorithm), dtype in product(GROUPS[:groups], OPS[:ops], DTYPES[:dtypes])
    ]


Slowdown = Callable[[int, Series], float]  # (night, series) -> factor on time


def steady(night: int, series: Series) -> float:
    return 1.0


@dataclass
class History:
    """Nights of one cluster written to `root`, oldest first."""

    root: Path
    series: Sequence[Series]
    noise: float = 0.01
    seed: int = 0
    cluster_name: str = "synthetic"
    gpu_model: str | None = "NVIDIA H200"
    run_kind: str = "nightly"
    start: datetime = datetime(2026, 10, 1, 2, 0, tzinfo=timezone.utc)
    versions: dict[str, str] = field(default_factory=lambda: {"driver_version": "570.86"})
    run_ids: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def night(
        self, slowdown: Slowdown = steady, unfinished: Sequence[str] = (), **overrides: Any
    ) -> str:
        """Write one more night, with a point of each status in `unfinished` (oom, skipped)
        after its first series' largest size; `overrides` replace run columns."""
        night = len(self.run_ids)
        started = self.start + timedelta(days=night)
        run_id = f"{started:%Y%m%dT%H%M%SZ}-{night:06x}"
        meta = {
            "run_id": run_id,
            "run_started_at": started,
            "run_kind": self.run_kind,
            "cluster_name": self.cluster_name,
            "backend": "nccl",
            "gpu_model": self.gpu_model,
            **self.versions,
            **overrides,
        }
        rows = []
        for series in self.series:
            factor = slowdown(night, series)
            for size in SIZES:
                base_us = 10.0 + size / 100e3  # 10 us latency, then 100 GB/s
                time_us = base_us * factor * (1 + self.noise * self.rng.standard_normal())
                rows.append(
                    {
                        **meta,
                        **vars(series),
                        "size_bytes": size,
                        "time_us": time_us,
                        "busbw_gb_per_s": size / time_us / 1e3,
                        "status": "ok",
                    }
                )
        for status in unfinished:
            point = {"size_bytes": 2 * SIZES[-1], "status": status, "error": f"{status}: why"}
            rows.append({**meta, **vars(self.series[0]), **point})
        # a night's rows in one journal write: the store's per-point fsync is for live runs
        writer = ResultWriter(self.root, run_id, f"{started:%Y-%m-%d}", batch_rows=100_000)
        writer.extend(rows)
        writer.flush()
        self.run_ids.append(run_id)
        return run_id

    def nights(self, count: int, slowdown: Slowdown = steady) -> list[str]:
        return [self.night(slowdown) for _ in range(count)]


def point_row(size: int, time_us: float, **extra: object) -> dict[str, object]:
    """One ok row of a 2-rank all_reduce, its bandwidth from its time; `extra` overrides."""
    return {
        "tier": "cpu",
        "variant": "default",
        "group_id": "cpu:n0r0,1",
        "world_size": 2,
        "op": "all_reduce",
        "algorithm": "native",
        "dtype": "float32",
        "in_place": True,
        "size_bytes": size,
        "time_us": time_us,
        "busbw_gb_per_s": size / time_us / 1e3,
        "status": "ok",
        **extra,
    }
