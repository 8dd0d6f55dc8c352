"""The `sweeper` command line. Thin: options -> SweepSpec -> sweep -> exit code.

Options default to None ("not given") so the SweepSpec model owns every default and
every rule; their help text is the model's field description.
Exit codes: 0 done, 1 regression, 2 bad input, 3 infrastructure, 4 some points failed.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from sweeper.errors import SweeperError
from sweeper.spec import SweepSpec, build_spec

EXIT_POINTS_FAILED = 4

app = typer.Typer(
    name="sweeper",
    help="How fast does your GPU cluster really move data? Collective sweeps on Ray.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class Format(str, Enum):
    human = "human"
    json = "json"


def _help(field: str) -> str:
    info = SweepSpec.model_fields[field]
    default = info.default
    if isinstance(default, (tuple, list)):
        default = ",".join(map(str, default))
    shown = "" if default is None else f" [default: {default}]"
    return f"{info.description}{shown}"


def _fail(exc: SweeperError) -> typer.Exit:
    if os.environ.get("SWEEPER_DEBUG") == "1":
        raise exc
    hint = f" ({exc.hint})" if exc.hint else ""
    print(f"sweeper: error: {exc}{hint}", file=sys.stderr)
    return typer.Exit(exc.exit_code)


@app.command(
    epilog="Examples: sweeper run | sweeper run --ops all_reduce,all_gather --max-size 4G "
    "--dtypes bfloat16 | sweeper run --address ray://head:10001 --format json"
)
def run(
    address: Annotated[str | None, typer.Option(help=_help("address"), show_default=False)] = None,
    backend: Annotated[str | None, typer.Option(help=_help("backend"), show_default=False)] = None,
    world: Annotated[int | None, typer.Option(help=_help("world"), show_default=False)] = None,
    ops: Annotated[str | None, typer.Option(help=_help("ops"), show_default=False)] = None,
    dtypes: Annotated[str | None, typer.Option(help=_help("dtypes"), show_default=False)] = None,
    min_size: Annotated[
        str | None, typer.Option(help=_help("min_size"), show_default=False)
    ] = None,
    max_size: Annotated[
        str | None, typer.Option(help=_help("max_size"), show_default=False)
    ] = None,
    step_factor: Annotated[
        float | None, typer.Option(help=_help("step_factor"), show_default=False)
    ] = None,
    iters: Annotated[int | None, typer.Option(help=_help("iters"), show_default=False)] = None,
    warmup: Annotated[int | None, typer.Option(help=_help("warmup"), show_default=False)] = None,
    check: Annotated[
        bool | None, typer.Option("--check/--no-check", help=_help("check"), show_default=False)
    ] = None,
    samples: Annotated[
        bool | None,
        typer.Option("--samples/--no-samples", help=_help("samples"), show_default=False),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help=_help("timeout"), show_default=False)
    ] = None,
    seed: Annotated[int | None, typer.Option(help=_help("seed"), show_default=False)] = None,
    output: Annotated[Path | None, typer.Option(help=_help("output"), show_default=False)] = None,
    plugin: Annotated[
        list[str] | None, typer.Option(help=_help("plugins"), show_default=False)
    ] = None,
    cluster_name: Annotated[
        str | None, typer.Option(help=_help("cluster_name"), show_default=False)
    ] = None,
    format: Annotated[Format, typer.Option(help="human or json (one event per line).")] = (
        Format.human
    ),
) -> None:
    """Sweep every collective over a range of sizes; write rows to the results dataset."""
    options: dict[str, Any] = dict(locals())
    output_format = options.pop("format")
    options["plugins"] = options.pop("plugin")
    try:
        spec = build_spec(**options)
        from sweeper import console, sweep

        observer = console.JsonConsole() if output_format is Format.json else console.HumanConsole()
        finished = sweep.run(spec, observer)
    except SweeperError as exc:
        raise _fail(exc) from None
    if finished.failed:
        raise typer.Exit(EXIT_POINTS_FAILED)


@app.callback()
def main() -> None:
    """sweeper: collective and peer-to-peer bandwidth of a GPU cluster, on Ray."""
