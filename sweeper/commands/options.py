"""The sweep's options on the command line, made from their sections' fields
(sweeper/planning/spec.py): an option's flags, metavar and type from its field and its `Cli`
metadata, its help panel from its section's title, its help from the field's description and
default. `sweep_options` gives a command all of them (or all but some), `given_options` any
such table, so `run`, `plan` and the rest spell, explain and order them alike.

Options default to None ("not given") so the model owns every default and every rule; the
help shows the model's default.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_args

import typer
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo
from rich.markup import escape

from sweeper.planning.fields import Cli, cli_of
from sweeper.planning.spec import (
    SECTIONS,
    ClusterSection,
    ExperimentSection,
    MeasureSection,
    NcclSection,
    OptionSection,
    OutputSection,
    SweepSpec,
    TimingSection,
)


class Format(str, Enum):
    human = "human"
    json = "json"


def _help(field: str, model: type[BaseModel] = SweepSpec, more: str = "") -> str:
    info = model.model_fields[field]
    default = info.get_default(call_default_factory=True)
    if isinstance(default, (tuple, list)):
        default = ",".join(map(str, default))
    shown = "" if default in (None, {}, "") else f" [default: {default}]"
    # help is rich markup: brackets are literal
    return escape(f"{info.description}{more}{shown}")


# The help panels `--help` groups options into, by what a user is deciding: the sections'
MEASURE = MeasureSection.title
WHERE = ClusterSection.title
TIMING = TimingSection.title
NCCL = NcclSection.title
OUTPUT = OutputSection.title
EXPERIMENTS = ExperimentSection.title


def option(
    model: type[BaseModel],
    field: str,
    panel: str,
    metavar: str,
    *flags: str,
    more: str = "",
    callback: Any = None,
    parser: Callable[[str], Any] | None = None,
) -> Any:
    """The option of a model's field (a sweep's, a scan's): its help the field's description
    (then `more`) and default, not given (None) unless the user gives it, so that the model
    owns every default and every rule."""
    return typer.Option(
        *flags,
        parser=parser,
        metavar=metavar,
        help=_help(field, model, more),
        show_default=False,
        rich_help_panel=panel,
        callback=callback,
    )


def directory(value: str | Path) -> Path:
    """A directory given on the command line: an empty one is bad input, not the current
    directory (what Path('') is)."""
    if not str(value).strip():  # a default is a Path already
        raise typer.BadParameter("an empty path; name a directory")
    return Path(value)


def _kind(info: FieldInfo, shown: Cli) -> Any:
    """The type an option takes from the command line (None: not given): a flag's bool, a
    count's or a figure's number, a directory, text given again for each value, else the text
    the field's validators read (comma lists, sizes, key=value pairs)."""
    kinds = {k for k in (*get_args(info.annotation), info.annotation) if k is not type(None)}
    if info.annotation is bool:
        return bool | None
    if shown.repeated:
        return list[str] | None
    if any(isinstance(m, BeforeValidator) for m in info.metadata):  # sizes: 64M
        return str | None
    if Path in kinds:
        return Path | None
    for number in (int, float):
        if info.annotation in (number, number | None):
            return number | None
    return str | None


def section_option(section: type[OptionSection], name: str) -> Any:
    """The option of a section's field: `--name` (`--name/--no-name` for a flag, or the
    field's own flags), in its section's panel."""
    info = section.model_fields[name]
    shown = cli_of(info)
    kind = _kind(info, shown)
    flag = "--" + name.replace("_", "-")
    default_flags = (f"{flag}/--no-{flag[2:]}",) if kind == bool | None else (flag,)
    made = option(
        section,
        name,
        section.title,
        shown.metavar,
        *(shown.flags or default_flags),
        parser=directory if kind == Path | None else None,
    )
    return Annotated[kind, made]


# Every sweep option, as `sweeper run --help` lists them: its sections' fields, in order
SWEEP_OPTIONS: dict[str, Any] = {
    name: section_option(section, name) for section in SECTIONS for name in section.model_fields
}
# The few a command takes by name beside its own (`sweeper topo`)
Address = SWEEP_OPTIONS["address"]
ConnectTimeout = SWEEP_OPTIONS["connect_timeout"]
Backend = SWEEP_OPTIONS["backend"]
World = SWEEP_OPTIONS["world"]
Nodes = SWEEP_OPTIONS["nodes"]
GpusPerNode = SWEEP_OPTIONS["gpus_per_node"]
Pairs = SWEEP_OPTIONS["pairs"]
ForceNetwork = SWEEP_OPTIONS["force_network"]

# `sweeper plan --calibrate DIR`: the cost model fitted to a run's rows
Calibrate = Annotated[
    Path | None,
    typer.Option(
        parser=directory,
        metavar="DIR",
        help="Fit the cost model to the rows of an earlier run (its results directory): "
        "each tier's latency and bandwidth, and what a point costs beyond its iterations.",
    ),
]
OutputFormat = Annotated[
    Format,
    typer.Option(metavar="human|json", help="human, or json for machines.", rich_help_panel=OUTPUT),
]
ProfileFile = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE", help="YAML profile: option values (flags given here override them)."
    ),
]

# What the commands that read a run (compare, history, export, report) take
RunId = Annotated[str, typer.Argument(metavar="RUN_ID", help="A run id of the results, or latest.")]
Results = Annotated[
    Path,
    typer.Option(parser=directory, metavar="DIR", help="Results directory (a Parquet dataset)."),
]

Command = TypeVar("Command", bound=Callable[..., Any])


def sweep_options(*, after: str, leave_out: Collection[str] = ()) -> Callable[[Command], Command]:
    """Give a command the sweep's options (all but `leave_out`) after its parameter `after`;
    the command takes them as keyword arguments (`**options`), each None where not given."""
    return given_options(SWEEP_OPTIONS, after=after, leave_out=leave_out)


def given_options(
    options: Mapping[str, Any], *, after: str | None, leave_out: Collection[str] = ()
) -> Callable[[Command], Command]:
    """Give a command the options of a table (name: its Annotated type; all but
    `leave_out`) after its parameter `after` (None: first); the command takes them as keyword
    arguments (`**options`), each None where not given."""
    unknown = set(leave_out) - set(options)
    if unknown:
        raise ValueError(f"no such option: {', '.join(sorted(unknown))}")

    def give(command: Command) -> Command:
        own = inspect.signature(command, eval_str=True)
        named = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
        at = [p.name for p in named].index(after) + 1 if after is not None else 0
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
            for name, kind in options.items()
            if name not in leave_out
        ]
        parameters = [*named[:at], *added, *named[at:]]
        command.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in parameters]
        )
        return command

    return give
