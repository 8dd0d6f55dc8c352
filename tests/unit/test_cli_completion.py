"""Shell completion is on: `sweeper --show-completion` prints a bash script, and the script's
callback completes commands and options. No shell is started, as in Typer's own tests."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sweeper.cli import app


def test_show_completion_prints_a_bash_script(monkeypatch: pytest.MonkeyPatch) -> None:
    # no shell detected (shellingham reads the process tree): the shell is named instead; read
    # as the command is built, before invoke's env applies
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "True")
    result = CliRunner().invoke(app, ["--show-completion", "bash"])
    assert result.exit_code == 0, result.output
    assert "_sweeper_completion()" in result.stdout
    assert "_SWEEPER_COMPLETE=complete_bash" in result.stdout


def test_the_completion_callback_completes_commands_and_options() -> None:
    def completed(words: str) -> list[str]:
        env = {"_SWEEPER_COMPLETE": "complete_bash", "COMP_WORDS": words}
        env["COMP_CWORD"] = str(len(words.split()) - 1)
        result = CliRunner().invoke(app, [], env=env)
        assert result.exit_code == 0, result.output
        return result.stdout.split()

    assert completed("sweeper ru") == ["run"]
    assert "--nccl-env" in completed("sweeper run --nccl")
