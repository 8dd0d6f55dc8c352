"""One name per setting: the results directory is `results` on the command line (--results),
in a profile, in `sweeper.run` and in the run's record (the report's "every option of the
run"); the plugins are --plugins and `plugins`. The old spellings (--output, output:,
output=, --plugin) still work for a release, each with one line saying the new name."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.errors import BadInput, Renamed
from sweeper.planning.profile import build_spec, load_profile
from sweeper.planning.spec import SweepSpec

ROOT = Path(__file__).parents[2]
DGX = ROOT / "tests" / "data" / "topologies" / "dgx-h100-nvswitch.json"


def _shown_flags(command: str) -> set[str]:
    found = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {o for p in found.params if not getattr(p, "hidden", False) for o in p.opts}


@pytest.mark.parametrize("command", ["run", "nightly", "scan"])
def test_the_commands_name_the_results_directory_and_the_plugins_as_profiles_do(
    command: str,
) -> None:
    flags = _shown_flags(command)
    assert {"--results", "--plugins"} <= flags
    assert not {"--output", "--plugin"} & flags
    assert {"results", "plugins"} <= set(SweepSpec.model_fields)
    assert "output" not in SweepSpec.model_fields


def test_a_runs_record_keeps_the_results_directory_as_results() -> None:
    # the record's options are the spec's dump: what the report's "every option" shows
    options = build_spec(results="elsewhere").model_dump(mode="json")
    assert options["results"] == "elsewhere"
    assert "output" not in options


def test_a_record_of_0_1_with_output_is_read_as_results_without_a_warning() -> None:
    with_old_key = SweepSpec().model_dump(mode="json") | {"output": "old"}
    del with_old_key["results"]
    assert build_spec(**with_old_key).results == Path("old")


def test_a_profiles_results_key_and_its_old_name_with_a_warning(tmp_path: Path) -> None:
    new = tmp_path / "new.yaml"
    new.write_text("results: here\n")
    assert build_spec(load_profile(new)).results == Path("here")
    old = tmp_path / "old.yaml"
    old.write_text("output: there\n")
    with pytest.warns(Renamed, match=r"old.yaml: output: is now results:"):
        assert build_spec(load_profile(old)).results == Path("there")


def test_the_apis_results_keyword_and_its_old_name_with_a_warning() -> None:
    with pytest.raises(BadInput, match="--results: an empty path"):
        sweeper.run(results=" ")
    with (
        pytest.warns(FutureWarning, match=r"sweeper.run\(output=...\) is now results=..."),
        pytest.raises(BadInput, match="--results: an empty path"),
    ):
        sweeper.run(output=" ")  # type: ignore[call-arg]


def test_the_old_flags_work_for_a_release_with_one_line_each(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", "--resume", "20260101T000000Z-abcdef", "--output", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    warning, error = result.stderr.splitlines()
    assert warning == (
        "sweeper: warning: --output is now --results; --output goes in the next release"
    )
    assert "20260101T000000Z-abcdef" in error
    result = CliRunner().invoke(
        app, ["plan", "--topology", str(DGX), "--plugin", "no_such_plugin", "--ops", "x"]
    )
    assert result.exit_code == 2, result.output
    warning, error = result.stderr.splitlines()
    assert warning == (
        "sweeper: warning: --plugin is now --plugins; --plugin goes in the next release"
    )
    assert error.startswith("sweeper: error: --plugins no_such_plugin: cannot import it")
