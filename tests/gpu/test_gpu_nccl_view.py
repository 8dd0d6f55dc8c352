"""On GPUs: NCCL loads sweeper's observing tuner plugin, and the rows of both engines carry the
communicators' start-up seconds, the GPUs' energy over the blocks, and NCCL's view (its cost
table's choice and prediction: on two GPUs or more; a communicator of one rank makes no table,
NCCL copies locally). Skipped where there is no GPU or no sweeper-bench[nccl]."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sweeper.rank.preflight import nccl_available
from tests.cli_sweep import sweep

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.usefixtures("ray_session"),
    pytest.mark.skipif(not nccl_available(), reason="needs sweeper-bench[nccl]"),
]

# A fresh process: NCCL loads its tuner once a process, as its first communicator starts
_LOADED = """
import json, torch
from sweeper.rank.nccl_view import NcclViews
views = NcclViews.start()
from sweeper.rank.nccl import NcclComm, unique_id
comm = NcclComm(unique_id(), 0, 1, (0,), torch.cuda.Stream())
print(json.dumps({"opened": views.observer.opened() if views.observer else None,
                  "partial": views.partial}))
comm.destroy()
"""


def test_nccl_loads_the_observer_as_its_tuner() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED], capture_output=True, text=True, check=True, timeout=120
    )
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said == {"opened": 1, "partial": None}, done.stderr[-2000:]


def test_world_1_rows_carry_start_up_energy_and_the_one_rank_view(tmp_path: Path) -> None:
    df = sweep(
        tmp_path,
        *("--world", "1", "--engine", "torch,nccl", "--launch", "graph,eager"),
        *("--ops", "all_reduce,all_gather", "--dtypes", "bfloat16"),
        *("--min-size", "1M", "--max-size", "256M", "--step-factor", "16"),
        *("--iters", "4000"),  # blocks of a second or more at 256 MiB: energy the counter tells
    )
    ran = df[df["status"] == "ok"]
    assert set(ran["engine"]) == {"torch", "nccl"}
    assert (ran["comm_start_s"] > 0).all()
    big = ran[ran["size_bytes"] == 2**28]
    moved = big[big["op"] == "all_gather"]
    assert len(moved) == 4, big[["op", "engine", "launch"]]
    assert (moved["energy_j"] > 0).all(), moved[["engine", "launch", "energy_j"]]
    assert (moved["energy_j_per_gb"] > 0).all()
    # An in-place all_reduce of one rank moves nothing: its blocks last microseconds, under
    # the counter's window (ENERGY_WINDOW_S), so no figure
    assert big[big["op"] == "all_reduce"]["energy_j"].isna().all()
    # NCCL runs a one-rank collective as a local copy: no cost table, and not a partial view
    assert set(ran["nccl_view"]) == {"no collective call"}, set(ran["nccl_view"])
    assert not any("NCCL_TUNER_PLUGIN" in dict(env) for env in ran["nccl_env"])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL tunes a communicator of 2+")
def test_two_gpus_rows_carry_nccls_choice_and_prediction_on_both_engines(tmp_path: Path) -> None:
    df = sweep(
        tmp_path,
        *("--world", "2", "--engine", "torch,nccl", "--launch", "graph,eager"),
        *("--ops", "all_reduce,all_gather,reduce_scatter+all_gather", "--dtypes", "bfloat16"),
        *("--max-size", "64M", "--step-factor", "16"),
    )
    ran = df[(df["status"] == "ok") & (df["world_size"] == 2)]
    assert set(ran["nccl_view"]) == {"observed"}, set(ran["nccl_view"])
    assert (ran["nccl_predicted_us"] > 0).all()
    assert ran["measured_over_predicted"].notna().all()
    for algo, proto, predictions in zip(
        ran["nccl_algo"], ran["nccl_proto"], ran["nccl_predictions"], strict=True
    ):
        pairs = dict(predictions)
        assert any(name.endswith(f"{algo}/{proto}") for name in pairs), (algo, proto, pairs)
