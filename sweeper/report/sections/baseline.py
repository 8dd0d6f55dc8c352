"""The run against a baseline run: each point's bus bandwidth against the same point's, and
what two runs can say of the change (`analysis.changes`: beyond its noise, or unclear)."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis import RegressionRule, launch_modes, point_changes
from sweeper.analysis.changes import VERDICTS, change_text
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Facts, Figure, Section, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView
from sweeper.wire import Status

_VERDICT_CSS = {"regression": "bad", "improvement": "good"}


def _noise(both: pd.DataFrame, several: bool) -> str:
    """Each series' noise in words: the median and the largest over its compared points."""
    keys = ["group_id", "operation", "dtype", *(["launch"] if several else [])]
    series = both.groupby(keys, sort=False)["noise"].agg(["median", "max"]).reset_index()
    named = [
        f"{' '.join(str(r[key]) for key in keys)} {100 * r['median']:.0f}% "
        f"(up to {100 * r['max']:.0f}%)"
        for r in cells.records(series)
    ]
    return (
        "Noise of each series, the change two runs of its points could show unchanged "
        "(the median over its points, and the largest): " + "; ".join(named) + "."
    )


def baseline(view: RunView) -> Section | None:
    base, new = view.base, view.rows
    if base is None:
        return None
    rule = RegressionRule()
    changes = point_changes(base, new, rule)
    changes = changes.assign(operation=cells.labels(changes))
    several = changes["launch"].nunique() > 1  # then each point's launch mode is named
    both = changes[changes["present"] == "both"]
    counts = both["verdict"].value_counts()
    facts = (
        ("baseline run", str(base["run_id"].iloc[0])),
        ("points compared", str(len(both))),
        *((verdict, str(int(counts.get(verdict, 0)))) for verdict in VERDICTS),
        ("only in the baseline", str(int((changes["present"] == "base").sum()))),
        ("only in this run", str(int((changes["present"] == "new").sum()))),
    )
    blocks: list[Block] = [
        Facts(facts, code=frozenset({"baseline run"})),
        Text(
            f"Launch modes: {launch_modes(changes['launch'])}; each point is compared with the "
            "baseline's point of the same launch mode.",
            "muted",
        ),
    ]
    plotted = both[both["busbw_change"].notna()]
    if several:
        plotted = plotted.assign(operation=plotted["operation"] + ", " + plotted["launch"])
    if not plotted.empty:
        blocks.append(Figure(figures.change_figure(plotted)))
    # every change the threshold counts, with what the noise makes of it
    notable = both[both["verdict"].isin(["regression", "improvement", "unclear"])]
    # Worst first; changes equal to a tenth of a percent read as one, then in a stable order.
    notable = notable.assign(order=notable["busbw_change"].round(3)).sort_values(
        ["order", "operation", "group_id", "dtype", "size_bytes"], na_position="first"
    )
    lines = [
        (
            Cell(str(r["verdict"]), _VERDICT_CSS.get(str(r["verdict"]), "")),
            Cell(str(r["group_id"])),
            Cell(str(r["operation"])),
            Cell(str(r["dtype"])),
            cells.size(r["size_bytes"]),
            *((Cell(str(r["launch"])),) if several else ()),
            cells.num(r["base_busbw_gb_per_s"], cells.SIG),
            cells.num(r["new_busbw_gb_per_s"], cells.SIG),
            Cell(
                change_text(r["busbw_change"], signed=True),
                f"num {_VERDICT_CSS.get(str(r['verdict']), '')}".strip(),
            ),
            Cell(change_text(r["noise"]), "num"),
            Cell(change_text(r["class_change"], signed=True), "num"),
            Cell(change_text(r["class_noise"]), "num"),
            Cell(
                f"{r['base_status']} -> {r['new_status']}",
                "" if r["new_status"] == Status.OK else "bad",
            ),
        )
        for r in cells.records(notable)
    ]
    point = ("group", "operation", "dtype", "size", *(("launch",) if several else ()))
    if lines:
        columns = (
            "verdict",
            *point,
            "base busbw",
            "busbw",
            "change",
            "noise",
            "class change",
            "class noise",
            "status",
        )
        blocks.append(cells.table(columns, lines, "changes beyond the threshold"))
    else:
        blocks.append(Text(f"No point changed by {rule.threshold:.0%} or more."))
    ran = both[both["noise"].notna()]
    if not ran.empty:
        blocks.append(Text(_noise(ran, several), "muted"))
    return Section(
        "baseline",
        "Against the baseline",
        tuple(blocks),
        "Each point's bus bandwidth against the same point of the baseline run. A change "
        f"counts from {rule.threshold:.0%}; it is a regression (or an improvement) only beyond "
        "the noise two runs of the point show: its size's floor (50% below 64 KiB, 10% to "
        f"1 MiB, 5% above: what identical runs moved on 4 H200), {rule.k:g}x the spread of "
        f"the two runs' timed blocks and {rule.k:g}x the scatter of its series' changes at "
        "sizes of its class, with every block of one run beyond every block of the other; "
        "or where its series' size class moved as a whole (the median change of its points "
        f"beyond the class's floor, {rule.k:g}x that median's error and {rule.k:g}x their "
        "blocks' spread) and the point moved with it beyond its floor; else it is unclear. "
        "A point failed only now is a regression.",
    )
