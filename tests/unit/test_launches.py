"""Launch modes in the analyses: a point's graph row where it has one, its eager row where it
has not, and what the eager launch costs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import (
    best_per_size,
    candidates,
    fits,
    launch_costs,
    launch_modes,
    pair_matrices,
    preferred,
)
from sweeper.analysis.launches import COST_COLUMNS
from sweeper.results.load import frame, load
from sweeper.results.writer import ResultWriter
from tests import report_data
from tests.synthetic import point_row


def _stored(root: Path, rows: list[dict[str, object]], run_id: str = "r1") -> pd.DataFrame:
    """Rows written and read back as a sweep's are (a missing launch reads as null)."""
    writer = ResultWriter(root, run_id, "2026-11-23")
    for row in rows:
        writer.append({"run_id": run_id, **row})
    writer.flush()
    return load(root, run_id=run_id)


def _row(size: int, time_us: float, launch: str | None, **extra: object) -> dict[str, object]:
    nvlink = {"tier": "nvlink", "group_id": "nvlink:n0g0,1", "launch": launch}
    return point_row(size, time_us, **{**nvlink, **extra})


def test_a_points_graph_row_wins_over_its_eager_row(tmp_path: Path) -> None:
    rows = _stored(tmp_path, [_row(64, 30.0, "eager"), _row(64, 20.0, "graph")])
    kept = preferred(rows)
    assert kept["launch"].tolist() == ["graph"]
    assert kept["time_us"].tolist() == [20.0]


def test_an_eager_row_is_kept_where_its_point_has_no_graph_row(tmp_path: Path) -> None:
    rows = _stored(
        tmp_path,
        [
            _row(64, 20.0, "graph"),
            _row(64, 30.0, "eager"),
            _row(128, 31.0, "eager", launch_note="cannot capture a CUDA graph: ..."),
            _row(64, 33.0, "eager", dtype="bfloat16"),
        ],
    )
    kept = preferred(rows)
    assert list(zip(kept["size_bytes"], kept["dtype"], kept["launch"], strict=True)) == [
        (64, "float32", "graph"),
        (128, "float32", "eager"),
        (64, "bfloat16", "eager"),
    ]


def test_a_new_engines_rows_are_read_after_the_known_engines_not_refused(tmp_path: Path) -> None:
    """An engine the order does not name (a third, added as docs/ARCHITECTURE.md says) has its
    rows read where its point has no other, and yields to nccl and torch where it has."""
    rows = _stored(
        tmp_path,
        [
            _row(64, 25.0, "graph", engine="store"),
            _row(64, 20.0, "graph", engine="torch"),
            _row(128, 40.0, "graph", engine="store"),
            _row(256, 50.0, "eager", engine="store"),
            _row(256, 45.0, "eager", engine="nccl"),
        ],
    )
    kept = preferred(rows)
    assert list(zip(kept["size_bytes"], kept["engine"], strict=True)) == [
        (64, "torch"),
        (128, "store"),
        (256, "nccl"),
    ]


def test_rows_without_a_launch_mode_are_eager(tmp_path: Path) -> None:
    """Rows from before launch modes read as null: eager, so a graph row of the same point
    wins over them; a frame with no launch column at all is eager throughout."""
    rows = _stored(tmp_path, [_row(64, 30.0, None), _row(64, 20.0, "graph"), _row(8, 9.0, None)])
    kept = preferred(rows)
    assert list(zip(kept["size_bytes"], kept["launch"], strict=True)) == [
        (64, "graph"),
        (8, "eager"),
    ]
    bare = frame([{k: v for k, v in _row(64, 30.0, None).items() if k != "launch"}])
    assert preferred(bare)["launch"].tolist() == ["eager"]


def test_each_pair_run_and_failed_graph_row_is_a_point_of_its_own(tmp_path: Path) -> None:
    """A graph row of one pair (or run) does not hide another's eager row; a point's graph
    row wins even where it failed, so a failed graph replay is not papered over."""
    pair = {"op": "p2p", "algorithm": "uni"}
    rows = pd.concat(
        [
            _stored(
                tmp_path,
                [
                    _row(8, 9.0, "graph", **pair, src_rank=0, dst_rank=1),
                    _row(8, 17.0, "eager", **pair, src_rank=0, dst_rank=1),
                    _row(8, 18.0, "eager", **pair, src_rank=1, dst_rank=0),
                    _row(64, 20.0, "graph", status="timeout"),
                    _row(64, 30.0, "eager"),
                ],
            ),
            _stored(tmp_path, [_row(64, 31.0, "eager")], run_id="r2"),
        ],
        ignore_index=True,
    )
    kept = preferred(rows)
    assert list(zip(kept["run_id"], kept["src_rank"], kept["time_us"], strict=True)) == [
        ("r1", 0, 9.0),
        ("r1", 1, 18.0),
        ("r1", pd.NA, 20.0),
        ("r2", pd.NA, 31.0),
    ]


def test_launch_modes_are_named_graph_first() -> None:
    assert launch_modes(["eager", "graph", "eager"]) == "graph, eager"
    assert launch_modes(["eager"]) == "eager"
    assert launch_modes([]) == ""


def test_fits_read_the_graph_times_of_a_run_timed_both_ways(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1", launches=report_data.BOTH)
    rows = load(tmp_path)
    table = fits(rows[~rows["op"].isin(["p2p", "copy"]) & rows["params"].isna()])
    by_name = table.set_index(["tier", "operation"])
    assert len(table) == len(report_data.MODELS)
    for (op, algorithm, variant), (alpha, beta, _) in report_data.MODELS.items():
        tier = "nvlink" if variant == "default" else f"nvlink/{variant}"
        name = op if algorithm == "native" else f"{op} ({algorithm})"
        assert by_name.loc[(tier, name), "alpha_us"] == pytest.approx(alpha, rel=1e-3)
        assert by_name.loc[(tier, name), "beta_gb_per_s"] == pytest.approx(beta, rel=1e-3)
        assert by_name.loc[(tier, name), "points"] == len(report_data.SIZES)
    assert set(table["launch"]) == {"graph"}


def test_a_fit_over_graph_and_eager_points_says_so(tmp_path: Path) -> None:
    """A capture that failed at some sizes leaves those points eager: the fit names both."""
    rows = _stored(
        tmp_path,
        [_row(8, 10.0, "graph"), _row(1024, 10.5, "graph"), _row(2**20, 40.0, "eager")],
    )
    (fit,) = fits(rows).to_dict("records")
    assert fit["launch"] == "graph, eager"
    assert fit["points"] == 3


def test_algorithms_compete_on_graph_times(tmp_path: Path) -> None:
    """Eager rows of a point timed both ways do not count: the native call's graph time
    (10 GB/s) beats the ring's (8), though its eager time (4) would lose. A candidate with no
    graph row (the tree here) competes with its eager time, and says so."""
    rows = _stored(
        tmp_path,
        [
            _row(2**20, 2**20 / 10e3, "graph"),
            _row(2**20, 2**20 / 4e3, "eager"),
            _row(2**20, 2**20 / 8e3, "graph", algorithm="ring"),
            _row(2**20, 2**20 / 6e3, "eager", algorithm="tree"),
        ],
    )
    table = candidates(rows, "all_reduce").set_index("candidate")
    assert table["busbw_gb_per_s"].to_dict() == pytest.approx(
        {"all_reduce": 10.0, "all_reduce (ring)": 8.0, "all_reduce (tree)": 6.0}
    )
    assert table["launch"].to_dict() == {
        "all_reduce": "graph",
        "all_reduce (ring)": "graph",
        "all_reduce (tree)": "eager",
    }
    (best,) = best_per_size(rows, "all_reduce").to_dict("records")
    assert best["best"] == "all_reduce"
    assert best["speedup"] == 1.0


def test_pair_matrices_read_the_graph_times(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1", launches=report_data.BOTH)
    matrices = {(m.op, m.algorithm, m.metric): m for m in pair_matrices(load(tmp_path))}
    latency = matrices[("p2p", "uni", "latency")].values.to_numpy()
    off_diagonal = latency[~np.eye(4, dtype=bool)]
    # the graph time at 8 B is about 9 us; eager rows would add EAGER_US
    assert off_diagonal.max() < 9.1
    copies = matrices[("copy", "uni", "latency")].values.to_numpy()
    assert np.nanmin(copies) > 9.0  # eager only, and kept


def _cost_rows(group: str, costs_us: dict[int, float]) -> list[dict[str, object]]:
    return [
        row
        for size, cost in costs_us.items()
        for row in (
            _row(size, 10.0 + size / 1e5, "graph", group_id=group),
            _row(size, 10.0 + size / 1e5 + cost, "eager", group_id=group),
        )
    ]


def test_the_launch_cost_is_eager_minus_graph_per_operation(tmp_path: Path) -> None:
    """At the smallest size timed both ways, and the median up to 64 KiB; two groups of a
    tier and size count by their median at each size. Points timed one way, failed points
    and sizes above 64 KiB are not in the median."""
    costs = {8: 10.0, 1024: 12.0, 64 * 2**10: 14.0, 2**20: 30.0}
    rows = [
        *_cost_rows("nvlink:n0g0,1", costs),
        *_cost_rows("nvlink:n0g2,3", {size: cost + 2.0 for size, cost in costs.items()}),
        _row(4, 9.0, "eager"),  # no graph row: not a cost
        _row(2048, 10.0, "graph"),
        _row(2048, 99.0, "eager", status="error"),
        *_cost_rows("nvlink:n0g0,1", {8: 5.0}),  # another operation, below
    ]
    rows[-2:] = [{**row, "op": "broadcast"} for row in rows[-2:]]
    table = launch_costs(_stored(tmp_path, rows))
    assert tuple(table.columns) == COST_COLUMNS
    assert table["operation"].tolist() == ["all_reduce", "broadcast"]
    first = table.iloc[0]
    assert (first["tier"], first["world_size"], first["size_bytes"]) == ("nvlink", 2, 8)
    assert first["graph_time_us"] == pytest.approx(10.0 + 8 / 1e5)
    assert first["eager_time_us"] == pytest.approx(10.0 + 8 / 1e5 + 11.0)
    assert first["cost_us"] == pytest.approx(11.0)  # the median of 10 and 12
    assert first["small_cost_us"] == pytest.approx(13.0)  # of 11, 13 and 15
    assert first["small_sizes"] == 3
    assert table.iloc[1]["cost_us"] == pytest.approx(5.0)


def test_no_launch_cost_without_points_timed_both_ways(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    table = launch_costs(load(tmp_path))
    assert table.empty
    assert tuple(table.columns) == COST_COLUMNS


def test_a_synthetic_run_timed_both_ways_costs_one_launch_per_call(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1", launches=report_data.BOTH)
    table = launch_costs(load(tmp_path))
    costs = table.set_index(["tier", "operation"])["small_cost_us"]
    assert costs[("nvlink", "all_reduce")] == pytest.approx(report_data.EAGER_US)
    assert costs[("nvlink/algo=Ring", "all_reduce")] == pytest.approx(report_data.EAGER_US)
    composite = ("nvlink", "all_reduce (reduce_scatter+all_gather)")
    assert costs[composite] == pytest.approx(2 * report_data.EAGER_US)
    assert "copy (uni)" not in set(table["operation"])  # eager only
    p2p = table[table["operation"] == "p2p (uni)"].iloc[0]
    assert (p2p["world_size"], p2p["size_bytes"]) == (2, 8)
    assert p2p["cost_us"] == pytest.approx(report_data.EAGER_US)
