"""`sweeper run` writes a report; `sweeper report` writes one of any run; bad input is one line,
exit 2, nothing written. Real sweeps on a real local Ray with gloo ranks: the session's
(tests/cli_runs.py), which the tests only read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.results import records
from tests.cli_runs import OPS, Runs


def test_run_writes_its_report_beside_the_results(cli_runs: Runs) -> None:
    page = cli_runs.root / "reports" / f"{cli_runs.first}.html"
    assert json.loads(cli_runs.first_stdout.splitlines()[-1])["report"] == str(page)
    assert '<section id="operations">' in page.read_text()
    saved = records.load(cli_runs.results, cli_runs.first)
    assert saved is not None
    assert saved.options["ops"] == list(OPS)
    assert len(saved.nodes) == 1


def test_run_says_where_the_report_is(cli_runs: Runs) -> None:
    (page,) = (cli_runs.root / "pages").glob("*.html")
    assert page.name == f"{cli_runs.second}.html"
    assert f"report: {page}" in cli_runs.second_stdout


def test_no_report_writes_none_but_keeps_the_record(cli_runs: Runs) -> None:
    assert json.loads(cli_runs.bare_stdout.splitlines()[-1])["report"] is None
    assert not (cli_runs.bare_results.parent / "reports").exists()
    assert records.load(cli_runs.bare_results, cli_runs.bare) is not None


def test_report_of_the_latest_run_and_against_a_baseline(cli_runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "latest.html"
    args = ["--results", str(cli_runs.results), "-o", str(out), "--baseline", cli_runs.first]
    result = CliRunner().invoke(app, ["report", *args])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"report: {out}"
    page = out.read_text()
    assert f"<code>{cli_runs.second}</code>" in page
    assert '<section id="baseline">' in page
    assert f"<code>{cli_runs.first}</code>" in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-run"], "no run 'no-such-run' in"),
        (["latest", "--baseline", "no-such-run"], "no run 'no-such-run' in"),
    ],
)
def test_an_unknown_run_is_one_line_exit_2_and_writes_nothing(
    cli_runs: Runs, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out" / "r.html"
    result = CliRunner().invoke(
        app, ["report", *args, "--results", str(cli_runs.results), "-o", str(out)]
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
