"""`sweeper compare`: two runs of a results directory, point by point.

The changes are `analysis.changes.point_changes`, the same the report's baseline section
shows: each point's bus bandwidth and time in both runs, the change, a Mann-Whitney test
of the per-iteration samples where both runs kept them (`--samples`), and whether the
point regressed or improved under a `RegressionRule`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
from rich.console import Console
from rich.table import Table

from sweeper.analysis import RegressionRule, point_changes
from sweeper.commands.nightly_run import json_value, series_name
from sweeper.planning.sizes import format_size
from sweeper.results.load import resolve, run_rows


@dataclass(frozen=True)
class Comparison:
    base: str  # run ids, as resolved (`latest` named)
    new: str
    rule: RegressionRule
    changes: pd.DataFrame  # point_changes' frame

    @property
    def regressions(self) -> int:
        return int(self.changes["regression"].sum())

    @property
    def improvements(self) -> int:
        return int(self.changes["improvement"].sum())


def compare(results: Path, base: str, new: str, rule: RegressionRule) -> Comparison:
    """Run `new` against run `base` (run ids or `latest`); BadInput for an unknown run."""
    base_id, new_id = resolve(results, base), resolve(results, new)
    changes = point_changes(run_rows(results, base_id), run_rows(results, new_id), rule)
    return Comparison(base_id, new_id, rule, changes)


def _shown(comparison: Comparison, every: bool) -> pd.DataFrame:
    """The points to show, worst change first: regressions and improvements, or with `every`
    every point of either run."""
    changes = comparison.changes
    if not every:
        changes = changes[changes["regression"] | changes["improvement"]]
    # regressions first, then by change; changes equal to a tenth of a percent read as one,
    # and are shown in a stable order
    keys = ["regression", "change", "group_id", "op", "algorithm", "dtype", "size_bytes"]
    ordered: pd.DataFrame = (
        changes.assign(change=changes["busbw_change"].round(3))
        .sort_values(keys, ascending=[False, *[True] * 6], na_position="last")
        .drop(columns="change")
    )
    return ordered


def records(comparison: Comparison, every: bool) -> dict[str, Any]:
    """The comparison as a JSON-ready object: the runs, the rule, the counts and the points."""
    return {
        "base": comparison.base,
        "new": comparison.new,
        "rule": {"threshold": comparison.rule.threshold, "alpha": comparison.rule.alpha},
        "points": int((comparison.changes["present"] == "both").sum()),
        "regressions": comparison.regressions,
        "improvements": comparison.improvements,
        "changes": [
            {str(key): json_value(value) for key, value in point.items()}
            for point in _shown(comparison, every).to_dict("records")
        ],
    }


def _number(value: float, spec: str) -> str:
    return "-" if pd.isna(value) else format(value, spec)


def print_comparison(comparison: Comparison, every: bool, out: TextIO | None = None) -> None:
    console = Console(file=out or sys.stdout, highlight=False, width=160)
    changes, rule = comparison.changes, comparison.rule
    console.print(
        f"{comparison.new} against {comparison.base}: "
        f"{int((changes['present'] == 'both').sum())} points in both, "
        f"{comparison.regressions} regressions, {comparison.improvements} improvements "
        f"(a change of at least {rule.threshold:.0%} in bus bandwidth, with p < {rule.alpha:g} "
        "where both runs kept samples; or failed only now)",
        soft_wrap=True,
    )
    shown = _shown(comparison, every)
    if shown.empty:
        return
    table = Table()
    columns = ("", "series", "size", "base GB/s", "GB/s", "change", "p")
    for column in (*columns, "status"):
        table.add_column(column, justify="right" if column in columns[2:] else "left")
    for point in shown.to_dict("records"):
        verdict = "regression" if point["regression"] else ""
        verdict = "improvement" if point["improvement"] else verdict
        table.add_row(
            verdict,
            series_name(point),
            format_size(int(point["size_bytes"])),
            _number(point["base_busbw_gb_per_s"], ".3g"),
            _number(point["new_busbw_gb_per_s"], ".3g"),
            _number(point["busbw_change"], "+.1%"),
            _number(point["p_value"], ".2g"),
            f"{point['base_status']} -> {point['new_status']}"
            if point["present"] == "both"
            else f"only in {point['present']}",
        )
    console.print(table)
