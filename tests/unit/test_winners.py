"""A winner between configurations is named only beyond what identical configurations can be
apart by: the size class's floor (analysis.changes.SIZE_CLASSES)."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis import knobs


def curve(size: int, default: float, value: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "line": ["default", "Simple"],
            "size_bytes": [size, size],
            "busbw_gb_per_s": [default, value],
        }
    )


def test_a_knob_value_119x_the_default_at_1_kib_is_no_winner() -> None:
    """Below 64 KiB identical runs move by up to 43%: 1.19x is within it."""
    table = knobs.best_values(curve(1024, 1.0, 1.19))
    assert table["gain"].round(2).tolist() == [1.19]
    assert table["clear"].tolist() == [False]


def test_a_knob_value_beyond_the_floor_is_the_winner_either_way() -> None:
    assert knobs.best_values(curve(2**22, 100.0, 119.0))["clear"].tolist() == [True]
    assert knobs.best_values(curve(2**22, 100.0, 103.0))["clear"].tolist() == [False]
    assert knobs.best_values(curve(2**22, 100.0, 80.0))["clear"].tolist() == [True]
