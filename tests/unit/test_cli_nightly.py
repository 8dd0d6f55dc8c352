"""`sweeper nightly` takes every option `sweeper run` takes, and its flags override the
profile's keys. Nothing starts Ray: the spec is built, and bad input refused, before."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from sweeper.cli import app

RUN_ONLY = {"--resume"}  # run goes on with a stopped nightly run itself
NIGHTLY_ONLY = {"--judge"}  # a complete nightly run that was never judged


def _flags(name: str) -> set[str]:
    group: typer.core.TyperGroup = typer.main.get_command(app)  # type: ignore[assignment]
    return {flag for param in group.commands[name].params for flag in param.opts}


def test_nightly_takes_the_options_run_takes() -> None:
    assert _flags("nightly") - NIGHTLY_ONLY == _flags("run") - RUN_ONLY


def test_nightly_lists_the_options_run_lists_in_help() -> None:
    def rows(name: str) -> set[str]:
        shown = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"}).stdout
        return {line.split()[1] for line in shown.splitlines() if line.startswith("│ --")}

    shown = rows("nightly")
    assert {"--max-size", "--nodes", "--nccl-env", "--results"} <= shown
    assert shown - NIGHTLY_ONLY == rows("run") - RUN_ONLY


def _profile(tmp_path: Path) -> Path:
    path = tmp_path / "nightly.yaml"
    path.write_text("ops: all_reduce\nmin_size: 1K\nmax_size: 1M\nnightly:\n  min_history: 5\n")
    return path


def test_a_flag_given_to_nightly_reaches_its_spec(tmp_path: Path) -> None:
    results = tmp_path / "results"
    given = ["--profile", str(_profile(tmp_path)), "--results", str(results)]
    result = CliRunner().invoke(app, ["nightly", *given, "--ops", "no_such_op"])
    assert result.exit_code == 2
    assert result.stderr.startswith("sweeper: error: --ops: unknown operation 'no_such_op'")
    assert not results.exists()  # refused before anything was written


def test_nightly_flags_override_the_profile_keys(tmp_path: Path) -> None:
    given = ["--profile", str(_profile(tmp_path)), "--results", str(tmp_path / "results")]
    result = CliRunner().invoke(app, ["nightly", *given, "--min-size", "4M", "--max-size", "2M"])
    assert result.exit_code == 2
    assert result.stderr == "sweeper: error: --min-size 4M is larger than --max-size 2M\n"


def test_a_scan_profile_refuses_the_flags_that_choose_what_a_sweep_measures(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "scan.yaml"
    profile.write_text("scan:\n  strategy: adaptive\n")
    results = tmp_path / "results"
    given = ["--profile", str(profile), "--results", str(results)]
    result = CliRunner().invoke(app, ["nightly", *given, "--ops", "all_reduce", "--nodes", "4"])
    assert result.exit_code == 2
    assert result.stderr == (
        "sweeper: error: the profile's scan: chooses what a scan measures; drop --nodes, --ops\n"
    )
    assert not results.exists()


@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_sweep_refuses_a_scan_profile_in_one_line(tmp_path: Path, command: str) -> None:
    profile = tmp_path / "scan.yaml"
    profile.write_text("scan:\n  strategy: adaptive\n")
    results = tmp_path / "results"
    given = ["--profile", str(profile)] + (["--results", str(results)] if command == "run" else [])
    result = CliRunner().invoke(app, [command, *given])
    assert result.exit_code == 2
    assert result.stderr == (
        f"sweeper: error: --profile {profile} has a scan: section: `sweeper nightly --profile "
        f"{profile}` scans the fleet with it; a sweep takes a profile without one\n"
    )
    assert not results.exists()
