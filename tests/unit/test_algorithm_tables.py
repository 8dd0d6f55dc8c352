"""Algorithm tables: the fastest way to perform an operation at each size."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis import best_per_size, candidate, candidates
from sweeper.analysis.algorithms import BEST_COLUMNS
from sweeper.results.load import frame, load
from tests import report_data


def test_candidates_are_named_by_label_and_non_default_variant() -> None:
    assert candidate("all_reduce", "native", "default") == "all_reduce"
    assert candidate("all_reduce", "native", "algo=Ring") == "all_reduce [algo=Ring]"
    assert candidate("all_to_all", "pairwise", "default") == "all_to_all (pairwise)"


def test_the_best_per_size_follows_the_models(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    best = best_per_size(load(tmp_path), "all_reduce")
    assert tuple(best.columns) == BEST_COLUMNS
    assert len(best) == len(report_data.SIZES)
    by_size = best.set_index("size_bytes")
    # symmetric memory's 12 us start wins small sizes; NCCL's ring wins the largest
    assert by_size.loc[8, "best"] == "all_reduce (symm_one_shot)"
    assert by_size.loc[8, "speedup"] == pytest.approx((35 + 8 / 240e3) / (12 + 8 / 60e3))
    assert by_size.loc[2**29, "best"] == "all_reduce [algo=Ring]"
    top = by_size.loc[2**29]
    assert top["speedup"] == pytest.approx(
        top["best_busbw_gb_per_s"] / top["default_busbw_gb_per_s"]
    )
    assert (best["tier"] == "nvlink").all()
    assert (best["world_size"] == 4).all()
    assert (best["dtype"] == "bfloat16").all()


def test_the_default_winning_has_speedup_one(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    best = best_per_size(load(tmp_path), "all_to_all").set_index("size_bytes")
    assert best.loc[2**29, "best"] == "all_to_all"
    assert best.loc[2**29, "speedup"] == 1.0
    assert best.loc[8, "best"] == "all_to_all (hierarchical)"


def _rows(*points: tuple[str, str, str, int, float]) -> pd.DataFrame:
    return frame(
        [
            {
                "op": "all_reduce",
                "algorithm": algorithm,
                "variant": variant,
                "group_id": group,
                "tier": "nvlink",
                "world_size": 2,
                "dtype": "float32",
                "size_bytes": size,
                "busbw_gb_per_s": busbw,
                "status": "ok",
            }
            for algorithm, variant, group, size, busbw in points
        ]
    )


def test_groups_of_one_tier_and_size_count_by_their_median() -> None:
    rows = _rows(
        ("native", "default", "nvlink:n0g0,1", 64, 10.0),
        ("native", "default", "nvlink:n0g0,2", 64, 11.0),
        ("native", "default", "nvlink:n0g0,3", 64, 30.0),
        ("ring", "default", "nvlink:n0g0,1", 64, 12.0),
        ("ring", "default", "nvlink:n0g0,2", 64, 12.0),
        ("ring", "default", "nvlink:n0g0,3", 64, 12.0),
    )
    table = candidates(rows, "all_reduce").set_index("candidate")
    assert table.loc["all_reduce", "busbw_gb_per_s"] == 11.0
    (best,) = best_per_size(rows, "all_reduce").to_dict("records")
    assert best["best"] == "all_reduce (ring)"
    assert best["speedup"] == pytest.approx(12.0 / 11.0)


def test_without_the_default_there_is_no_speedup() -> None:
    rows = _rows(("ring", "default", "g", 64, 5.0), ("native", "p2p-off", "g", 64, 4.0))
    (best,) = best_per_size(rows, "all_reduce").to_dict("records")
    assert best["best"] == "all_reduce (ring)"
    assert pd.isna(best["default_busbw_gb_per_s"])
    assert pd.isna(best["speedup"])


def test_failed_rows_and_other_operations_are_left_out() -> None:
    rows = _rows(("native", "default", "g", 64, 5.0), ("ring", "default", "g", 64, 50.0))
    rows.loc[1, "status"] = "error"
    assert best_per_size(rows, "all_reduce")["best"].tolist() == ["all_reduce"]
    assert best_per_size(rows, "all_to_all").empty
