"""The GPU benchmarks' pure parts, on CPU: the bare loop's graph unit."""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))  # scripts, not a package

import bare

from sweeper.collectives import REGISTRY
from sweeper.timing import graph_unit


def test_bare_graphs_split_a_row_as_sweeper_does_with_iters() -> None:
    for iters in range(1, 10_001):
        unit = graph_unit(iters)
        row_iters = math.ceil(iters / unit) * unit  # what the row records
        assert bare.graph_unit(iters) == unit
        assert bare.graph_unit(row_iters) == unit
        assert row_iters % unit == 0


def test_bare_loop_has_every_core_operation() -> None:
    assert set(bare.FACTORS) == {c.name for c in REGISTRY.values() if c.core}
