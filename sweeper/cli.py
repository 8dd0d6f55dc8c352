"""The `sweeper` command line: the Typer app, how its help and its refusals look, and the
commands it registers, each declared in its module of sweeper/commands/ (the sweep's options
once, in sweeper/commands/options.py).
Exit codes: 0 done, 1 regression, 2 bad input, 3 infrastructure, 4 some points failed;
130 and 143: stopped by SIGINT or SIGTERM (what was measured is kept).
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, TextIO

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from sweeper._version import __version__
from sweeper.commands import (
    compare,
    config,
    export,
    history,
    nightly,
    ops,
    plan,
    report,
    run,
    scan,
    topo,
    tune,
)
from sweeper.commands.common import fail
from sweeper.errors import BadInput, SweeperWarning
from sweeper.planning.profile import plainly


class _Argument(TyperArgument):
    """An argument shown by its metavar alone, RUN_ID (optional: [RUN_ID]), where Typer adds
    its Python type (<str>) in help and braces ({run_id}) in the usage line."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        return self.display_name_raw if self.required else f"[{self.display_name_raw}]"


def _by_metavar(params: Iterable[Any]) -> None:
    """Help shows what a value is (RUN_ID, FILE), and nothing where none is taken: Typer
    shows a flag's type (<bool>: --help, the completion options) and an argument's. Done as
    help is shown, when Typer's own options exist (--help is made then, the completion
    options after the group); idempotent."""
    for param in params:
        if isinstance(param, TyperArgument):
            param.__class__ = _Argument  # the class Typer builds, with how it is shown
        elif isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


# rich cuts a word wider than its column with an ellipsis: a word of an option's help this
# long is shown with a space after its commas, pluses and slashes (nvlink, pcie, internode)
_LONG_WORD = 20
_BREAKS = re.compile(r"([,+/])(?=\S)")


def _breakable(help_text: str) -> str:
    return " ".join(
        _BREAKS.sub(r"\1 ", word) if len(word) > _LONG_WORD else word
        for word in help_text.split(" ")
    )


@contextmanager
def _shown_narrow(params: Iterable[Any]) -> Iterator[None]:
    """While help is drawn: a flag and its negative as one name, --[no-]check (in a column
    of their own the negatives, --no-register-buffers, left the help a dozen characters at
    80 columns and rich cut the names to fit), and long words of help breakable."""
    options = [param for param in params if isinstance(param, TyperOption)]
    saved = [(param, param.opts, param.secondary_opts, param.help) for param in options]
    for param in options:
        (name, *more), negative = param.opts, param.secondary_opts
        if not more and negative == [f"--no-{name.removeprefix('--')}"]:
            param.opts, param.secondary_opts = [f"--[no-]{name.removeprefix('--')}"], []
        param.help = _breakable(param.help) if param.help else param.help
    try:
        yield
    finally:  # parsing still knows both names, and the help its words
        for param, opts, secondary, help_text in saved:
            param.opts, param.secondary_opts, param.help = opts, secondary, help_text


def _reflowed(text: str) -> str:
    """A docstring's paragraphs each as one line, for rich to wrap at the terminal's width:
    Typer's rich help keeps the docstring's own line ends, which at another width than the
    source's made ragged lines (`sweeper -h`: 'the run with the' alone on a line)."""
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


class _Command(TyperCommand):
    """Every command's class: its help reflowed (`_reflowed`) and by metavar (`_by_metavar`),
    a flag and its negative as one name (`_shown_narrow`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = _reflowed(self.help) if self.help else self.help

    def format_help(self, ctx: Any, formatter: Any) -> None:
        params = self.get_params(ctx)
        _by_metavar(params)
        with _shown_narrow(params):
            super().format_help(ctx, formatter)


class _Group(TyperGroup):
    """A value an option's type refuses (--seed 1e23, --last 0) is bad input like any other:
    one line naming the option, exit 2, where click would print the usage first. A group
    parses its commands' options in `invoke`. The usage errors click raises itself (an
    unknown option, a missing argument) are one line too, where rich help would draw them in
    a box: the main loop runs them through here instead of printing them."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        def inner() -> Any:
            return super(_Group, self).main(
                args, prog_name, complete_var, False, windows_expand_args, **extra
            )

        if not standalone_mode:
            return inner()
        try:
            code = inner()
        except typer.TyperException as exc:  # click's usage errors, as Typer vendors click
            # no arguments: the help is printed already, as typer's own handler assumes
            if type(exc).__name__ != "NoArgsIsHelpError":
                ctx = getattr(exc, "ctx", None)
                where = f" (see {ctx.command_path} -h)" if ctx is not None else ""
                print(f"sweeper: error: {_bounded(exc.format_message())}{where}", file=sys.stderr)
            sys.exit(getattr(exc, "exit_code", 2))
        except typer.Abort:
            print("sweeper: aborted", file=sys.stderr)
            sys.exit(1)
        # click's own main returns nothing: a command ran to its end, or Exit gave its code
        sys.exit(code if isinstance(code, int) else 0)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _by_metavar(self.get_params(ctx))
        super().format_help(ctx, formatter)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            # a missing argument has no message of its own: click's says which
            named = (
                f"{exc.param.opts[0]}: {plainly(exc.message)}"
                if exc.param and exc.message
                else exc.format_message()
            )
            raise fail(BadInput(_bounded(named))) from None


# click quotes what it was given whole (an unknown option, a value): a line of this much
MESSAGE_CHARS = 300


def _bounded(message: str) -> str:
    return message if len(message) <= MESSAGE_CHARS else f"{message[: MESSAGE_CHARS - 3]}..."


app = typer.Typer(
    name="sweeper",
    cls=_Group,
    help="How fast does your GPU cluster really move data? Collective sweeps on Ray.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},  # every command's, inherited
)
config_app = typer.Typer(cls=_Group, help=config.HELP, no_args_is_help=True)
app.add_typer(config_app, name="config")
# each command declared in its module, in the order `sweeper --help` lists them
app.command(cls=_Command, epilog=run.EXAMPLES)(run.run)
app.command(cls=_Command, epilog=nightly.EXAMPLES)(nightly.nightly)
app.command(cls=_Command, epilog=scan.EXAMPLES)(scan.scan)
app.command(cls=_Command, epilog=compare.EXAMPLES)(compare.compare)
app.command(cls=_Command, epilog=tune.EXAMPLES)(tune.tune)
app.command(cls=_Command, epilog=history.EXAMPLES)(history.history)
app.command(cls=_Command, epilog=export.EXAMPLES)(export.export)
config_app.command("schema", cls=_Command)(config.schema)
app.command(cls=_Command, epilog=topo.EXAMPLES)(topo.topo)
app.command(cls=_Command, epilog=ops.EXAMPLES)(ops.ops)
app.command(cls=_Command, epilog=plan.EXAMPLES)(plan.plan)
app.command(cls=_Command, epilog=report.EXAMPLES)(report.report)


class _OneLine:
    """sweeper's own warnings (a corrupt results file skipped) as one line, like its errors,
    each once a command (a file every read of a command skips is named once); everyone
    else's as Python shows them."""

    def __init__(self) -> None:
        self.shown: set[str] = set()

    def __call__(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not issubclass(category, SweeperWarning):
            _show_warning(message, category, filename, lineno, file, line)
        elif str(message) not in self.shown:
            self.shown.add(str(message))
            print(f"sweeper: warning: {message}", file=sys.stderr)


_show_warning = warnings.showwarning


def _version(asked: bool) -> None:
    if asked:
        print(f"sweeper-bench {__version__}")  # the distribution's name: `sweeper` is taken
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            callback=_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """sweeper: collective and peer-to-peer bandwidth of a GPU cluster, on Ray."""
    warnings.showwarning = _OneLine()
