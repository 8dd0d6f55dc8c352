"""Two runs, point by point: how much each point changed, whether the change is more than
noise, and which points regressed.

A point is what one row measures: the columns of `results.schema.POINT` (tier, variant,
group, operation, algorithm, dtype, size, engine and launch mode, and for point-to-point and
MoE rows the pair and the parameters). The launch mode is part of it because a graph replay
and an eager call are different measurements: a run timed both ways compares graph with
graph and eager with eager. Usage, for example with two runs of one results directory:

    base = sweeper.results.load.load("results", run_id="20261121T230000Z-a1b2c3")
    new = sweeper.results.load.load("results", run_id="20261122T230000Z-d4e5f6")
    changes = point_changes(base, new)
    changes[changes["regression"]]

`busbw_change` is new / base - 1 of the bus bandwidth (negative: slower), `time_change` the
same of the time. Where both rows kept per-iteration samples (`--samples`), `p_value` is a
two-sided Mann-Whitney U test of the two sets of samples, computed with numpy (normal
approximation with tie correction: good from about 8 samples a side; sweeper times at
least 5 iterations, adaptively many more). A `RegressionRule` decides what counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
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
    "p_value",
    "regression",
    "improvement",
)
MIN_SAMPLES = 5


@dataclass(frozen=True)
class RegressionRule:
    """A point regressed when it ran in both runs and either failed in the new one only, or
    lost at least `threshold` of its bus bandwidth with, where both runs kept samples, a
    p-value below `alpha`. An improvement is the same the other way round."""

    threshold: float = 0.05
    alpha: float = 0.01


def mann_whitney_p(a: Sequence[float] | npt.ArrayLike, b: Sequence[float] | npt.ArrayLike) -> float:
    """Two-sided p-value of the Mann-Whitney U test that `a` and `b` come from one
    distribution (normal approximation, tie-corrected, with continuity correction)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        return math.nan
    both = np.concatenate([x, y])
    ranks = pd.Series(both).rank(method="average").to_numpy()
    u = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    n = n1 + n2
    _, ties = np.unique(both, return_counts=True)
    tie_term = float(np.sum(ties.astype(np.float64) ** 3 - ties)) / (n * (n - 1))
    variance = n1 * n2 / 12 * ((n + 1) - tie_term)
    if variance <= 0:  # every sample equal: no evidence of a difference
        return 1.0
    distance = max(0.0, abs(u - n1 * n2 / 2) - 0.5)
    return math.erfc(distance / math.sqrt(variance) / math.sqrt(2))


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
    points: pd.DataFrame = latest[[*POINT, "status", "busbw_gb_per_s", "time_us", "samples_us"]]
    return points


def _p_value(base: object, new: object) -> float:
    if base is None or new is None:
        return math.nan
    a, b = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1 or len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return math.nan
    return mann_whitney_p(a, b)


def point_changes(
    base: pd.DataFrame, new: pd.DataFrame, rule: RegressionRule | None = None
) -> pd.DataFrame:
    """Every point of either run with its change from `base` to `new` (each frame one run's
    rows, as `sweeper.load` returns them). Columns: `CHANGE_COLUMNS`.

    Points measured by one run only are kept (`present` = base or new) with NaN changes and
    are neither regressions nor improvements; a point that failed in both is neither."""
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
    out["busbw_change"] = out["new_busbw_gb_per_s"] / out["base_busbw_gb_per_s"] - 1
    out["time_change"] = out["new_time_us"] / out["base_time_us"] - 1
    out["p_value"] = [
        _p_value(a, b)
        for a, b in zip(merged["samples_us_base"], merged["samples_us_new"], strict=True)
    ]
    both = out["present"] == "both"
    base_ok = (out["base_status"] == Status.OK).fillna(False).astype(bool)
    new_ok = (out["new_status"] == Status.OK).fillna(False).astype(bool)
    unsure = (out["p_value"] >= rule.alpha).fillna(False).astype(bool)  # NaN: no samples, no test
    slower = (out["busbw_change"] <= -rule.threshold).fillna(False).astype(bool) & ~unsure
    faster = (out["busbw_change"] >= rule.threshold).fillna(False).astype(bool) & ~unsure
    out["regression"] = both & base_ok & (~new_ok | slower)
    out["improvement"] = both & new_ok & (~base_ok | faster)
    changes: pd.DataFrame = out[list(CHANGE_COLUMNS)].reset_index(drop=True)
    return changes
