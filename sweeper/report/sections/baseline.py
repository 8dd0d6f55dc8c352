"""The run against a baseline run: each point's bus bandwidth against the same point's."""

from __future__ import annotations

from sweeper.analysis import RegressionRule, launch_modes, point_changes
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Facts, Figure, Section, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView
from sweeper.wire import Status


def baseline(view: RunView) -> Section | None:
    base, new = view.base, view.rows
    if base is None:
        return None
    rule = RegressionRule()
    changes = point_changes(base, new, rule)
    changes = changes.assign(operation=cells.labels(changes))
    several = changes["launch"].nunique() > 1  # then each point's launch mode is named
    both = changes[changes["present"] == "both"]
    facts = (
        ("baseline run", str(base["run_id"].iloc[0])),
        ("points compared", str(len(both))),
        ("regressions", str(int(changes["regression"].sum()))),
        ("improvements", str(int(changes["improvement"].sum()))),
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
    notable = changes[changes["regression"] | changes["improvement"]]
    # Worst first; changes equal to a tenth of a percent read as one, then in a stable order.
    notable = notable.assign(order=notable["busbw_change"].round(3)).sort_values(
        ["order", "operation", "group_id", "dtype", "size_bytes"], na_position="first"
    )
    lines = [
        (
            Cell(str(r["group_id"])),
            Cell(str(r["operation"])),
            Cell(str(r["dtype"])),
            cells.size(r["size_bytes"]),
            *((Cell(str(r["launch"])),) if several else ()),
            cells.num(r["base_busbw_gb_per_s"], cells.SIG),
            cells.num(r["new_busbw_gb_per_s"], cells.SIG),
            cells.num(100 * r["busbw_change"], "+.1f", "bad" if r["regression"] else "good"),
            cells.num(r["p_value"], ".2g"),
            Cell(
                f"{r['base_status']} -> {r['new_status']}",
                "" if r["new_status"] == Status.OK else "bad",
            ),
        )
        for r in cells.records(notable)
    ]
    if lines:
        point = ("group", "operation", "dtype", "size", *(("launch",) if several else ()))
        columns = (*point, "base busbw", "busbw", "change %", "p", "status")
        blocks.append(cells.table(columns, lines, "regressions and improvements"))
    else:
        blocks.append(Text("No point regressed or improved beyond the threshold."))
    return Section(
        "baseline",
        "Against the baseline",
        tuple(blocks),
        "Each point's bus bandwidth against the same point of the baseline run. A regression "
        f"lost at least {rule.threshold:.0%} of it (and, where both runs kept samples, a "
        f"Mann-Whitney test gives p < {rule.alpha:g}), or failed only now.",
    )
