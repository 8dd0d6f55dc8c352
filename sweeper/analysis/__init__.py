"""Reading results, pure functions over rows and DataFrames (no Ray, no torch): summaries,
latency/bandwidth fits, point-to-point matrices, algorithm tables, run comparisons, and which
launch mode of a point they read (graph where it was timed both ways)."""

from sweeper.analysis.algorithms import best_per_size, candidate, candidates, ties
from sweeper.analysis.changes import RegressionRule, point_changes
from sweeper.analysis.fits import AlphaBeta, fit_alpha_beta, fits
from sweeper.analysis.launches import launch_costs, preferred
from sweeper.analysis.p2p import PairMatrix, mad_outliers, pair_matrices, pair_table
from sweeper.analysis.summary import (
    OpSummary,
    label,
    launch_modes,
    probe_seconds,
    summarize,
    tier_name,
)

__all__ = [
    "AlphaBeta",
    "OpSummary",
    "PairMatrix",
    "RegressionRule",
    "best_per_size",
    "candidate",
    "candidates",
    "fit_alpha_beta",
    "fits",
    "label",
    "launch_costs",
    "launch_modes",
    "mad_outliers",
    "pair_matrices",
    "pair_table",
    "point_changes",
    "preferred",
    "probe_seconds",
    "summarize",
    "tier_name",
    "ties",
]
