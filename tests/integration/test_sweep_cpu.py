"""Real sweeps: a real local Ray, real gloo ranks, real Parquet. No mocks of either."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import sweeper
from sweeper.driver.measurement import ResultRow
from sweeper.driver.observer import Finished, Started
from sweeper.driver.sweep import run
from sweeper.ops.registry import REGISTRY
from sweeper.planning.profile import build_spec
from sweeper.results.writer import columns
from tests import cli_sweep
from tests.cli_runs import Runs
from tests.conftest import registry_kept, start_ray_session

pytestmark = pytest.mark.usefixtures("ray_session")


class Recorder:
    """The observer a test reads back: what the terminal would have been shown."""

    def __init__(self) -> None:
        self.run: Started | None = None
        self.rows: list[ResultRow] = []
        self.end: Finished | None = None

    def started(self, run: Started) -> None:
        self.run = run

    def point(self, row: ResultRow) -> None:
        self.rows.append(row)

    def finished(self, run: Finished) -> None:
        self.end = run


def sweep(tmp_path: Path, **options: object) -> tuple[Finished, Recorder]:
    """A sweep with no HTML report: the tests read its rows (the report's tests build pages)."""
    recorder = Recorder()
    finished = run(build_spec(results=tmp_path / "results", report=False, **options), recorder)
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
    df = pd.DataFrame([columns(row) for row in finished.rows])
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


def test_results_read_back_with_pandas_and_load(cli_runs: Runs) -> None:
    """tests/cli_runs.py's bare run: two operations to 4K, three iterations a block, each
    iteration's time kept."""
    results = cli_runs.bare_results
    finished = json.loads(cli_runs.bare_stdout.splitlines()[-1])
    assert not list(results.rglob("_inflight-*"))
    plain = pd.read_parquet(results)
    loaded = sweeper.load(results)
    assert len(plain) == len(loaded) == finished["points"] == 2 * 10
    assert (loaded["iters"] == 3).all()
    assert (loaded["warmup_iters"] == 1).all()
    assert (loaded["run_id"] == cli_runs.bare).all()
    assert str(loaded["n_wrong"].dtype) == "Int64"
    row = loaded.set_index(["op", "size_bytes"]).loc[("all_reduce", 4096)]
    assert row["algbw_gb_per_s"] == pytest.approx(4096 / row["time_us"] / 1e3)
    assert row["busbw_gb_per_s"] == pytest.approx(row["algbw_gb_per_s"] * 1.0)  # n = 2


def test_samples_give_percentiles_from_per_iteration_times(cli_runs: Runs) -> None:
    rows = sweeper.load(cli_runs.bare_results).to_dict("records")
    assert len(rows) == 2 * 10
    for row in rows:
        assert len(row["samples_us"]) == 3 * 3  # every iteration of the three blocks
        # kept as float32: a sample read back may differ from the time it was in the run
        # in its last bits
        assert (
            min(row["samples_us"]) - 1e-3
            <= row["time_us_p50"]
            <= row["time_us_p99"]
            <= max(row["samples_us"]) + 1e-3
        )


# What the hung point waits. Each call of a point has it (prepare, then execute): one here takes
# milliseconds, a stalled one a quarter second more, under half a second in all with forty
# processes queued for the two cores of a loaded box. The hang ends in a timeout whatever the
# load: its rank 1 sleeps for an hour, and a point ends when all its ranks have answered.
TIMEOUT_S = 3


@pytest.fixture(scope="module")
def plugged(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """One sweep through the CLI for three tests below (they only look): two test plugins
    beside all_reduce, `hang` hanging at 1K and `stall` stalling once in each point's middle
    block (five iterations a block, two warm-up and three blocks: the calls `stall`
    counts), and two NCCL_PROTO values, each an actor set of its own; no HTML report."""
    start_ray_session()  # the sweep runs here, while the session's Ray is sure to be up
    with registry_kept():
        return cli_sweep.sweep(
            tmp_path_factory.mktemp("plugged"),
            *("--plugins", "tests.plugins.hang", "--plugins", "tests.plugins.stall"),
            *("--ops", "hang,all_reduce,stall", "--min-size", "256", "--max-size", "2K"),
            *("--iters", "5", "--warmup", "2", "--blocks", "3", "--timeout", str(TIMEOUT_S)),
            *("--nccl-env", "NCCL_PROTO=LL,Simple", "--no-report"),
            exit_code=4,
        )


def _default(plugged: pd.DataFrame, algorithm: str) -> pd.DataFrame:
    """The rows of `algorithm` on the actor set of NCCL's defaults."""
    return plugged[(plugged["variant"] == "default") & (plugged["algorithm"] == algorithm)]


def test_a_hung_point_times_out_and_the_sweep_and_its_series_go_on(plugged: pd.DataFrame) -> None:
    df = pd.concat([_default(plugged, "hang"), _default(plugged, "native")])
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
    assert f"took over {TIMEOUT_S} s" in df.loc[df["status"] == "timeout", "error"].iloc[0]


def test_json_format_prints_one_event_per_line(cli_runs: Runs) -> None:
    events = [json.loads(line) for line in cli_runs.bare_stdout.splitlines()]
    assert [e["event"] for e in events] == ["started"] + ["point"] * 2 * 10 + ["finished"]
    assert events[-1]["failed"] == 0
    assert events[-1]["summary"][0]["label"] == "all_reduce"
    assert {e["status"] for e in events[1:-1]} == {"ok"}


def test_plain_output_names_what_ran(cli_runs: Runs) -> None:
    assert "gloo on cpu x2" in cli_runs.second_stdout
    assert "peak busbw" in cli_runs.second_stdout


@pytest.mark.usefixtures("isolated_registry")  # importing the plugin registers its operation
def test_a_stall_in_one_block_shows_in_the_blocks_not_in_the_time(plugged: pd.DataFrame) -> None:
    from tests.plugins.stall import STALL_S

    stalled = _default(plugged, "stall").query("size_bytes == 1024")
    (row,) = stalled.to_dict("records")
    blocks = list(row["time_us_blocks"])
    stall_us = STALL_S / 5 * 1e6  # the stall, spread over the block's 5 iterations
    # The stall is a floor (a sleep), so the middle block holds it whatever the box's load.
    # An unstalled block of a 1 KiB all_reduce would need a hiccup as long as the stall
    # itself to reach it; the box's own noise (a few ms a block when loaded) moves the
    # blocks' ratio to each other, so the test compares with the stall, not with them.
    assert blocks[1] >= stall_us
    assert blocks[1] == max(blocks)
    assert row["time_us"] == sorted(blocks)[1] < stall_us


def test_nccl_env_values_get_actor_sets_of_their_own_whose_rows_say_gloo_ignores_them(
    plugged: pd.DataFrame,
) -> None:
    df = plugged[plugged["algorithm"] == "native"]  # all_reduce's
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
