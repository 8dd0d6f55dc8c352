"""On GPUs: tiers, the P2P and copy-engine matrices, algorithm variants, MoE and the real
out-of-memory path. Skipped where there are no GPUs; run on the GPU machine."""

from __future__ import annotations

from itertools import permutations
from pathlib import Path

import pytest
import torch

from sweeper.rank.preflight import nccl_available
from tests.cli_sweep import sweep

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("ray_session")]
# Pairs, islands, algorithms that move data between GPUs: on one GPU there is nothing to plan
pairs = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="GPU pairs: two or more GPUs")


@pairs
def test_tiers_give_the_island_its_pairs_and_the_forced_host_path(tmp_path: Path) -> None:
    n = torch.cuda.device_count()
    df = sweep(tmp_path, "--tiers", "nvlink,pcie", "--ops", "all_reduce", "--max-size", "1M")
    assert (df["status"] == "ok").all()
    groups = df.drop_duplicates("group_id")
    # each pair, and the whole island where it is more than a pair
    per_tier = n * (n - 1) // 2 + (n > 2)
    assert (groups["tier"] + "/" + groups["variant"]).value_counts().to_dict() == {
        "nvlink/default": per_tier,
        "pcie/p2p-off": per_tier,
    }
    assert set(
        df.loc[df["variant"] == "p2p-off", "nccl_env"]
        .map(dict)
        .map(lambda env: env.get("NCCL_P2P_DISABLE"))
    ) == {"1"}


@pairs
@pytest.mark.parametrize(
    "engine",
    [
        "torch",
        pytest.param(
            "nccl",
            marks=pytest.mark.skipif(not nccl_available(), reason="needs sweeper-bench[nccl]"),
        ),
    ],
)
def test_p2p_matrix_covers_every_ordered_gpu_pair(tmp_path: Path, engine: str) -> None:
    n = torch.cuda.device_count()
    df = sweep(
        tmp_path,
        "--engine",
        engine,
        "--tiers",
        "nvlink",
        "--ops",
        "p2p*",
        "--min-size",
        "8",
        "--max-size",
        "64M",
        "--concurrent",
    )
    p2p = df[df["op"] == "p2p"]
    assert (p2p["engine"] == engine).all()
    assert (p2p["status"] == "ok").all()
    assert (p2p["n_wrong"] == 0).all()
    uni = p2p[(p2p["algorithm"] == "uni") & (p2p["size_bytes"] == 64 * 2**20)]
    assert set(zip(uni["src_rank"], uni["dst_rank"], strict=True)) == set(permutations(range(n), 2))
    assert uni["src_gpu_uuid"].ne(uni["dst_gpu_uuid"]).all()


@pairs
def test_copy_engine_matrix_times_every_pair_and_the_fan_out(tmp_path: Path) -> None:
    n = torch.cuda.device_count()
    df = sweep(tmp_path, "--ops", "broadcast", "--max-size", "64M", "--copy-engine")
    copies = df[df["op"] == "copy"]
    bi = copies["algorithm"] == "bi"
    assert set(copies.loc[~bi, "size_bytes"]) == {8, 64 * 2**20}
    assert set(copies.loc[bi, "size_bytes"]) == {16, 128 * 2**20}  # bi counts both ways
    large = copies[copies["size_bytes"] >= 64 * 2**20]
    counts = large["algorithm"].value_counts().to_dict()
    assert counts == {"uni": n * (n - 1), "bi": n * (n - 1) // 2, "fanout": n * (n - 1)}
    assert (large["busbw_gb_per_s"] > 1).all()


@pairs
def test_all_reduce_algorithms_include_symmetric_memory_and_nccl_algos(tmp_path: Path) -> None:
    df = sweep(
        tmp_path,
        "--ops",
        "all_reduce*,reduce_scatter+all_gather,reduce+broadcast",
        "--nccl-algos",
        "ring,tree",
        "--max-size",
        "16M",
        "--dtypes",
        "bfloat16",
    )
    assert set(df["status"]) <= {"ok", "skipped"}, df.loc[df["status"] != "ok", "error"]
    ran = df[df["status"] == "ok"]
    assert (ran["n_wrong"] == 0).all()
    by_variant = {variant: set(rows) for variant, rows in ran.groupby("variant")["algorithm"]}
    composites = {"reduce_scatter+all_gather", "reduce+broadcast"}
    assert by_variant["default"] == {"native", "symm_one_shot", "symm_two_shot", *composites}
    # Ring has every kernel the composites launch; Tree has AllReduce alone; neither touches
    # torch symmetric memory, so those rows would only repeat the default's
    assert by_variant["algo=Ring"] == {"native", *composites}
    assert by_variant["algo=Tree"] == {"native"}


def test_all_to_all_algorithms_and_moe_are_exact_on_gpus(tmp_path: Path) -> None:
    df = sweep(
        tmp_path,
        "--ops",
        "all_to_all*,moe*",
        "--max-size",
        "64M",
        "--moe",
        "tokens=2048,hidden=1024",
    )
    ran = df[df["status"] == "ok"]
    assert (ran["n_wrong"] == 0).all()
    assert {"native", "pairwise", "ring", "moe_dispatch", "moe_combine"} <= set(ran["algorithm"])
    assert set(df.loc[df["status"] != "ok", "status"]) <= {"skipped"}


def test_sizes_past_a_mem_limit_are_real_oom_rows_and_auto_stays_under(tmp_path: Path) -> None:
    # On one GPU an in-place all_reduce's graph holds no work (its rows say skipped): eager
    launch = ("--launch", "eager") if torch.cuda.device_count() == 1 else ()
    df = sweep(
        tmp_path / "fixed",
        *launch,
        "--ops",
        "all_reduce",
        "--mem-limit",
        "2G",
        "--min-size",
        "512M",
        "--max-size",
        "4G",
        exit_code=4,
    )
    status = dict(zip(df["size_bytes"] // 2**20, df["status"], strict=True))
    assert status == {512: "ok", 1024: "ok", 2048: "oom", 4096: "oom"}
    assert df.loc[df["status"] == "oom", "error"].str.contains("out of memory").all()
    auto = sweep(
        tmp_path / "auto",
        *launch,
        "--ops",
        "all_reduce,all_to_all",
        "--mem-limit",
        "2G",
        "--min-size",
        "256M",
    )
    assert (auto["status"] == "ok").all()
    bounds = auto.groupby("op")["max_size_bytes"].max() / 2**30
    assert 1.7 < bounds["all_reduce"] < 2.0
    assert 0.85 < bounds["all_to_all"] < 1.0
