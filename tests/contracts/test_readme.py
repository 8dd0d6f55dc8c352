"""The README renders as written: every code fence is closed (an unclosed one turns the rest of
the page into code), its `sweeper ...` lines name real commands and options, and CI runs its
quick start as written. The commands are read from the CLI's own objects; nothing starts Ray."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import typer
import typer.main
from markdown_it import MarkdownIt
from markdown_it.token import Token

from sweeper.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHELLS = {"bash", "sh", "shell", "console"}
SEPARATORS = {"&&", "||", "|", ";", "&", "(", ")"}  # where one command of a line ends
REDIRECTS = {">", ">>", "<"}  # the word after one is a file, not an argument
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


def _blocks() -> Iterator[tuple[str, Token]]:
    """Each fence of the README, with the heading of the section it is in."""
    heading = ""
    tokens = MarkdownIt("commonmark").parse(README.read_text())
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            heading = tokens[index + 1].content
        elif token.type == "fence":
            yield heading, token


def _shell_lines(section: str | None = None) -> list[str]:
    return [
        line
        for heading, fence in _blocks()
        if fence.info.split()[:1] and fence.info.split()[0] in SHELLS
        if section is None or heading == section
        for line in fence.content.replace("\\\n", " ").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _commands(line: str) -> Iterator[list[str]]:
    """The words of each simple command of a shell line, less leading VAR=value words."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words: list[str] = []
    redirected = False
    for word in [*lexer, ";"]:
        if word in SEPARATORS:
            while words and ASSIGNMENT.match(words[0]):
                words.pop(0)
            if words:
                yield words
            words = []
        elif word in REDIRECTS:
            redirected = True
        elif redirected:
            redirected = False
        else:
            words.append(word)


def _sweeper_lines() -> list[str]:
    return [
        line for line in _shell_lines() if any(words[0] == "sweeper" for words in _commands(line))
    ]


def _listed_options(command: Any, ctx: typer.Context) -> set[str]:
    """The option names `--help` lists for a command: its visible parameters and help."""
    return {
        name
        for param in command.get_params(ctx)
        if not getattr(param, "hidden", False)
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("-")
    }


def _check(line: str) -> None:
    for words in _commands(line):
        if words[0] == "sweeper":
            _check_command(words[1:])


def _check_command(arguments: list[str]) -> None:
    """Walk `sweeper`'s command groups as click would, then check every option word."""
    command: Any = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="sweeper", **command.context_settings)
    words = list(arguments)
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        name = words.pop(0)
        assert name in command.commands, f"{ctx.command_path} has no command {name!r}"
        command = command.commands[name]
        ctx = typer.Context(command, parent=ctx, info_name=name, **command.context_settings)
    assert not hasattr(command, "commands"), f"{ctx.command_path} needs a command"
    used = {word.split("=", 1)[0] for word in words if word.startswith("-") and word != "-"}
    unknown = used - _listed_options(command, ctx)
    assert not unknown, f"{ctx.command_path} --help lists no {sorted(unknown)}"


def test_every_fence_is_closed_by_a_line_of_its_own() -> None:
    lines = README.read_text().splitlines()
    fences = [fence for _, fence in _blocks()]
    assert fences
    for fence in fences:
        assert fence.map is not None
        start, end = fence.map
        closing = lines[end - 1].strip()
        marker = fence.markup[0]
        assert end - start >= 2, f"README line {start + 1}: a fence never closed"
        assert closing == marker * len(closing), f"README line {start + 1}: a fence never closed"
        assert len(closing) >= len(fence.markup), f"README line {start + 1}: a fence never closed"
        # a fence's marker at the start of one of its lines is a fence it swallowed
        swallowed = [line for line in fence.content.splitlines() if line.startswith(fence.markup)]
        assert not swallowed, f"README line {start + 1}: a fence runs over {swallowed}"


def test_no_fence_swallows_a_heading() -> None:
    # a shell comment starts with one '#'; a section heading of the README with two or more
    swallowed = [
        line
        for _, fence in _blocks()
        for line in fence.content.splitlines()
        if re.match(r"#{2,6} ", line)
    ]
    assert not swallowed


def test_the_readme_shows_sweeper_commands() -> None:
    assert len(_sweeper_lines()) >= 10


@pytest.mark.parametrize("line", _sweeper_lines())
def test_each_sweeper_line_names_a_command_and_only_the_options_it_lists(line: str) -> None:
    _check(line)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("sweeper rnu --world 2", "sweeper has no command 'rnu'"),
        ("sweeper config", "sweeper config needs a command"),
        ("sweeper run --wrold 2", "sweeper run --help lists no ['--wrold']"),
        ("RAY_ADDRESS=auto sweeper plan --nodes=2 --resume X", "lists no ['--resume']"),
        ("sweeper history > runs.txt && sweeper compare --max-size 1G", "lists no ['--max-size']"),
    ],
)
def test_the_check_refuses_a_wrong_command_or_option(line: str, problem: str) -> None:
    with pytest.raises(AssertionError, match=re.escape(problem)):
        _check(line)


CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"


def _cpu_torch_lines() -> list[str]:
    """The quick start's CPU-torch lines: a user's, on any index, where CI pins its index's."""
    return [
        line.split("#")[0].strip()
        for line in _shell_lines("Quick start")
        if CPU_INDEX in line or "torch.version.cuda" in line
    ]


def test_ci_runs_the_quick_start_as_written() -> None:
    """.ci/run runs the quick start's lines, in order, all but the sweep itself and the CPU
    torch a user takes from PyTorch's index (CI's own index serves its pin as a CPU build)."""
    quick_start = [
        line.strip()
        for line in _shell_lines("Quick start")
        if not any(words[0] == "sweeper" for words in _commands(line))
        if line.split("#")[0].strip() not in _cpu_torch_lines()
    ]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "python -m pytest" in quick_start
    missing = [line for line in quick_start if line not in ci]
    assert not missing
    order = [ci.index(line) for line in quick_start]
    assert order == sorted(order)


def _ci_torch() -> str:
    (pin,) = re.findall(r"^pip install -q (torch==\S+)$", (ROOT / ".ci" / "run").read_text(), re.M)
    return pin


def test_the_quick_start_gives_pip_and_uv_a_cpu_torch_of_the_version_ci_pins() -> None:
    """On the public index CI's pin is the CUDA build: the README gives each tool the same
    version from PyTorch's CPU index, which serves CPU builds only."""
    lines = _cpu_torch_lines()
    assert f"pip install {_ci_torch()} {CPU_INDEX}" in lines
    assert f"uv pip install {_ci_torch()} {CPU_INDEX}" in lines
    said = " ".join(README.read_text().split("## Commands")[0].split())
    assert f"`pip install {_ci_torch()}` is the CUDA build" in said


def test_the_quick_start_check_prints_none_exactly_for_a_cpu_torch() -> None:
    """The README's one-line check, run here, tells the CPU build (`+cpu`, as CI installs)
    from a CUDA one."""
    (check,) = [line for line in _cpu_torch_lines() if line.startswith("python -c")]
    printed = subprocess.run(
        [sys.executable, *shlex.split(check)[1:]], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert printed == str(torch.version.cuda)
    if torch.__version__.endswith("+cpu"):
        assert printed == "None"


def _targets() -> Iterator[tuple[str, Token]]:
    """Each link's and image's target in the README, with its token."""
    for token in MarkdownIt("commonmark").parse(README.read_text()):
        for child in token.children or []:
            if child.type == "image":
                yield str(child.attrs["src"]), child
            elif child.type == "link_open":
                yield str(child.attrs["href"]), child


def test_every_link_and_image_in_the_repo_exists() -> None:
    local = [
        target.split("#")[0]
        for target, _ in _targets()
        if not re.match(r"[a-z]+:", target) and not target.startswith("#")
    ]
    assert local
    missing = [target for target in local if not (ROOT / target).exists()]
    assert not missing


def test_the_report_screenshot_is_shown_with_alt_text() -> None:
    images = {target: image for target, image in _targets() if image.type == "image"}
    assert "docs/report.png" in images
    assert len(images["docs/report.png"].content) > 20  # alt text that says what it shows


def test_the_readme_is_a_few_screens_and_the_rest_is_in_docs() -> None:
    assert len(README.read_text().splitlines()) <= 160
    assert "docs/USAGE.md" in {target for target, _ in _targets()}


DOCS = sorted((ROOT / "docs").glob("*.md"))
FIGURE = re.compile(r"\b\d{1,3}(?:,\d{3})+\b")  # 13,315: a figure, not a size or a version


def test_a_figure_the_readme_gives_is_one_the_docs_give() -> None:
    """One figure per fact: the README quotes the docs' figures, so a figure that changes there
    (the nightly scan's series: 13,315 in the README, 11,267 in MONITORING.md) cannot drift."""
    docs = " ".join(" ".join(page.read_text().split()) for page in DOCS)
    figures = set(FIGURE.findall(README.read_text()))
    assert not {figure for figure in figures if figure not in docs}


def test_the_figure_check_finds_a_figure_the_docs_do_not_give() -> None:
    docs = " ".join(page.read_text() for page in DOCS)
    assert "13,315" in FIGURE.findall("13,315 series for the nightly scan")
    assert "13,315" not in docs


def _nccl_tests_table() -> list[tuple[str, str]]:
    lines = README.read_text().split("## Coming from nccl-tests", 1)[1].splitlines()
    rows = [line.split("|")[1:3] for line in lines if line.startswith("| ")]
    return [(theirs.strip(), ours.strip()) for theirs, ours in rows[1:]]


def test_the_nccl_tests_table_maps_their_flags_to_options_sweeper_run_lists() -> None:
    rows = _nccl_tests_table()
    theirs = " ".join(flags for flags, _ in rows)
    for flag in ("-b", "-e", "-f", "-g", "-n", "-w", "-c", "-d", "-o", "-a", "-G", "-R", "-z"):
        assert re.search(rf"`{flag}\b", theirs), flag
    ours = {flag for _, options in rows for flag in re.findall(r"`(--[a-z-]+)", options)}
    command: Any = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="sweeper")
    run = command.commands["run"]
    listed = _listed_options(run, typer.Context(run, parent=ctx, info_name="run"))
    assert ours
    assert not ours - listed


def test_the_install_lines_name_no_package_that_is_not_published() -> None:
    """Until `sweeper-bench` is on the package index, sweeper is installed from its clone:
    neither the pages nor sweeper's own hints (an extra that is missing) say otherwise."""
    code = sorted((ROOT / "sweeper").rglob("*.py"))
    for page in (README, *DOCS, *code):
        said = " ".join(page.read_text().split())
        assert not re.search(r"pip install '?sweeper-bench", said), page.name


def test_the_readme_plans_from_a_topology_topo_writes() -> None:
    lines = _sweeper_lines()
    assert [line for line in lines if re.match(r"sweeper topo --format json > (\S+)", line)]
    assert [line for line in lines if line.startswith("sweeper plan --topology node.json")]
