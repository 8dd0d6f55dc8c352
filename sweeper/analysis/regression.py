"""Nightly regression detection: each run's summary metrics per series, and the small rules
that decide whether tonight is a regression. Pure: DataFrames in, DataFrames out.

A series is one thing nights are compared on: a point of `results.schema.POINT` without its
size, that is a group (its id names the tier, the hosts and GPUs, and so the world size),
an operation (op, algorithm), a dtype, a launch mode, and for pair and MoE rows the pair
and parameters. Each group is a series of its own, not folded into its tier, so one weak
link shows. The launch mode is part of a series because a series is the same measurement
night after night: a night timed with CUDA graphs is not compared with eager nights (whose
small sizes carry the host's launch path), and a run timed both ways gives two series.
A run gives each series two metrics: the peak bus bandwidth over the large sizes, and the
time of the smallest size. Tonight's value is compared with the series' baseline, the
median and robust spread (1.4826 x MAD) of up to `window` earlier runs. A value is *worse*
when every check fails (it is beyond the series' own noise by a robust z, and beyond a
relative floor); the series is a *regression* when the last `persistence` runs, tonight's
included, were all worse than the baseline of the runs before them.

A scan's series (`scan_metrics`) are its judged figures, named so that they recur night after
night: a group of the stages that measure every node (the gate: one node's GPUs, and each GPU's
own copies; the screen's and the cross-domain group) by its stage and its members' host names,
not by tonight's group id, which numbers nodes in tonight's order. Bisection and confirmation
groups are left out: they test tonight's suspects beside whichever partners were free, and
the scan's verdicts already speak for them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from sweeper.analysis.changes import params_text
from sweeper.planning.profile import NightlySettings
from sweeper.results.schema import POINT
from sweeper.scan.thresholds import UNBIASED
from sweeper.wire import Status

# A point over nights, whatever its size: the sizes are the series' values.
SERIES = tuple(key for key in POINT if key != "size_bytes")
# The columns of the results dataset that the metrics are computed from.
COLUMNS = ("run_id", *SERIES, "size_bytes", "time_us", "busbw_gb_per_s", "status")
MAD_TO_SIGMA = 1.4826  # MAD x this estimates the standard deviation of normal noise
STATUSES = ("regression", "worse", "better", "ok", "new")
# A scan's rows: the stage and the hosts and GPUs that name its series.
SCAN_COLUMNS = (*COLUMNS, "stage", "hosts", "gpu_uuids")
_NAMED_HOSTS = 4  # a group of more hosts is named by its first and last, and a digest


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    higher_is_better: bool


PEAK_BUSBW = Metric("peak_busbw_gb_per_s", "GB/s", higher_is_better=True)
SMALLEST_TIME = Metric("smallest_size_time_us", "us", higher_is_better=False)
METRICS = (PEAK_BUSBW, SMALLEST_TIME)


def run_metrics(rows: pd.DataFrame, bandwidth_min_size_bytes: int) -> pd.DataFrame:
    """Each run's metrics per series, one row per run, series and metric: run_id, the SERIES
    columns (`params` as k=v text), metric, value and the size it was measured at. Peak bus
    bandwidth is taken over the sizes of at least `bandwidth_min_size_bytes` (a series with
    none has no peak); the smallest-size time is the time of the smallest size that ran."""
    ok = _ok(rows)
    return _metrics(ok[ok["size_bytes"] >= bandwidth_min_size_bytes], ok)


def scan_metrics(rows: pd.DataFrame) -> pd.DataFrame:
    """`run_metrics` of scans (rows of SCAN_COLUMNS): the series of the gate, screen and
    cross-domain groups, each group named by `scan_group`; the bus bandwidth at a series'
    largest size (the scan's bandwidth size), the time at its smallest where it ran more than
    one (the latency size; a GPU's copies run one)."""
    judged = rows[rows["stage"].isin([str(stage) for stage in UNBIASED])]
    named = [
        scan_group(stage, hosts, None if pd.isna(rank) else uuids)
        for stage, hosts, uuids, rank in zip(
            judged["stage"], judged["hosts"], judged["gpu_uuids"], judged["rank"], strict=True
        )
    ]
    # ranks are numbered in tonight's node order: the group's name says which GPU
    ok = _ok(judged.assign(group_id=named, rank=pd.NA, src_rank=pd.NA, dst_rank=pd.NA))
    sizes = ok.groupby(["run_id", *SERIES], dropna=False, sort=False)["size_bytes"]
    largest = ok[ok["size_bytes"] == sizes.transform("max")]
    return _metrics(largest, ok[sizes.transform("nunique") > 1])


def scan_group(stage: str, hosts: Sequence[str], gpus: Sequence[str] | None = None) -> str:
    """A scan group's name night after night: its stage and its hosts (screen:a+b+c), beyond
    four hosts the first and last, their count and a digest of them all; `gpus`, a GPU's own
    row: its UUID (gate:a/GPU-...)."""
    members = sorted(set(hosts))
    named = "+".join(members)
    if len(members) > _NAMED_HOSTS:
        digest = hashlib.sha256(named.encode()).hexdigest()[:8]
        named = f"{members[0]}..{members[-1]}/{len(members)}#{digest}"
    gpu = f"/{gpus[0]}" if gpus is not None and len(gpus) == 1 else ""
    return f"{stage}:{named}{gpu}"


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows.loc[rows["status"].isin([Status.OK]), list(COLUMNS)]  # isin: no NA in the mask
    passed: pd.DataFrame = ok.assign(params=ok["params"].map(params_text))
    return passed


def _metrics(large: pd.DataFrame, timed: pd.DataFrame) -> pd.DataFrame:
    """The peak busbw of `large`'s rows and the smallest size's time of `timed`'s, per run
    and series."""
    keys = ["run_id", *SERIES]
    peak = large.sort_values("busbw_gb_per_s").drop_duplicates(keys, keep="last")
    smallest = timed.sort_values("size_bytes").drop_duplicates(keys, keep="first")
    parts = [
        frame[[*keys, "size_bytes"]].assign(metric=metric.name, value=frame[column])
        for metric, frame, column in (
            (PEAK_BUSBW, peak, "busbw_gb_per_s"),
            (SMALLEST_TIME, smallest, "time_us"),
        )
    ]
    metrics: pd.DataFrame = pd.concat(parts, ignore_index=True)
    return metrics


@dataclass(frozen=True)
class Deviation:
    """How much worse than the baseline values are (positive: worse), as a fraction of the
    baseline median and in robust standard deviations of the baseline."""

    fraction: pd.Series
    z: pd.Series

    def __neg__(self) -> Deviation:
        return Deviation(-self.fraction, -self.z)


class Check(Protocol):
    def fails(self, deviation: Deviation) -> pd.Series: ...


@dataclass(frozen=True)
class RobustZ:
    """Worse than the baseline median by at least `z` robust standard deviations: the bar is
    the series' own night-to-night noise, so a noisy series needs a larger change."""

    z: float

    def fails(self, deviation: Deviation) -> pd.Series:
        return deviation.z >= self.z


@dataclass(frozen=True)
class RelativeFloor:
    """Worse by at least `fraction` of the median: a very steady series (a tiny MAD) does not
    alarm on a change too small to act on."""

    fraction: float

    def fails(self, deviation: Deviation) -> pd.Series:
        return deviation.fraction >= self.fraction


@dataclass(frozen=True)
class Policy:
    """When a series is a regression: every check fails on each of the last `persistence`
    runs, against the baseline of up to `window` runs before them. A series with fewer than
    `min_history` runs before tonight's (the streak's earlier runs included) is new, and
    nothing is judged."""

    window: int
    min_history: int
    persistence: int
    checks: tuple[Check, ...]
    bandwidth_min_size_bytes: int

    @classmethod
    def of(cls, settings: NightlySettings) -> Policy:
        """The policy a profile's `nightly:` section sets."""
        return cls(
            window=settings.window,
            min_history=settings.min_history,
            persistence=settings.persistence,
            checks=(RobustZ(settings.z), RelativeFloor(settings.min_change)),
            bandwidth_min_size_bytes=settings.bandwidth_min_size,
        )

    @property
    def runs(self) -> int:
        """How many runs, tonight's included, a verdict looks at."""
        return self.window + self.persistence

    def worse(self, deviation: Deviation) -> pd.Series:
        """Whether each value is worse: every check fails on it."""
        worse: pd.Series = pd.Series(True, index=deviation.z.index)
        for check in self.checks:
            worse = worse & check.fails(deviation)
        return worse


def _deviation(values: pd.Series, median: pd.Series, sigma: pd.Series, metric: Metric) -> Deviation:
    gap = (median - values) if metric.higher_is_better else (values - median)
    # sigma 0 (identical baseline values): z is infinite, and the relative floor decides
    return Deviation(gap / median, gap / sigma)


def detect(metrics: pd.DataFrame, runs: Sequence[str], policy: Policy) -> pd.DataFrame:
    """Tonight's verdict per series and metric, for the series tonight measured.

    `runs`: run ids oldest first, tonight's last; `metrics`: their `run_metrics`. Columns:
    the SERIES columns, metric, unit, size_bytes and value (tonight's), baseline (median),
    sigma (1.4826 x MAD), baseline_runs (values in it), change (value / baseline - 1), z
    ((value - baseline) / sigma), and status: regression, worse (tonight only, so far),
    better, ok, or new.
    """
    tonight = runs[-1]
    streak = list(runs[-policy.persistence :])
    earlier = list(runs[: -policy.persistence])[-policy.window :]
    out = []
    for metric in METRICS:
        of_metric = metrics[metrics["metric"] == metric.name]
        # one number per series: pair and MoE columns are empty (NA) on other rows, and
        # NA keys do not survive a pivot
        of_metric = of_metric.assign(
            series=of_metric.groupby(list(SERIES), dropna=False, sort=False).ngroup()
        )
        table = of_metric.pivot(index="series", columns="run_id", values="value")
        table = table.reindex(columns=list(runs))
        table = table[table[tonight].notna()]
        baseline = table[earlier]
        median = baseline.median(axis=1)
        sigma = MAD_TO_SIGMA * baseline.sub(median, axis=0).abs().median(axis=1)
        baseline_runs = baseline.notna().sum(axis=1)
        earlier_runs = table[list(runs[:-1])].notna().sum(axis=1)
        now = _deviation(table[tonight], median, sigma, metric)
        worse_tonight = policy.worse(now)
        persistent = pd.concat(
            [policy.worse(_deviation(table[run], median, sigma, metric)) for run in streak], axis=1
        ).all(axis=1)
        # a persistence longer than min_history leaves some such series no baseline at all
        new = (earlier_runs < policy.min_history) | (baseline_runs == 0)
        status = np.select(
            [new, persistent, worse_tonight, policy.worse(-now)],
            ["new", "regression", "worse", "better"],
            "ok",
        )
        measured = of_metric[of_metric["run_id"] == tonight].set_index("series")
        frame = measured.loc[table.index, [*SERIES, "size_bytes"]].assign(
            metric=metric.name,
            unit=metric.unit,
            value=table[tonight],
            baseline=median,
            sigma=sigma,
            baseline_runs=baseline_runs,
            change=table[tonight] / median - 1,
            z=(table[tonight] - median) / sigma,
            status=status,
        )
        out.append(frame.reset_index(drop=True))
    findings: pd.DataFrame = pd.concat(out, ignore_index=True)
    return findings
