"""The report's figures: which bandwidth the size plots' left panel shows, and that the figures
plotly takes as written are what it validates."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from sweeper.analysis.p2p import PairMatrix
from sweeper.report import figures


def _line(busbw: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "size_bytes": [8, 1024],
            "time_us": [5.0, 6.0],
            "algbw_gb_per_s": [0.0016, 0.17],
            "busbw_gb_per_s": busbw,
        }
    )


def _left(figure: object) -> tuple[str, list[float]]:
    title = figure.layout.annotations[0].text  # type: ignore[attr-defined]
    return title, list(figure.data[0].y)  # type: ignore[attr-defined]


def test_the_left_panel_is_bus_bandwidth_where_a_group_has_a_bus() -> None:
    title, values = _left(figures.series_figure([("g", _line([0.0016, 0.17]))], "all_gather"))
    assert title == "bus bandwidth (GB/s)"
    assert values == [0.0016, 0.17]


def test_one_rank_moves_nothing_over_a_bus_so_the_panel_is_algbw() -> None:
    title, values = _left(figures.series_figure([("local", _line([0.0, 0.0]))], "all_gather"))
    assert title.startswith("algorithm bandwidth (GB/s")
    assert values == [0.0016, 0.17]
    # lines without algbw (the knob curves' medians) keep busbw
    knobs = _line([0.0, 0.0]).drop(columns="algbw_gb_per_s")
    assert _left(figures.series_figure([("v", knobs)], "x"))[0] == "bus bandwidth (GB/s)"


def test_figures_taken_as_written_are_what_plotly_validates() -> None:
    """The figures skip plotly's validation as they are built: each one, validated again
    (plotly raises on a property it does not know), gives the same JSON."""
    lines = [("a", _line([0.001, 0.1])), ("<b>", _line([0.002, 0.2]))]
    ratios = [(name, frame.assign(ratio=[0.9, 1.1])) for name, frame in lines]
    values = pd.DataFrame([[np.nan, 2.0], [1.0, np.nan]])
    matrix = PairMatrix("p2p", "uni", False, "bandwidth", 1024, values, values > 1.5)
    changes = pd.DataFrame(
        {
            "operation": ["all_reduce", "all_reduce", "all_gather"],
            "group_id": ["g", "g", "g"],
            "size_bytes": [8, 1024, 8],
            "busbw_change": [-0.2, 0.01, 0.0],
            "regression": [True, False, False],
        }
    )
    built = [
        figures.series_figure(lines, "all_reduce"),
        figures.series_figure(lines[:1], "all_reduce"),
        figures.ratio_figure(ratios, "composites", "ratio"),
        figures.heatmap(matrix, ["r0", "r1"], "p2p"),
        figures.change_figure(changes),
    ]
    for figure in built:
        assert json.loads(go.Figure(figure.to_dict()).to_json()) == json.loads(figure.to_json())
