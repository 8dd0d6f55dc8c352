"""Real sweeps: a real local Ray, real gloo ranks, real Parquet. No mocks of either."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.collectives import REGISTRY
from sweeper.spec import build_spec
from sweeper.sweep import Finished, Row, Started, run
from tests import cli_sweep
from tests.conftest import start_ray_session

pytestmark = pytest.mark.usefixtures("ray_session")


class Recorder:
    """The observer a test reads back: what the terminal would have been shown."""

    def __init__(self) -> None:
        self.run: Started | None = None
        self.rows: list[Row] = []
        self.end: Finished | None = None

    def started(self, run: Started) -> None:
        self.run = run

    def point(self, row: Row) -> None:
        self.rows.append(row)

    def finished(self, run: Finished) -> None:
        self.end = run


def sweep(tmp_path: Path, **options: object) -> tuple[Finished, Recorder]:
    recorder = Recorder()
    finished = run(build_spec(output=tmp_path / "results", **options), recorder)
    return finished, recorder


@pytest.mark.parametrize(
    ("world", "dtypes"), [(1, "float32"), (2, "float32,bfloat16,int8"), (4, "float32,float16")]
)
def test_every_operation_is_exact_at_every_size(tmp_path: Path, world: int, dtypes: str) -> None:
    # exactness, not timing: two iterations a block (the blocks are still three), and every
    # fourth size from 8 B (under one element a rank) to 32K (thousands a rank)
    finished, recorder = sweep(
        tmp_path, world=world, dtypes=dtypes, max_size="32K", step_factor=4, iters=2, warmup=1
    )
    assert recorder.run is not None
    assert recorder.run.backend == "gloo"
    assert recorder.rows == list(finished.rows)
    df = pd.DataFrame(finished.rows)
    assert set(df["op"] + "/" + df["algorithm"]) == {
        f"{c.op}/{c.algorithm}" for c in REGISTRY.values() if c.core
    }
    # the copies of each GPU (in the default run): skipped on CPU ranks, saying why
    copies = df["kind"] == "copy"
    assert (df.loc[copies, "status"] == "skipped").all()
    assert df.loc[copies, "error"].str.endswith("CPU ranks have no device memory").all()
    assert set(df.loc[copies, "size_bytes"]) == {8, min(64 * 2**10, int(df["size_bytes"].max()))}
    df = df[~copies]
    bad = df[(df["status"] != "ok") | (df["n_wrong"] != 0)]
    assert bad.empty, bad[["op", "algorithm", "dtype", "size_bytes", "status", "error", "n_wrong"]]
    assert (df["world_size"] == world).all()
    assert (df["tier"] == "cpu").all()
    assert (df["time_us"] >= df["time_us_min"]).all()
    assert (df["launch"] == "eager").all()  # CPU ranks launch eagerly
    assert (df["engine"] == "torch").all()
    assert df["launch_note"].isna().all()
    assert not df["registered"].astype(bool).any()  # gloo's buffers: no NCCL to register with
    assert (df["time_us_blocks"].map(len) == 3).all()
    assert (df["time_us_blocks"].map(sorted).str[1] == df["time_us"]).all()
    assert (df["algbw_gb_per_s"] > 0).all()
    assert (df["busbw_gb_per_s"] == df["algbw_gb_per_s"] * df["busbw_factor"]).all()
    assert set(df["dtype"]) == set(dtypes.split(","))
    assert {8 * 4**k for k in range(1, 7)} <= set(df["size_bytes"])  # 8 B: some round up


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Finished]:
    """Two operations to 4K, three iterations a block, each iteration's time kept: one sweep
    for the tests that read its rows back (they only look)."""
    start_ray_session()  # the sweep runs here, while the session's Ray is sure to be up
    root = tmp_path_factory.mktemp("small")
    finished, _ = sweep(
        root, ops="all_reduce,all_to_all", max_size="4K", iters=3, warmup=1, samples=True
    )
    return root / "results", finished


def test_results_read_back_with_pandas_and_load(small_run: tuple[Path, Finished]) -> None:
    results, finished = small_run
    assert not list(results.rglob("_inflight-*"))
    plain = pd.read_parquet(results)
    loaded = sweeper.load(results)
    assert len(plain) == len(loaded) == len(finished.rows) == 2 * 10
    assert (loaded["iters"] == 3).all()
    assert (loaded["warmup_iters"] == 1).all()
    assert (loaded["run_id"] == finished.run_id).all()
    assert str(loaded["n_wrong"].dtype) == "Int64"
    row = loaded.set_index(["op", "size_bytes"]).loc[("all_reduce", 4096)]
    assert row["algbw_gb_per_s"] == pytest.approx(4096 / row["time_us"] / 1e3)
    assert row["busbw_gb_per_s"] == pytest.approx(row["algbw_gb_per_s"] * 1.0)  # n = 2


def test_samples_give_percentiles_from_per_iteration_times(
    small_run: tuple[Path, Finished],
) -> None:
    _, finished = small_run
    for row in finished.rows:
        assert len(row["samples_us"]) == 3 * 3  # every iteration of the three blocks
        assert (
            min(row["samples_us"])
            <= row["time_us_p50"]
            <= row["time_us_p99"]
            <= max(row["samples_us"]) + 1e-3
        )


@pytest.mark.usefixtures("isolated_registry")
def test_a_hung_point_times_out_and_the_sweep_and_its_series_go_on(tmp_path: Path) -> None:
    hang = ("--plugin", "tests.plugins.hang", "--ops", "hang,all_reduce", "--timeout", "8")
    df = cli_sweep.sweep(tmp_path, *hang, "--min-size", "256", "--max-size", "2K", exit_code=4)
    assert cli_sweep.statuses(df) == {
        "hang@256": "ok",
        "hang@512": "ok",
        "hang@1024": "timeout",
        "hang@2048": "ok",  # after the rebuild, the series' next size
        "native@256": "ok",
        "native@512": "ok",
        "native@1024": "ok",
        "native@2048": "ok",
    }
    assert "took over 8 s" in df.loc[df["status"] == "timeout", "error"].iloc[0]


def test_json_format_prints_one_event_per_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--ops",
            "gather",
            "--max-size",
            "64",
            "--format",
            "json",
            "--output",
            str(tmp_path / "r"),
        ],
    )
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["event"] for e in events] == ["started"] + ["point"] * 4 + ["finished"]
    assert events[-1]["failed"] == 0
    assert events[-1]["summary"][0]["label"] == "gather"
    assert {e["status"] for e in events[1:-1]} == {"ok"}


def test_plain_output_names_what_ran(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", "--ops", "all_reduce", "--max-size", "64", "--output", str(tmp_path / "r")]
    )
    assert result.exit_code == 0, result.output
    assert "gloo on cpu x2" in result.stdout
    assert "peak busbw" in result.stdout


@pytest.mark.usefixtures("isolated_registry")
def test_a_stall_in_one_block_shows_in_the_blocks_not_in_the_time(tmp_path: Path) -> None:
    from tests.plugins.stall import STALL_S

    stalled = cli_sweep.sweep(
        tmp_path,
        *("--plugin", "tests.plugins.stall", "--ops", "stall", "--min-size", "1K"),
        *("--max-size", "1K", "--iters", "5", "--warmup", "2", "--blocks", "3"),
    )
    (row,) = stalled.to_dict("records")
    first, middle, last = row["time_us_blocks"]
    assert middle >= STALL_S / 5 * 1e6  # the stall, spread over the block's 5 iterations
    assert max(first, last) < middle / 10
    assert row["time_us"] == sorted(row["time_us_blocks"])[1] < middle / 10


def test_nccl_env_values_get_actor_sets_of_their_own_whose_rows_say_gloo_ignores_them(
    tmp_path: Path,
) -> None:
    df = cli_sweep.sweep(
        tmp_path,
        *("--nccl-env", "NCCL_PROTO=LL,Simple", "--ops", "all_reduce", "--max-size", "1K"),
        *("--iters", "2", "--warmup", "1", "--no-report"),
    )
    assert set(df["variant"]) == {"default", "proto=LL", "proto=Simple"}
    default = df[df["variant"] == "default"]
    assert (default["status"] == "ok").all()
    assert not any("NCCL_PROTO" in dict(env) for env in default["nccl_env"])
    assert default["busbw_pct_of_link"].isna().all()  # CPU ranks cross no NVML-known link
    for variant, value in (("proto=LL", "LL"), ("proto=Simple", "Simple")):
        rows = df[df["variant"] == variant]
        assert len(rows) == len(default)  # every size, each saying why it did not run
        assert (rows["status"] == "skipped").all()
        assert rows["error"].str.endswith("NCCL variables are inert on CPU ranks (gloo)").all()
        assert rows["group_id"].str.endswith(f"/{variant}").all()
        # the actors' own environment: the variant's value reached them
        assert all(dict(env)["NCCL_PROTO"] == value for env in rows["nccl_env"])
