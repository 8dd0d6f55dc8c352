"""Reading results, pure functions over rows and DataFrames (no Ray, no torch):
summaries, and (in their own modules) fits, regressions and matrices."""

from sweeper.analysis.summary import OpSummary, label, probe_seconds, summarize, tier_name

__all__ = ["OpSummary", "label", "probe_seconds", "summarize", "tier_name"]
