"""The report's figures: which bandwidth the size plots' left panel shows, that the figures
plotly takes as written are what it validates, and that every figure's axes and hover write
numbers one way: 3 significant digits in a unit that reads."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import sweeper
from sweeper.analysis.p2p import PairMatrix
from sweeper.report import figures, page
from sweeper.report.blocks import Figure
from sweeper.report.sections import alternatives
from sweeper.report.view import RunView
from sweeper.results.load import frame
from tests import report_data
from tests.unit.test_regret import GRID
from tests.unit.test_report_decisions import one_run, with_figures

BOUND = figures.BOUND_NAME


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
    assert title == "bus bandwidth"
    assert values == [0.0016, 0.17]


def test_one_rank_moves_nothing_over_a_bus_so_the_panel_is_algbw() -> None:
    title, values = _left(figures.series_figure([("local", _line([0.0, 0.0]))], "all_gather"))
    assert title.startswith("algorithm bandwidth (one rank")
    assert values == [0.0016, 0.17]
    # lines without algbw (the knob curves' medians) keep busbw
    knobs = _line([0.0, 0.0]).drop(columns="algbw_gb_per_s")
    assert _left(figures.series_figure([("v", knobs)], "x"))[0] == "bus bandwidth"


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
        figures.series_figure([("p", _small_line().assign(probe_s=0.4, max_size_bytes=8))], "p"),
        figures.series_figure(
            [("e", _small_line().assign(energy_j_per_gb=0.5))], "e", figures.ENERGY_PANELS
        ),
        figures.start_up_figure(
            pd.DataFrame(
                {"group_id": ["a", "b"], "engine": ["torch", "nccl"], "world_size": [2, 8]}
            ).assign(start_s=[0.003, 1.5])
        ),
    ]
    for figure in built:
        assert json.loads(go.Figure(figure.to_dict()).to_json()) == json.loads(figure.to_json())


def test_numbers_read_in_a_unit_with_three_significant_digits() -> None:
    assert figures.bandwidth(5.1e-06) == "5.1 kB/s"  # where plotly wrote 5.1e-06 GB/s
    assert figures.bandwidth(0.31234) == "312 MB/s"
    assert figures.bandwidth(0.99973) == "1 GB/s"  # rounded up into the next unit
    assert figures.bandwidth(45.23) == "45.2 GB/s"
    assert figures.duration(100_000) == "100 ms"  # where the axis wrote 100,000 us
    assert figures.duration(24.53) == "24.5 us"
    assert figures.duration(0.812) == "812 ns"
    assert figures.duration(2.5e6) == "2.5 s"
    assert figures.energy(0.0812) == "81.2 mJ/GB"
    assert figures.energy(6.85e6) == "6.85 MJ/GB"


def _small_line() -> pd.DataFrame:
    """A gloo line from 8 B to 16 MiB: bandwidths of kB/s to GB/s, times of us to 0.1 s."""
    sizes = [8 * 8**k for k in range(8)]
    return pd.DataFrame(
        {
            "size_bytes": sizes,
            "time_us": [1500.0, 90.0, 120.0, 400.0, 2000.0, 9000.0, 40000.0, 100000.0],
            "busbw_gb_per_s": [s / t / 1e3 for s, t in zip(sizes, [1500.0] * 8, strict=True)],
        }
    )


def test_each_value_axis_writes_every_tick_in_one_unit_format_and_hover_agrees() -> None:
    figure = figures.series_figure([("g", _small_line())], "all_reduce")
    one_format = re.compile(r"\d{1,3}(\.\d+)? (B|kB|MB|GB|TB)/s|\d{1,3}(\.\d+)? (ns|us|ms|s)")
    for axis in (figure.layout.yaxis, figure.layout.yaxis2):
        assert axis.ticktext
        assert all(one_format.fullmatch(tick) for tick in axis.ticktext), axis.ticktext
    assert "5.33 kB/s" in {value for _, value in figure.data[0].customdata}
    assert ["16M", "100 ms"] in [list(c) for c in figure.data[1].customdata]


def test_the_point_max_size_auto_found_is_marked_on_both_panels() -> None:
    line = _small_line()
    probed = line.assign(probe_s=0.4, max_size_bytes=line["size_bytes"].max())
    marks = [t for t in figures.series_figure([("g", probed)], "x").data if t.name == BOUND]
    assert [list(t.x) for t in marks] == [[line["size_bytes"].max()]] * 2
    assert [t.xaxis for t in marks] == ["x", "x2"]
    assert figures.series_figure([("g", probed)], "x").layout.showlegend  # the mark says why
    fixed = line.assign(probe_s=None, max_size_bytes=line["size_bytes"].max())
    assert not [t for t in figures.series_figure([("g", fixed)], "x").data if t.name == BOUND]


def test_a_matrix_is_written_in_the_unit_its_largest_value_reads_in_without_exponents() -> None:
    slow = pd.DataFrame([[np.nan, 0.0005], [0.000312, np.nan]])  # CPU ranks' GB/s
    figure = figures.heatmap(
        PairMatrix("p2p", "uni", False, "bandwidth", 8, slow, slow > 1), ["r0", "r1"], "p2p"
    )
    (trace,) = figure.data
    assert trace.colorbar.title.text == "kB/s"
    assert [list(row) for row in trace.text] == [["", "500"], ["312", ""]]
    late = pd.DataFrame([[np.nan, 41234.0], [2.5, np.nan]])  # us
    figure = figures.heatmap(
        PairMatrix("p2p", "uni", False, "latency", 8, late, late > 1e9), ["r0", "r1"], "p2p"
    )
    assert figure.data[0].colorbar.title.text == "ms"
    assert [list(row) for row in figure.data[0].text] == [["", "41.2"], ["0.00250", ""]]


# The formats a log axis' ticks may be written in, one an axis: sizes as --max-size takes
# them, figures in a unit with 3 significant digits, a group's ranks
_TICKS = {
    "size": re.compile(r"\d+(\.\d+)?[KMG]?B?"),
    "bandwidth": re.compile(r"\d{1,3}(\.\d+)? (B|kB|MB|GB|TB)/s"),
    "time": re.compile(r"\d{1,3}(\.\d+)? (ns|us|ms|s)"),
    "energy": re.compile(r"\d{1,3}(\.\d+)? (mJ|J|kJ|MJ|GJ)/GB"),
}


def _pages() -> dict[str, RunView]:
    """A run of every kind the report draws figures of: the synthetic 4x H200 run and the
    CPU run, and the recorded H200 grid with its regret, energy and start-up."""
    gpu = frame(list(report_data.gpu_rows("gpu", launches=report_data.BOTH, knobs=True)))
    return {
        "gpu": RunView.of(gpu, report_data.h200_record("gpu")),
        "cpu": RunView.of(frame(list(report_data.cpu_rows("cpu"))), report_data.cpu_record("cpu")),
        "grid": RunView.of(with_figures(one_run(sweeper.load(GRID))), None),
    }


def test_every_log_axis_of_every_figure_writes_its_ticks_in_one_format_and_hover_agrees() -> None:
    """plotly's own log ticks mix formats (2, 5, 10, 20 for ranks; 10µ, 1m for values); each
    figure of the report sets its own, and every point's hover writes its figure."""
    checked = set()
    for name, view in _pages().items():
        for section in page.sections(view):
            for block in section.blocks:
                if not isinstance(block, Figure):
                    continue
                layout = block.figure.layout
                for key in layout:
                    axis = layout[key]
                    if not key.startswith(("xaxis", "yaxis")) or axis.type != "log":
                        continue
                    where = (name, section.id, key)
                    assert axis.ticktext, where
                    formats = [f for f, r in _TICKS.items() if all(map(r.fullmatch, axis.ticktext))]
                    assert formats, (where, axis.ticktext)
                    checked.add(section.id)
                for trace in block.figure.data:
                    if trace.type == "scatter" and trace.hoverinfo != "skip":
                        assert trace.hovertemplate, (name, section.id, trace.name)
    assert {"operations", "energy", "start-up", "regret", "composites", "nccl-algo"} <= checked


def test_a_swept_variables_lines_mark_the_size_max_size_auto_found() -> None:
    """The knob figures draw medians over groups, where the probed point's mark was lost."""
    rows = frame(list(report_data.gpu_rows("gpu", knobs=True)))
    largest = int(rows.loc[rows["status"] == "ok", "size_bytes"].max())
    probed = rows.assign(probe_s=0.4, max_size_bytes=largest)
    sections = alternatives.nccl_variables(RunView.of(probed, None))
    assert sections
    for section in sections:
        for block in section.blocks:
            if isinstance(block, Figure):
                marks = [t for t in block.figure.data if t.name == BOUND]
                assert marks, block.figure.layout.title.text
                assert {x for t in marks for x in t.x} == {largest}


def test_an_axis_whose_values_span_under_a_decade_has_ticks_between_them() -> None:
    groups = pd.DataFrame({"group_id": ["a", "b"], "engine": ["torch"] * 2, "world_size": [4, 4]})
    axis = figures.start_up_figure(groups.assign(start_s=[0.75, 1.5])).layout.yaxis
    between = [t for v, t in zip(axis.tickvals, axis.ticktext, strict=True) if 0.75 <= v <= 1.5]
    assert between == ["1 s", "1.5 s"]  # where 1, 2 and 5 gave only 1 s
