"""The sweep's options on the command line, declared once: each an `Annotated` type whose
help is its SweepSpec field's description, and `sweep_options`, which gives a command all of
them (or all but some) in one order, so `run`, `plan` and the rest spell, explain and order
them alike.

Options default to None ("not given") so the SweepSpec model owns every default and every
rule; the help shows the model's default.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.markup import escape

from sweeper.planning.spec import SweepSpec


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


# The help panels `--help` groups options into, by what a user is deciding
MEASURE = "What to measure"
WHERE = "Where"
TIMING = "Timing"
NCCL = "NCCL"
OUTPUT = "Output"
EXPERIMENTS = "Experiments"


def _opt(field: str, panel: str, metavar: str, *flags: str, callback: Any = None) -> Any:
    """An option's one declaration; a flag's metavar is "" (it takes no value)."""
    return option(SweepSpec, field, panel, metavar, *flags, callback=callback)


def option(
    model: type[BaseModel],
    field: str,
    panel: str,
    metavar: str,
    *flags: str,
    more: str = "",
    callback: Any = None,
) -> Any:
    """The option of a model's field (a sweep's, a scan's): its help the field's description
    (then `more`) and default, not given (None) unless the user gives it, so that the model
    owns every default and every rule."""
    help_ = _help(field, model, more)
    return typer.Option(
        *flags,
        metavar=metavar,
        help=help_,
        show_default=False,
        rich_help_panel=panel,
        callback=callback,
    )


Address = Annotated[str | None, _opt("address", WHERE, "ADDRESS")]
ConnectTimeout = Annotated[float | None, _opt("connect_timeout", WHERE, "SECONDS")]
Backend = Annotated[str | None, _opt("backend", WHERE, "BACKEND")]
World = Annotated[int | None, _opt("world", WHERE, "N")]
Nodes = Annotated[int | None, _opt("nodes", WHERE, "N")]
GpusPerNode = Annotated[int | None, _opt("gpus_per_node", WHERE, "N")]
Pairs = Annotated[str | None, _opt("pairs", MEASURE, "PAIRS")]
ForceNetwork = Annotated[
    bool | None, _opt("force_network", MEASURE, "", "--force-network/--no-force-network")
]


def directory(value: str | Path) -> Path:
    """A directory given on the command line: an empty one is bad input, not the current
    directory (what Path('') is)."""
    if not str(value).strip():  # a default is a Path already
        raise typer.BadParameter("an empty path; name a directory")
    return Path(value)


def _dir_opt(field: str, *flags: str, callback: Any = None) -> Any:
    return typer.Option(
        *flags,
        parser=directory,
        metavar="DIR",
        help=_help(field),
        show_default=False,
        rich_help_panel=OUTPUT,
        callback=callback,
    )


def _renamed(old: str, new: str) -> None:
    """The one line an old spelling costs, on stderr, as sweeper's warnings look."""
    print(f"sweeper: warning: {old} is now {new}; {old} goes in the next release", file=sys.stderr)


@dataclass(frozen=True)
class _RenamedDirectory:
    """A directory option's spelling of 0.1 (`old`, hidden, eager) whose value the new option
    takes: one warning line, and a refusal where both are given. `said` is how the warning
    names the old spelling; `what`, what the directory is."""

    old: str
    new: str
    what: str
    said: str = ""

    def take_old(self, ctx: typer.Context, value: Path | None) -> None:
        if value is not None:
            _renamed(self.said or self.old, self.new)
            ctx.meta[self.new] = value

    def take(self, ctx: typer.Context, value: Path | None) -> Path | None:
        """The new option's value, or the directory its old spelling gave (read first)."""
        old: Path | None = ctx.meta.get(self.new)
        if value is not None and old is not None:
            raise typer.BadParameter(f"give {self.what} once ({self.old} is its old name)")
        return value if value is not None else old


_RESULTS = _RenamedDirectory("--output", "--results", "the results directory")


_OLD_PLUGINS = "sweeper.plugins_as_plugin"  # where --plugin leaves its modules for --plugins


def _old_plugins(ctx: typer.Context, value: list[str] | None) -> None:
    if value:
        _renamed("--plugin", "--plugins")
        ctx.meta[_OLD_PLUGINS] = value


def _plugins(ctx: typer.Context, value: list[str] | None) -> list[str] | None:
    """--plugins, and the modules its old spelling --plugin named (processed first: eager)."""
    old: list[str] = ctx.meta.get(_OLD_PLUGINS, [])
    return [*(value or []), *old] or None


def _old(flag: str, callback: Any, multiple: bool = False) -> Any:
    """An option's spelling of 0.1, hidden from help and from the command's arguments: its
    value goes to the new option's callback, with a line saying the new name."""
    return typer.Option(
        flag,
        parser=directory if not multiple else None,
        hidden=True,
        is_eager=True,
        expose_value=False,
        callback=callback,
    )


# plan --results: its directory for --calibrate
_CALIBRATE = _RenamedDirectory(
    "--results", "--calibrate", "the run to calibrate with", said="plan --results"
)


# `sweeper plan --calibrate DIR`: the cost model fitted to a run's rows; --results, its name in
# 0.1, still works for a release (every other command's --results is a results directory).
Calibrate = Annotated[
    Path | None,
    typer.Option(
        parser=directory,
        metavar="DIR",
        help="Fit the cost model to the rows of an earlier run (its results directory): "
        "each tier's latency and bandwidth, and what a point costs beyond its iterations.",
        callback=_CALIBRATE.take,
    ),
]
OldCalibrate = Annotated[Path | None, _old("--results", _CALIBRATE.take_old)]


# The results directory is --results in every command (`report`'s --output is its HTML file),
# `results` in a profile and in sweeper.run. --output, its name in `run`, `nightly` and `scan`
# in 0.1, and --plugin (now --plugins, a profile's `plugins`) still work for a release.
Output = Annotated[Path | None, _dir_opt("results", "--results", callback=_RESULTS.take)]
OldOutput = Annotated[Path | None, _old("--output", _RESULTS.take_old)]
OldPlugin = Annotated[list[str] | None, _old("--plugin", _old_plugins, multiple=True)]
ReportsDir = Annotated[Path | None, _dir_opt("reports_dir")]
ClusterName = Annotated[str | None, _opt("cluster_name", OUTPUT, "NAME")]
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

# Every sweep option, as `sweeper run --help` lists them; `plugin` is --plugins (repeatable),
# the spec's `plugins`.
SWEEP_OPTIONS: dict[str, Any] = {
    "address": Address,
    "connect_timeout": ConnectTimeout,
    "backend": Backend,
    "world": World,
    "nodes": Nodes,
    "gpus_per_node": GpusPerNode,
    "tiers": Annotated[str | None, _opt("tiers", MEASURE, "TIERS")],
    "pairs": Pairs,
    "force_network": ForceNetwork,
    "gpu_visibility": Annotated[str | None, _opt("gpu_visibility", WHERE, "node|own")],
    "ops": Annotated[str | None, _opt("ops", MEASURE, "OPS")],
    "dtypes": Annotated[str | None, _opt("dtypes", MEASURE, "DTYPES")],
    "min_size": Annotated[str | None, _opt("min_size", MEASURE, "SIZE")],
    "max_size": Annotated[str | None, _opt("max_size", MEASURE, "SIZE")],
    "mem_limit": Annotated[str | None, _opt("mem_limit", MEASURE, "SIZE|PCT%")],
    "step_factor": Annotated[float | None, _opt("step_factor", MEASURE, "FACTOR")],
    "dense_sizes": Annotated[
        bool | None, _opt("dense_sizes", MEASURE, "", "--dense-sizes/--sparse-sizes")
    ],
    "iters": Annotated[int | None, _opt("iters", TIMING, "N")],
    "warmup": Annotated[int | None, _opt("warmup", TIMING, "N")],
    "launch": Annotated[str | None, _opt("launch", TIMING, "LAUNCH")],
    "engine": Annotated[str | None, _opt("engine", TIMING, "ENGINE")],
    "register_buffers": Annotated[
        bool | None, _opt("register_buffers", NCCL, "", "--register-buffers/--no-register-buffers")
    ],
    "blocks": Annotated[int | None, _opt("blocks", TIMING, "N")],
    "check": Annotated[bool | None, _opt("check", TIMING, "", "--check/--no-check")],
    "samples": Annotated[bool | None, _opt("samples", TIMING, "", "--samples/--no-samples")],
    "timeout": Annotated[float | None, _opt("timeout", TIMING, "SECONDS")],
    "seed": Annotated[int | None, _opt("seed", TIMING, "N")],
    "results": Output,
    "old_output": OldOutput,
    "concurrent": Annotated[
        bool | None, _opt("concurrent", EXPERIMENTS, "", "--concurrent/--isolated")
    ],
    "curves": Annotated[int | None, _opt("curves", EXPERIMENTS, "N")],
    "copy_engine": Annotated[
        bool | None, _opt("copy_engine", EXPERIMENTS, "", "--copy-engine/--no-copy-engine")
    ],
    "nccl_algos": Annotated[str | None, _opt("nccl_algos", NCCL, "ALGOS")],
    "nccl_env": Annotated[list[str] | None, _opt("nccl_env", NCCL, "KEY=V1,V2")],
    "allow_multicast_knobs": Annotated[
        bool | None, _opt("allow_multicast_knobs", NCCL, "", "--allow-multicast-knobs")
    ],
    "moe": Annotated[str | None, _opt("moe", EXPERIMENTS, "KEY=VALUE,...")],
    "report": Annotated[bool | None, _opt("report", OUTPUT, "", "--report/--no-report")],
    "reports_dir": ReportsDir,
    "plugin": Annotated[
        list[str] | None, _opt("plugins", MEASURE, "MODULE", "--plugins", callback=_plugins)
    ],
    "old_plugin": OldPlugin,
    "cluster_name": ClusterName,
}

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
