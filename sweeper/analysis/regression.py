"""Nightly regression detection: each run's summary metrics per series, and the small rules that
decide whether tonight is a regression. Pure: DataFrames in, DataFrames out.

A series is a point without its size, kept group by group (so one weak link shows) and launch
mode by launch mode. Tonight is compared with the median and robust spread of up to `window`
earlier nights; `persistence` worse nights make a regression. Each series is also segmented
into steps and drifts, and a group much noisier than its peers is `fail_slow`. A scan's series
(`scan_metrics`) are named by stage and host names, so that they recur night after night.
docs/REGRESSIONS.md, "A history", gives each rule and its figures."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
MIN_SEGMENT = 2  # nights a side of a step: one night alone is an outlier, not a level
# A group whose series are this many times as noisy as their peers' (a geometric mean over
# its series) is fail-slow: doubled noise is flagged, a peer's own spread seldom is
# (docs/REGRESSIONS.md has the rates).
FAIL_SLOW_RATIO = 1.5
MIN_PEERS = 3  # fewer other groups of a measurement: no fail-slow verdict
FAIL_SLOW_NIGHTS = 10  # fewer nights know a series' noise to no better than +-30%
# The series of a measurement on every group: peers differ only in these.
_GROUP_KEYS = ("group_id", "src_rank", "dst_rank", "rank")
_PEER_KEYS = tuple(key for key in SERIES if key not in _GROUP_KEYS)
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
    def step_bar(self) -> tuple[float, float]:
        """The robust z and the relative floor a step must pass: the checks' own."""
        z = next((c.z for c in self.checks if isinstance(c, RobustZ)), 0.0)
        floor = next((c.fraction for c in self.checks if isinstance(c, RelativeFloor)), 0.0)
        return z, floor

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


def noise(values: np.ndarray[Any, np.dtype[np.float64]], skip: Sequence[int] = ()) -> float:
    """The night-to-night sigma of a series (oldest first, no NaN): from the mean absolute
    difference of successive nights (sqrt(pi) / 2 x it for normal noise, efficient where a
    median of 14 nights is not), leaving out the differences across `skip` (each the index
    of a step's first night)."""
    gaps = np.abs(np.diff(values))
    kept = np.delete(gaps, [i - 1 for i in skip if 0 < i <= len(gaps)])
    return float(np.mean(kept) * math.sqrt(math.pi) / 2) if len(kept) else math.nan


def steps(values: np.ndarray[Any, np.dtype[np.float64]], z: float, floor: float) -> list[int]:
    """Where a series' level changes (asv's step detection, by binary segmentation): the
    index of each segment's first night but the first's, oldest first. A split is kept where
    both sides have MIN_SEGMENT nights and their medians differ by more than `z` robust
    sigmas of the night-to-night differences and by `floor` of the earlier median."""
    sigma = MAD_TO_SIGMA * float(np.median(np.abs(np.diff(values)))) / math.sqrt(2)
    found: list[int] = []
    # plain floats: a series has a few dozen nights, where numpy's median costs 60 us a call
    # in overhead and a fleet's nightly judges tens of thousands of series
    nights = values.tolist()

    def deviation(part: list[float]) -> float:
        middle = statistics.median(part)
        return sum(abs(v - middle) for v in part)

    def split(lo: int, hi: int) -> None:
        best, cost = None, math.inf
        for i in range(lo + MIN_SEGMENT, hi - MIN_SEGMENT + 1):
            here = deviation(nights[lo:i]) + deviation(nights[i:hi])
            if here < cost:
                best, cost = i, here
        if best is None:
            return
        before, after = statistics.median(nights[lo:best]), statistics.median(nights[best:hi])
        if abs(after - before) <= max(z * sigma, floor * abs(before)):
            return
        found.append(best)
        split(lo, best)
        split(best, hi)

    split(0, len(values))
    return sorted(found)


def drift(values: np.ndarray[Any, np.dtype[np.float64]]) -> float:
    """The Theil-Sen slope of a series over its nights, times their span, over its median:
    how far it moved end to end, as a fraction."""
    n = len(values)
    if n < 2:
        return math.nan
    slopes = [(values[j] - values[i]) / (j - i) for i in range(n) for j in range(i + 1, n)]
    return float(np.median(slopes) * (n - 1) / np.median(values))


@dataclass(frozen=True)
class History:
    """A series over its nights: its noise (sigma over median), the night its last step
    began with the change of the median there (after / before - 1), and its drift."""

    noise: float
    nights: int = 0  # the values it is over
    step_began: Any = None  # the row's label (a run id) of the step's first night
    step_change: float = math.nan
    drift: float = math.nan


def history(row: pd.Series, z: float, floor: float) -> History:
    """`row`: a series' values by run, oldest first (NaN where a run did not measure it)."""
    values = row.dropna()
    if len(values) < 2 * MIN_SEGMENT:
        return History(math.nan, len(values))
    array = values.to_numpy(dtype=np.float64)
    found = steps(array, z, floor)
    relative = noise(array, found) / float(np.median(array))
    if not found:
        return History(relative, len(array), drift=drift(array))
    begin = found[-1]
    before = float(np.median(array[found[-2] if len(found) > 1 else 0 : begin]))
    after = float(np.median(array[begin:]))
    return History(relative, len(array), values.index[begin], after / before - 1, drift(array))


def fail_slow(findings: pd.DataFrame) -> pd.Series:
    """Each finding's group's noise against its peers': over the group's series, the
    geometric mean of each one's noise over the median of its peers' (the same metric and
    measurement on the other groups, at least MIN_PEERS of them), each over at least
    FAIL_SLOW_NIGHTS nights; NaN without. One
    series' noise over 14 nights is known to about +-20%; a group's several series together
    know it better."""
    keys = ["metric", *_PEER_KEYS]
    ratios = pd.Series(np.nan, index=findings.index)
    known = findings["noise"].where(findings["noise_nights"] >= FAIL_SLOW_NIGHTS)
    for _, part in known.groupby([findings[key] for key in keys], dropna=False, sort=False):
        for index, value in part.items():
            others = part.drop(index).dropna()
            usual = float(others.median()) if len(others) >= MIN_PEERS else math.nan
            if usual > 0:  # peers that never varied (identical values): no measure of noise
                ratios[index] = value / usual
    logs = np.log(ratios.where(ratios > 0))
    by_group: pd.Series = np.exp(logs.groupby(findings["group_id"]).transform("mean"))
    return by_group


def detect(metrics: pd.DataFrame, runs: Sequence[str], policy: Policy) -> pd.DataFrame:
    """Tonight's verdict per series and metric, for the series tonight measured.

    `runs`: run ids oldest first, tonight's last; `metrics`: their `run_metrics`. Columns:
    the SERIES columns, metric, unit, size_bytes and value (tonight's), baseline (median),
    sigma (the most of 1.4826 x the baseline's MAD, the night-to-night `noise` of its runs,
    and its peers' median noise), baseline_runs (values in it), change (value / baseline -
    1), z ((value - baseline) / sigma), threshold (the value from which a night
    counts as worse: baseline less, or for a time more, the larger of z x sigma and the
    relative floor of the baseline), and status: regression, worse (tonight only, so far),
    better, ok, or new; noise (the series' night-to-night sigma over its median, over all
    `runs`, steps left out) and noise_nights (the runs it is over); trend (of a worse
    series: `step` where a step beyond the noise made it so, with step_began the run it
    began with and step_change its size, else `drift`, with drift the Theil-Sen slope over
    the runs as a fraction); noise_ratio (`fail_slow`: the group's noise against its
    peers') and fail_slow (noise_ratio at least FAIL_SLOW_RATIO).
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
        past = [history(row, *policy.step_bar) for _, row in table.iterrows()]
        # the MAD of a few nights can come out near 0 by chance; the night-to-night
        # differences of the baseline's nights know the noise better (a step among them
        # only raises the bar: few nights can split by chance into steps that are none)
        known = pd.Series(
            [noise(row.dropna().to_numpy(dtype=np.float64)) for _, row in baseline.iterrows()],
            index=table.index,
        )
        mad = MAD_TO_SIGMA * baseline.sub(median, axis=0).abs().median(axis=1)
        # and a series is no quieter than its peers' median (the same measurement on the
        # other groups): a few nights of one series can look quiet by chance, several
        # groups' together seldom do
        first = of_metric.drop_duplicates("series").set_index("series").loc[table.index]
        relative = known / median
        peers = relative.groupby(
            [first[key].astype("string").fillna("") for key in _PEER_KEYS], sort=False
        ).transform("median")
        sigma = np.fmax(np.fmax(mad, known), peers * median)
        baseline_runs = baseline.notna().sum(axis=1)
        earlier_runs = table[list(runs[:-1])].notna().sum(axis=1)
        now = _deviation(table[tonight], median, sigma, metric)
        z, floor = policy.step_bar  # every check must fail: the larger bar decides
        bar = np.fmax(z * sigma, floor * median.abs())
        threshold = median - bar if metric.higher_is_better else median + bar
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
        step_change = pd.Series([h.step_change for h in past], index=table.index)
        worse_step = (-step_change if metric.higher_is_better else step_change) > 0
        judged = pd.Series(status, index=table.index).isin(["regression", "worse"])
        stepped = judged & worse_step
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
            threshold=threshold,
            status=status,
            noise=[h.noise for h in past],
            noise_nights=[h.nights for h in past],
            trend=pd.Series(
                np.where(stepped, "step", "drift"), index=table.index, dtype="string"
            ).where(judged),
            step_began=pd.Series(
                [h.step_began for h in past], index=table.index, dtype=object
            ).where(stepped, None),
            step_change=step_change.where(stepped),
            drift=[h.drift for h in past],
        )
        out.append(frame.reset_index(drop=True))
    findings: pd.DataFrame = pd.concat(out, ignore_index=True)
    findings["noise_ratio"] = fail_slow(findings)
    findings["fail_slow"] = (findings["noise_ratio"] >= FAIL_SLOW_RATIO).fillna(False)
    return findings
