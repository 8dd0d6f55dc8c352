"""The GPU benchmarks' pure parts, on CPU: the bare loop's graph unit and fidelity's
comparison and gate."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))  # scripts, not a package

import bare
import fidelity

from sweeper.collectives import REGISTRY
from sweeper.timing import graph_unit

MIB = 2**20


def test_bare_graphs_split_a_row_as_sweeper_does_with_iters() -> None:
    for iters in range(1, 10_001):
        unit = graph_unit(iters)
        row_iters = math.ceil(iters / unit) * unit  # what the row records
        assert bare.graph_unit(iters) == unit
        assert bare.graph_unit(row_iters) == unit
        assert row_iters % unit == 0


def test_bare_loop_has_every_core_operation() -> None:
    assert set(bare.FACTORS) == {c.name for c in REGISTRY.values() if c.core}


def _compared(**given: Any) -> fidelity.Compared:
    values: dict[str, Any] = {
        "name": "all_reduce",
        "size_bytes": 8,
        "launch": "eager",
        "iters": 100,
        "warmup_iters": 10,
        "moves_data": True,
        "sweeper_factor": 1.5,
        "bare_factor": 1.5,
        "sweeper_times_us": (10.0,),
        "bare_times_us": (10.0,),
    }
    return fidelity.Compared(**{**values, **given})


def test_fidelity_keeps_each_sides_lowest_time() -> None:
    point = _compared(sweeper_times_us=(12.0, 11.0), bare_times_us=(10.0, 10.5))
    assert point.time_ratio == pytest.approx(1.1)
    assert point.bw_ratio == pytest.approx(1 / 1.1)


def test_fidelity_bandwidth_ratio_uses_both_factors_and_algbw_on_one_rank() -> None:
    wrong_factor = _compared(sweeper_factor=0.75, bare_factor=1.5)
    assert wrong_factor.bw_ratio == pytest.approx(0.5)
    one_rank = _compared(sweeper_factor=0.0, bare_factor=0.0, sweeper_times_us=(20.0,))
    assert one_rank.bw_ratio == pytest.approx(0.5)


def test_gate_fails_slow_eager_calls_at_any_size_but_not_graph_replays() -> None:
    gate = fidelity.Gate()
    slow = {"sweeper_times_us": (11.2,), "bare_times_us": (10.0,)}
    assert gate.problems(_compared(**slow))
    assert gate.problems(_compared(size_bytes=64 * MIB, **slow))
    assert not gate.problems(_compared(launch="graph", **slow))
    assert not gate.problems(_compared(sweeper_times_us=(10.9,)))


def test_gate_fails_low_bandwidth_from_the_floor_in_either_mode() -> None:
    gate = fidelity.Gate()
    low = {"sweeper_times_us": (10.4,), "bare_times_us": (10.0,)}  # ratio 0.96
    for launch in ("graph", "eager"):
        assert gate.problems(_compared(size_bytes=256 * MIB, launch=launch, **low))
        assert not gate.problems(_compared(size_bytes=128 * MIB, launch=launch, **low))
    assert not gate.problems(_compared(size_bytes=256 * MIB, sweeper_times_us=(10.2,)))


def test_gate_skips_bandwidth_of_in_place_operations_on_one_rank() -> None:
    slow = {"sweeper_times_us": (20.0,), "bare_times_us": (10.0,)}
    nothing_moved = _compared(size_bytes=512 * MIB, launch="graph", moves_data=False, **slow)
    assert not fidelity.Gate().problems(nothing_moved)


def test_gate_fails_on_sweeper_failures_and_passes_a_clean_run() -> None:
    gate = fidelity.Gate()
    assert gate.failures([_compared()], []) == []
    assert gate.failures([_compared()], ["gather 8B graph: sweeper oom: ..."]) == [
        "gather 8B graph: sweeper oom: ..."
    ]
    reasons = gate.failures([_compared(sweeper_times_us=(12.0,))], [])
    assert reasons == ["all_reduce 8B eager: time ratio 1.200 > 1.1"]


def _row(**given: Any) -> dict[str, Any]:
    values = {
        "iters": 200,
        "warmup_iters": 50,
        "world_size": 2,
        "in_place": True,
        "busbw_factor": 1.0,
        "count_elems": 4,
        "dtype": "bfloat16",
    }
    return {**values, **given}


def test_compare_takes_each_point_from_its_row_and_both_sides_repeats() -> None:
    key = ("all_reduce", 8, "graph")
    one_rank = ("all_reduce", 512 * MIB, "graph")
    rows = {key: _row(), one_rank: _row(world_size=1, busbw_factor=0.0)}
    points = fidelity.compare(
        rows,
        {key: [3.0, 2.0], one_rank: [40.0]},
        {key: [2.5], one_rank: [41.0]},
    )
    assert [(p.name, p.size_bytes, p.launch) for p in points] == [key, one_rank]
    assert points[0].sweeper_time_us == 2.0
    assert points[0].bare_factor == 1.0
    assert points[0].moves_data
    assert not points[1].moves_data
    assert fidelity.compare(rows, {key: [3.0]}, {}) == []  # the bare loop did not run it


def test_bare_points_repeat_the_rows_iterations_and_warm_up() -> None:
    point = fidelity.bare_point(("gather", 8, "graph"), _row(count_elems=4))
    assert point == fidelity.BarePoint("gather", 4, "bfloat16", "graph", 200, 50)


def test_fidelity_table_marks_the_points_that_fail() -> None:
    gate = fidelity.Gate()
    lines = fidelity.table([_compared(), _compared(sweeper_times_us=(12.0,))], gate)
    assert len(lines) == 3
    assert not lines[1].endswith("fails")
    assert lines[2].endswith("<- fails")
