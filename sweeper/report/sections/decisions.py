"""What a run says to decide by: NCCL's default against the settings measured beside it (the
regret per size, `analysis.regret`), the energy a collective cost per byte beside its bus
bandwidth, and how long each group's communicators took to start against its size."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from sweeper.analysis import regret as regrets
from sweeper.analysis.summary import label
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Figure, Section, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView
from sweeper.wire import DEFAULT_VARIANT

_SHAPE = ["op", "algorithm", "tier", "world_size", "dtype", "engine", "launch"]


def _line(key: Sequence[object]) -> str:
    op, algorithm, tier, world_size, dtype, engine, launch = key
    return f"{label(str(op), str(algorithm))} {tier} x{world_size} {dtype} {engine} {launch}"


def regret(view: RunView) -> Section | None:
    """The default's regret per size where the run measured NCCL settings beside it: a curve
    of fastest / default per group shape, and the sizes where a clear regret exceeds 5%."""
    table = regrets.regret(view.rows)
    if table.empty:
        return None
    series = [
        (_line(key), part.sort_values("size_bytes").assign(ratio=1 + part["regret"]))
        for key, part in table.groupby(_SHAPE, sort=False)
    ]
    title = "fastest configuration over NCCL's default (bus bandwidth)"
    blocks: list[Block] = [Figure(figures.ratio_figure(series, title, "fastest / default"))]
    over = regrets.shown(table)
    lines = [
        (
            Cell(_line([r[c] for c in _SHAPE])),
            cells.size(r["size_bytes"]),
            Cell(str(r["best"]), "code"),
            cells.num(r["default_busbw_gb_per_s"], cells.SIG),
            cells.num(r["fastest_busbw_gb_per_s"], cells.SIG),
            cells.num(100 * r["regret"], ".0f", "bad"),
            cells.num(100 * r["noise"], ".0f"),
            Cell(str(r["efficient"]), "code"),
        )
        for r in cells.records(over)
    ]
    headers = ("group", "size", "best", "default GB/s", "best GB/s", "regret %", "noise %")
    over_by = f"over {regrets.SHOWN_REGRET:.0%} slower"
    if lines:
        caption = f"sizes where NCCL's default is {over_by}, beyond noise"
        blocks.append(cells.table((*headers, "least energy"), lines, caption))
    else:
        blocks.append(Text(f"No size where NCCL's default is clearly {over_by}.", "muted"))
    return Section(
        "regret",
        "NCCL's default against the settings beside it",
        tuple(blocks),
        "Per operation, group and size, the fastest configuration (a run and variant, named "
        "by the NCCL variables it sets) over NCCL's default; a winner is named only where the "
        "compare rules call it faster in every group of the shape, beyond the runs' noise. "
        "`sweeper tune` turns the winners into a tuning NCCL's example tuner plugin loads "
        "(docs/TUNING.md).",
    )


def energy(view: RunView) -> Section | None:
    """Energy per GB beside bus bandwidth, per operation, group and variant, where the GPUs
    have an energy counter; and where the run measured settings beside NCCL's default, the
    sizes whose least-energy configuration is not their best (fastest beyond noise)."""
    rows = view.ok_collectives
    rows = rows[rows["energy_j_per_gb"].notna()]
    if rows.empty:
        return None
    keys = [*_SHAPE, "variant"]
    medians = rows.groupby([*keys, "size_bytes"], sort=False)[
        ["busbw_gb_per_s", "energy_j_per_gb"]
    ].median()
    series = [
        (_named(key), part.reset_index().sort_values("size_bytes"))
        for key, part in medians.groupby(level=keys, sort=False)
    ]
    figure = figures.series_figure(
        series, "energy per GB beside bus bandwidth", figures.ENERGY_PANELS
    )
    blocks: list[Block] = [Figure(figure)]
    table = regrets.regret(view.rows)
    if not table.empty:
        apart = table[table["efficient"] != table["best"]]
        lines = [
            (
                Cell(_line([r[c] for c in _SHAPE])),
                cells.size(r["size_bytes"]),
                Cell(str(r["best"]), "code"),
                Cell(str(r["efficient"]), "code"),
                cells.num(r["default_energy_j_per_gb"], cells.SIG),
                cells.num(r["efficient_energy_j_per_gb"], cells.SIG),
            )
            for r in cells.records(apart)
        ]
        if lines:
            headers = ("group", "size", "best", "least energy", "default J/GB", "its J/GB")
            caption = "sizes whose least-energy configuration is not the best"
            blocks.append(cells.table(headers, lines, caption))
    return Section(
        "energy",
        "Energy per byte",
        tuple(blocks),
        "What the group's GPUs used over the timed blocks (NVML's total-energy counter, "
        "summed over the ranks) per GB of the operation's size, beside its bus bandwidth; "
        "the median over the groups of a shape. The counter updates at its own period, so the "
        "smallest sizes read it coarsely. A configuration is named least-energy where it used "
        "less than the default by more than the size's floor (the compare rules').",
    )


def _named(key: Sequence[object]) -> str:
    """A shape's line with its variant where that is not the default."""
    *shape, variant = key
    line = _line(shape)
    return line if variant == DEFAULT_VARIANT else f"{line} [{variant}]"


def start_up(view: RunView) -> Section | None:
    """How long each group's communicators took to start, per engine, against group size."""
    rows = view.rows[view.rows["comm_start_s"].notna()]
    if rows.empty:
        return None
    groups = rows.groupby(["group_id", "engine"], sort=False).agg(
        world_size=("world_size", "first"),
        n_nodes=("n_nodes", "first"),
        start_s=("comm_start_s", "max"),
        split=("nccl_init_s", _first_split),
    )
    groups = groups.reset_index()
    nccl = cells.nccl(rows)
    lines = [
        (
            Cell(str(r["group_id"])),
            Cell(str(r["engine"])),
            cells.num(r["world_size"], "d"),
            cells.num(r["n_nodes"], "d"),
            cells.num(r["start_s"], cells.SIG),
            *((Cell(r["split"]),) if nccl else ()),
        )
        for r in cells.records(groups.sort_values("start_s", ascending=False))
    ]
    columns = ("group", "engine", "ranks", "nodes", "seconds", *(("NCCL's split",) if nccl else ()))
    how = _NCCL_START if nccl else "torch.distributed's gloo process group"
    split = _NCCL_SPLIT if nccl else ""
    return Section(
        "start-up",
        "Communicator start-up",
        (
            Figure(figures.start_up_figure(groups)),
            cells.table(columns, lines),
        ),
        f"How long each group's communicator took to open in each engine, the slowest rank's: "
        f"{how} (the world's join for a group of every rank){split}.",
    )


# How an NCCL run's communicators start, and what NCCL says of it, which a gloo run has not
_NCCL_START = (
    "torch.distributed's process group with NCCL's communicator made at once, or "
    "ncclCommInitRank for the nccl engine"
)
_NCCL_SPLIT = ", and where NCCL printed its own split (`nccl_init_s`), its largest parts"


def _first_split(splits: pd.Series) -> str:
    """NCCL's split of a start, its three largest parts: `kernels 0.41, bootstrap 0.07, ...`."""
    for split in splits:
        if split is None or (isinstance(split, float) and np.isnan(split)):
            continue
        parts = sorted((p for p in split if p[0] != "total"), key=lambda p: -p[1])
        return ", ".join(f"{name} {cells.fmt(seconds, cells.SIG)}" for name, seconds in parts[:3])
    return "-"
