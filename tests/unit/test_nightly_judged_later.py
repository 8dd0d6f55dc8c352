"""A nightly run stopped or killed between its last point and its summary: complete, and never
judged. It is no baseline for later nights until it is judged, `sweeper nightly --judge`
judges it as it would have been, and a stop in that window says so."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from typer.testing import CliRunner

from sweeper.analysis import nightly
from sweeper.analysis.regression import Policy
from sweeper.cli import app
from sweeper.driver.stops import Stopped
from sweeper.planning.profile import NightlySettings
from sweeper.results import records, summaries
from sweeper.results.records import RunRecord
from tests.synthetic import History, every_series


def _nights(results: Path, reports: Path) -> tuple[History, list[str], str]:
    """Three judged nights, then a slow one killed before its judgment (complete, no
    summary): the nights, the judged ones and the killed one."""
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    judged = history.nights(3)
    for run_id in judged:
        verdict = nightly.judge(results, run_id, Policy.of(NightlySettings()), judged_in=reports)
        nightly.write_summary(verdict, reports)
    killed = history.night(lambda night, series: 2.0)
    records.save(results, RunRecord(killed, "sweeper nightly", {}, (), ended="complete"))
    return history, judged, killed


def test_a_night_killed_before_its_judgment_is_no_baseline_for_the_next(tmp_path: Path) -> None:
    """Its rows joined later nights' history, unjudged for ever."""
    results, reports = tmp_path / "results", tmp_path / "reports"
    history, judged, _ = _nights(results, reports)
    next_night = history.night()

    verdict = nightly.judge(results, next_night, Policy.of(NightlySettings()), judged_in=reports)

    assert verdict.history == tuple(judged)


def test_nightly_judge_judges_a_complete_unjudged_night_against_the_nights_before_it(
    tmp_path: Path,
) -> None:
    """`--resume` refused it (complete), and nothing else could judge it."""
    results, reports = tmp_path / "results", tmp_path / "reports"
    _, judged, killed = _nights(results, reports)
    args = ["nightly", "--judge", killed, "--results", str(results), "--reports-dir", str(reports)]

    result = CliRunner().invoke(app, [*args, "--format", "json"])

    assert result.exit_code == 0, result.output
    written = json.loads(summaries.path(reports, killed).read_text())
    assert (written["run_id"], written["history"]) == (killed, judged)
    shown = CliRunner().invoke(
        app,
        ["history", "--results", str(results), "--reports-dir", str(reports), "--format", "json"],
    )
    assert shown.exit_code == 0, shown.output
    assert {run["run_id"]: run["status"] for run in json.loads(shown.stdout)}[killed] == "ok"


def test_nightly_judge_of_a_run_that_is_no_complete_nightly_is_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    results, reports = tmp_path / "results", tmp_path / "reports"
    _, judged, _ = _nights(results, reports)
    for run_id, said in [("20261201T000000Z-abcdef", "no complete run of that id")]:
        result = CliRunner().invoke(app, ["nightly", "--judge", run_id, "--results", str(results)])
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"sweeper: error: --judge {run_id}: {said}")
    given = ["nightly", "--judge", judged[0], "--results", str(results), "--nodes", "2"]
    result = CliRunner().invoke(app, given)
    assert result.exit_code == 2, result.output
    assert "drop --nodes" in result.stderr


def test_a_stop_after_a_nightly_completed_and_before_its_judgment_says_how_to_judge_it() -> None:
    stop = Stopped(signal.SIGTERM)
    stop.run_id, stop.output, stop.complete = "R", Path("results"), True
    stop.unjudged = "sweeper nightly --judge R --results results --reports-dir reports"
    assert stop.line() == (
        "stopped by SIGTERM after run R completed: its rows are in results; it was not judged: "
        "sweeper nightly --judge R --results results --reports-dir reports"
    )


def test_a_resume_of_a_complete_unjudged_night_says_how_to_judge_it(tmp_path: Path) -> None:
    results, reports = tmp_path / "results", tmp_path / "reports"
    _, _, killed = _nights(results, reports)
    result = CliRunner().invoke(app, ["run", "--resume", killed, "--results", str(results)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"sweeper: error: --resume {killed}: the run is complete (a nightly run its driver "
        f"never judged is judged with: sweeper nightly --judge {killed} --results {results})"
    ]
