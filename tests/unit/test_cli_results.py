"""One meaning per option name: the results directory is --results in every command (`report`'s
--output is its HTML file); --output, its name in 0.1 (never published), is no option of run,
nightly or scan. Nothing starts Ray: a file where the directory goes is refused before."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.driver.stops import resume_command

SWEEPS = ("run", "nightly", "scan")


def _options(name: str) -> dict[str, bool]:
    """Each option name of a command, and whether help shows it."""
    group: typer.core.TyperGroup = typer.main.get_command(app)  # type: ignore[assignment]
    return {
        flag: not getattr(param, "hidden", False)
        for param in group.commands[name].params
        for flag in param.opts
    }


@pytest.mark.parametrize("name", [*SWEEPS, "history", "compare", "export", "report"])
def test_the_results_directory_is_results_in_help(name: str) -> None:
    assert _options(name)["--results"] is True


@pytest.mark.parametrize("name", SWEEPS)
def test_output_is_no_option_of_a_sweep(name: str) -> None:
    assert "--output" not in _options(name)
    shown = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"}).stdout
    assert "--results" in shown
    assert "--output" not in shown


def test_report_output_is_still_its_html_file() -> None:
    assert _options("report")["--output"] is True
    assert _options("report")["-o"] is True


@pytest.mark.parametrize("name", ["run", "nightly"])
def test_results_reaches_the_results_directory(tmp_path: Path, name: str) -> None:
    file = tmp_path / "a_file"
    file.write_text("")
    result = CliRunner().invoke(app, [name, "--results", str(file)])
    assert result.exit_code == 2
    assert f"{file} is not a directory" in result.stderr


def test_the_resume_line_names_results() -> None:
    line = resume_command("20261122T013412Z-33627a", Path("/data/results"))
    assert line == "sweeper run --resume 20261122T013412Z-33627a --results /data/results"
