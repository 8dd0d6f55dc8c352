"""`sweeper run` writes a report; `sweeper report` writes one of any run; bad input is one line,
exit 2, nothing written. Real sweeps on a real local Ray with gloo ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.report import record

pytestmark = pytest.mark.usefixtures("ray_session")
SMALL = ["--ops", "all_reduce,reduce_scatter+all_gather", "--max-size", "4K"]


def _run(tmp_path: Path, *args: str) -> tuple[str, str]:
    """(run id, stdout) of a small sweep into tmp_path/results."""
    result = CliRunner().invoke(
        app, ["run", *SMALL, "--output", str(tmp_path / "results"), "--format", "json", *args]
    )
    assert result.exit_code == 0, result.output
    finished = json.loads(result.stdout.splitlines()[-1])
    return str(finished["run_id"]), result.stdout


def test_run_writes_its_report_beside_the_results(tmp_path: Path) -> None:
    run_id, stdout = _run(tmp_path)
    page = tmp_path / "reports" / f"{run_id}.html"
    assert json.loads(stdout.splitlines()[-1])["report"] == str(page)
    assert '<section id="operations">' in page.read_text()
    saved = record.load(tmp_path / "results", run_id)
    assert saved is not None
    assert saved.options["ops"] == ["all_reduce", "reduce_scatter+all_gather"]
    assert len(saved.nodes) == 1


def test_run_says_where_the_report_is(tmp_path: Path) -> None:
    reports = tmp_path / "pages"
    result = CliRunner().invoke(
        app,
        ["run", *SMALL, "--output", str(tmp_path / "results"), "--reports-dir", str(reports)],
    )
    assert result.exit_code == 0, result.output
    (page,) = reports.glob("*.html")
    assert f"report: {page}" in result.stdout


def test_no_report_writes_none_but_keeps_the_record(tmp_path: Path) -> None:
    run_id, stdout = _run(tmp_path, "--no-report")
    assert json.loads(stdout.splitlines()[-1])["report"] is None
    assert not (tmp_path / "reports").exists()
    assert record.load(tmp_path / "results", run_id) is not None


def test_report_of_the_latest_run_and_against_a_baseline(tmp_path: Path) -> None:
    first, _ = _run(tmp_path, "--no-report")
    second, _ = _run(tmp_path, "--no-report")
    out = tmp_path / "latest.html"
    result = CliRunner().invoke(
        app,
        ["report", "--results", str(tmp_path / "results"), "-o", str(out), "--baseline", first],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"report: {out}"
    page = out.read_text()
    assert f"<code>{second}</code>" in page
    assert '<section id="baseline">' in page
    assert f"<code>{first}</code>" in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-run"], "no run 'no-such-run' in"),
        (["latest", "--baseline", "no-such-run"], "no run 'no-such-run' in"),
    ],
)
def test_an_unknown_run_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    _run(tmp_path, "--no-report")
    out = tmp_path / "out" / "r.html"
    result = CliRunner().invoke(
        app, ["report", *args, "--results", str(tmp_path / "results"), "-o", str(out)]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: {message}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.parent.exists()


def test_a_missing_results_directory_is_one_line_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", "--results", str(tmp_path / "nothing")])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"sweeper: error: no results directory at {tmp_path / 'nothing'} "
        "(give it with --results DIR)"
    )
    assert not (tmp_path / "reports").exists()
