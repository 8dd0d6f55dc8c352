"""`sweeper compare`: two runs of a results directory, point by point.

The changes are `analysis.changes.point_changes`, the same the report's baseline section
shows: each point's bus bandwidth and time in both runs, the change, the noise two runs of
it show (its size class's floor, its blocks' spread, its series' scatter), and its verdict
under a `RegressionRule`: regression, improvement, unclear (a change the noise can explain)
or unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from sweeper.analysis import RegressionRule, label, point_changes
from sweeper.analysis.changes import VERDICTS, change_text
from sweeper.analysis.nightly import json_value, series_name
from sweeper.analysis.summary import figure
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


# The per-operation table's verdict columns: how many of its points have each verdict
_COUNTED = {
    "regression": "regr.",
    "improvement": "impr.",
    "unclear": "unclear",
    "unchanged": "unch.",
}


def operations(comparison: Comparison) -> pd.DataFrame:
    """Per operation (its label: all_reduce, p2p (uni)), in the order measured: the peak
    bus bandwidth of each run, the peak's change, and its points by verdict."""
    changes = comparison.changes
    labelled = changes.assign(
        operation=[label(o, a) for o, a in zip(changes["op"], changes["algorithm"], strict=True)]
    )
    by = labelled.groupby("operation", sort=False)
    table = pd.DataFrame(
        {
            "base_peak_gb_per_s": by["base_busbw_gb_per_s"].max(),
            "new_peak_gb_per_s": by["new_busbw_gb_per_s"].max(),
        }
    )
    table["change"] = table["new_peak_gb_per_s"] / table["base_peak_gb_per_s"] - 1
    verdicts = pd.crosstab(labelled["operation"], labelled["verdict"])
    for verdict in VERDICTS:
        table[verdict] = verdicts.get(verdict, 0)
    filled: pd.DataFrame = table.fillna({verdict: 0 for verdict in VERDICTS})
    return filled


def series_changes(shown: pd.DataFrame) -> pd.DataFrame:
    """The points shown, a row per verdict and series, in their order: its sizes, how many,
    its change's range and its noise's largest."""
    named = shown.assign(series=[series_name(p) for p in shown.to_dict("records")])
    by = named.groupby(["verdict", "series"], sort=False)
    runs = pd.DataFrame(
        {
            "smallest_bytes": by["size_bytes"].min(),
            "largest_bytes": by["size_bytes"].max(),
            "points": by.size(),
            "least_change": by["busbw_change"].min(),
            "most_change": by["busbw_change"].max(),
            "noise": by["noise"].max(),
        }
    )
    flat: pd.DataFrame = runs.reset_index()
    return flat


def _table(title: str | None = None) -> Table:
    """A table as the sweep's closing one is drawn: a rule under its head, no edges."""
    return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0))


def _span(low: float, high: float, written: Callable[[float], str]) -> str:
    return written(low) if written(low) == written(high) else f"{written(low)}..{written(high)}"


def print_comparison(comparison: Comparison, every: bool, out: TextIO | None = None) -> None:
    """The counts and the rule in a few lines, a table per operation, then the series whose
    points changed (every point with `every`): at the terminal's width, made to read at 80."""
    console = Console(file=out or sys.stdout, highlight=False)
    changes, rule = comparison.changes, comparison.rule
    both = int((changes["present"] == "both").sum())
    console.print(f"{comparison.new} against {comparison.base}: {both} points in both")
    console.print(", ".join(f"{n} {verdict}" for verdict, n in comparison.counts().items()))
    console.print(
        f"A point counts when its bus bandwidth changed beyond {rule.threshold:.0%} and beyond "
        "its noise (the change two runs of it can show unchanged); unclear: a change the "
        "noise can explain. docs/REGRESSIONS.md says how.",
        style="dim",
    )
    per_op = _table("peak bus bandwidth (GB/s) per operation; its points by verdict")
    per_op.add_column("operation", overflow="fold")
    for column in ("base", "new", "change", *_COUNTED.values()):
        per_op.add_column(column, justify="right", no_wrap=True)
    for name, op in operations(comparison).iterrows():
        per_op.add_row(
            str(name),
            figure(op["base_peak_gb_per_s"]),
            figure(op["new_peak_gb_per_s"]),
            change_text(op["change"], signed=True),
            *(str(int(op[verdict])) for verdict in _COUNTED),
        )
    console.print(per_op)
    shown = _shown(comparison, every)
    if shown.empty:
        return
    if every:
        console.print(_every_point(shown))
        return
    runs = series_changes(shown)
    for verdict, part in runs.groupby("verdict", sort=False):
        points = int(part["points"].sum())
        table = _table(f"{verdict}: {points} points in {len(part)} series")
        table.add_column("series", overflow="fold")
        for column in ("sizes", "points", "change", "noise"):
            table.add_column(column, justify="right", no_wrap=True)
        for r in part.to_dict("records"):
            table.add_row(
                str(r["series"]),
                _span(r["smallest_bytes"], r["largest_bytes"], lambda b: format_size(int(b))),
                str(r["points"]),
                _span(r["least_change"], r["most_change"], lambda c: change_text(c, signed=True)),
                change_text(r["noise"]),
            )
        console.print(table)


def _every_point(shown: pd.DataFrame) -> Table:
    """Every point of either run, a row each, with its statuses where any differ."""
    statuses = (shown["present"] != "both") | (shown["base_status"] != shown["new_status"])
    table = _table("every point")
    table.add_column("verdict", no_wrap=True)
    table.add_column("series", overflow="fold")
    for column in ("size", "base GB/s", "GB/s", "change", "noise"):
        table.add_column(column, justify="right", no_wrap=True)
    if statuses.any():
        table.add_column("status", overflow="fold")
    for point in shown.to_dict("records"):
        status = f"{point['base_status']} -> {point['new_status']}"
        if point["present"] != "both":
            status = f"only in {point['present']}"
        table.add_row(
            "" if pd.isna(point["verdict"]) else str(point["verdict"]),
            series_name(point),
            format_size(int(point["size_bytes"])),
            figure(point["base_busbw_gb_per_s"]),
            figure(point["new_busbw_gb_per_s"]),
            change_text(point["busbw_change"], signed=True),
            change_text(point["noise"]),
            *([status] if statuses.any() else []),
        )
    return table
