"""The operations over a group, swept over sizes: bandwidth and time per operation, peaks
against the links, what an eager launch costs, the plateaus and largest sizes, alpha-beta
fits; and the experiments measured with parameters of their own."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pandas as pd

from sweeper.analysis import fits, launch_costs, summarize, tier_name, why
from sweeper.analysis.launches import SMALL_BYTES
from sweeper.analysis.summary import at_bound
from sweeper.planning.sizes import plateau_size
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Figure, Section, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView
from sweeper.scan.reference import share as reference_share
from sweeper.wire import Kind, Status

# A fit whose median relative error is above this does not describe its curve: noisy times
# (a busy CPU box), or a curve that bends where NCCL changes protocol or algorithm.
LARGE_FIT_ERROR = 0.25


def _about(tier: object, world_size: object, operation: object) -> tuple[Cell, ...]:
    """A table row's first cells: the tier, group size and operation it is about."""
    return Cell(str(tier)), cells.num(world_size, "d"), Cell(str(operation))


# Per operation


# An operation measured on more groups than this draws a line per shape of group, not per
# group: a fleet scan of 1024 nodes measures 2,500 groups, whose lines came to 3 MB.
MOST_GROUP_LINES = 24
_FIGURES = ["busbw_gb_per_s", "algbw_gb_per_s", "time_us"]


def _series(rows: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """Lines of a figure: one per group, and per dtype where the run has several; beyond
    MOST_GROUP_LINES groups, one per shape (`_shapes`)."""
    several = rows["dtype"].nunique() > 1
    if rows["group_id"].nunique() > MOST_GROUP_LINES:
        yield from _shapes(rows, several)
        return
    for (group_id, dtype), part in rows.groupby(["group_id", "dtype"], sort=False):
        name = f"{group_id} {dtype}" if several else str(group_id)
        yield name, part.sort_values("size_bytes")


def _shapes(rows: pd.DataFrame, several: bool) -> Iterator[tuple[str, pd.DataFrame]]:
    """A line per shape of group (its tier, its ranks, and its dtype where the run has
    several): the median of its groups at each size, with bars to the least and greatest."""
    keys = ["tier", "variant", "world_size", "dtype"]
    for (tier, variant, ranks, dtype), part in rows.groupby(keys, sort=False):
        name = f"{tier_name(str(tier), str(variant))} {ranks} ranks" + (
            f" {dtype}" if several else ""
        )
        groups = part["group_id"].nunique()
        if groups > 1:
            name += f": median of {groups} groups"
        sizes = part.groupby("size_bytes")[_FIGURES]
        spread = sizes.min().add_suffix(figures.LOW).join(sizes.max().add_suffix(figures.HIGH))
        # a size some group's --max-size auto bound fell on is marked on the median's line
        bound = at_bound(part).groupby(part["size_bytes"]).any().rename("at_bound")
        yield name, sizes.median().join(spread).join(bound).reset_index()


def operations(view: RunView) -> Section | None:
    rows = view.ok_collectives
    if rows.empty:
        return None
    rows = rows.assign(operation=cells.labels(rows))
    blocks: list[Block] = [
        cells.launch_line(rows["launch"], rows["operation"]),
        *(
            Figure(figures.series_figure(list(_series(part)), str(operation)))
            for operation, part in rows.groupby("operation", sort=False)
        ),
    ]
    off = why.off_neighbours(rows, view.gpu_names)
    if not off.empty:
        columns = ("group", "operation", "dtype", "launch", "size", "time us", "neighbours' us")
        caption = (
            f"points more than {why.OFF_FACTOR:g}x off the line through their neighbours "
            "(log axes); why: their GPUs' readings against those at the neighbouring sizes; "
            "points with the same why in one line"
        )
        lines = [_off_line(part) for _, part in off.groupby("why", sort=False)]
        blocks.append(cells.table(("points", *columns, "why"), lines, caption))
    return Section(
        "operations",
        "Bandwidth and latency by operation",
        tuple(blocks),
        "Bus bandwidth (nccl-tests' busbw) and time per operation against size S, one line "
        f"per group (of more than {MOST_GROUP_LINES} groups, one per shape of group: its tier "
        "and ranks, the median of its groups with bars to the least and greatest); log axes. "
        "Failed points are left out (see Status).",
    )


def _off_line(points: pd.DataFrame) -> tuple[Cell, ...]:
    """Points off their neighbours that share one why: the point itself where it is alone,
    else what they are and where, with their count."""
    if len(points) == 1:
        (r,) = cells.records(points)
        return (
            cells.num(1, "d"),
            Cell(str(r["group_id"])),
            Cell(str(r["operation"])),
            Cell(str(r["dtype"])),
            Cell(str(r["launch"])),
            cells.size(r["size_bytes"]),
            cells.num(r["time_us"], cells.SIG, "bad"),
            cells.num(r["expected_us"], cells.SIG),
            Cell(str(r["why"]), "wrap why"),
        )
    named = (cells.listed(points[c]) for c in ("group_id", "operation", "dtype", "launch"))
    return (
        cells.num(len(points), "d"),
        *named,
        Cell(cells.size_range(points["size_bytes"]), "num"),
        Cell("-", "num"),
        Cell("-", "num"),
        Cell(str(points["why"].iloc[0]), "wrap why"),
    )


# Peaks


def peaks(view: RunView) -> Section | None:
    rows = view.preferred_collectives
    if rows.empty:
        return None
    links = view.link_peaks
    known = any(link.peak_gb_per_s for link in links.values())  # else no link columns
    table = []
    for s in summarize(cells.tuples(rows)):
        ref = view.references.get((s.tier, s.world_size, s.label))
        of_ref = reference_share(s.peak_busbw_gb_per_s, ref)
        of_reference = Cell(
            cells.fmt(None if of_ref is None else 100 * of_ref, ".0f"),
            "num",
            ref.source if ref else "",
        )
        link = links.get((s.tier, s.world_size))
        peak = link.peak_gb_per_s if link else None
        share = (
            100 * s.peak_busbw_gb_per_s / peak
            if peak and s.peak_busbw_gb_per_s is not None
            else None
        )
        against = (
            Cell(link.name if link else "-"),
            cells.num(peak, ".0f"),
            cells.num(share, ".0f"),
        )
        table.append(
            (
                *_about(s.tier, s.world_size, s.label),
                Cell(s.launch),
                cells.num(s.points, "d"),
                cells.num(s.failed, "d", "bad" if s.failed else ""),
                cells.num(s.peak_busbw_gb_per_s, cells.SIG),
                cells.size(s.peak_size_bytes),
                *(against if known else ()),
                *((of_reference,) if view.references else ()),
                cells.num(s.min_time_us, cells.SIG),
                cells.size(s.min_time_size_bytes),
            )
        )
    measured = ("tier", "ranks", "operation", "launch", "points", "failed", "peak busbw GB/s", "at")
    link_columns = ("link", "link peak GB/s", "% of link") if known else ()
    reference_columns = ("% of reference",) if view.references else ()
    intro = ["Peak bus bandwidth and smallest time per tier, group size and operation."]
    if cells.graphs(rows):
        intro[0] = intro[0][:-1] + _FROM_GRAPHS
    if known:
        intro.append(
            "The link peak is one direction of the slowest GPU's link as NVML reports it "
            "(NVLink: links x speed; PCIe: generation x width), where known."
        )
    if view.references:
        intro.append(
            "The reference is sweeper's figure for the GPU model, tier, group size, operation "
            "and NCCL algorithm (measured or published; its entry and source on hover), where "
            "one is known."
        )
    return cells.table_section(
        "peaks",
        "Peaks",
        (*measured, *link_columns, *reference_columns, "min time us", "at"),
        table,
        " ".join(intro),
    )


# Said only of a run that timed points as CUDA-graph replays (a GPU's, not --launch eager)
_FROM_GRAPHS = ", from its CUDA-graph replays where a point was timed both ways."


# Launch cost


def launch_cost(view: RunView) -> Section | None:
    table = launch_costs(view.rows)  # every launch mode: the eager rows are its subject
    if table.empty:
        return None
    lines = [
        (
            *_about(r["tier"], r["world_size"], r["operation"]),
            cells.size(r["size_bytes"]),
            cells.num(r["graph_time_us"], cells.SIG),
            cells.num(r["eager_time_us"], cells.SIG),
            cells.num(r["cost_us"], cells.SIG),
            cells.num(r["small_cost_us"], cells.SIG),
            cells.num(r["small_sizes"], "d"),
        )
        for r in cells.records(table)
    ]
    small = figures.size_label(SMALL_BYTES)
    columns = ("tier", "ranks", "operation", "size", "graph us", "eager us", "eager - graph us")
    return cells.table_section(
        "launch",
        "Launch cost",
        (*columns, f"median to {small} us", f"sizes to {small}"),
        lines,
        "What issuing each call from Python adds to its time: the eager time minus the "
        "CUDA-graph replay's, for the points timed both ways (--launch graph,eager). At the "
        f"smallest such size, and the median over the sizes up to {small}, where this fixed "
        "cost is most of an operation's time; the groups of a tier and size by their median.",
    )


# MoE and other experiments with parameters


def experiments(view: RunView) -> Section | None:
    rows = view.preferred[view.preferred["kind"] == Kind.EXPERIMENT]
    if rows.empty:
        return None
    rows = rows.assign(
        operation=cells.labels(rows),
        knobs=[" ".join(f"{k}={v}" for k, v in sorted(p or ())) for p in rows["params"]],
    )
    lines = [
        (
            Cell(str(r["group_id"])),
            Cell(str(r["operation"])),
            Cell(str(r["knobs"]), "code"),
            Cell(str(r["dtype"])),
            cells.size(r["size_bytes"]),
            Cell(str(r["launch"])),
            cells.num(r["time_us"], cells.SIG),
            cells.num(r["busbw_gb_per_s"], cells.SIG),
            cells.status(r["status"]),
        )
        for r in cells.records(rows.sort_values(["operation", "group_id", "knobs", "size_bytes"]))
    ]
    columns = (
        "group",
        "operation",
        "parameters",
        "dtype",
        "size",
        "launch",
        "time us",
        "busbw GB/s",
        "status",
    )
    return cells.table_section(
        "experiments",
        "Mixture-of-experts and other experiments",
        columns,
        lines,
        "Operations measured with parameters of their own (MoE dispatch and combine: tokens, "
        "hidden size, top-k, experts, routing skew, seed).",
    )


# Largest sizes


def max_sizes(view: RunView) -> Section | None:
    rows = view.collectives
    if rows["max_size_bytes"].isna().all():
        return None
    rows = rows.assign(operation=cells.labels(rows), tier=cells.tier_names(rows))
    keys = ["tier", "world_size", "operation", "dtype", "group_id"]
    per_series = rows.groupby(keys, sort=False)
    series = per_series.agg(
        limit=("max_size_bytes", "min"),
        probe_s=("probe_s", "max"),  # each row: the series' probing so far
        largest_ok=("size_bytes", lambda s: s[rows.loc[s.index, "status"] == Status.OK].max()),
    )
    curves = view.preferred_collectives
    curves = curves.assign(operation=cells.labels(curves), tier=cells.tier_names(curves))
    ends = {key: _curve_ends(part) for key, part in curves.groupby(keys, sort=False)}
    nothing = (math.nan,) * 3  # a series with no point in its preferred launch mode
    found = [ends.get(key, nothing) for key in series.index]
    series = series.assign(
        plateau=[f[0] for f in found],
        plateau_busbw=[f[1] for f in found],
        largest_busbw=[f[2] for f in found],
    ).reset_index()
    lines = [
        (
            *_about(tier, world_size, operation),
            Cell(str(dtype)),
            cells.size(part["plateau"].min()),
            cells.num(part["plateau_busbw"].min(), cells.SIG),
            cells.size(part["limit"].min()),
            cells.size(part["largest_ok"].min()),
            cells.num(part["largest_busbw"].min(), cells.SIG),
            cells.num(part["probe_s"].sum(min_count=1), cells.SIG),
        )
        for (tier, world_size, operation, dtype), part in series.groupby(
            ["tier", "world_size", "operation", "dtype"], sort=False
        )
    ]
    columns = (
        "tier",
        "ranks",
        "operation",
        "dtype",
        "plateau from",
        "busbw GB/s there",
        "limit",
        "largest ok",
        "busbw GB/s at it",
        "probing s",
    )
    return cells.table_section(
        "max-size",
        "Plateaus and largest sizes",
        columns,
        lines,
        "Where each series' busbw stops rising (less than 2% over the next three sizes) and "
        "its busbw there: past the three sizes that found it a run steps by 8x (--dense-sizes: "
        "every size) up to its limit (with --max-size auto: the largest S that fits every "
        "rank's memory, probed), which it still runs. Then the largest size that ran, its "
        "busbw, and the time the probing took; the smallest over the groups of a tier and size.",
    )


def _curve_ends(points: pd.DataFrame) -> tuple[float, float, float]:
    """A series' plateau (`sizes.plateau_size`, as the run found it: a failed point in no
    window) and its busbw there, and the busbw of its largest size that ran; NaN where none."""
    points = points.sort_values("size_bytes")
    busbw = points["busbw_gb_per_s"].where(points["status"] == Status.OK).astype(float)
    sizes = [int(size) for size in points["size_bytes"]]
    found = plateau_size(sizes, busbw.fillna(math.nan).tolist())
    at = math.nan if found is None else float(busbw.iloc[sizes.index(found)])
    ran = busbw.dropna()
    return math.nan if found is None else found, at, float(ran.iloc[-1]) if len(ran) else math.nan


# Fits


def alpha_beta(view: RunView) -> Section | None:
    table = fits(view.preferred_collectives)
    if table.empty:
        return None
    lines = [
        (
            *_about(r["tier"], r["world_size"], r["operation"]),
            Cell(str(r["launch"])),
            cells.num(r["alpha_us"], cells.SIG),
            cells.num(r["beta_gb_per_s"], cells.SIG)
            if math.isfinite(r["beta_gb_per_s"])
            else Cell("-", "num"),
            cells.num(100 * r["rel_error"], ".0f"),
            cells.num(r["points"], "d"),
        )
        for r in cells.records(table)
    ]
    loose = int((table["rel_error"] > LARGE_FIT_ERROR).sum())
    columns = (
        "tier",
        "ranks",
        "operation",
        "launch",
        "alpha us",
        "beta GB/s",
        "median error %",
        "points",
    )
    blocks: list[Block] = [cells.table(columns, lines)]
    if loose:
        causes = "noisy, as on a busy CPU box"
        if cells.nccl(view.rows):
            causes += ", or bending where NCCL changes protocol"
        blocks.append(
            Text(
                f"{loose} of {len(lines)} fits have a median error above "
                f"{100 * LARGE_FIT_ERROR:.0f}%: their times do not follow alpha + S / beta "
                f"({causes}), so their alpha and beta are rough.",
                "why",
            )
        )
    to = (
        "to its CUDA-graph replays where a point was timed both ways"
        if cells.graphs(view.rows)
        else "to its times"
    )
    return Section(
        "fits",
        "Latency and bandwidth fits",
        tuple(blocks),
        "time = alpha + S / beta, fitted per tier, group size and operation (robust, on "
        f"relative error) {to}: alpha is the fixed cost of a call, beta the rate the time "
        "grows with S (algorithm bandwidth, not busbw).",
    )
