"""Reading results, pure functions over rows and DataFrames (no Ray, no torch): summaries,
latency/bandwidth fits, point-to-point matrices, algorithm tables and run comparisons."""

from sweeper.analysis.algorithms import best_per_size, candidate, candidates
from sweeper.analysis.compare import RegressionRule, mann_whitney_p, point_changes
from sweeper.analysis.fits import AlphaBeta, fit_alpha_beta, fits
from sweeper.analysis.p2p import PairMatrix, mad_outliers, pair_matrices, pair_table
from sweeper.analysis.summary import OpSummary, label, probe_seconds, summarize, tier_name

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
    "mad_outliers",
    "mann_whitney_p",
    "pair_matrices",
    "pair_table",
    "point_changes",
    "probe_seconds",
    "summarize",
    "tier_name",
]
