"""`sweeper nightly` for real: a real local Ray, gloo ranks, Parquet, the JSON summary; and
two sweeps writing one results directory at once."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
import ray
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results import load as stored
from sweeper.results import records
from sweeper.results.schema import COLUMNS
from sweeper.results.writer import ResultWriter
from tests.conftest import start_ray_session

pytestmark = pytest.mark.usefixtures("ray_session")

SERIES = "cpu:n0r0,1 all_reduce float32"
KEY = ["group_id", "op", "algorithm", "dtype", "size_bytes", "engine", "launch"]


def profile(tmp_path: Path) -> Path:
    """A nightly profile small enough for two CPU cores (and a bandwidth floor to match)."""
    path = tmp_path / "nightly.yaml"
    path.write_text(
        f"""
world: 2
ops: all_reduce
min_size: 1K
max_size: 64K
iters: 20
warmup: 2
cluster_name: ci
results: {tmp_path / "results"}
nightly:
  bandwidth_min_size: 16K
"""
    )
    return path


def nightly(tmp_path: Path, *args: str, columns: int = 80) -> tuple[int, str]:
    """`sweeper nightly` with the profile, in a terminal `columns` wide."""
    result = CliRunner().invoke(
        app,
        ["nightly", "--profile", str(profile(tmp_path)), *args],
        env={"COLUMNS": str(columns)},
    )
    return result.exit_code, result.stdout


def judged(output: str) -> dict[str, Any]:
    """The `nightly` event, the last line of --format json."""
    event: dict[str, Any] = json.loads(output.splitlines()[-1])
    assert event["event"] == "nightly"
    return event


@dataclass(frozen=True)
class FirstNight:
    """A nightly run into an empty results directory, once for the module: where it wrote, and
    what it printed."""

    root: Path  # root/results and root/reports
    run_id: str
    output: str

    def copy_to(self, tmp_path: Path) -> None:
        """Its results and reports into tmp_path, where profile(tmp_path) reads and writes."""
        for name in ("results", "reports"):
            shutil.copytree(self.root / name, tmp_path / name)


@pytest.fixture(scope="module")
def first_night(tmp_path_factory: pytest.TempPathFactory) -> FirstNight:
    start_ray_session()  # the night runs here, while the session's Ray is sure to be up
    root = tmp_path_factory.mktemp("first-night")
    code, output = nightly(root)
    assert code == 0, output
    (run_id,) = stored.runs(root / "results")["run_id"]
    return FirstNight(root, run_id, output)


def test_nightly_twice_compares_the_second_run_with_the_first_and_exits_0(
    first_night: FirstNight, tmp_path: Path
) -> None:
    first, output = first_night.run_id, first_night.output
    assert "starts its history" in output
    reports = first_night.root / "reports"  # beside the results, as `sweeper run` writes them
    assert f"report: {reports / f'{first}.html'}" in output
    assert f"summary: {reports / f'{first}.summary.json'}" in output
    assert '<section id="baseline">' not in (reports / f"{first}.html").read_text()

    first_night.copy_to(tmp_path)
    reports = tmp_path / "reports"
    code, output = nightly(tmp_path, "--format", "json")
    assert code == 0, output
    second = judged(output)
    assert second["history"] == [first]
    # the report of the second night is compared with the first, point by point
    page = Path(second["report"])
    assert page == reports / f"{second['run_id']}.html"
    assert '<section id="baseline">' in page.read_text()
    assert f"<code>{first}</code>" in page.read_text()
    assert second["fingerprint"] == {"cluster_name": "ci", "backend": "gloo", "gpu_model": None}
    assert {(s["series"], s["metric"]) for s in second["series"]} == {
        (SERIES, "peak_busbw_gb_per_s"),
        (SERIES, "smallest_size_time_us"),
    }
    assert {s["status"] for s in second["series"]} == {"new"}  # 1 earlier run: too few to judge
    saved = json.loads(Path(second["summary"]).read_text())
    assert Path(second["summary"]) == reports / f"{second['run_id']}.summary.json"
    assert saved["run_id"] == second["run_id"] != first
    assert saved["history"] == [first]
    assert saved["report"] == str(page)


def _plant(results: Path, run_id: str, nights: int, faster: float) -> None:
    """Earlier nights of the same cluster, about `faster` times as fast as run `run_id` was
    (give or take 2%, night to night)."""
    rows = (
        stored.dataset(results)
        .to_table(columns=list(COLUMNS), filter=ds.field("run_id") == run_id)
        .to_pylist()
    )
    for night in range(nights, 0, -1):
        started = rows[0]["run_started_at"] - timedelta(days=night)
        planted = f"{started:%Y%m%dT%H%M%SZ}-planted"
        speedup = faster * (1 + 0.02 * (night % 3 - 1))
        writer = ResultWriter(results, planted, f"{started:%Y-%m-%d}")
        for row in rows:
            writer.append(
                {
                    **row,
                    "run_id": planted,
                    "run_started_at": started,
                    "time_us": row["time_us"] / speedup,
                    "algbw_gb_per_s": row["algbw_gb_per_s"] * speedup,
                    "busbw_gb_per_s": row["busbw_gb_per_s"] * speedup,
                }
            )
        writer.flush()


def test_nightly_with_a_planted_slowdown_exits_1_and_names_the_series(
    first_night: FirstNight, tmp_path: Path
) -> None:
    first_night.copy_to(tmp_path)
    yesterday = first_night.run_id
    # Six earlier nights ten times as fast: yesterday's run and tonight's are a slowdown
    # that persists two nights.
    _plant(tmp_path / "results", yesterday, nights=6, faster=10.0)

    code, output = nightly(tmp_path, columns=120)  # a series and its metric on one line
    assert code == 1, output
    assert "compared with 7 earlier nightly runs" in " ".join(output.split())
    regressions = output.split("regressions: 2", 1)[1].splitlines()
    table = [line for line in regressions if re.search(r" [+-]\d+\.\d% ", line)]
    assert len(table) == 2
    assert all(SERIES in line for line in table)
    assert "peak busbw @" in table[0]
    assert "time @1K (us)" in table[1]
    tonight = stored.runs(tmp_path / "results")["run_id"].iloc[-1]
    saved = json.loads((tmp_path / "reports" / f"{tonight}.summary.json").read_text())
    assert saved["regressions"] == 2
    assert saved["history"][-1] == yesterday


def _sweep(address: str, results: Path, log: Path) -> subprocess.Popen[bytes]:
    """`sweeper run` in a process of its own, on the test's Ray; its output goes to `log` (a
    pipe nobody reads until the end would fill up and stop it)."""
    with log.open("w") as out:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "sweeper", "run", "--address", address),
                # one rank (one actor) each: the writers, not the ranks, are what is shared
                *("--world", "1", "--dtypes", "float32,int32", "--max-size", "64K"),
                *("--iters", "5", "--warmup", "1", "--blocks", "1"),
                *("--results", str(results), "--format", "json"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_two_sweeps_writing_one_results_directory_at_once_both_complete(tmp_path: Path) -> None:
    results = tmp_path / "results"
    address = ray.get_runtime_context().gcs_address
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    sweeps = [_sweep(address, results, log) for log in logs]
    reads = 0
    while any(sweep.poll() is None for sweep in sweeps):
        if results.is_dir():  # a reader meanwhile sees whole files only
            stored.runs(results)
            reads += 1
        time.sleep(0.2)
    finished = []
    for sweep, log in zip(sweeps, logs, strict=True):
        output = log.read_text()
        assert sweep.returncode == 0, output
        finished.append(json.loads(output.splitlines()[-1]))
    runs = stored.runs(results).set_index("run_id")
    assert sorted(runs.index) == sorted(event["run_id"] for event in finished)
    for event in finished:
        assert event["points"] > 256  # more than one write batch each
        assert runs.loc[event["run_id"], "points"] == event["points"]
        assert runs.loc[event["run_id"], "failed"] == 0
    # every row of both, each once: what the runs' batches hold, however many files the
    # 30 s flush split them into
    rows = stored.load(results, columns=["run_id", *KEY, "status", "kind"])
    for event in finished:
        mine = rows[rows["run_id"] == event["run_id"]]
        assert len(mine) == event["points"]
        assert not mine.duplicated(KEY).any()
        # every collective ran; host<->device copies have no GPU on CPU ranks
        assert set(mine["status"] + "/" + mine["kind"]) == {
            "ok/collective",
            "ok/composite",
            "skipped/copy",
        }
    assert not list(results.rglob("_inflight-*"))
    for event in finished:  # each run's record beside the rows, and its report, whole
        assert records.load(results, event["run_id"]) is not None
        assert Path(event["report"]).read_text().rstrip().endswith("</html>")
    assert reads > 0
    started = sorted(runs["run_started_at"])
    finished_at = stored.load(results, columns=["run_id", "measured_at"]).groupby("run_id").max()
    assert started[1] < finished_at["measured_at"].min()  # the two sweeps did overlap
