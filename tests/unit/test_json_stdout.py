"""Under `--format json` stdout is the document's alone: what a plugin's code prints while
the driver runs it goes to stderr, for `plan` (the planner asks the plugin's operation
whether it runs on each group) and for the sweeps that print through a JSON console (run,
nightly, scan), and nothing moves under the human format."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.commands.common import stoppable
from sweeper.driver.console import HumanConsole, JsonConsole

CPU = Path(__file__).parents[1] / "data" / "topologies" / "cpu-no-nvml.json"
PLAN = ("plan", "--topology", str(CPU), "--plugins", "tests.plugins.chatty", "--ops", "chatty")


@pytest.mark.usefixtures("isolated_registry")  # the plugin's operation leaves with the test
def test_a_plugins_prints_go_to_stderr_while_plan_writes_its_json() -> None:
    from tests.plugins.chatty import SAID

    result = CliRunner().invoke(app, [*PLAN, "--max-size", "1K", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["groups"] >= 1  # the whole of stdout is the document
    assert SAID in result.stderr
    human = CliRunner().invoke(app, [*PLAN, "--max-size", "1K"])
    assert SAID in human.stdout  # the human format keeps stdout as it was


def test_a_json_sweep_owns_stdout_and_what_else_prints_goes_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = io.StringIO()
    observer = JsonConsole(out=document)
    with stoppable(observer):
        print("a plugin's line")
        observer.document({"verdicts": []})
    said = capsys.readouterr()
    assert json.loads(document.getvalue()) == {"verdicts": []}
    assert said.out == ""
    assert said.err == "a plugin's line\n"


def test_a_human_sweep_leaves_stdout_where_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    with stoppable(HumanConsole(out=io.StringIO())):
        print("a plugin's line")
    assert capsys.readouterr().out == "a plugin's line\n"
