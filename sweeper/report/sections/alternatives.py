"""Ways to perform an operation side by side: its algorithms and composites, the values of
a swept NCCL variable, and composites against the native call."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis import best_per_size, candidate, candidates, knobs, preferred, ties
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Figure, Section
from sweeper.report.sections import cells
from sweeper.report.view import RunView
from sweeper.wire import DEFAULT_VARIANT, Kind, Status

# Algorithms


def _way(op: str, name: str) -> str:
    """A candidate's name without its operation, which the table's caption gives:
    native, native [algo=Ring], reduce_scatter+all_gather."""
    rest = name.removeprefix(op).strip()
    if not rest or rest.startswith("["):
        return f"native {rest}".strip()
    return rest.removeprefix("(").replace(")", "", 1)


def algorithms(view: RunView) -> Section | None:
    rows = view.collectives
    blocks: list[Block] = []
    compared = []
    for op in dict.fromkeys(rows["op"]):
        table = candidates(rows, str(op))
        if table["candidate"].nunique() < 2:
            continue
        compared.append(op)
        keys = ["tier", "world_size", "dtype", "size_bytes"]
        best = best_per_size(rows, str(op)).set_index(keys)
        tied = ties(rows, str(op)).set_index(keys)["tied"]
        for (tier, world_size, dtype), part in table.groupby(
            ["tier", "world_size", "dtype"], sort=False
        ):
            wide = part.pivot_table(
                index="size_bytes", columns="candidate", values="busbw_gb_per_s", sort=False
            )
            names = list(dict.fromkeys(part["candidate"]))
            short = {name: _way(str(op), name) for name in names}
            lines = []
            for size, values in wide[names].iterrows():
                point = (tier, world_size, dtype, size)
                winner, others = best.loc[point], tied.loc[point]
                top = str(winner["best"])
                # the answer first: with many ways the table scrolls sideways
                lines.append(
                    (
                        cells.size(size),
                        _best(short, top, others),
                        _speedup(winner, op, others),
                        *(
                            cells.num(
                                values[n], cells.SIG, "best" if n == top and not others else ""
                            )
                            for n in names
                        ),
                    )
                )
            caption = f"{op} on {tier} x{world_size}, {dtype}: bus bandwidth (GB/s)"
            headers = ("size", "best", "speedup", *(short[n] for n in names))
            blocks.append(cells.table(headers, lines, caption))
    if not blocks:
        return None
    shown = view.ok_collectives[view.ok_collectives["op"].isin(compared)]
    ways = pd.Series(
        [
            candidate(str(o), str(a), str(v))
            for o, a, v in zip(shown["op"], shown["algorithm"], shown["variant"], strict=True)
        ],
        index=shown.index,
        dtype=object,
    )
    nccl = cells.nccl(view.rows)
    return Section(
        "algorithms",
        "Algorithms",
        (cells.launch_line(shown["launch"], ways), *blocks),
        "Every way an operation was performed, side by side, the fastest per size marked "
        "where it is fastest by more than the points' own timed blocks vary, else a tie (the "
        "ways of one group run on one actor set, one after the other, so their blocks are the "
        f"noise between them{_KNOBS_APART if nccl else ''}); speedup is the best's bus "
        "bandwidth over the default's (torch.distributed's own call"
        f"{_NCCL_CHOICE if nccl else ''}).",
    )


# Said only of a run on NCCL: gloo has no knobs swept, nor a choice of algorithm of its own
_KNOBS_APART = "; NCCL's knobs below run on sets of their own"
_NCCL_CHOICE = ", NCCL's choice of algorithm"


def _best(short: dict[str, str], top: str, others: tuple[str, ...]) -> Cell:
    """The fastest way, or a tie with the ways its blocks do not clearly beat (on hover)."""
    if not others:
        return Cell(short[top])
    return Cell("tie", "muted", title=", ".join(short[n] for n in (top, *others)))


def _speedup(winner: pd.Series, op: object, others: tuple[str, ...]) -> Cell:
    """The best's speedup over the default, which means nothing where the default is in a
    tie."""
    if others and candidate(str(op), "native", DEFAULT_VARIANT) in (winner["best"], *others):
        return Cell("-", "num muted")
    return cells.num(winner["speedup"], cells.SIG)


# Swept NCCL variables


def nccl_variables(view: RunView) -> list[Section]:
    """A section per swept NCCL variable (--nccl-env): for each operation, busbw against size
    with a line per value and NCCL's default, and at the judged sizes the best value and its
    gain over the default."""
    rows = view.ok_collectives
    sets = knobs.swept(rows)
    found = []
    for variable in dict.fromkeys(sets["variable"]):
        curves = knobs.lines(rows, sets, str(variable))
        blocks: list[Block] = [cells.launch_line(rows["launch"], rows["op"])]
        for (operation, tier, world_size, dtype), curve in curves.groupby(
            knobs.LINE_KEYS, sort=False
        ):
            if curve["line"].nunique() < 2:  # every value skipped here: nothing to compare
                continue
            where = f"{operation} on {tier} x{world_size}, {dtype}"
            series = [
                (str(line), part.sort_values("size_bytes"))
                for line, part in curve.groupby("line", sort=False)
            ]
            blocks.append(Figure(figures.series_figure(series, f"{variable}: {where}")))
            table = [
                (
                    cells.size(r["size_bytes"]),
                    Cell(str(r["best"]), "code")
                    if r["clear"]
                    else Cell("none beyond noise", "muted", title=str(r["best"])),
                    cells.num(r["busbw_gb_per_s"], cells.SIG),
                    cells.num(r["default_busbw_gb_per_s"], cells.SIG),
                    cells.num(
                        r["gain"],
                        cells.SIG,
                        ("good" if r["gain"] > 1 else "bad") if r["clear"] else "",
                    ),
                )
                for r in cells.records(knobs.best_values(curve))
            ]
            columns = ("size", "best value", "busbw GB/s", "default busbw GB/s", "gain")
            blocks.append(cells.table(columns, table, f"{variable}: {where}"))
        if len(blocks) > 1:
            found.append(
                Section(
                    f"nccl-{str(variable).removeprefix('NCCL_').lower().replace('_', '-')}",
                    f"NCCL variable {variable}",
                    tuple(blocks),
                    f"Bus bandwidth against size with {variable} at each value swept "
                    "(--nccl-env), each on an actor set of its own, and NCCL's default "
                    "(nothing set); other swept variables' values in brackets. The tables "
                    "give, at sizes 16x apart, the best value and its gain: its busbw over "
                    "the default's (below 1, NCCL's own choice was faster), named only where "
                    "the gain is beyond its size's floor, what two identical configurations "
                    "can be apart by. Medians over the groups of a tier and size.",
                )
            )
    return found


# Composites


def composites(view: RunView) -> Section | None:
    rows = view.collectives
    rows = rows[rows["status"] == Status.OK]
    built = rows[rows["kind"] == Kind.COMPOSITE]
    if built.empty:
        return None
    # against the native call in the same launch mode, and the graph pair where both ran:
    # the preferred launch mode of the pairs, not of the composite's points alone
    keys = ["group_id", "op", "dtype", "size_bytes", "launch"]
    native = rows[(rows["kind"] == Kind.COLLECTIVE) & (rows["algorithm"] == "native")]
    native = native[[*keys, "busbw_gb_per_s"]]
    joined = preferred(built.merge(native, on=keys, suffixes=("", "_native")))
    if joined.empty:
        return None
    joined = joined.assign(
        ratio=joined["busbw_gb_per_s"] / joined["busbw_gb_per_s_native"],
        operation=cells.labels(joined),
    )
    several = joined["dtype"].nunique() > 1
    series = [
        (
            f"{operation} {group_id}" + (f" {dtype}" if several else ""),
            part.sort_values("size_bytes"),
        )
        for (operation, group_id, dtype), part in joined.groupby(
            ["operation", "group_id", "dtype"], sort=False
        )
    ]
    figure = figures.ratio_figure(series, "composites against native", "busbw / native busbw")
    return Section(
        "composites",
        "Composites against native",
        (cells.launch_line(joined["launch"], joined["operation"]), Figure(figure)),
        "An operation built from two others (all_reduce as reduce_scatter then all_gather, or "
        "reduce then broadcast), as a fraction of the native call's bus bandwidth at each size, "
        "both in the same launch mode: below 1, the native call is faster.",
    )
