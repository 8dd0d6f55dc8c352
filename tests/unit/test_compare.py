"""Comparing two runs point by point: changes, their significance, regressions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import RegressionRule, mann_whitney_p, point_changes
from sweeper.analysis.compare import CHANGE_COLUMNS
from sweeper.results.load import load
from sweeper.results.writer import ResultWriter
from tests import report_data
from tests.synthetic import point_row


def test_mann_whitney_matches_the_textbook_normal_approximation() -> None:
    # U = 0 for 5 vs 5 fully separated samples: z = (12.5 - 0.5) / sqrt(25 * 11 / 12)
    assert mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(0.01219, abs=1e-4)
    assert mann_whitney_p([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == pytest.approx(0.01219, abs=1e-4)


def test_mann_whitney_sees_no_difference_in_one_distribution() -> None:
    rng = np.random.default_rng(1)
    assert mann_whitney_p(rng.normal(10, 1, 200), rng.normal(10, 1, 200)) > 0.05
    assert mann_whitney_p([3.0] * 8, [3.0] * 8) == 1.0
    assert np.isnan(mann_whitney_p([], [1.0]))


def test_mann_whitney_sees_a_shift_of_a_few_percent_in_many_samples() -> None:
    rng = np.random.default_rng(2)
    assert mann_whitney_p(rng.normal(100, 2, 500), rng.normal(103, 2, 500)) < 1e-6


def _run(root: Path, run_id: str, rows: list[dict[str, object]]) -> pd.DataFrame:
    writer = ResultWriter(root, run_id, "2026-11-22")
    for row in rows:
        writer.append({"run_id": run_id, **row})
    writer.flush()
    return load(root, run_id=run_id)


def test_a_slower_point_is_a_regression_and_a_faster_one_an_improvement(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [point_row(64, 10.0), point_row(128, 10.0), point_row(256, 10.0)])
    new = _run(tmp_path, "new", [point_row(64, 12.0), point_row(128, 10.2), point_row(256, 8.0)])
    changes = point_changes(base, new).set_index("size_bytes")
    assert tuple(point_changes(base, new).columns) == CHANGE_COLUMNS
    assert changes.loc[64, "busbw_change"] == pytest.approx(10 / 12 - 1)
    assert changes.loc[64, "time_change"] == pytest.approx(0.2)
    assert changes["regression"].tolist() == [True, False, False]
    assert changes["improvement"].tolist() == [False, False, True]
    assert changes["p_value"].isna().all()  # no samples: the threshold alone decides
    assert (changes["present"] == "both").all()


def test_samples_decide_whether_a_change_is_more_than_noise(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    noisy_base = rng.normal(10, 3, 50).astype(np.float32).tolist()
    noisy_new = rng.normal(10.6, 3, 50).astype(np.float32).tolist()
    steady_base = rng.normal(10, 0.1, 50).astype(np.float32).tolist()
    steady_new = rng.normal(10.6, 0.1, 50).astype(np.float32).tolist()
    base = _run(
        tmp_path,
        "base",
        [
            point_row(64, 10.0, samples_us=noisy_base),
            point_row(128, 10.0, samples_us=steady_base),
        ],
    )
    new = _run(
        tmp_path,
        "new",
        [point_row(64, 10.6, samples_us=noisy_new), point_row(128, 10.6, samples_us=steady_new)],
    )
    changes = point_changes(base, new).set_index("size_bytes")
    assert changes.loc[64, "p_value"] > 0.01
    assert changes.loc[128, "p_value"] < 1e-6
    assert changes["regression"].tolist() == [False, True]
    lenient = point_changes(base, new, RegressionRule(threshold=0.05, alpha=0.9))
    assert lenient["regression"].tolist() == [True, True]


def test_a_point_failing_only_now_regressed(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [point_row(64, 10.0), point_row(128, 10.0, status="oom")])
    failed = {**point_row(64, 10.0), "status": "oom", "time_us": None, "busbw_gb_per_s": None}
    new = _run(tmp_path, "new", [failed, point_row(128, 10.0)])
    changes = point_changes(base, new).set_index("size_bytes")
    assert changes.loc[64, "regression"]
    assert not changes.loc[64, "improvement"]
    assert changes.loc[128, "improvement"]
    assert not changes.loc[128, "regression"]


def test_points_of_one_run_only_are_kept_but_not_judged(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [point_row(64, 10.0), point_row(128, 10.0)])
    new = _run(tmp_path, "new", [point_row(64, 10.0), point_row(256, 99.0)])
    changes = point_changes(base, new).set_index("size_bytes")
    assert changes["present"].to_dict() == {64: "both", 128: "base", 256: "new"}
    assert not changes["regression"].any()
    assert not changes["improvement"].any()


def test_pairs_and_parameters_are_part_of_a_point(tmp_path: Path) -> None:
    """Every ordered pair of a p2p matrix, and every MoE routing, is a point of its own;
    missing pair columns (collectives) still match each other."""
    report_data.write_run(tmp_path, "base")
    report_data.write_run(tmp_path, "new", slow=1.25)
    base, new = load(tmp_path, run_id="base"), load(tmp_path, run_id="new")
    changes = point_changes(base, new)
    assert len(changes) == len(new) == len(base)
    assert (changes["present"] == "both").all()
    ok = changes["new_status"] == "ok"
    assert changes.loc[ok, "busbw_change"].to_numpy() == pytest.approx(1 / 1.25 - 1)
    assert changes.loc[ok, "regression"].all()
    p2p = changes[changes["op"] == "p2p"]
    assert len(p2p) == len(p2p.drop_duplicates(["algorithm", "src_rank", "dst_rank", "size_bytes"]))
    moe = changes[changes["op"] == "all_to_all_v"]
    assert moe["params"].str.contains("tokens=4096").sum() == 2


def test_graph_rows_compare_with_graph_rows_and_eager_with_eager(tmp_path: Path) -> None:
    """A run timed both ways: the eager time regressed (the launch path), the graph time did
    not. Rows from before launch modes (no launch) compare with eager rows."""
    base = _run(
        tmp_path,
        "base",
        [
            point_row(64, 10.0, launch="graph"),
            point_row(64, 20.0, launch="eager"),
            point_row(8, 9.0),
        ],
    )
    new = _run(
        tmp_path,
        "new",
        [
            point_row(64, 10.0, launch="graph"),
            point_row(64, 30.0, launch="eager"),
            point_row(8, 9.0, launch="eager"),
        ],
    )
    changes = point_changes(base, new).set_index(["size_bytes", "launch"])
    assert sorted(changes.index) == [(8, "eager"), (64, "eager"), (64, "graph")]
    assert (changes["present"] == "both").all()
    assert changes.loc[(64, "graph"), "time_change"] == pytest.approx(0.0)
    assert changes.loc[(64, "eager"), "time_change"] == pytest.approx(0.5)
    assert changes["regression"].to_dict() == {
        (64, "graph"): False,
        (64, "eager"): True,
        (8, "eager"): False,
    }


def test_a_point_timed_in_another_launch_mode_is_not_compared(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [point_row(64, 20.0, launch="eager")])
    new = _run(tmp_path, "new", [point_row(64, 10.0, launch="graph")])
    changes = point_changes(base, new).set_index("launch")
    assert changes["present"].to_dict() == {"eager": "base", "graph": "new"}
    assert not changes["improvement"].any()
