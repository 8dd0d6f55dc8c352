"""One name per setting: the results directory is `results` on the command line (--results),
in a profile, in `sweeper.run` and in the run's record (the report's "every option of the
run"); the plugins are --plugins and `plugins`. 0.1's spellings (never published: --output,
--plugin, plan --results, a profile's output:, sweeper.run(output=)) are unknown; a run record
of 0.1, which says `output`, is read by today's names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.errors import BadInput
from sweeper.planning.profile import build_spec, load_profile
from sweeper.planning.spec import SweepSpec
from sweeper.results import records

ROOT = Path(__file__).parents[2]
DGX = ROOT / "tests" / "data" / "topologies" / "dgx-h100-nvswitch.json"
RUN_OF_0_1 = ROOT / "tests/data/results/main-2026-11-25/_runs/20261125T063903Z-c4526e.json"


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


def test_a_run_record_of_0_1_resumes_with_its_output_read_as_results(tmp_path: Path) -> None:
    shutil.copytree(RUN_OF_0_1.parent, tmp_path / records.RECORDS_DIR)
    run_id = RUN_OF_0_1.stem
    written = json.loads(RUN_OF_0_1.read_text())["options"]
    assert "results" not in written
    started = records.load(tmp_path, run_id)
    assert started is not None
    assert "output" not in started.options
    assert started.options["results"] == written["output"]
    # what `sweeper run --resume RUN` builds from the record (commands/run.py)
    spec = build_spec(None, **{**started.options, "results": tmp_path})
    assert spec.results == tmp_path
    assert spec.ops == tuple(started.options["ops"])


def test_a_profiles_results_key_and_output_an_unknown_key(tmp_path: Path) -> None:
    new = tmp_path / "new.yaml"
    new.write_text("results: here\n")
    assert build_spec(load_profile(new)).results == Path("here")
    old = tmp_path / "old.yaml"
    old.write_text("output: there\n")
    with pytest.raises(BadInput, match=r"old.yaml: unknown key 'output'"):
        load_profile(old)


def test_the_apis_results_keyword_and_output_an_unknown_keyword() -> None:
    with pytest.raises(BadInput, match="--results: an empty path"):
        sweeper.run(results=" ")
    with pytest.raises(BadInput, match=r"^unknown option 'output'$"):
        sweeper.run(output=" ")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["run", "--resume", "20260101T000000Z-abcdef", "--output", "r"], "--output"),
        (["plan", "--topology", str(DGX), "--plugin", "no_such_plugin"], "--plugin"),
        (["plan", "--topology", str(DGX), "--results", "r"], "--results"),
    ],
)
def test_the_spellings_of_0_1_are_unknown_options(argv: list[str], flag: str) -> None:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"sweeper: error: No such option: {flag} ")
    assert len(result.stderr.splitlines()) == 1
