"""--max-size auto and out-of-memory on real gloo ranks whose budgets differ.

Two Ray nodes on this machine, a rank each: Ray's `memory` resource of a node is what its CPU
ranks may use, so one node is given 2 GiB (its rank then held to --mem-limit 256M) and the other
40 MiB. They are two of the session's `fake_nodes` (tests/conftest.py), which test_multinode
runs on too: the two with 3 CPUs, to which gloo ranks go first."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.ops.registry import REGISTRY
from sweeper.planning.sizing import largest_count

pytestmark = pytest.mark.own_cluster

MIB = 2**20
TIMEOUT_S = 30


def _sweep(out: Path, *args: str) -> pd.DataFrame:
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--backend",
            "gloo",
            "--nodes",
            "2",
            "--gpus-per-node",
            "1",
            "--timeout",
            str(TIMEOUT_S),
            "--mem-limit",
            "256M",
            *("--iters", "2", "--warmup", "1"),  # bounds and OOM rows, not timing
            "--no-report",  # the rows alone
            "--results",
            str(out),
            *args,
        ],
    )
    assert result.exit_code in (0, 4), result.output
    return sweeper.load(out).sort_values("measured_at")


def _no_point_waited(df: pd.DataFrame) -> None:
    """A rank left waiting in a collective its peer skipped would hold its point to the
    timeout, so the point's row would come the whole timeout after the one before it; every
    point here takes a fraction of it (under 20 s with fifty processes queued for two cores)."""
    gaps = df["measured_at"].diff().dropna().dt.total_seconds()
    assert gaps.max() < TIMEOUT_S


@pytest.mark.usefixtures("fake_nodes")
def test_auto_bound_is_agreed_from_the_poorest_rank(tmp_path: Path) -> None:
    df = _sweep(tmp_path / "r", "--ops", "all_reduce,all_gather,all_to_all")
    assert (df["status"] == "ok").all()
    assert (df["n_wrong"] == 0).all()
    _no_point_waited(df)
    for name in ("all_reduce", "all_gather", "all_to_all"):
        rows = df[df["op"] == name]
        bound = largest_count(REGISTRY[name], 4, [256 * MIB, 40 * MIB], "cpu")
        assert bound is not None
        # rows are written as measured: the smallest size runs before the budgets are asked,
        # and every later row carries the one bound
        first = rows["size_bytes"] == rows["size_bytes"].min()
        assert rows.loc[first, "max_size_bytes"].isna().all()
        assert set(rows.loc[~first, "max_size_bytes"]) == {bound * 4}
        assert rows["size_bytes"].max() == bound * 4  # and it ran: the largest row is the bound
        assert (rows.loc[~first, "probe_s"] > 0).all()  # the probing so far, on each row


@pytest.mark.usefixtures("fake_nodes")
def test_sizes_that_do_not_fit_the_poorest_rank_are_oom_rows(tmp_path: Path) -> None:
    df = _sweep(
        tmp_path / "r", "--ops", "all_reduce,all_to_all", "--min-size", "4M", "--max-size", "64M"
    )
    _no_point_waited(df)
    oom = {
        (op, size // MIB)
        for op, size in zip(df["op"], df["size_bytes"], strict=True)
        if df.set_index(["op", "size_bytes"]).loc[(op, size), "status"] == "oom"
    }
    # 40 MiB: all_reduce holds S, all_to_all 2 S, each with 12 MiB of scratch to fill and check
    assert oom == {
        ("all_reduce", 32),
        ("all_reduce", 64),
        ("all_to_all", 16),
        ("all_to_all", 32),
        ("all_to_all", 64),
    }
    assert set(df.loc[df["status"] != "oom", "status"]) == {"ok"}
    errors = df.loc[df["status"] == "oom", "error"]
    budget = r"over its budget of 40\.0 MiB \(--mem-limit raises it\)"
    assert errors.str.fullmatch(rf"rank \d: needs [\d.]+ MiB, {budget}").all()
