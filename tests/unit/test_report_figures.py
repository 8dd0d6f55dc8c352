"""The report's size plots: which bandwidth their left panel shows."""

from __future__ import annotations

import pandas as pd

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
