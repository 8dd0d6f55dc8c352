"""`sweeper compare`: two runs of a results directory, point by point.

The changes are `analysis.changes.point_changes`, the same the report's baseline section
shows: each point's bus bandwidth and time in both runs, the change, the noise two runs of
it show (its size class's floor, its blocks' spread, its series' scatter), and its verdict
under a `RegressionRule`: regression, improvement, unclear (a change the noise can explain)
or unchanged.
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
from sweeper.analysis.changes import VERDICTS
from sweeper.analysis.nightly import json_value, series_name
from sweeper.errors import BadInput
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

    def counts(self) -> dict[str, int]:
        """Points of both runs per verdict, every verdict named."""
        counts = self.changes["verdict"].value_counts()
        return {verdict: int(counts.get(verdict, 0)) for verdict in VERDICTS}


def compare(results: Path, base: str, new: str, rule: RegressionRule) -> Comparison:
    """Run `new` against run `base` (run ids or `latest`); BadInput for an unknown run, or
    two runs that measured no point in common (nothing to compare: not "no regression")."""
    base_id, new_id = resolve(results, base), resolve(results, new)
    changes = point_changes(run_rows(results, base_id), run_rows(results, new_id), rule)
    if not (changes["present"] == "both").any():
        raise BadInput(
            f"runs {base_id} and {new_id} measured no point in common (the same group, "
            "operation, dtype, size, launch and engine)",
            hint="compare runs of the same sweep",
        )
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
        "rule": {"threshold": comparison.rule.threshold, "k": comparison.rule.k},
        "points": int((comparison.changes["present"] == "both").sum()),
        "regressions": comparison.regressions,
        "improvements": comparison.improvements,
        "counts": comparison.counts(),
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
    counts = comparison.counts()
    console.print(
        f"{comparison.new} against {comparison.base}: "
        f"{int((changes['present'] == 'both').sum())} points in both, "
        + ", ".join(f"{n} {verdict}" for verdict, n in counts.items())
        + f" (a change of bus bandwidth counts beyond {rule.threshold:.0%} and the noise of "
        "its point: its size's floor, and "
        f"{rule.k:g}x its runs' blocks' spread and its series' scatter, or beyond its floor "
        "where its series' size class moved as a whole beyond the class's noise; or a point "
        "failed only now; unclear: a change the noise can explain)",
        soft_wrap=True,
    )
    shown = _shown(comparison, every)
    if shown.empty:
        return
    table = Table()
    columns = ("", "series", "size", "base GB/s", "GB/s", "change", "noise", "class", "class noise")
    for column in (*columns, "status"):
        table.add_column(column, justify="right" if column in columns[2:] else "left")
    for point in shown.to_dict("records"):
        table.add_row(
            "" if pd.isna(point["verdict"]) else str(point["verdict"]),
            series_name(point),
            format_size(int(point["size_bytes"])),
            _number(point["base_busbw_gb_per_s"], ".3g"),
            _number(point["new_busbw_gb_per_s"], ".3g"),
            _number(point["busbw_change"], "+.1%"),
            _number(point["noise"], ".1%"),
            _number(point["class_change"], "+.1%"),
            _number(point["class_noise"], ".1%"),
            f"{point['base_status']} -> {point['new_status']}"
            if point["present"] == "both"
            else f"only in {point['present']}",
        )
    console.print(table)
