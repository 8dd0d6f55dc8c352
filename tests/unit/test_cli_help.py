"""`--help` reads like its peers': options grouped in panels by what a user decides, real
metavars, no empty defaults, examples one per line that parse. Nothing starts Ray."""

from __future__ import annotations

import inspect
import itertools
import re
import shlex
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from click import Command
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.commands import options

SWEEPS = ("run", "plan", "nightly", "scan")
PANELS = {
    options.MEASURE,
    options.WHERE,
    options.TIMING,
    options.NCCL,
    options.OUTPUT,
    options.EXPERIMENTS,
}


def _command(name: str) -> Command:
    group = typer.main.get_command(app)
    return group.commands[name]  # type: ignore[attr-defined,no-any-return]


def _panels(name: str) -> dict[str, set[str]]:
    panels: dict[str, set[str]] = {}
    for param in _command(name).params:
        panel = getattr(param, "rich_help_panel", None)
        if panel is not None:
            panels.setdefault(panel, set()).add(param.name or "")
    return panels


def test_run_groups_its_options_in_the_six_panels() -> None:
    panels = _panels("run")
    assert set(panels) == PANELS
    assert {"ops", "dtypes", "tiers", "min_size", "max_size"} <= panels[options.MEASURE]
    assert {"address", "nodes", "connect_timeout", "backend"} <= panels[options.WHERE]
    assert {"iters", "warmup", "blocks", "timeout"} <= panels[options.TIMING]
    assert {"nccl_env", "nccl_algos"} <= panels[options.NCCL]
    assert {"results", "report", "format"} <= panels[options.OUTPUT]
    assert {"concurrent", "copy_engine", "moe"} <= panels[options.EXPERIMENTS]


def test_every_sweep_command_shows_its_panels_in_help() -> None:
    for name in SWEEPS:
        shown = CliRunner().invoke(app, [name, "--help"], terminal_width=100).stdout
        for panel in _panels(name):
            assert f"─ {panel} ─" in shown, (name, panel)


def _helps() -> dict[str, str]:
    group = typer.main.get_command(app)
    names = [(n,) for n in group.commands if n != "config"] + [("config", "schema")]  # type: ignore[attr-defined]
    runner = CliRunner()
    return {
        " ".join(n): runner.invoke(app, [*n, "--help"], terminal_width=200).stdout for n in names
    }


def test_options_show_metavars_not_python_types_and_no_empty_default() -> None:
    for name, shown in _helps().items():
        options_rows = [line for line in shown.splitlines() if "│ --" in line]
        assert options_rows, name
        for row in options_rows:
            for python_type in ("<str>", "<int", "<float>", "<list[", "<path>", "<Path>"):
                assert python_type not in row, (name, row)
        assert "[default: ]" not in shown, name


def test_a_size_and_an_nccl_variable_read_as_what_they_take() -> None:
    shown = _helps()["run"]
    assert "SIZE" in shown
    assert "KEY=V1,V2" in shown
    assert "SECONDS" in shown


def _commands() -> dict[str, Command]:
    group: Any = typer.main.get_command(app)
    found = {n: c for n, c in group.commands.items() if n != "config"}
    found.update({f"config {n}": c for n, c in group.commands["config"].commands.items()})
    return found


def _examples(command: Command) -> list[str]:
    """The examples of a command's epilog, one a line after `Examples:`."""
    head, *lines = inspect.cleandoc(command.epilog or "").splitlines()
    assert head == "Examples:"
    return lines


@pytest.mark.parametrize("name", [n for n, c in _commands().items() if c.epilog])
def test_every_example_is_a_line_of_its_own_that_parses(name: str) -> None:
    command = _commands()[name]
    for line in _examples(command):
        words = shlex.split(line)
        path = ["sweeper", *name.split()]
        assert words[: len(path)] == path, line
        assert "|" not in words, line  # examples are not shell pipes
        # click parses the line as the command would (options, their values, arguments)
        # and raises on anything the command does not take; nothing is invoked
        with command.make_context(" ".join(path), words[len(path) :]) as ctx:
            assert ctx.command is command


def test_examples_are_shown_one_per_line() -> None:
    for name, command in _commands().items():
        if not command.epilog:
            continue
        wide = {"COLUMNS": "300"}  # rich wraps at the terminal's width
        shown = CliRunner().invoke(app, [*name.split(), "--help"], env=wide).stdout
        lines = {line.strip() for line in shown.splitlines()}
        for example in _examples(command):
            assert example in lines, (name, example)


def _paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command of the app, by the words that name it: () is `sweeper` itself."""
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _paths(sub, (*path, name))


# What Typer and click show for a value's type where no metavar says what it is
TYPE_PLACEHOLDER = re.compile(
    r"<(bool|str|int|float|path|Path|list\[[^>]*|tuple|datetime|UUID|choice)[^>]*>"
    r"|(?<![\w$])(TEXT|INTEGER|BOOLEAN|FLOAT|PATH|FILENAME|DIRECTORY)(?=\s{2}|\s*│)"
)


@pytest.mark.parametrize(
    "path", list(_paths(typer.main.get_command(app))), ids=lambda p: " ".join(p) or "sweeper"
)
def test_help_shows_no_type_placeholder_and_no_empty_default(path: tuple[str, ...]) -> None:
    """Typer's own options (--help, --version, the completion options) and the arguments
    (RUN_ID) read as the options do: a flag shows nothing, a value what it is."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    shown = result.stdout
    assert TYPE_PLACEHOLDER.search(shown) is None, TYPE_PLACEHOLDER.search(shown)
    assert "[default: ]" not in shown
    (usage,) = [line for line in shown.splitlines() if "Usage:" in line]
    assert "{" not in usage, usage  # Typer's braces around a required argument


def test_arguments_show_their_metavar_in_usage_and_help() -> None:
    def shown(*words: str) -> str:
        return CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200"}).stdout

    assert "sweeper compare [OPTIONS] BASE NEW" in shown("compare")
    for name in ("report", "export"):
        assert f"sweeper {name} [OPTIONS] [RUN_ID]" in shown(name)
        assert re.search(r"│\s+RUN_ID\s+A run id", shown(name))


def _shown_names(param: Any) -> set[str]:
    """The names help shows for an option: a flag and its negative as --[no-]name."""
    (*names,), negatives = param.opts, param.secondary_opts
    if len(names) == 1 and negatives == [f"--no-{names[0].removeprefix('--')}"]:
        return {f"--[no-]{names[0].removeprefix('--')}"}
    return {name for name in (*names, *negatives) if name.startswith("--")}


@pytest.mark.parametrize(
    "path", list(_paths(typer.main.get_command(app))), ids=lambda p: " ".join(p) or "sweeper"
)
def test_help_fits_80_columns_and_shows_every_option_name_whole(path: tuple[str, ...]) -> None:
    """At 80 columns rich cut option names (--no-register-buff…, --allow-multicast-…) and
    long words of help to fit: every line fits, nothing is cut, every name is there whole."""
    result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in result.stdout
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    words = set(re.findall(r"--[\w\[\]-]+", result.stdout))
    for param in command.params:
        if not getattr(param, "hidden", False) and param.param_type_name == "option":
            assert _shown_names(param) <= words, (param.opts, param.secondary_opts)


def _commands_panel(shown: str) -> list[tuple[str, str]]:
    """`sweeper -h`'s commands panel as (name or '', help text) a line."""
    panel = shown.split("─ Commands ─", 1)[1].split("╰", 1)[0]
    rows = [line.strip("│").rstrip() for line in panel.splitlines()[1:]]
    return [(row[:10].strip(), row[10:].strip()) for row in rows if row.strip()]


def test_sweeper_h_wraps_each_commands_help_as_one_paragraph_at_any_width() -> None:
    """A docstring's own line ends made ragged lines ('the run with the' alone): each line of
    a command's help is as full as the next word allows."""
    for width in (80, 120):
        shown = CliRunner().invoke(app, ["-h"], env={"COLUMNS": str(width)}).stdout
        rows = _commands_panel(shown)
        room = width - 4 - 10  # the panel's borders and padding, and the names' column
        assert len(rows) >= 10
        for (_, line), (name, after) in itertools.pairwise(rows):
            if not name:  # the same command's help goes on: its first word did not fit
                assert len(line) + 1 + len(after.split()[0]) > room, (line, after)
