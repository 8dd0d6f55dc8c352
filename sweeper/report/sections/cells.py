"""What the sections' tables are made of: numbers, sizes and messages as cells, tables cut
to a readable length, and the line saying which launch mode a section's times are."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import pandas as pd

from sweeper.analysis import label, tier_name
from sweeper.analysis.summary import Row, figure, missing
from sweeper.report import figures
from sweeper.report.blocks import Cell, Section, Table, Text
from sweeper.wire import Backend, Launch, Status

_MOST_ROWS = 100  # longer tables are cut, saying so
_LAUNCH_WORDS = {
    Launch.GRAPH: "CUDA-graph replays (graph)",
    Launch.EAGER: "eager calls from Python (eager)",
}
_ERROR_CHARS = 160
SIG = "sig"  # our own format: 3 significant digits, and whole numbers from 100 up


def fmt(value: object, spec: str) -> str:
    if missing(value):
        return "-"
    if spec != SIG:
        return format(value, spec)
    return figure(float(value))  # type: ignore[arg-type]


def graphs(rows: pd.DataFrame) -> bool:
    """Whether any of the rows was timed as CUDA-graph replays: where none was (CPU ranks,
    copies, --launch eager), the report does not speak of them."""
    return bool((rows["launch"] == Launch.GRAPH).any())


def nccl(rows: pd.DataFrame) -> bool:
    """Whether any of the rows ran on NCCL: where none did (gloo's CPU ranks), the report
    does not speak of it."""
    return bool((rows["backend"] != Backend.GLOO).any())


def num(value: object, spec: str, css: str = "") -> Cell:
    return Cell(fmt(value, spec), f"num {css}".strip())


def size(value: object) -> Cell:
    return Cell("-" if missing(value) else figures.size_label(float(value)), "num")  # type: ignore[arg-type]


def size_range(sizes: pd.Series) -> str:
    low, high = (figures.size_label(float(s)) for s in (sizes.min(), sizes.max()))
    return low if low == high else f"{low} to {high}"


def status(state: object) -> Cell:
    """A point's status: a failure stands out; a skip is what the run expected (an operation
    these ranks cannot run, says its reason) and reads quietly."""
    text = str(state)
    return Cell(text, "" if text == Status.OK else "muted" if text == Status.SKIPPED else "bad")


def listed(values: pd.Series, most: int = 3) -> Cell:
    """A column's different values in one cell, in order: up to `most` by name, else how
    many (all of them on hover)."""
    names = [str(v) for v in dict.fromkeys(values)]
    if len(names) <= most:
        return Cell(", ".join(names))
    return Cell(f"{len(names)} different", title=", ".join(names))


def short(message: object) -> Cell:
    full = "" if missing(message) else str(message)
    if len(full) <= _ERROR_CHARS:
        return Cell(full, "wrap")
    return Cell(full[: _ERROR_CHARS - 1] + "…", "wrap", title=full)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], frame.to_dict("records"))


def tuples(frame: pd.DataFrame) -> list[Row]:
    """The frame's rows as records whose fields are its columns."""
    return cast(list[Row], list(frame.astype(object).itertuples(index=False)))


def labels(frame: pd.DataFrame) -> pd.Series:
    """Each row's operation as people read it: all_reduce, all_reduce (ring), ..."""
    return _named(frame, label, "op", "algorithm")


def tier_names(frame: pd.DataFrame) -> pd.Series:
    """Each row's tier, with its variant where that is not the default: pcie/p2p-off."""
    return _named(frame, tier_name, "tier", "variant")


def _named(frame: pd.DataFrame, name: Callable[[str, str], str], *columns: str) -> pd.Series:
    first, second = (frame[column] for column in columns)
    return pd.Series(
        [name(str(a), str(b)) for a, b in zip(first, second, strict=True)],
        index=frame.index,
        dtype=object,
    )


def table(columns: Iterable[str], rows: Iterable[tuple[Cell, ...]], caption: str = "") -> Table:
    listed = list(rows)
    if len(listed) > _MOST_ROWS:
        caption = f"{caption} (first {_MOST_ROWS} of {len(listed)} rows)".strip()
        listed = listed[:_MOST_ROWS]
    return Table(tuple(columns), tuple(listed), caption)


def launch_line(launches: pd.Series, names: pd.Series) -> Text:
    """Which launch mode the times shown are, with the names of what is eager where the rest
    are graph replays (copies, a graph capture that failed): 'Times: CUDA-graph replays
    (graph); eager calls from Python (eager) for copy uni.'"""
    graph = (launches == Launch.GRAPH).to_numpy(dtype=bool)
    if not graph.any():
        return Text(f"Times: {_LAUNCH_WORDS[Launch.EAGER]}.", "muted")
    partly = set(names[graph])
    eager = [
        f"{name} (at some points)" if name in partly else str(name)
        for name in dict.fromkeys(names[~graph])
    ]
    rest = f"; {_LAUNCH_WORDS[Launch.EAGER]} for {', '.join(eager)}" if eager else ""
    return Text(f"Times: {_LAUNCH_WORDS[Launch.GRAPH]}{rest}.", "muted")


def table_section(
    id_: str, title: str, columns: Iterable[str], rows: Iterable[tuple[Cell, ...]], intro: str
) -> Section:
    return Section(id_, title, (table(columns, rows),), intro)
