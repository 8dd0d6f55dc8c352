"""`sweeper run` writes a report; `sweeper report` writes one of any run; bad input is one line,
exit 2, nothing written. Real sweeps on a real local Ray with gloo ranks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.report import record
from tests.conftest import start_ray_session

SMALL = ["--ops", "all_reduce,reduce_scatter+all_gather", "--max-size", "4K"]


def _run(results: Path, *args: str) -> tuple[str, str]:
    """(run id, stdout) of a small sweep into `results`."""
    result = CliRunner().invoke(
        app, ["run", *SMALL, "--output", str(results), "--format", "json", *args]
    )
    assert result.exit_code == 0, result.output
    finished = json.loads(result.stdout.splitlines()[-1])
    return str(finished["run_id"]), result.stdout


@dataclass(frozen=True)
class Runs:
    """Three small sweeps, run once for the module; the tests only look (and write their own
    pages elsewhere)."""

    root: Path
    first: str  # into root/results, its report beside them (root/reports), --format json
    first_stdout: str
    second: str  # into root/results after it, plain output, its report in root/pages
    second_stdout: str
    bare: str  # --no-report, into root/bare/results, alone
    bare_stdout: str

    @property
    def results(self) -> Path:
        return self.root / "results"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    start_ray_session()  # the module's runs happen here, while the session's Ray is sure to be up
    root = tmp_path_factory.mktemp("runs")
    first, first_stdout = _run(root / "results")
    second = CliRunner().invoke(
        app,
        ["run", *SMALL, "--output", str(root / "results"), "--reports-dir", str(root / "pages")],
    )
    assert second.exit_code == 0, second.output
    second_id = second.stdout.rsplit("run_id ", 1)[1].split(")")[0]
    bare, bare_stdout = _run(root / "bare" / "results", "--no-report")
    return Runs(root, first, first_stdout, second_id, second.stdout, bare, bare_stdout)


def test_run_writes_its_report_beside_the_results(runs: Runs) -> None:
    page = runs.root / "reports" / f"{runs.first}.html"
    assert json.loads(runs.first_stdout.splitlines()[-1])["report"] == str(page)
    assert '<section id="operations">' in page.read_text()
    saved = record.load(runs.results, runs.first)
    assert saved is not None
    assert saved.options["ops"] == ["all_reduce", "reduce_scatter+all_gather"]
    assert len(saved.nodes) == 1


def test_run_says_where_the_report_is(runs: Runs) -> None:
    (page,) = (runs.root / "pages").glob("*.html")
    assert page.name == f"{runs.second}.html"
    assert f"report: {page}" in runs.second_stdout


def test_no_report_writes_none_but_keeps_the_record(runs: Runs) -> None:
    assert json.loads(runs.bare_stdout.splitlines()[-1])["report"] is None
    assert not (runs.root / "bare" / "reports").exists()
    assert record.load(runs.root / "bare" / "results", runs.bare) is not None


def test_report_of_the_latest_run_and_against_a_baseline(runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "latest.html"
    result = CliRunner().invoke(
        app, ["report", "--results", str(runs.results), "-o", str(out), "--baseline", runs.first]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"report: {out}"
    page = out.read_text()
    assert f"<code>{runs.second}</code>" in page
    assert '<section id="baseline">' in page
    assert f"<code>{runs.first}</code>" in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-run"], "no run 'no-such-run' in"),
        (["latest", "--baseline", "no-such-run"], "no run 'no-such-run' in"),
    ],
)
def test_an_unknown_run_is_one_line_exit_2_and_writes_nothing(
    runs: Runs, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out" / "r.html"
    result = CliRunner().invoke(
        app, ["report", *args, "--results", str(runs.results), "-o", str(out)]
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
