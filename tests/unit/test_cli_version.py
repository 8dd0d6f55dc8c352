"""`sweeper --version`, `-h` beside `--help` on every command, and the usage errors click
raises itself (an unknown option or command, a missing argument) in one line on every command."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_version_names_the_distribution_and_its_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"sweeper-bench {sweeper.__version__}\n"


def test_every_command_is_walked() -> None:
    assert {("run",), ("plan",), ("report",), ("config", "schema")} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "sweeper")
def test_h_is_help_on_every_command(path: tuple[str, ...]) -> None:
    short = CliRunner().invoke(app, [*path, "-h"])
    long = CliRunner().invoke(app, [*path, "--help"])
    assert short.exit_code == long.exit_code == 0
    assert short.stdout == long.stdout
    assert re.search(r"--help\s+-h\s", short.stdout)  # one row of the help panel


def _one_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("sweeper: error: ")
    assert "╭" not in line  # no box
    return line


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "sweeper")
def test_an_unknown_option_is_one_line_naming_it_on_every_command(path: tuple[str, ...]) -> None:
    line = _one_line(CliRunner().invoke(app, [*path, "--no-such-option"]))
    assert "--no-such-option" in line


def test_an_unknown_command_and_a_missing_argument_are_one_line_naming_them() -> None:
    assert "'nosuch'" in _one_line(CliRunner().invoke(app, ["nosuch"]))
    assert _one_line(CliRunner().invoke(app, ["compare"])).endswith("Missing argument 'BASE'.")
    missing_new = _one_line(CliRunner().invoke(app, ["compare", "latest"]))
    assert missing_new.endswith("Missing argument 'NEW'.")
