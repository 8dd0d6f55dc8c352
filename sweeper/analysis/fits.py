"""Latency and bandwidth (alpha-beta) fits: time_us ~ alpha_us + size_bytes / (beta_gb_per_s x 1e3).

alpha is an operation's fixed cost (launch, synchronisation, the first byte's trip), beta the
rate its time grows at with S. The fit is robust, on relative residuals, with both parameters
kept >= 0, and reads a point's CUDA-graph time where it has one (`launches.preferred`);
docs/ARCHITECTURE.md, "Inside the rooms", says why."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from sweeper.analysis.launches import preferred
from sweeper.analysis.summary import label, launch_modes, tier_name
from sweeper.wire import Status

_HUBER_K = 1.345  # residuals beyond this many robust standard deviations get less weight
_MAD_TO_SIGMA = 1.4826
_MAX_ROUNDS = 50
_TOLERANCE = 1e-9

FIT_COLUMNS = (
    "tier",
    "world_size",
    "operation",
    "launch",  # the launch modes of its points: graph, eager, or both where a graph failed
    "alpha_us",
    "beta_gb_per_s",
    "rel_error",
    "points",
)


@dataclass(frozen=True)
class AlphaBeta:
    alpha_us: float
    beta_gb_per_s: float  # inf when the time does not grow with the size
    rel_error: float  # median |measured - model| / measured over the points
    points: int

    def time_us(self, size_bytes: float) -> float:
        return self.alpha_us + size_bytes / (self.beta_gb_per_s * 1e3)


def _solve(x: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Weighted least squares of x @ (alpha, us per byte) ~ 1, with both >= 0.

    With two unknowns the non-negative solution is the unconstrained one when it is
    non-negative, else the better of the two one-parameter fits."""
    w = np.sqrt(weights)[:, None]
    coef = np.linalg.lstsq(x * w, w[:, 0], rcond=None)[0]
    if (coef >= 0).all():
        return np.asarray(coef, dtype=np.float64)
    best: npt.NDArray[np.float64] = np.zeros(2)
    best_cost = np.inf
    for column in (0, 1):
        xc = x[:, column]
        denominator = float(np.sum(weights * xc * xc))
        one = np.zeros(2)
        one[column] = max(0.0, float(np.sum(weights * xc)) / denominator) if denominator else 0.0
        cost = float(np.sum(weights * (x @ one - 1) ** 2))
        if cost < best_cost:
            best, best_cost = one, cost
    return best


def fit_alpha_beta(
    size_bytes: npt.ArrayLike, time_us: npt.ArrayLike, *, huber_k: float = _HUBER_K
) -> AlphaBeta | None:
    """alpha (us) and beta (GB/s) for points (S, t); None with fewer than two distinct sizes."""
    s = np.asarray(size_bytes, dtype=np.float64)
    t = np.asarray(time_us, dtype=np.float64)
    keep = np.isfinite(s) & np.isfinite(t) & (t > 0)
    s, t = s[keep], t[keep]
    if len(np.unique(s)) < 2:
        return None
    # Dividing each equation by its measured time makes the residuals relative.
    x = np.column_stack([1 / t, s / t])
    weights = np.ones(len(t))
    coef = _solve(x, weights)
    for _ in range(_MAX_ROUNDS):
        residual = x @ coef - 1
        scale = _MAD_TO_SIGMA * float(np.median(np.abs(residual - np.median(residual))))
        if scale <= _TOLERANCE:
            break
        limit = huber_k * scale
        weights = np.minimum(1.0, limit / np.maximum(np.abs(residual), 1e-300))
        new = _solve(x, weights)
        converged = np.allclose(new, coef, rtol=1e-7, atol=0)
        coef = new
        if converged:
            break
    alpha_us, us_per_byte = float(coef[0]), float(coef[1])
    beta = 1 / (us_per_byte * 1e3) if us_per_byte > 0 else float("inf")
    rel_error = float(np.median(np.abs(x @ coef - 1)))
    return AlphaBeta(alpha_us, beta, rel_error, len(t))


def fits(df: pd.DataFrame) -> pd.DataFrame:
    """One alpha-beta fit per tier (with its variant), group size and operation, on `ok` rows.

    The groups of one tier and size (say the pairs of an NVLink island) and every dtype are
    fitted together: S is in bytes, so the element type does not change the model. Columns:
    `FIT_COLUMNS`; operations with fewer than two sizes are left out. Each point counts
    once, in its preferred launch mode (graph where it was timed both ways)."""
    rows = preferred(df)
    ok = rows[rows["status"] == Status.OK]
    out = []
    keys = ["tier", "variant", "world_size", "op", "algorithm"]
    for (tier, variant, world_size, op, algorithm), group in ok.groupby(keys, sort=False):
        fit = fit_alpha_beta(group["size_bytes"], group["time_us"])
        if fit is None:
            continue
        out.append(
            {
                "tier": tier_name(str(tier), str(variant)),
                "world_size": int(world_size),
                "operation": label(str(op), str(algorithm)),
                "launch": launch_modes(group["launch"]),
                "alpha_us": fit.alpha_us,
                "beta_gb_per_s": fit.beta_gb_per_s,
                "rel_error": fit.rel_error,
                "points": fit.points,
            }
        )
    table: pd.DataFrame = pd.DataFrame(out, columns=list(FIT_COLUMNS))
    return table
