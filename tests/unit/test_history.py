"""`sweeper history`: the runs of a results directory with their status."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sweeper.analysis import nightly
from sweeper.analysis.regression import Policy
from sweeper.cli import app
from sweeper.commands import history_runs
from sweeper.planning.profile import NightlySettings
from sweeper.planning.spec import SweepSpec
from sweeper.results import records
from sweeper.results.load import load
from sweeper.results.writer import ResultWriter
from tests.synthetic import History, every_series


def test_history_lists_runs_oldest_first_with_their_status(tmp_path: Path) -> None:
    results, reports = tmp_path / "results", tmp_path / "reports"
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    policy = Policy.of(NightlySettings.model_validate({"min_history": 2, "window": 2}))
    clean = history.nights(3)
    slow = history.nights(2, lambda night, series: 2.0 if night >= 3 else 1.0)
    unjudged = history.night()
    skipped = history.night(unfinished=["skipped"], run_kind="run")
    ad_hoc = history.night(unfinished=["oom"], run_kind="run")
    for run_id in (*clean, *slow):
        nightly.write_summary(nightly.judge(results, run_id, policy), reports)

    # the summaries are where `sweeper nightly` writes them: reports/ beside the results
    result = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)
    assert [run["run_id"] for run in runs] == history.run_ids
    assert [run["status"] for run in runs] == [
        "ok",
        "ok",
        "ok",
        "ok",  # the first slow night is worse, not yet a regression
        "regression",
        "unjudged",
        "ok",  # a point that could not run there was skipped, and did not fail
        "failed",
    ]
    assert runs[-2]["run_id"] == skipped
    assert (runs[-2]["failed"], runs[-1]["failed"]) == (0, 1)
    assert runs[-1]["points"] == 1 + len(history.series) * 4
    assert runs[4]["regressions"] == 2
    assert runs[0]["run_started_at"].startswith("2026-10-01T02:00:00")

    elsewhere = tmp_path / "pages"
    reports.rename(elsewhere)
    human = CliRunner().invoke(
        app,
        ["history", "--results", str(results), "--reports-dir", str(elsewhere), "--last", "4"],
    )
    assert human.exit_code == 0, human.output
    lines = {
        run_id: line
        for line in human.stdout.splitlines()
        for run_id in history.run_ids
        if run_id in line
    }
    assert list(lines) == [slow[-1], unjudged, skipped, ad_hoc]
    assert "regression (2)" in lines[slow[-1]]
    assert "unjudged" in lines[unjudged]
    assert "failed" in lines[ad_hoc]


def test_history_of_a_missing_directory_is_bad_input(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["history", "--results", str(tmp_path / "none")])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"sweeper: error: no results directory at {tmp_path / 'none'}"


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")  # shown, as users see it
def test_strangers_in_the_results_are_ignored_and_a_corrupt_file_named_in_one_line(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    run_ids = history.nights(2)
    (results / "README.md").write_text("# our nightly results\n")
    (results / "junk").mkdir()
    partition = next(results.glob("date=*"))
    (partition / "notes.txt").write_text("not data")
    (partition / "truncated-00000.parquet").write_bytes(b"PAR1")
    result = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [run["run_id"] for run in json.loads(result.stdout)] == run_ids
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"sweeper: warning: skipped {partition / 'truncated-00000.parquet'}: ")


def test_a_partial_run_is_never_ok_its_status_says_how_it_ended(tmp_path: Path) -> None:

    results = tmp_path / "results"
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    legacy, complete, interrupted, killed, running = (
        history.night(run_kind="run") for _ in range(5)
    )
    for run_id, ended in [(complete, "complete"), (interrupted, "interrupted"), (killed, None)]:
        records.save(
            results, records.RunRecord.of(run_id, SweepSpec().model_dump(mode="json"), (), ended)
        )
    records.save(results, records.RunRecord.of(running, SweepSpec().model_dump(mode="json"), ()))
    live = ResultWriter(results, running, "2026-10-05")  # its driver is still measuring
    live.append({"run_id": running, "status": "ok"})

    result = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert result.exit_code == 0, result.output
    ended = {run["run_id"]: (run["ended"], run["status"]) for run in json.loads(result.stdout)}
    assert ended == {
        legacy: ("complete", "ok"),  # no record: rows another tool wrote, or an older run
        complete: ("complete", "ok"),
        interrupted: ("interrupted", "interrupted"),
        killed: ("incomplete", "incomplete"),
        running: ("running", "running"),
    }
    live.flush()


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")  # shown, as users see it
def test_run_records_that_are_not_records_are_skipped_with_a_line_naming_each(
    tmp_path: Path,
) -> None:

    results = tmp_path / "results"
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    run_ids = history.nights(3)
    kept = [records.path(results, run_id) for run_id in run_ids]
    kept[0].parent.mkdir(parents=True, exist_ok=True)
    kept[0].write_text("{not json")
    kept[1].write_text("[1, 2]")
    kept[2].write_bytes(bytes(range(256)))
    result = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [run["run_id"] for run in json.loads(result.stdout)] == run_ids
    lines = result.stderr.splitlines()
    assert [line.split(": not a run record")[0] for line in lines] == [
        f"sweeper: warning: skipped {path}" for path in kept
    ]
    page = tmp_path / "page.html"
    shown = CliRunner().invoke(
        app, ["report", run_ids[2], "--results", str(results), "-o", str(page)]
    )
    assert shown.exit_code == 0, shown.output
    (line,) = shown.stderr.splitlines()
    assert line.startswith(f"sweeper: warning: skipped {kept[2]}: not a run record")
    assert page.is_file()


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")  # shown, as users see it
def test_another_tools_parquet_and_a_copied_batch_are_skipped_whatever_their_names(
    tmp_path: Path,
) -> None:

    results = tmp_path / "results"
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    run_ids = history.nights(2)
    rows = len(load(results))
    batch = next(results.glob(f"date=*/{run_ids[1]}-00000.parquet"))
    partition = batch.parent
    foreign = partition / f"{run_ids[1]}-00001.parquet"
    pq.write_table(pa.table({"x": [1, 2], "y": ["a", "b"]}), foreign)
    copy = partition / f"{run_ids[1]}-00002.parquet"
    shutil.copy(batch, copy)
    result = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [run["run_id"] for run in listed] == run_ids
    assert sum(run["points"] for run in listed) == rows
    assert result.stderr.splitlines() == [
        f"sweeper: warning: skipped {foreign}: not sweeper's rows (column 'x')",
        f"sweeper: warning: skipped {copy}: a copy of {batch}",
    ]
    page = tmp_path / "page.html"
    shown = CliRunner().invoke(
        app, ["report", "latest", "--results", str(results), "-o", str(page)]
    )
    assert shown.exit_code == 0, shown.output
    assert page.is_file()


def test_the_runs_table_fits_80_columns_a_run_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its console was 160 columns wide, so at 80 every row wrapped into two; a sweep's ids
    say when it started, and a status says how many failed, regressed or were condemned."""
    monkeypatch.setenv("COLUMNS", "80")
    started = pd.Timestamp("2026-12-01 02:00", tz="UTC")
    runs = pd.DataFrame(
        {
            "run_id": [f"20261201T02000{i}Z-a1b2c{i}" for i in range(3)],
            "run_started_at": [started] * 3,
            "run_kind": ["nightly", "run", "scan"],
            "cluster_name": ["gpu-west-2"] * 3,
            "gpu_model": ["NVIDIA H200", None, "NVIDIA H200"],
            "backend": ["nccl", "gloo", "nccl"],
            "points": [13315, 269, 2500],
            "failed": [0, 3, 0],
            "regressions": pd.array([12, None, None], dtype="Int64"),  # as `runs` counts them
            "condemned": pd.array([None, None, 4], dtype="Int64"),
            "status": ["regression", "failed", "condemned"],
        }
    )
    shown = io.StringIO()
    history_runs.print_runs(runs, shown)
    lines = shown.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if line.startswith("20261201T")]
    assert [row.split()[-2:] for row in rows] == [
        ["regression", "(12)"],
        ["failed", "(3)"],
        ["condemned", "(4)"],
    ]
    assert "started" not in lines[1]  # the ids say it
    assert "(gloo)" in rows[1]


def test_a_nights_verdict_prints_at_80_columns_its_figures_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nightly's console was 160 columns wide: at 80 its regression table wrapped into
    garbage. Its text columns fold inside themselves; its figures stay whole on one line, in
    three significant digits."""
    from sweeper.commands import nightly_run

    monkeypatch.setenv("COLUMNS", "80")
    results = tmp_path / "results"
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    policy = Policy.of(NightlySettings.model_validate({"min_history": 2, "window": 2}))
    history.nights(3)
    slow = history.nights(2, lambda night, series: 2.0 if night >= 3 else 1.0)
    verdict = nightly.judge(results, slow[-1], policy)
    shown = io.StringIO()
    nightly_run.print_night(nightly_run.Night(verdict, tmp_path / "summary.json", None), shown)
    lines = shown.getvalue().splitlines()
    assert lines[-1] == f"summary: {tmp_path / 'summary.json'}"  # a path stays whole
    assert max(len(line) for line in lines[:-1]) <= 80
    assert any(line.strip() == "regressions: 2" for line in lines)
    # three significant digits (49.95 GB/s, 20.0 us read 50 and 20, as the report has them)
    assert re.search(r" peak busbw @1G +50 +99\.9 +-50\.0% +-inf +0\.0% ", shown.getvalue())
    assert re.search(r" time @8B \(us\) +20 +10 +\+100\.0% +\+inf +0\.0% ", shown.getvalue())
