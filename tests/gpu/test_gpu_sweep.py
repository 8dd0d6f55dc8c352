"""On GPUs: the same sweep through NCCL, one rank actor per GPU. Skipped where there are none."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import ONE_GPU
from tests.cli_sweep import statuses, sweep
from tests.gpu.gpus import nccl_allocates

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("ray_session")]


def test_nccl_sweep_over_every_gpu_is_exact(tmp_path: Path) -> None:
    df = sweep(tmp_path, "--max-size", "64M", "--dtypes", "bfloat16,float32", "--samples")
    assert (df["backend"] == "nccl").all()
    assert len(set(df["op"] + df["algorithm"])) == sum(c.core for c in REGISTRY.values())
    copies = df[df["tier"] == "gpu"]  # each GPU's own copies, on groups of their own
    assert (copies["kind"] == "copy").all()
    assert (copies["status"] == "ok").all()
    df = df[df["tier"] != "gpu"]
    assert (df["world_size"] == torch.cuda.device_count()).all()
    # One GPU alone: NCCL moves nothing in place, so those CUDA graphs are empty (skipped).
    empty = df["status"] == "skipped"
    assert df.loc[empty, "in_place"].astype(bool).all()
    assert empty.any() == (torch.cuda.device_count() == 1)
    df = df[~empty]
    assert (df["status"] == "ok").all()
    assert (df["n_wrong"] == 0).all()
    assert df["nccl_version"].notna().all()
    assert df["gpu_uuids"].map(lambda uuids: len(set(uuids))).eq(torch.cuda.device_count()).all()
    assert (df["time_us_p99"] >= df["time_us_p50"]).all()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="a hang needs a peer: two GPUs")
@pytest.mark.usefixtures("isolated_registry")
def test_a_hung_nccl_point_is_killed_and_rebuilt(tmp_path: Path) -> None:
    hang = ("--plugins", "tests.plugins.hang", "--ops", "hang,all_reduce", "--timeout", "20")
    df = sweep(tmp_path, *hang, "--min-size", "512", "--max-size", "1K", exit_code=4)
    assert statuses(df) == {
        "hang@512": "ok",
        "hang@1024": "timeout",
        "native@512": "ok",
        "native@1024": "ok",
    }


@pytest.mark.skipif(
    torch.cuda.device_count() < 2,
    reason="one rank: NCCL 2.28.9 ran the bogus NCCL_ALGO's variant without a word (H100 x1)",
)
def test_a_value_nccl_refuses_gives_its_variant_error_rows_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    # sweeper cannot judge NCCL's per-function syntax; NCCL refuses the unknown name as the
    # variant's ranks join, and only that variant's points fail
    bad = "allreduce:bogus"
    df = sweep(
        tmp_path,
        *("--ops", "all_reduce", "--max-size", "1K", "--nccl-env", f"NCCL_ALGO=Ring,{bad}"),
        exit_code=4,
    )
    refused = df[df["variant"] == f"algo={bad}"]
    assert len(refused) > 0
    assert (refused["status"] == "error").all()
    assert (
        refused["error"].str.contains('NCCL: Unrecognized element token "bogus"', regex=False).all()
    )
    assert (df.loc[df["variant"] != f"algo={bad}", "status"] == "ok").all()


def test_every_gpu_row_carries_each_ranks_telemetry(tmp_path: Path) -> None:
    # out of place: work on every GPU count (on one GPU an in-place graph holds none)
    df = sweep(tmp_path, "--ops", "all_gather", "--max-size", "1M")
    ran = df[df["status"] == "ok"]
    assert len(ran) > 0
    for column in ("sm_clock_mhz", "mem_clock_mhz", "power_w", "temperature_c"):
        assert ran[column].map(len).eq(ran["world_size"]).all(), column
        assert ran[column].map(lambda ranks: all(v > 0 for v in ranks)).all(), column
    assert ran["throttle_reasons"].map(lambda ranks: all(r is not None for r in ranks)).all()
    # counters change only with errors: a healthy GPU adds none over a point
    assert ran["ecc_uncorrected_delta"].map(lambda ranks: all(v in (0, None) for v in ranks)).all()


@pytest.mark.skipif(torch.cuda.device_count() != 1, reason="a machine of one GPU")
def test_one_gpu_runs_what_it_can_says_pairs_need_two_and_writes_the_report(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", "--results", str(out), "--max-size", "1M"])
    assert result.exit_code == 0, result.output
    assert ONE_GPU in result.stdout.splitlines()
    df = sweeper.load(out)
    assert set(df["tier"]) == {"local", "gpu"}  # the collectives at world 1; its copies
    assert (df["status"] == "ok").any()
    assert list((tmp_path / "reports").glob("*.html"))


ONE_WAY = ("h2d", "d2h")


@pytest.mark.skipif(torch.cuda.device_count() != 1, reason="a machine of one GPU")
def test_sweeper_run_with_no_options_gives_copies_near_the_pcie_peak_and_a_report(
    tmp_path: Path,
) -> None:
    """Issue 17's done line: `sweeper run` with no options on one GPU: copy rows (pinned
    above half the PCIe peak, as the named copies' test holds them: a shared host's link gave
    64% one day and 84-88% another, docs/measurements/h200-x1-2026-12-02.md), telemetry
    filled, a report."""
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", "--results", str(out)])
    assert result.exit_code == 0, result.output
    assert ONE_GPU in result.stdout.splitlines()
    assert list((tmp_path / "reports").glob("*.html"))
    df = sweeper.load(out)
    copies = df[df["kind"] == "copy"]
    assert set(copies["op"]) == {"h2d", "d2h", "h2d+d2h", "d2d"}
    assert (copies["status"] == "ok").all(), copies[["op", "algorithm", "status", "error"]]
    assert not copies["concurrent"].astype(bool).any()  # one GPU: alone only
    assert copies["sm_clock_mhz"].map(lambda ranks: all(v > 0 for v in ranks)).all()
    assert copies["pcie_gen"].map(lambda ranks: all(v > 0 for v in ranks)).all()
    large = copies[copies["size_bytes"] == 256 * 2**20].set_index(["op", "algorithm"])
    shares = {op: large.loc[(op, "pinned"), "pcie_pct_of_peak"] for op in ONE_WAY}
    assert all(share > 50 for share in shares.values()), shares
    # the memory roof is above the link to the host
    assert (
        large.loc[("d2d", "device"), "busbw_gb_per_s"]
        > large.loc[("h2d", "pinned"), "algbw_gb_per_s"]
    )


def test_host_copies_asked_by_name_take_every_size_are_exact_and_a_share_of_the_pcie_peak(
    tmp_path: Path,
) -> None:
    grid = ("--min-size", "1M", "--max-size", "256M")
    df = sweep(tmp_path, "--ops", "h2d*,d2h*", "--dtypes", "uint8", *grid)
    assert (df["kind"] == "copy").all()
    assert set(df["tier"]) == {"gpu"}
    ran = df[df["status"] == "ok"]
    assert set(ran["op"]) == {"h2d", "d2h", "h2d+d2h"}
    assert set(ran["algorithm"]) == {"pinned", "pageable"}
    assert set(ran["size_bytes"]) == {2**k for k in range(20, 29)}  # every size, by name
    assert (ran.loc[ran["op"] != "d2h", "n_wrong"] == 0).all()
    assert ran.loc[ran["op"] == "d2h", "n_wrong"].isna().all()  # its output is on the host
    alone = ran[~ran["concurrent"].astype(bool)]
    large = alone[(alone["size_bytes"] == 256 * 2**20) & (alone["algorithm"] == "pinned")]
    # A healthy link runs well above half of its peak, though a shared host's memory moves a
    # copy now and then (4 H100, 2026-11-28: alone, 64-87% in one run, 38-45% for three of
    # twelve in the run before); a link trained down to half its lanes or generation stays
    # under half in every row, and its trained state is in the row.
    share = large["pcie_pct_of_peak"]
    assert share.between(25, 110).all(), share
    assert share.median() > 50, share
    trained = large[["pcie_gen", "pcie_max_gen", "pcie_width", "pcie_max_width"]].map(list)
    assert (trained["pcie_gen"] == trained["pcie_max_gen"]).all(), trained
    assert (trained["pcie_width"] == trained["pcie_max_width"]).all(), trained


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="GPUs at once: two or more")
def test_host_copies_of_every_gpu_at_once_give_a_row_per_gpu_beside_each_alone(
    tmp_path: Path,
) -> None:
    # Each GPU alone is a group smaller than the world, opened on its member only: a world
    # bound to a device would split it over every rank and hang (it did, on two H200).
    n = torch.cuda.device_count()
    df = sweep(tmp_path, "--ops", "h2d,d2d", "--min-size", "64M", "--max-size", "64M")
    assert (df["status"] == "ok").all()
    assert (df.loc[df["op"] == "h2d", "n_wrong"] == 0).all()
    h2d = df[df["op"] == "h2d"]
    together = h2d[h2d["concurrent"].astype(bool)]
    alone = h2d[~h2d["concurrent"].astype(bool)]
    assert (together["world_size"] == n).all()
    assert (alone["world_size"] == 1).all()
    for rows in (together, alone):  # each GPU once, its own row
        assert sorted(rows["gpu_uuids"].map(lambda uuids: uuids[0])) == sorted(
            alone["gpu_uuids"].map(lambda uuids: uuids[0])
        )
        assert rows["gpu_uuids"].map(len).eq(1).all()
        assert rows["pcie_pct_of_peak"].notna().all()
    d2d = df[df["op"] == "d2d"]  # the memory roof: each GPU alone only
    assert len(d2d) == n
    assert not d2d["concurrent"].astype(bool).any()
    assert (d2d["busbw_gb_per_s"] == 2 * d2d["algbw_gb_per_s"]).all()


@pytest.mark.skipif(nccl_allocates(), reason="this GPU registers its buffers (test_gpu_engine.py)")
def test_registered_buffers_without_multicast_are_one_line_exit_2_and_write_nothing(
    tmp_path: Path,
) -> None:
    """Every point would fail at its allocation: the nodes' survey tells first."""
    out = tmp_path / "results"
    args = ["run", "--register-buffers", "--ops", "all_gather", "--max-size", "64K"]
    result = CliRunner().invoke(app, [*args, "--world", "1", "--results", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("sweeper: error: --register-buffers: torch cannot allocate")
    assert "it needs the GPU's multicast support" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()
