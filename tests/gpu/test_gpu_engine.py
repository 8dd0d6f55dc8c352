"""On a GPU: the nccl engine (NCCL called directly through nccl4py) beside torch.distributed, at
world size 1, in both launch modes. Skipped where there is no GPU or no sweeper-bench[nccl]."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.ops.registry import REGISTRY
from sweeper.rank.preflight import nccl_available
from tests.cli_sweep import sweep
from tests.gpu.gpus import nccl_allocates
from tests.gpu.test_gpu_launch import COLLECTIVES, HBM_BYTES_PER_S

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.usefixtures("ray_session"),
    pytest.mark.skipif(not nccl_available(), reason="needs sweeper-bench[nccl]"),
]


def test_the_nccl_engine_runs_every_op_exactly_in_both_launch_modes(tmp_path: Path) -> None:
    df = sweep(
        tmp_path,
        *("--world", "1", "--engine", "torch,nccl", "--launch", "graph,eager"),
        *("--ops", ",".join(COLLECTIVES)),
        *("--dtypes", "bfloat16", "--max-size", "128M", "--step-factor", "8"),
    )
    direct = df[df["engine"] == "nccl"]
    assert set(direct["op"] + direct["algorithm"]) == {
        REGISTRY[name].op + REGISTRY[name].algorithm for name in COLLECTIVES
    }
    empty = direct["status"] == "skipped"  # in place on one rank: NCCL has nothing to do
    assert direct.loc[empty, "in_place"].astype(bool).all()
    assert (direct.loc[empty, "launch"] == "graph").all()
    ran = direct[~empty]
    assert (ran["status"] == "ok").all(), ran.loc[ran["status"] != "ok", ["op", "error"]]
    assert (ran["n_wrong"] == 0).all()
    # A graph that captured nothing would replay in no time: below the time to read and write
    # S once, an out-of-place graph row would be empty. The largest S (128 MiB) is past any
    # GPU's L2 cache (50 MiB on H100 and H200), where copies of 16 MiB replay faster than HBM.
    largest = ran[(ran["size_bytes"] == ran["size_bytes"].max()) & ~ran["in_place"].astype(bool)]
    floor_us = 2 * largest["size_bytes"] / HBM_BYTES_PER_S * 1e6
    assert (largest["time_us"] >= floor_us).all(), largest[["op", "launch", "time_us"]]
    # Issued eagerly, the direct call skips torch.distributed's Python path: always cheaper.
    small = df[(df["size_bytes"] <= 64 * 2**10) & (df["status"] == "ok")]
    eager = small[small["launch"] == "eager"].pivot_table(
        index=["op", "algorithm", "size_bytes"], columns="engine", values="time_us"
    )
    slower = eager[eager["nccl"] >= eager["torch"]]
    assert slower.empty, slower


@pytest.mark.skipif(not nccl_allocates(), reason="NCCL's allocator: torch needs GPU multicast")
def test_registered_buffers_run_every_op_exactly_on_both_engines_and_give_memory_back(
    tmp_path: Path,
) -> None:
    """--register-buffers: buffers from NCCL's allocator, registered with both engines'
    communicators, point after point. Under a 3 GB cap, 22 points of up to 512 MB of buffers each
    would run out if a point's pool outlived it: each is deregistered and freed first."""
    df = sweep(
        tmp_path,
        *("--register-buffers", "--engine", "torch,nccl", "--launch", "graph,eager"),
        *("--ops", ",".join(COLLECTIVES), "--dtypes", "bfloat16"),
        *("--min-size", "1M", "--max-size", "256M", "--step-factor", "256", "--mem-limit", "3G"),
    )
    ran = df[df["status"] == "ok"]
    assert set(df["status"]) <= {"ok", "skipped"}, df.loc[df["status"] != "ok", "error"]
    assert ran["registered"].astype(bool).all()
    assert (ran["n_wrong"] == 0).all()
    assert set(ran["engine"]) == {"torch", "nccl"}
    assert set(ran["size_bytes"]) == {2**20, 2**28}
