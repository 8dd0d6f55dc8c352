"""The series state machine, driven by scripted outcomes: no Ray, no ranks."""

from __future__ import annotations

from collections.abc import Callable

from sweeper.ops.registry import REGISTRY
from sweeper.planning.schedule import Series
from sweeper.planning.series import Allocate, Budgets, MeasurePoint, SeriesRunner
from sweeper.planning.sizing import footprint_bytes

ALL_REDUCE = REGISTRY["all_reduce"]
GRID = (2, 256, 2**15, 2**20)  # float32 elements: 8 B, 1K, 128K, 4M


def drive(
    runner: SeriesRunner,
    status: Callable[[int], tuple[str, bool]],
    budget: int = 2**30,
    allocates: Callable[[int], bool] = lambda count: True,
) -> list[object]:
    """Run the series to its end with scripted answers; the actions it asked for."""
    asked: list[object] = []
    while (action := runner.next()) is not None:
        asked.append(action)
        if isinstance(action, MeasurePoint):
            runner.measured(*status(action.count))
        elif isinstance(action, Budgets):
            runner.budgets([budget, budget])
        elif isinstance(action, Allocate):
            runner.allocated(allocates(action.count))
    assert runner.done
    return asked


def ok(count: int) -> tuple[str, bool]:
    return "ok", True


def test_a_grid_measures_every_size_whatever_each_one_gives() -> None:
    runner = SeriesRunner(Series("all_reduce", "float32", GRID), ALL_REDUCE, 2, "cpu", 4 << 20)
    asked = drive(runner, lambda c: ("timeout", True) if c == 256 else ("ok", True))
    assert asked == [MeasurePoint(c) for c in GRID]
    assert runner.limit_bytes == 4 << 20


def test_a_probe_measures_the_smallest_asks_budgets_and_stops_at_the_bound() -> None:
    runner = SeriesRunner(Series("all_reduce", "float32", GRID, probe=True), ALL_REDUCE, 2, "cpu")
    budget = footprint_bytes(ALL_REDUCE, 2**16, 2, 0, 4, "cpu")  # 256 KiB of S fits
    asked = drive(runner, ok, budget)
    assert asked[:2] == [MeasurePoint(2), Budgets()]
    measured = [a.count for a in asked if isinstance(a, MeasurePoint)]
    assert measured[:-1] == [2, 256, 2**15]
    assert 2**15 < measured[-1] < 2**20  # the bound itself, between grid steps
    assert runner.limit_bytes == measured[-1] * 4


def test_a_refused_allocation_bisects_and_measures_the_largest_that_allocates() -> None:
    runner = SeriesRunner(Series("all_reduce", "float32", GRID, probe=True), ALL_REDUCE, 2, "cpu")
    refused = 2**19  # the budgets say 4M fits, the allocator disagrees from 512K elements

    def status(count: int) -> tuple[str, bool]:
        return ("oom", False) if count >= refused else ("ok", True)

    asked = drive(runner, status, allocates=lambda count: count < refused)
    tries = [a.count for a in asked if isinstance(a, Allocate)]
    assert tries
    assert all(2**15 < c < 2**20 for c in tries)
    last = asked[-1]
    assert isinstance(last, MeasurePoint)
    assert 2**15 < last.count < refused
    assert runner.limit_bytes == last.count * 4


def test_a_probe_where_nothing_fits_ends_without_a_limit() -> None:
    runner = SeriesRunner(Series("all_reduce", "float32", GRID, probe=True), ALL_REDUCE, 2, "cpu")
    assert drive(runner, lambda c: ("oom", False)) == [MeasurePoint(2)]
    assert runner.limit_bytes is None


def test_a_probe_whose_smallest_size_fails_still_probes_the_rest() -> None:
    runner = SeriesRunner(Series("all_reduce", "float32", GRID, probe=True), ALL_REDUCE, 2, "cpu")
    budget = footprint_bytes(ALL_REDUCE, 2**16, 2, 0, 4, "cpu")
    asked = drive(runner, lambda c: ("error", True) if c == 2 else ("ok", True), budget)
    assert asked[:3] == [MeasurePoint(2), Budgets(), MeasurePoint(256)]
    last = asked[-1]
    assert isinstance(last, MeasurePoint)
    assert runner.limit_bytes == last.count * 4


def test_a_failed_point_does_not_end_a_probe_or_set_its_limit() -> None:
    runner = SeriesRunner(Series("all_reduce", "float32", GRID, probe=True), ALL_REDUCE, 2, "cpu")
    budget = footprint_bytes(ALL_REDUCE, 2**16, 2, 0, 4, "cpu")  # 256 KiB of S fits
    failing = {2**15}
    asked = drive(runner, lambda c: ("timeout", True) if c in failing else ("ok", True), budget)
    measured = [a.count for a in asked if isinstance(a, MeasurePoint)]
    assert measured[:3] == [2, 256, 2**15]
    bound = measured[-1]
    assert 2**15 < bound < 2**20  # the sizes after the failure ran, up to the bound
    assert runner.limit_bytes == bound * 4
    # the bound itself failing leaves the limit where the budgets put it
    again = SeriesRunner(Series("all_reduce", "float32", GRID, probe=True), ALL_REDUCE, 2, "cpu")
    drive(again, lambda c: ("error", True) if c == bound else ("ok", True), budget)
    assert again.limit_bytes == bound * 4


def test_a_recorded_bound_replays_the_probe_without_asking_budgets() -> None:
    runner = SeriesRunner(Series("all_reduce", "float32", GRID, probe=True), ALL_REDUCE, 2, "cpu")
    assert runner.next() == MeasurePoint(2)
    runner.measured("ok")
    assert runner.next() == Budgets()
    runner.bound(3 * 2**15)
    assert runner.next() == MeasurePoint(256)
    assert runner.limit_bytes == 3 * 2**15 * 4
