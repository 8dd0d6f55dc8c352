"""On a GPU: launch modes at world size 1 (NCCL's single-rank path, as nccl-tests -g 1), the
way graph capture and the launch path are tested on a one-GPU machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.ops.registry import REGISTRY
from tests.cli_sweep import sweep

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("ray_session")]

HBM_BYTES_PER_S = 5e12  # above any GPU's memory bandwidth today (H200: 4.8 TB/s)
# The core operations between ranks: the copies (core too) have no launch modes or engines.
COLLECTIVES = [c.name for c in REGISTRY.values() if c.core and c.kind != "copy"]


def test_world_1_runs_every_op_in_both_launch_modes_and_graphs_launch_faster(
    tmp_path: Path,
) -> None:
    df = sweep(
        tmp_path,
        *("--world", "1", "--launch", "graph,eager", "--dtypes", "bfloat16"),
        *("--ops", ",".join(COLLECTIVES), "--max-size", "64M", "--step-factor", "4"),
    )
    # NCCL moves nothing for an in-place operation on one rank: its graph holds no work, so
    # there is nothing to time, and the row says so; its eager row is the call's cost.
    empty = df[df["status"] == "skipped"]
    assert set(empty["launch"]) == {"graph"}
    assert empty["in_place"].astype(bool).all()
    assert empty["error"].str.startswith("nothing to time: the CUDA graph holds no GPU work").all()
    df = df[df["status"] != "skipped"]
    assert (df["status"] == "ok").all(), df.loc[df["status"] != "ok", ["op", "error"]]
    assert (df["n_wrong"] == 0).all()
    assert (df["tier"] == "local").all()
    assert df["launch_note"].isna().all()
    assert len(set(df["op"] + df["algorithm"])) == len(COLLECTIVES)
    key = ["op", "algorithm", "size_bytes"]
    both = df.pivot_table(index=key, columns="launch", values="time_us")
    assert both["eager"].notna().all()
    assert both["graph"].notna().sum() == len(both) - len(empty)
    small = both[both.index.get_level_values("size_bytes") <= 64 * 2**10]
    slower = small[small["graph"] > small["eager"]]
    assert slower.empty, slower
    # A graph that captured nothing would replay in no time: out-of-place ops move S at least
    # once through memory (read and write), so their time has a floor.
    largest = df[(df["size_bytes"] == df["size_bytes"].max()) & ~df["in_place"].astype(bool)]
    floor_us = 2 * largest["size_bytes"] / HBM_BYTES_PER_S * 1e6
    assert (largest["time_us"] >= floor_us).all(), largest[[*key, "launch", "time_us"]]


@pytest.mark.usefixtures("isolated_registry")
def test_an_op_that_cannot_be_captured_runs_eagerly_and_says_why(tmp_path: Path) -> None:
    df = sweep(
        tmp_path,
        *("--world", "1", "--plugins", "tests.plugins.host_sync", "--ops", "host_sync,all_gather"),
        *("--launch", "graph,eager", "--min-size", "1K", "--max-size", "4K"),
    )
    assert (df["status"] == "ok").all()
    synced = df[df["algorithm"] == "host_sync"]
    assert len(synced) == 3  # one eager row per size, not a second one for the graph
    assert (synced["launch"] == "eager").all()
    assert synced["launch_note"].str.startswith("cannot capture a CUDA graph").all()
    gathered = df[df["op"] == "all_gather"]
    assert sorted(gathered["launch"]) == ["eager"] * 3 + ["graph"] * 3
    assert gathered["launch_note"].isna().all()
