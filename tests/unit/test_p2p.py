"""Peer-to-peer matrices and the pairs that are weak for their tier."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.analysis import mad_outliers, pair_matrices, pair_table
from sweeper.results.load import load
from tests import report_data


def test_a_value_far_below_its_tier_median_is_an_outlier() -> None:
    values = pd.Series([100.0, 101.0, 99.0, 100.5, 60.0, 20.0, 21.0])
    tiers = pd.Series(["nvlink"] * 5 + ["pcie"] * 2)
    assert mad_outliers(values, tiers, "low").tolist() == [False] * 4 + [True, False, False]


def test_latency_outliers_are_the_slow_side() -> None:
    values = pd.Series([10.0, 10.2, 9.9, 10.1, 30.0, 2.0])
    tiers = pd.Series(["nvlink"] * 6)
    assert mad_outliers(values, tiers, "high").tolist() == [False] * 4 + [True, False]


def test_equal_values_do_not_make_noise_an_outlier() -> None:
    """MAD is 0 when most pairs measure the same; 0.5% below is noise, half is not."""
    values = pd.Series([385.0, 385.0, 385.0, 383.0, 192.0])
    tiers = pd.Series(["nvlink"] * 5)
    assert mad_outliers(values, tiers, "low").tolist() == [False] * 4 + [True]


def test_missing_values_are_not_outliers() -> None:
    values = pd.Series([1.0, np.nan, 1.0])
    assert not mad_outliers(values, pd.Series(["a"] * 3), "low").any()


def test_matrices_are_square_with_the_weak_pair_marked(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    matrices = {(m.op, m.algorithm, m.metric): m for m in pair_matrices(load(tmp_path))}
    assert set(matrices) == {
        (op, algorithm, metric)
        for op, algorithm in (("copy", "uni"), ("p2p", "bi"), ("p2p", "uni"))
        for metric in ("bandwidth", "latency")
    }
    bandwidth = matrices[("p2p", "uni", "bandwidth")]
    assert bandwidth.size_bytes == 2**28
    assert bandwidth.values.shape == (4, 4)
    assert list(bandwidth.values.index) == list(bandwidth.values.columns) == [0, 1, 2, 3]
    assert np.isnan(np.diag(bandwidth.values.to_numpy())).all()
    src, dst = report_data.WEAK_PAIR
    assert bandwidth.values.loc[src, dst] < 0.6 * bandwidth.values.loc[dst, src]
    assert bandwidth.outliers.to_numpy().sum() == 1
    assert bandwidth.outliers.loc[src, dst]
    latency = matrices[("p2p", "uni", "latency")]
    assert latency.size_bytes == 8
    assert not latency.outliers.to_numpy().any()


def test_a_failed_pair_has_no_value(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    rows = load(tmp_path)
    failed = (rows["op"] == "p2p") & (rows["src_rank"] == 1) & (rows["dst_rank"] == 0)
    rows.loc[failed, "status"] = "timeout"
    table = pair_table(rows, "p2p", "uni", "bandwidth")
    pair = table[(table["src_rank"] == 1) & (table["dst_rank"] == 0)].iloc[0]
    assert np.isnan(pair["value"])
    assert pair["status"] == "timeout"
    assert not pair["outlier"]


def test_host_copies_of_kind_copy_are_no_pairs(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    df = load(tmp_path)
    host = df[df["kind"] == "copy"].head(1).assign(op="h2d", algorithm="pinned")
    host[["src_rank", "dst_rank", "src_gpu_uuid", "dst_gpu_uuid"]] = pd.NA
    with_host = pd.concat([df, host], ignore_index=True)
    assert {(m.op, m.algorithm) for m in pair_matrices(with_host)} == {
        (m.op, m.algorithm) for m in pair_matrices(df)
    }
