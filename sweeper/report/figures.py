"""The report's plotly figures, built from prepared frames. Only this module imports plotly.

Every text a figure shows that may come from the cluster (group names, operation names of
plugins, host names) is HTML-escaped first: plotly renders a subset of HTML in its labels.

The line figures are written out as plain traces and layouts and taken by plotly as they are
(`_validate=False`): built through plotly's objects (make_subplots, add_trace, update_layout),
each took about 0.1 s of the CPU, a third of a report's build; the JSON is the same. The
heatmap's trace stays a validated object, which writes its named colour scale out in full.
"""

from __future__ import annotations

import copy
import functools
import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from sweeper.analysis.p2p import PairMatrix
from sweeper.analysis.summary import at_bound
from sweeper.planning.sizes import format_size

_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
)
BAD = "#c0392b"
_INK = "#1d2329"  # rings: seen on every colour of a line or a result
_HEIGHT = 340
_MAX_TICKS = 12


_AXIS = {"gridcolor": "#e5e5e5", "linecolor": "#999", "zeroline": False, "ticks": "outside"}


def _layout(**extra: object) -> dict[str, Any]:
    """A small layout of our own instead of plotly's default template, which would add
    about 7 kB to every figure of the page (a figure taken as it is keeps the template it is
    given; one updated through plotly would merge a plain dict into the default)."""
    title = extra.get("title")
    if isinstance(title, Mapping):  # at x 0 of the plot, not of the box, whose edge cut it
        extra = {**extra, "title": {"xref": "paper", **title}}
    return {
        "template": {"layout": {"colorway": list(_COLORS)}},
        "font": {"family": "system-ui, sans-serif", "size": 12},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "height": _HEIGHT,
        "margin": {"l": 60, "r": 20, "t": 56, "b": 50},
        "hovermode": "closest",
        "xaxis": _AXIS,
        "yaxis": _AXIS,
        "legend": {"font": {"size": 11}},
        **extra,
    }


def _merged(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """`base` updated as plotly's update_layout does: dicts merged key by key, other values
    replaced."""
    merged = dict(base)
    for key, value in update.items():
        old = merged.get(key)
        both = isinstance(value, Mapping) and isinstance(old, Mapping)
        merged[key] = _merged(old, value) if both else value  # type: ignore[arg-type]
    return merged


def _figure(data: Sequence[Any], layout: Mapping[str, Any]) -> go.Figure:
    """A figure of traces and a layout written out in full, taken by plotly as they are."""
    return go.Figure(data=list(data), layout=dict(layout), _validate=False)


@functools.cache
def _two_panels(titles: tuple[str, str]) -> dict[str, Any]:
    """make_subplots' layout of two panels side by side: their axes, domains and titles."""
    grid = make_subplots(rows=1, cols=2, subplot_titles=titles, horizontal_spacing=0.08)
    layout: dict[str, Any] = grid.layout.to_plotly_json()
    del layout["template"]  # plotly's default: the figure's own replaces it
    return layout


def _parity(y: float) -> dict[str, object]:
    """A dotted line across the plot at `y`, as plotly's add_hline draws it."""
    line = {"color": "#555", "width": 1, "dash": "dot"}
    return {
        "type": "line",
        "xref": "x domain",
        "x0": 0,
        "x1": 1,
        "yref": "y",
        "y0": y,
        "y1": y,
        "line": line,
    }


def text(value: object) -> str:
    """A label plotly shows as written (it would otherwise read tags in it)."""
    return html.escape(str(value), quote=False)


def size_label(size_bytes: float) -> str:
    """8B, 1K, 64M when exact; 12.8M otherwise."""
    size = int(size_bytes)
    exact = format_size(size)
    if size == size_bytes and (not exact.endswith("B") or size < 1024):
        return exact
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.3g}{unit}"
    return f"{size_bytes:.0f}B"


def _size_axis(sizes: Sequence[float], title: str = "size S (bytes)") -> dict[str, object]:
    """A log axis of sizes with ticks at powers of two, labelled like --max-size takes them."""
    low, high = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    step = max(1, math.ceil((high - low + 1) / _MAX_TICKS))
    ticks = [2.0**e for e in range(low, high + 1, step)]
    return {
        **_AXIS,
        "type": "log",
        "title": {"text": title},
        "tickvals": ticks,
        "ticktext": [size_label(t) for t in ticks],
    }


# Units a figure's numbers are written in, largest first: 3 significant digits in the
# largest unit that keeps the number at 1 or more (GB = 1e9 bytes, as everywhere)
_BYTES_PER_S = ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s"))
_SECONDS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def _in_units(value: float, units: Sequence[tuple[float, str]]) -> str:
    if not math.isfinite(value) or value <= 0:
        return f"{value:g} {units[-1][1]}"
    for scale, unit in units:
        shown = float(f"{value / scale:.3g}")  # 999.7 MB/s is 1 GB/s, not 1e+03 MB/s
        if shown >= 1:
            return f"{shown:g} {unit}"
    scale, unit = units[-1]
    return f"{value / scale:.3g} {unit}"


def bandwidth(gb_per_s: float) -> str:
    """5.1 kB/s, 312 MB/s, 45.2 GB/s: 3 significant digits in a unit that reads."""
    return _in_units(gb_per_s * 1e9, _BYTES_PER_S)


def duration(time_us: float) -> str:
    """812 ns, 24.5 us, 100 ms, 2.5 s: 3 significant digits in a unit that reads."""
    return _in_units(time_us * 1e-6, _SECONDS)


_JOULES_PER_GB = ((1e9, "GJ/GB"), (1e6, "MJ/GB"), (1e3, "kJ/GB"), (1.0, "J/GB"), (1e-3, "mJ/GB"))


def energy(j_per_gb: float) -> str:
    """0.52 J/GB, 81.2 mJ/GB: 3 significant digits in a unit that reads."""
    return _in_units(j_per_gb, _JOULES_PER_GB)


_BUS = ("busbw_gb_per_s", "bus bandwidth", bandwidth)
# one rank: nccl-tests' bus factor is 0, so every busbw is 0 and only algbw says anything
_ALG = ("algbw_gb_per_s", "algorithm bandwidth (one rank, no bus)", bandwidth)
_TIME = ("time_us", "time", duration)
_Panel = tuple[str, str, Callable[[float], str]]
# energy per GB beside bus bandwidth (the GPUs' energy counter, over the timed blocks)
ENERGY_PANELS = (_BUS, ("energy_j_per_gb", "energy", energy))


def _panels(series: Sequence[tuple[str, pd.DataFrame]]) -> tuple[_Panel, ...]:
    """busbw and time; algbw in busbw's place where no line has a bus bandwidth."""
    bus = any((frame["busbw_gb_per_s"] > 0).any() for _, frame in series)
    has_alg = all("algbw_gb_per_s" in frame for _, frame in series)
    return (_BUS if bus or not has_alg else _ALG, _TIME)


# A series of many groups: its columns' least and greatest values beside their middle one
LOW, HIGH = "_low", "_high"


def _spread(frame: pd.DataFrame, column: str, color: str) -> dict[str, Any]:
    """Bars from a series' least to its greatest value at each size, where the frame holds
    them (column + LOW, column + HIGH); none where it does not."""
    if column + LOW not in frame:
        return {}
    y = frame[column].to_numpy(dtype=np.float64)
    return {
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": frame[column + HIGH].to_numpy(dtype=np.float64) - y,
            "arrayminus": y - frame[column + LOW].to_numpy(dtype=np.float64),
            "color": color,
            "thickness": 1,
            "width": 3,
        }
    }


def series_figure(
    series: Sequence[tuple[str, pd.DataFrame]],
    title: str,
    panels: tuple[_Panel, _Panel] | None = None,
) -> go.Figure:
    """Bus bandwidth (left; algbw on one rank) and time (right) against size, log axes, one
    line per series (frames with size_bytes, time_us and busbw_gb_per_s, and algbw_gb_per_s
    for one rank; a series of many groups with bars to the least and greatest of each
    column, `_spread`); one legend entry per series. `panels`: other columns, each with its
    title and how its values are written (ENERGY_PANELS)."""
    chosen = panels or _panels(series)
    axes = ("", "2")  # the panels' axes: x and y, x2 and y2
    traces = []
    sizes = [s for _, frame in series for s in frame["size_bytes"]]
    for index, (name, frame) in enumerate(series):
        color = _COLORS[index % len(_COLORS)]
        for axis, (column, _, written) in zip(axes, chosen, strict=True):
            y = frame[column].to_numpy(dtype=np.float64)
            traces.append(
                {
                    "type": "scatter",
                    "x": frame["size_bytes"].to_numpy(dtype=np.float64),
                    "y": y,
                    "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}",
                    "name": text(name),
                    "legendgroup": text(name),
                    "showlegend": not axis,
                    "mode": "lines+markers",
                    "marker": {"size": 4, "color": color},
                    "line": {"width": 1.5, "color": color},
                    "customdata": [
                        [size_label(s), written(v)]
                        for s, v in zip(frame["size_bytes"], y, strict=True)
                    ],
                    "hovertemplate": "%{fullData.name}<br>%{customdata[0]}: %{customdata[1]}"
                    "<extra></extra>",
                    **_spread(frame, column, color),
                }
            )
    marks = _bounds(series, chosen, axes)
    if len(series) == 1:  # no legend: the title names the one line
        title = f"{title} on {series[0][0]}"
    layout = _merged(
        copy.deepcopy(_two_panels((chosen[0][1], chosen[1][1]))),
        _layout(title={"text": text(title), "x": 0}, showlegend=len(series) > 1 or bool(marks)),
    )
    for axis, (column, _, written) in zip(axes, chosen, strict=True):
        if sizes:
            layout[f"xaxis{axis}"] = _merged(layout[f"xaxis{axis}"], _size_axis(sizes))
        values = [
            v
            for _, frame in series
            for name in (column, column + LOW, column + HIGH)
            if name in frame
            for v in frame[name]
        ]
        layout[f"yaxis{axis}"] = _merged(layout[f"yaxis{axis}"], _log_axis(values, written))
    return _figure([*traces, *marks], layout)


BOUND_NAME = "largest that fits (--max-size auto)"


def _bounds(
    series: Sequence[tuple[str, pd.DataFrame]], panels: Sequence[_Panel], axes: Sequence[str]
) -> list[dict[str, Any]]:
    """A ringed mark on each line's point at the size --max-size auto found to be the largest
    that fits (off the grid's sizes, where the memory bound fell): the bend a curve often
    takes there is that point's, not the link's. None for a fixed --max-size."""
    found = [frame[at_bound(frame)] for _, frame in series]
    points = pd.concat(found) if found else pd.DataFrame()
    if points.empty:
        return []
    return [
        {
            "type": "scatter",
            "x": points["size_bytes"].to_numpy(dtype=np.float64),
            "y": points[column].to_numpy(dtype=np.float64),
            "xaxis": f"x{axis}",
            "yaxis": f"y{axis}",
            "name": BOUND_NAME,
            "legendgroup": "bound",
            "showlegend": not axis,
            "mode": "markers",
            "marker": {"symbol": "circle-open", "size": 11, "color": _INK, "line": {"width": 2}},
            "customdata": [size_label(s) for s in points["size_bytes"]],
            "hovertemplate": "%{customdata}: the largest size that fits every rank's memory, "
            "as --max-size auto found it<extra></extra>",
        }
        for axis, (column, _, _) in zip(axes, panels, strict=True)
    ]


def _log_axis(values: Sequence[float], written: Callable[[float], str]) -> dict[str, object]:
    """A log axis with its ticks in one format, `written` (plotly's own labels use SI prefixes
    on the axis' unit, 10µ GB/s, and label 2 and 5 between decades): every decade, and 2 and
    5 when there are few, and more between where the values span less than one (start-ups of
    0.75 and 1.5 s had one tick between them)."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    axis: dict[str, object] = {**_AXIS, "type": "log"}
    if not positive:
        return axis
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    steps: tuple[float, ...] = (1.0,) if high - low > 3 else (1.0, 2.0, 5.0)
    if max(positive) < 10 * min(positive):
        steps = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ticks = [m * 10.0**e for e in range(low, high + 1) for m in steps]
    # room for the longest label (100 MB/s) beside the plot, where a fixed margin cut it
    axis.update(tickvals=ticks, ticktext=[written(t) for t in ticks], automargin=True)
    return axis


def ratio_figure(series: Sequence[tuple[str, pd.DataFrame]], title: str, y_title: str) -> go.Figure:
    """A ratio against size (log x), one line per series (frames: size_bytes, ratio), with
    the line of parity at 1."""
    sizes = [s for _, frame in series for s in frame["size_bytes"]]
    traces = [
        {
            "type": "scatter",
            "x": frame["size_bytes"].to_numpy(dtype=np.float64),
            "y": frame["ratio"].to_numpy(dtype=np.float64),
            "name": text(name),
            "mode": "lines+markers",
            "marker": {"size": 4},
            "customdata": [size_label(s) for s in frame["size_bytes"]],
            "hovertemplate": "%{fullData.name}<br>%{customdata}: %{y:.3g}<extra></extra>",
        }
        for name, frame in series
    ]
    layout = _layout(title={"text": text(title), "x": 0}, shapes=[_parity(1.0)])
    layout["yaxis"] = _merged(layout["yaxis"], {"title": {"text": text(y_title)}})
    if sizes:
        layout["xaxis"] = _merged(layout["xaxis"], _size_axis(sizes))
    return _figure(traces, layout)


# A matrix's units, largest first, as the scale from GB/s or from us
_MATRIX_BANDWIDTH = ((1.0, "GB/s"), (1e-3, "MB/s"), (1e-6, "kB/s"))
_MATRIX_TIME = ((1e6, "s"), (1e3, "ms"), (1.0, "us"))


def _matrix_unit(values: np.ndarray, bandwidth: bool) -> tuple[float, str]:
    """The scale from GB/s or us to the unit that writes a matrix's largest value at 1 or
    more: GB/s, MB/s, kB/s; us, ms, s."""
    known = values[np.isfinite(values) & (values > 0)]
    top = float(known.max()) if known.size else 1.0
    units = _MATRIX_BANDWIDTH if bandwidth else _MATRIX_TIME
    return next(((s, u) for s, u in units if top >= s), units[-1])


def _three_digits(value: float) -> str:
    """3 significant digits, never an exponent: 0.00512, 5.12, 512, 5,120."""
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    digits = 2 - math.floor(math.log10(abs(value)))
    return f"{value:.{digits}f}"


def heatmap(matrix: PairMatrix, labels: Sequence[str], title: str) -> go.Figure:
    """An N x N matrix (sources down, destinations across) with its values written in the
    cells and outliers ringed in red."""
    bandwidth = matrix.metric == "bandwidth"
    # the matrix in the unit its largest value reads in (CPU ranks' MB/s, a slow link's ms)
    scale, unit = _matrix_unit(matrix.values.to_numpy(dtype=np.float64), bandwidth)
    values = matrix.values.to_numpy(dtype=np.float64) / scale
    names = [text(label) for label in labels]
    cells = [[_three_digits(v) if np.isfinite(v) else "" for v in row] for row in values]
    traces: list[Any] = [
        go.Heatmap(
            z=values,
            x=names,
            y=names,
            text=cells,
            texttemplate="%{text}",
            colorscale="Viridis" if bandwidth else "Viridis_r",
            colorbar={"title": {"text": unit}, "thickness": 12},
            hovertemplate=f"%{{y}} -> %{{x}}: %{{text}} {unit}<extra></extra>",
            hoverongaps=False,
            xgap=1,
            ygap=1,
        )
    ]
    rows, columns = np.nonzero(matrix.outliers.to_numpy(dtype=bool))
    if len(rows):
        traces.append(
            {
                "type": "scatter",
                "x": [names[c] for c in columns],
                "y": [names[r] for r in rows],
                "mode": "markers",
                "marker": {
                    "symbol": "square-open",
                    "size": 30,
                    "color": BAD,
                    "line": {"width": 3},
                },
                "name": "outlier",
                "hoverinfo": "skip",
                "showlegend": False,
            }
        )
    side = max(300, 60 + 38 * len(labels))
    layout = _layout(
        title={"text": text(title), "x": 0},
        height=side + 40,
        xaxis={"title": {"text": "destination"}, "side": "bottom", "type": "category"},
        yaxis={"title": {"text": "source"}, "autorange": "reversed", "type": "category"},
    )
    return _figure(traces, layout)


def change_figure(changes: pd.DataFrame) -> go.Figure:
    """Every compared point's change in bus bandwidth against its size, one colour per
    operation, regressions ringed in red."""
    traces = []
    for index, (operation, rows) in enumerate(changes.groupby("operation", sort=False)):
        color = _COLORS[index % len(_COLORS)]
        traces.append(
            {
                "type": "scatter",
                "x": rows["size_bytes"].to_numpy(dtype=np.float64),
                "y": (100 * rows["busbw_change"]).to_numpy(dtype=np.float64),
                "name": text(operation),
                "mode": "markers",
                "marker": {
                    "size": 7,
                    "color": color,
                    "line": {
                        "color": [BAD if r else color for r in rows["regression"]],
                        "width": [3 if r else 0 for r in rows["regression"]],
                    },
                },
                "customdata": [
                    [text(g), size_label(s)]
                    for g, s in zip(rows["group_id"], rows["size_bytes"], strict=True)
                ],
                "hovertemplate": "%{fullData.name} %{customdata[0]}<br>%{customdata[1]}: "
                "%{y:+.1f}%<extra></extra>",
            }
        )
    layout = _layout(
        title={"text": "change in bus bandwidth against the baseline", "x": 0},
        shapes=[_parity(0.0)],
    )
    layout["yaxis"] = _merged(layout["yaxis"], {"title": {"text": "change (%)"}})
    sizes = changes["size_bytes"].tolist()
    if sizes:
        layout["xaxis"] = _merged(layout["xaxis"], _size_axis(sizes))
    return _figure(traces, layout)


def start_up_figure(groups: pd.DataFrame) -> go.Figure:
    """Each group's communicator start-up (frame: group_id, engine, world_size, start_s, the
    slowest rank's seconds) against its ranks, a colour per engine; log axes, ticks at the
    group sizes measured and in the unit seconds read in."""
    traces = [
        {
            "type": "scatter",
            "x": part["world_size"].to_numpy(dtype=np.float64),
            "y": part["start_s"].to_numpy(dtype=np.float64),
            "name": text(engine),
            "mode": "markers",
            "customdata": [
                [text(g), duration(1e6 * s)]
                for g, s in zip(part["group_id"], part["start_s"], strict=True)
            ],
            "hovertemplate": "%{customdata[0]}: %{customdata[1]}<extra>%{fullData.name}</extra>",
        }
        for engine, part in groups.groupby("engine", sort=False)
    ]
    ranks = sorted({int(r) for r in groups["world_size"]})
    shown = ranks[:: max(1, math.ceil(len(ranks) / _MAX_TICKS))]
    layout = _layout()
    layout["xaxis"] = {
        **_AXIS,
        "type": "log",
        "title": {"text": "ranks in the group"},
        "tickvals": shown,
        "ticktext": [str(r) for r in shown],
    }
    seconds = _log_axis(groups["start_s"].tolist(), lambda s: duration(1e6 * s))
    layout["yaxis"] = {**seconds, "title": {"text": "start-up (slowest rank)"}}
    return _figure(traces, layout)


# A fleet map's results by name, and their colours
_RESULT_COLORS = {
    "untested": "#eef1f4",
    "healthy": "#9fd8a8",
    "unconfirmed": "#f2c14e",
    "misconfigured": "#8e7cc3",  # the configuration, not the hardware: apart from the reds
    "flaky": "#eb9b34",
    "slow": "#e67e22",
    "failed": BAD,
    "unreachable": "#3d434b",
}
_MOST_DOMAIN_TICKS = 48
_DOMAINS_ACROSS = 12
_UINT16 = 65535


@dataclass(frozen=True, kw_only=True, slots=True)
class Ring:
    """A map cell ringed in its result's colour, with its text on hover."""

    row: int
    column: int
    result: str
    text: str


def _two_bytes(gb_per_s: np.ndarray) -> tuple[np.ndarray, str]:
    """Figures as whole GB/s, or MB/s where the largest is under 65 GB/s (CPU ranks): two
    bytes a cell in the figure's JSON; 0 for none."""
    known = gb_per_s[np.isfinite(gb_per_s)]
    top = float(known.max()) if known.size else 0.0
    scale, unit = (1.0, "GB/s") if top * 1e3 > _UINT16 else (1e3, "MB/s")
    whole = np.rint(np.nan_to_num(gb_per_s, nan=0.0) * scale).clip(0, _UINT16)
    return whole.astype(np.uint16), unit


def fleet_map(
    labels: Sequence[str],
    domains: Sequence[tuple[str, int, int]],
    codes: np.ndarray,
    gb_per_s: np.ndarray,
    rings: Sequence[Ring],
    results: Sequence[str],
) -> go.Figure:
    """A node x node map of results: `codes` index `results` (a higher one is worse),
    `gb_per_s` is each cell's figure on hover; domains (name, first position, size) labelled
    and divided on both axes; `rings` over the cells they name. A code per cell in one byte
    and a figure in two keep a 1024-node map near 4 MB of JSON."""
    names = [text(label) for label in labels]
    k = len(results)
    colorscale = [
        (edge / k, _RESULT_COLORS[name]) for i, name in enumerate(results) for edge in (i, i + 1)
    ]
    figures, unit = _two_bytes(gb_per_s)
    step = max(1, math.ceil(len(domains) / _MOST_DOMAIN_TICKS))
    shown = domains[::step] if len(domains) > 1 else ()
    axis = {
        **_AXIS,
        "type": "category",
        "showgrid": False,
        "showline": False,
        "automargin": True,
        "constrain": "domain",  # square cells: the axes shrink to the map, not the map to them
        "ticks": "",
        "tickfont": {"size": 10},
        "tickvals": [names[first + size // 2] for _, first, size in shown],
        "ticktext": [text(name) for name, _, _ in shown],
    }
    figure = go.Figure(
        go.Heatmap(
            z=codes.astype(np.int8),
            x=names,
            y=names,
            customdata=figures,
            zmin=-0.5,
            zmax=k - 0.5,
            colorscale=colorscale,
            colorbar={"tickvals": list(range(k)), "ticktext": list(results), "thickness": 12},
            hovertemplate=f"%{{y}}<br>%{{x}}<br>best busbw together: %{{customdata}} {unit}"
            "<extra></extra>",
        )
    )
    if rings:
        figure.add_trace(
            go.Scatter(
                x=[names[r.column] for r in rings],
                y=[names[r.row] for r in rings],
                mode="markers",
                marker={
                    "symbol": "square-open",
                    "size": 12,
                    "color": _INK,
                    "line": {"width": 2},
                },
                text=[text(r.text).replace("\n", "<br>") for r in rings],
                hovertemplate="%{text}<extra></extra>",
                showlegend=False,
            )
        )
    edges = [first - 0.5 for _, first, _ in domains[1:]]
    line = {"color": "#5f6b76", "width": 0.5}
    end = len(names) - 0.5
    figure.update_layout(
        _layout(
            title={"text": "Nodes measured together, by the worse verdict", "x": 0},
            height=780,
            # across, domain names side by side overlap beyond a few; the rows name them
            xaxis={**axis, "tickangle": -45, "showticklabels": len(shown) <= _DOMAINS_ACROSS},
            yaxis={**axis, "autorange": "reversed", "scaleanchor": "x"},
            dragmode="zoom",
            shapes=[
                {"type": "line", "x0": e, "x1": e, "y0": -0.5, "y1": end, "line": line}
                for e in edges
            ]
            + [
                {"type": "line", "y0": e, "y1": e, "x0": -0.5, "x1": end, "line": line}
                for e in edges
            ],
        )
    )
    return figure


def scan_timeline(waves: pd.DataFrame) -> go.Figure:
    """Each wave of a scan (frame: index, stage, groups, largest, seconds, start) as a bar
    from its start to its end, a row and a colour per stage, in the order they ran."""
    figure = go.Figure()
    for i, (stage, part) in enumerate(waves.groupby("stage", sort=False)):
        figure.add_trace(
            go.Bar(
                y=[text(stage)] * len(part),
                x=part["seconds"].to_numpy(dtype=np.float64),
                base=part["start"].to_numpy(dtype=np.float64),
                orientation="h",
                name=text(stage),
                marker={"color": _COLORS[i % len(_COLORS)], "line": {"color": "white", "width": 1}},
                customdata=[
                    [int(w), duration(1e6 * s), int(g), int(n)]
                    for w, s, g, n in part[["index", "seconds", "groups", "largest"]].to_numpy()
                ],
                hovertemplate="wave %{customdata[0]}: %{customdata[1]}, %{customdata[2]} groups, "
                "the largest of %{customdata[3]} nodes<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_layout(
        _layout(
            title={"text": "waves in time", "x": 0},
            height=120 + 36 * waves["stage"].nunique(),
            showlegend=False,
            barmode="overlay",
            xaxis={**_AXIS, "title": {"text": "seconds since the first wave began"}},
            yaxis={**_AXIS, "type": "category", "autorange": "reversed", "automargin": True},
        )
    )
    return figure
