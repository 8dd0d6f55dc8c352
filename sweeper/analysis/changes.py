"""Two runs, point by point: how much each point changed, how much its runs vary, and what two
runs can say about it: a regression, an improvement, unchanged, or unclear.

A point is a row's `results.schema.POINT` columns, launch mode included, so graph is compared
with graph and eager with eager. `busbw_change` and `time_change` are new / base - 1. Two runs
are judged by their timed blocks, never their iterations, against a floor per size class
(`SIZE_CLASSES`), as the `RegressionRule` says; docs/REGRESSIONS.md gives the figures."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweeper.results.schema import POINT
from sweeper.wire import Status

CHANGE_COLUMNS = (
    *POINT,
    "present",  # both, base, new: which runs measured the point
    "base_status",
    "new_status",
    "base_busbw_gb_per_s",
    "new_busbw_gb_per_s",
    "busbw_change",
    "base_time_us",
    "new_time_us",
    "time_change",
    "base_spread",  # ln(slowest / fastest block) of each run
    "new_spread",
    "scatter",  # the robust spread of ln(1 + change) over the series' size class
    "noise",  # the change the runs could show unchanged: e^max(ln(1+floor), k x ...) - 1
    "class_change",  # the median change of the series' points in its size class
    "class_noise",  # the change that median could show unchanged (NaN: too few points)
    "verdict",  # VERDICTS; null where one run only measured the point
    "regression",
    "improvement",
)
VERDICTS = ("regression", "improvement", "unclear", "unchanged")
MIN_BLOCKS = 3  # fewer blocks say nothing of a run's spread
MIN_SCATTER_POINTS = 3  # fewer points of a series in a size class: no scatter
MAD_TO_SIGMA = 1.4826  # MAD x this estimates the standard deviation of normal noise
MEDIAN_EFFICIENCY = 1.2533  # sqrt(pi / 2): a median's standard error over the mean's
# A point over sizes: its series, whose points in one size class share their runs' noise.
SERIES = tuple(key for key in POINT if key != "size_bytes")


@dataclass(frozen=True)
class SizeClass:
    """The sizes below `below_bytes` (and at least the previous class's bound): `floor` is
    the smallest change two runs of them can tell, whatever their blocks say."""

    name: str
    below_bytes: float
    floor: float


# Between two identical runs the blocks of one run agree far better than the runs do (the
# run's clocks, placement and NCCL's channels are fixed for its length), so the blocks alone
# understate the noise; the floors are what identical runs moved on 4 H200 (NV18, recorded
# in tests/data/results/h200-x4-identical-2026-11-27, and issue 42): up to 43% below 64 KiB,
# where launch and synchronisation decide the time; up to 4% at 64 KiB-1 MiB; 1-3% from
# 1 MiB, where the link does, but 16% for send_recv at 1-2 MiB, which its blocks' spread
# covers (`RegressionRule.k`).
SIZE_CLASSES = (
    SizeClass("small", 64 * 2**10, 0.5),
    SizeClass("medium", 2**20, 0.1),
    SizeClass("large", math.inf, 0.05),
)


def size_class(size_bytes: float) -> SizeClass:
    return next(c for c in SIZE_CLASSES if size_bytes < c.below_bytes)


@dataclass(frozen=True)
class RegressionRule:
    """A point that ran in both runs is a regression when it failed in the new one only, or
    when it lost more of its bus bandwidth than each bar: `threshold`, its size class's floor,
    `k` x the combined spread of the two runs' blocks (the root of the sum of their squares of
    ln(slowest / fastest block)), and `k` x its series' scatter. The scatter is how far
    neighbouring sizes of the series move apart in that size class, where it has at least
    MIN_SCATTER_POINTS (`_scatter`). Every block of the new run must also be slower than every
    block of the base, and a neighbouring size of its series slower beyond its own floor
    (`_corroborated`; a series of one judged size has none to ask). An improvement is the same
    the other way round. A change of less than `threshold` is unchanged; a larger one that the
    noise can explain, or of a point without `MIN_BLOCKS` blocks a side, is unclear.

    A point is also a regression where its series' size class moved as a whole
    (`_class_shift`). The median change of the class's points must lose more than the
    threshold, the class's floor, `k` x the median's standard error and `k` x the median
    spread of their blocks; the point itself more than the threshold and its floor, every
    block slower. One size of a series is now and then dealt a slower state for a whole run
    (send_recv on two H200: 6-9% at one size, its neighbours within 1%), which the scatter
    rightly counts as noise. A cause in the fabric, the library or the configuration moves
    every size of the class, so their median moves with little error, and the point's own
    draw of noise no longer hides it (docs/REGRESSIONS.md has the figures).

    Every change is judged as a log ratio (ln(new / base)), so that a point twice as fast
    from A to B is as clear as half as fast from B to A; `noise` is its bar as a fraction.
    The scatter is the two runs' own measure of the noise between them: a slower link moves
    neighbouring sizes alike, while a busy host moves them by unrelated amounts (on the
    2-core CPU box, by -80% to +400% between identical runs whose blocks spread far less).
    k = 3 is the smallest that leaves every point of two identical runs unflagged, on 4 H200
    (k = 2 flags 3 of 154) and on the CPU box (docs/REGRESSIONS.md)."""

    threshold: float = 0.05
    k: float = 3.0


def change_text(change: float, signed: bool = False) -> str:
    """A relative change or a noise as a person reads it: 5.0% (+20.0% signed) under 100%,
    and from there the factor it is, 2.5x or 1,657x (where a percentage read 165598%); '-'
    for none."""
    if math.isnan(change):
        return "-"
    if abs(change) < 1:
        return format(change, "+.1%" if signed else ".1%")
    factor = 1 + change
    return f"{factor:,.0f}x" if factor >= 10 else f"{factor:.1f}x"


def params_text(value: object) -> str:
    """The `params` map (key-value pairs, or a dict) as one comparable string, k=v in key
    order; '' when there is none."""
    if isinstance(value, Mapping):
        value = value.items()
    if not isinstance(value, Iterable) or isinstance(value, str):
        return ""
    pairs: list[Any] = list(value)
    return ",".join(f"{k}={v}" for k, v in sorted((str(k), str(v)) for k, v in pairs))


def _points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per point (the last measured when a point repeats), keyed by POINT."""
    frame = df.assign(params=[params_text(p) for p in df["params"]])
    frame = frame.sort_values("measured_at", kind="stable", na_position="first")
    latest = frame.drop_duplicates(list(POINT), keep="last")
    points: pd.DataFrame = latest[[*POINT, "status", "busbw_gb_per_s", "time_us", "time_us_blocks"]]
    return points


def _blocks(value: object) -> np.ndarray[Any, np.dtype[np.float64]] | None:
    """A run's block times, where it kept at least MIN_BLOCKS of them."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    blocks = np.asarray(value, dtype=np.float64)
    blocks = blocks[np.isfinite(blocks) & (blocks > 0)]
    return blocks if len(blocks) >= MIN_BLOCKS else None


def _spread(blocks: np.ndarray[Any, np.dtype[np.float64]] | None) -> float:
    """How far a run's blocks are apart: ln(slowest / fastest), a ratio as changes are."""
    if blocks is None:
        return math.nan
    return float(np.log(blocks.max() / blocks.min()))


@dataclass(frozen=True)
class _Classes:
    """The judged points keyed by their series and size class (the key columns' `names`), in
    order of size within each, with their log change (`log`), size, class floor as a log
    (`floor`) and two runs' combined block spread (`spread`): what the scatter, the
    neighbour rule and the class's shift read, made once. `index`: every point's."""

    frame: pd.DataFrame
    names: list[str]
    index: pd.Index

    def groups(self) -> Any:
        return self.frame.groupby(self.names, sort=False)

    def keys(self) -> list[pd.Series]:
        return [self.frame[n] for n in self.names]


def _in_series_classes(
    out: pd.DataFrame, judged: np.ndarray[Any, np.dtype[np.bool_]], floor: Any, spread: Any
) -> _Classes:
    frame = pd.DataFrame(
        {
            "log": np.log1p(out["busbw_change"].where(judged)),
            "size": out["size_bytes"],
            "floor": floor,
            "spread": spread,
        },
        index=out.index,
    )
    names = []
    for i, key in enumerate(SERIES):
        frame[f"k{i}"] = out[key].astype("string").fillna("")
        names.append(f"k{i}")
    frame["class"] = [size_class(s).name for s in out["size_bytes"]]
    names.append("class")
    judged_frame = frame[frame["log"].notna()].sort_values([*names, "size"], kind="stable")
    return _Classes(judged_frame, names, out.index)


def _scatter(classes: _Classes) -> pd.Series:
    """Each point's series' scatter in its size class, from the successive differences of
    the log changes of its judged points there, in order of size: 1.4826 x their MAD over
    sqrt(2) (the difference of two independent points has sqrt(2) times their sigma); NaN
    with fewer than MIN_SCATTER_POINTS points. Differences, not deviations from the class's
    median: a real change moves neighbouring sizes alike, but not every size of a class by
    as much (fewer NCCL channels cost 4 H200 63% of all_reduce's bus bandwidth at 1 MiB and
    87% at 256 MiB). Its spread over the class would count as noise and hide it, where noise
    moves neighbouring sizes by unrelated amounts."""
    keys = classes.keys()
    steps = classes.groups()["log"].diff()
    deviation = steps - steps.groupby(keys, sort=False).transform("median")
    mad = deviation.abs().groupby(keys, sort=False).transform("median")
    count = classes.groups()["log"].transform("count")
    per_point = (MAD_TO_SIGMA * mad / math.sqrt(2)).where(count >= MIN_SCATTER_POINTS)
    # every point of a series' class gets the class's figure (its first point has no step)
    per_class = per_point.groupby(keys, sort=False).transform("max")
    scatter: pd.Series = per_class.reindex(classes.index)
    return scatter


def _corroborated(classes: _Classes) -> pd.Series:
    """Whether each point's change is shared by a neighbouring size of its series in its
    size class: the size just below or just above it there (among the judged) moved the same
    way by at least the class's floor. True for a point with no other judged size of its
    series in its class, which has no neighbour to ask. A cause in the fabric, the library or
    the configuration moves a range of sizes. The state a run is dealt moves one size now and
    then (two H200s, three identical runs: all_reduce at 256 KiB 12% apart in one of them,
    its neighbours within 1.6%), and two runs cannot tell that from a change at that size."""
    series = classes.groups()
    sign = np.sign(classes.frame["log"])
    shared = pd.Series(False, index=classes.frame.index)
    for step in (1, -1):
        log, floor = series["log"].shift(step), series["floor"].shift(step)
        shared |= ((np.sign(log) == sign) & (log.abs() >= floor)).fillna(False)
    alone = series["log"].transform("count") < 2
    corroborated: pd.Series = shared | alone
    corroborated = corroborated.reindex(classes.index, fill_value=True).astype(bool)
    return corroborated


def _class_shift(classes: _Classes, rule: RegressionRule) -> tuple[pd.Series, pd.Series]:
    """Each point's series' size class: the median of its judged points' log changes, and
    the bar that median must pass to be a change of the class (both NaN where the class has
    fewer than MIN_SCATTER_POINTS judged points, or its points no blocks). The bar is the
    largest of the threshold, the class's floor, `k` x the median's standard error (1.2533
    sigma / sqrt(n), sigma from the MAD of the points around it) and `k` x the median of
    the points' combined block spreads, so a run whose blocks scatter (a busy host) moves
    no class."""
    frame, keys = classes.frame, classes.keys()
    median = classes.groups()["log"].transform("median")
    mad = (frame["log"] - median).abs().groupby(keys, sort=False).transform("median")
    count = classes.groups()["log"].transform("count")
    error = MEDIAN_EFFICIENCY * MAD_TO_SIGMA * mad / np.sqrt(count)
    blocks = frame["spread"].groupby(keys, sort=False).transform("median")
    floor = np.fmax(frame["floor"], math.log1p(rule.threshold))
    bar = np.fmax(np.fmax(floor, rule.k * error), rule.k * blocks)  # NaN blocks: NaN
    enough = count >= MIN_SCATTER_POINTS
    return (
        median.where(enough).reindex(classes.index),
        bar.where(enough).reindex(classes.index),
    )


def _apart(base: object, new: object) -> tuple[bool, bool]:
    """Whether every block of `new` is slower than every block of `base`, and faster."""
    a, b = _blocks(base), _blocks(new)
    if a is None or b is None:
        return False, False
    return bool(b.min() > a.max()), bool(b.max() < a.min())


def point_changes(
    base: pd.DataFrame, new: pd.DataFrame, rule: RegressionRule | None = None
) -> pd.DataFrame:
    """Every point of either run with its change from `base` to `new` (each frame one run's
    rows, as `sweeper.load` returns them) and its verdict. Columns: `CHANGE_COLUMNS`.

    Points measured by one run only are kept (`present` = base or new) with NaN changes and
    no verdict; a point that failed in both is unchanged."""
    rule = rule or RegressionRule()
    merged = _points(base).merge(
        _points(new), on=list(POINT), how="outer", suffixes=("_base", "_new"), indicator=True
    )
    out = merged[list(POINT)].copy()
    out["present"] = merged["_merge"].map(
        {"both": "both", "left_only": "base", "right_only": "new"}
    )
    out["present"] = out["present"].astype(str)
    for side in ("base", "new"):
        out[f"{side}_status"] = merged[f"status_{side}"].astype("string")
        out[f"{side}_busbw_gb_per_s"] = merged[f"busbw_gb_per_s_{side}"].astype("float64")
        out[f"{side}_time_us"] = merged[f"time_us_{side}"].astype("float64")
        out[f"{side}_spread"] = [_spread(_blocks(b)) for b in merged[f"time_us_blocks_{side}"]]
    out["busbw_change"] = out["new_busbw_gb_per_s"] / out["base_busbw_gb_per_s"] - 1
    out["time_change"] = out["new_time_us"] / out["base_time_us"] - 1
    both = (out["present"] == "both").to_numpy()
    base_ok = (out["base_status"] == Status.OK).fillna(False).to_numpy(dtype=bool)
    new_ok = (out["new_status"] == Status.OK).fillna(False).to_numpy(dtype=bool)
    ran = both & base_ok & new_ok
    # changes are judged as log ratios, so that twice as fast and half as fast weigh alike
    floor = np.log1p([size_class(size).floor for size in out["size_bytes"]])
    spread = np.hypot(out["base_spread"], out["new_spread"])  # NaN without blocks
    classes = _in_series_classes(out, ran, floor, spread)
    out["scatter"] = _scatter(classes)
    # NaN scatter (too few points) is left out; NaN spread (no blocks) leaves the floor
    noise = np.fmax(np.fmax(floor, rule.k * spread), rule.k * out["scatter"])
    out["noise"] = np.expm1(noise)
    apart = [
        _apart(a, b)
        for a, b in zip(merged["time_us_blocks_base"], merged["time_us_blocks_new"], strict=True)
    ]
    slower_blocks = np.array([s for s, _ in apart], dtype=bool)
    faster_blocks = np.array([f for _, f in apart], dtype=bool)
    change = np.log1p(out["busbw_change"])
    bar = np.fmax(noise, math.log1p(rule.threshold))
    shared = _corroborated(classes).to_numpy(dtype=bool)
    moved, class_bar = _class_shift(classes, rule)
    out["class_change"] = np.expm1(moved)
    out["class_noise"] = np.expm1(class_bar)
    own = np.fmax(floor, math.log1p(rule.threshold))
    class_down = ((moved <= -class_bar) & (change <= -own)).fillna(False).to_numpy(dtype=bool)
    class_up = ((moved >= class_bar) & (change >= own)).fillna(False).to_numpy(dtype=bool)
    beyond_down = (change <= -bar).fillna(False).to_numpy(dtype=bool) & shared
    beyond_up = (change >= bar).fillna(False).to_numpy(dtype=bool) & shared
    slower = ran & slower_blocks & (beyond_down | class_down)
    faster = ran & faster_blocks & (beyond_up | class_up)
    small = ran & (change.abs() < math.log1p(rule.threshold)).fillna(False).to_numpy(dtype=bool)
    regression = (both & base_ok & ~new_ok) | slower
    improvement = (both & ~base_ok & new_ok) | faster
    verdict = np.select(
        [regression, improvement, small | (both & ~base_ok & ~new_ok)],
        ["regression", "improvement", "unchanged"],
        "unclear",
    )
    out["verdict"] = pd.Series(verdict, index=out.index, dtype="string").where(both)
    out["regression"] = regression
    out["improvement"] = improvement
    changes: pd.DataFrame = out[list(CHANGE_COLUMNS)].reset_index(drop=True)
    return changes
