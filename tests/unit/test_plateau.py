"""Where a busbw curve's plateau starts, and the sparse sizes a series runs above it: the pure
functions, a series that runs them on the busbw its points measure, and the report's account."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest

from sweeper.commands.plan_estimate import recorded_node
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import expected_placement
from sweeper.planning.profile import build_spec, load_profile
from sweeper.planning.request import resolve
from sweeper.planning.schedule import Series, schedule
from sweeper.planning.series import Budgets, MeasurePoint, SeriesRunner
from sweeper.planning.sizes import SPARSE_FACTOR, grid, plateau_size, thinned
from sweeper.report.blocks import Table
from sweeper.report.figures import size_label
from sweeper.report.sections.collectives import max_sizes
from sweeper.report.view import RunView
from sweeper.results.load import frame
from sweeper.wire import Backend, Status
from tests import report_data

K = 2**10
SIZES = grid(K, 2**30, 2)  # 1K .. 1G, 21 sizes


def saturating(size: int, peak: float = 100.0, half: int = 2**20) -> float:
    """busbw of a link whose latency halves the bandwidth at `half` bytes."""
    return peak * size / (size + half)


def test_a_saturating_curve_plateaus_where_it_rises_less_than_two_percent_in_three_steps() -> None:
    busbw = [saturating(size) for size in SIZES]
    plateau = plateau_size(SIZES, busbw)
    assert plateau is not None
    at = SIZES.index(plateau)
    assert busbw[at + 3] < 1.02 * busbw[at]
    assert busbw[at + 2] >= 1.02 * busbw[at - 1]  # one step earlier still rose by 2%


def test_no_plateau_while_busbw_still_rises_or_too_few_points_follow() -> None:
    doubling = [float(size) for size in SIZES]  # latency-bound: busbw doubles each step
    assert plateau_size(SIZES, doubling) is None
    assert plateau_size(SIZES[:3], [50.0, 50.0, 50.0]) is None  # three points: no three steps
    assert plateau_size(SIZES[:4], [50.0, 50.0, 50.0, 50.0]) == SIZES[0]


def test_a_noise_spike_is_no_plateau_but_noise_within_the_band_is() -> None:
    # a spike at the 4th point the next three fall from by 5%: the curve still rises after it
    spiky = [10.0, 20.0, 40.0, 84.0, 80.0, 80.5, 81.0, 90.0, 96.0, 97.0, 97.5, 97.0]
    assert plateau_size(SIZES[:12], spiky) == SIZES[8]
    # +-0.8% around a flat 100: a plateau from the first flat point
    noisy = [10.0, 30.0, 60.0, 100.8, 99.2, 100.5, 99.4, 100.1]
    assert plateau_size(SIZES[:8], noisy) == SIZES[3]


def test_a_failed_point_belongs_to_no_window() -> None:
    busbw = [50.0, 50.0, math.nan, 50.0, 50.0, 50.0, 0.0, 50.0]
    assert plateau_size(SIZES[:8], busbw) is None
    assert plateau_size(SIZES[:11], [*busbw, 50.0, 50.0, 50.0]) == SIZES[7]


def test_above_the_plateau_only_every_eighth_size_runs_and_the_largest_always_does() -> None:
    plateau = 2**20
    kept = thinned(SIZES, plateau)
    dense_end = SIZES.index(plateau) + 3  # the three steps that found the plateau
    assert kept[: dense_end + 1] == SIZES[: dense_end + 1]
    tail = kept[dense_end:]
    assert all(b >= SPARSE_FACTOR * a for a, b in pairwise(tail[:-1]))
    assert kept[-1] == SIZES[-1] == 2**30
    # 2**29 is 8x the last kept, but half the largest: it would repeat the bound's figure
    assert kept == [*SIZES[: dense_end + 1], 2**26, 2**30]
    assert kept[-1] >= SPARSE_FACTOR * kept[-2]


def test_the_largest_size_is_kept_off_the_power_of_two_grid() -> None:
    sizes = [*SIZES, 1_500_000_000]  # --max-size auto's bound is rarely a grid step
    assert thinned(sizes, 2**20)[-2:] == [2**26, 1_500_000_000]


def test_no_plateau_keeps_the_dense_grid() -> None:
    assert thinned(SIZES, None) == SIZES
    assert thinned(SIZES, SIZES[-2]) == SIZES  # found too late to leave anything out


def test_a_run_and_its_plan_thin_the_same_grid_from_the_same_busbw() -> None:
    busbw = {size: saturating(size, half=16 * K) for size in SIZES}
    predicted = thinned(SIZES, plateau_size(SIZES, list(busbw.values())))
    # the run sees its points in increasing size, and thins once the plateau shows
    seen: list[int] = []
    for size in SIZES:
        plateau = plateau_size(seen, [busbw[s] for s in seen])
        if size in thinned(SIZES, plateau):
            seen.append(size)
    assert seen == predicted
    assert len(predicted) < len(SIZES)


def measured_counts(
    series: Series, busbw: Callable[[int], float], budget: int = 2**40
) -> list[int]:
    """The counts a series runs, each point answering ok with `busbw(count)`."""
    runner = SeriesRunner(series, REGISTRY["all_reduce"], 2, "cpu", 2**40)
    counts = []
    while (action := runner.next()) is not None:
        if isinstance(action, MeasurePoint):
            counts.append(action.count)
            runner.measured(Status.OK, True, busbw(action.count))
        elif isinstance(action, Budgets):
            runner.budgets([budget, budget])
    return counts


def test_a_sparse_series_leaves_out_the_sizes_above_the_plateau_its_points_showed() -> None:
    counts = tuple(grid(1, 2**24, 2))  # 4 B .. 64M of float32
    flat_from = 2**10

    def busbw(count: int) -> float:
        return 50.0 * min(count, flat_from)

    ran = measured_counts(Series("all_reduce", "float32", counts, sparse=True), busbw)
    assert ran == thinned(counts, flat_from)
    assert ran[-1] == counts[-1]
    assert len(ran) < len(counts)
    assert measured_counts(Series("all_reduce", "float32", counts), busbw) == list(counts)


def test_a_probe_still_reaches_its_memory_bound_above_the_plateau() -> None:
    counts = tuple(grid(1, 2**30, 2))
    budget = 2**28  # the bound falls between grid steps
    series = Series("all_reduce", "float32", counts, probe=True, sparse=True)
    ran = measured_counts(series, lambda count: 50.0 * min(count, 256), budget)
    dense = measured_counts(replace(series, sparse=False), lambda count: 50.0, budget)
    assert ran[-1] == dense[-1] not in counts  # the largest size that fits, as dense
    assert len(ran) < len(dense)
    assert all(b >= SPARSE_FACTOR * a for a, b in pairwise(ran[ran.index(2**11) : -1]))


def _max_size_table(rows: pd.DataFrame) -> dict[tuple[str, str], dict[str, str]]:
    """The report's plateau and largest-size table, by tier and operation."""
    section = max_sizes(RunView.of(rows, None))
    assert section is not None
    (table,) = [block for block in section.blocks if isinstance(block, Table)]
    return {
        (row[0].text, row[2].text): {
            c: cell.text for c, cell in zip(table.columns, row, strict=True)
        }
        for row in table.rows
    }


def test_the_report_gives_each_curves_plateau_its_busbw_and_the_memory_bound() -> None:
    rows = frame(list(report_data.gpu_rows("gpu")))
    half = 2**10
    curve = rows.assign(busbw_gb_per_s=[saturating(s, half=half) for s in rows["size_bytes"]])
    line = _max_size_table(curve)[("nvlink", "all_reduce")]
    sizes = report_data.SIZES
    busbw = [saturating(s, half=half) for s in sizes]
    plateau = plateau_size(sizes, busbw)
    assert plateau is not None
    assert line["plateau from"] == size_label(plateau)
    assert line["busbw GB/s there"] == f"{busbw[sizes.index(plateau)]:.3g}"
    assert line["limit"] == line["largest ok"] == size_label(sizes[-1])  # the memory bound
    assert line["busbw GB/s at it"] == f"{busbw[-1]:.3g}"


def test_the_report_says_where_a_curve_has_no_plateau() -> None:
    rows = frame(list(report_data.gpu_rows("gpu")))
    line = _max_size_table(rows)[("nvlink", "all_reduce")]  # alpha-beta: still rising
    assert line["plateau from"] == line["busbw GB/s there"] == "-"
    assert line["limit"] == size_label(report_data.SIZES[-1])


@pytest.mark.parametrize(
    ("profile", "flag", "sparse"),
    [("", None, True), ("dense_sizes: true\n", None, False), ("dense_sizes: true\n", False, True)],
)
def test_dense_sizes_from_a_profile_or_the_command_line_keeps_every_size(
    tmp_path: Path, profile: str, flag: bool | None, sparse: bool
) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(f"ops: all_reduce\nmax_size: 1M\n{profile}")
    spec = build_spec(load_profile(path), dense_sizes=flag)
    node = recorded_node(Path(__file__).parents[1] / "data" / "topologies" / "cpu-no-nvml.json")
    planned = schedule(
        expected_placement(Backend.GLOO, [node], [2]),
        resolve(spec, Backend.GLOO).request([REGISTRY["all_reduce"]]),
    )
    (series,) = planned.series(planned.waves[0].groups[0])
    assert series.sparse is sparse
