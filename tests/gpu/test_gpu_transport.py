"""On GPUs joined by NVLink: every row says the transport NCCL set up, read from NCCL's own
INFO lines, and a transport that contradicts the tier is flagged. Skipped where no two GPUs
share NVLink."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
import torch

from sweeper.fabric.multicast import switches_multicast
from sweeper.topology import Node, read_nvml
from tests.cli_sweep import sweep

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("ray_session")]


def _nvlinked() -> bool:
    if torch.cuda.device_count() < 2:
        return False
    return any(len(island) > 1 for island in Node.from_record(read_nvml()).islands())


@pytest.mark.skipif(not _nvlinked(), reason="an NVLink group needs two GPUs joined by NVLink")
def test_nvlink_rows_say_p2p_and_without_it_shm_then_the_network_each_flagged(
    tmp_path: Path,
) -> None:
    df = sweep(
        tmp_path,
        *("--tiers", "nvlink", "--pairs", "none", "--ops", "all_reduce,all_to_all"),
        *("--max-size", "64K", "--engine", "torch,nccl", "--launch", "graph,eager"),
        *("--nccl-env", "NCCL_P2P_DISABLE=1", "--nccl-env", "NCCL_SHM_DISABLE=0,1"),
        exit_code=5,  # rows flagged against their tier, every point run
    )
    env = df["nccl_env"].map(dict)
    assert not any(name.startswith("NCCL_DEBUG") for names in env for name in names)
    # the machine's multicast switch reached every actor set as the environment set it
    kept = {k: v for k, v in os.environ.items() if k.startswith("NCCL_") and switches_multicast(k)}
    assert all(kept.items() <= names.items() for names in env)
    p2p_off = env.map(lambda e: e.get("NCCL_P2P_DISABLE") == "1")
    shm_off = env.map(lambda e: e.get("NCCL_SHM_DISABLE") == "1")
    assert (df["status"] == "ok").all()
    assert set(df["engine"]) == {"torch", "nccl"}

    default = df[~p2p_off]
    assert default["transport"].str.startswith("P2P/").all(), _seen(default)
    assert default["transport_flag"].isna().all()
    assert (default["nccl_channels"] > 0).all()

    host_memory = df[p2p_off & ~shm_off]
    assert (host_memory["transport"] == "SHM").all(), _seen(host_memory)
    assert host_memory["transport_flag"].str.startswith("nvlink group through SHM").all()

    network = df[p2p_off & shm_off]  # NET/Socket where the node has no RDMA device
    assert network["transport"].str.startswith("NET/").all(), _seen(network)
    assert network["transport_flag"].str.startswith("nvlink group through NET/").all()


def _seen(rows: pd.DataFrame) -> str:
    return str(rows.groupby(["engine", "launch", "op"])["transport"].unique())
