"""The `sweeper` command line. Thin: options -> SweepSpec -> sweep -> exit code.

Options default to None ("not given") so the SweepSpec model owns every default and
every rule; their help text is the model's field description.
Exit codes: 0 done, 1 regression, 2 bad input, 3 infrastructure, 4 some points failed.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sweeper.errors import BadInput, SweeperError
from sweeper.spec import NightlySettings, Profile, SweepSpec, build_spec, load_profile

if TYPE_CHECKING:
    from sweeper.sweep import Finished

EXIT_REGRESSION = 1
EXIT_POINTS_FAILED = 4

app = typer.Typer(
    name="sweeper",
    help="How fast does your GPU cluster really move data? Collective sweeps on Ray.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
config_app = typer.Typer(
    help="Profiles: YAML files whose keys are `sweeper run`'s options (and `nightly:`).",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")


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


def _opt(field: str, *flags: str) -> Any:
    return typer.Option(*flags, help=_help(field), show_default=False)


def _profile(path: Path | None) -> Profile | None:
    return load_profile(path) if path is not None else None


# Options shared by the commands that need a cluster, declared once.
Address = Annotated[str | None, _opt("address")]
Backend = Annotated[str | None, _opt("backend")]
World = Annotated[int | None, _opt("world")]
Nodes = Annotated[int | None, _opt("nodes")]
GpusPerNode = Annotated[int | None, _opt("gpus_per_node")]
Tiers = Annotated[str | None, _opt("tiers")]
Pairs = Annotated[str | None, _opt("pairs")]
ForceNetwork = Annotated[bool | None, _opt("force_network", "--force-network/--no-force-network")]
GpuVisibility = Annotated[str | None, _opt("gpu_visibility")]
Output = Annotated[Path | None, _opt("output")]
ClusterName = Annotated[str | None, _opt("cluster_name")]
OutputFormat = Annotated[Format, typer.Option(help="human, or json for machines.")]
ProfileFile = Annotated[
    Path | None,
    typer.Option(help="YAML profile: option values (flags given here override them)."),
]


def _sweep(spec: SweepSpec, output_format: Format, run_kind: str) -> Finished:
    """A sweep as the command line runs it, for `run` and `nightly` alike."""
    from sweeper import console, sweep

    observer = console.JsonConsole() if output_format is Format.json else console.HumanConsole()
    return sweep.run(spec, observer, run_kind)


@app.command(
    epilog="Examples: sweeper run | sweeper run --ops all_reduce,all_gather --max-size 4G "
    "--dtypes bfloat16 | sweeper run --nodes 2 --tiers all --force-network | "
    "sweeper run --address ray://head:10001 --format json | sweeper run --profile jobs/nightly.yaml"
)
def run(
    profile: ProfileFile = None,
    address: Address = None,
    backend: Backend = None,
    world: World = None,
    nodes: Nodes = None,
    gpus_per_node: GpusPerNode = None,
    tiers: Tiers = None,
    pairs: Pairs = None,
    force_network: ForceNetwork = None,
    gpu_visibility: GpuVisibility = None,
    ops: Annotated[str | None, _opt("ops")] = None,
    dtypes: Annotated[str | None, _opt("dtypes")] = None,
    min_size: Annotated[str | None, _opt("min_size")] = None,
    max_size: Annotated[str | None, _opt("max_size")] = None,
    mem_limit: Annotated[str | None, _opt("mem_limit")] = None,
    step_factor: Annotated[float | None, _opt("step_factor")] = None,
    iters: Annotated[int | None, _opt("iters")] = None,
    warmup: Annotated[int | None, _opt("warmup")] = None,
    check: Annotated[bool | None, _opt("check", "--check/--no-check")] = None,
    samples: Annotated[bool | None, _opt("samples", "--samples/--no-samples")] = None,
    timeout: Annotated[float | None, _opt("timeout")] = None,
    seed: Annotated[int | None, _opt("seed")] = None,
    output: Output = None,
    plugin: Annotated[list[str] | None, _opt("plugins")] = None,
    cluster_name: ClusterName = None,
    format: OutputFormat = Format.human,
) -> None:
    """Sweep every collective over a range of sizes; write rows to the results dataset."""
    options: dict[str, Any] = dict(locals())
    output_format = options.pop("format")
    options["plugins"] = options.pop("plugin")
    try:
        spec = build_spec(_profile(options.pop("profile")), **options)
        finished = _sweep(spec, output_format, run_kind="run")
    except SweeperError as exc:
        raise _fail(exc) from None
    if finished.failed:
        raise typer.Exit(EXIT_POINTS_FAILED)


@app.command(
    "nightly",
    epilog="Examples: sweeper nightly --profile jobs/nightly.yaml | "
    "sweeper nightly --profile jobs/nightly.yaml --output /data/results --reports /data/reports",
)
def nightly_command(
    profile: ProfileFile = None,
    address: Address = None,
    output: Output = None,
    cluster_name: ClusterName = None,
    reports: Annotated[
        Path | None, typer.Option(help=NightlySettings.model_fields["reports"].description)
    ] = None,
    format: OutputFormat = Format.human,
) -> None:
    """Run a profile, compare it with the history of this cluster and hardware, and write a
    JSON summary; exit 1 on a regression (4: no regression, but some points failed)."""
    from sweeper import nightly

    try:
        loaded = _profile(profile) or Profile.model_validate({})
        spec = build_spec(loaded, address=address, output=output, cluster_name=cluster_name)
        finished = _sweep(spec, format, run_kind="nightly")
        verdict = nightly.judge(spec.output, finished.run_id, loaded.nightly.policy())
        path = nightly.write_summary(verdict, reports or loaded.nightly.reports)
    except SweeperError as exc:
        raise _fail(exc) from None
    if format is Format.json:
        print(json.dumps({"event": "nightly", "summary": str(path), **nightly.summary(verdict)}))
    else:
        nightly.print_verdict(verdict, path)
    if len(verdict.regressions):
        raise typer.Exit(EXIT_REGRESSION)
    if verdict.failed:
        raise typer.Exit(EXIT_POINTS_FAILED)


@app.command(epilog="Examples: sweeper history | sweeper history --results /data/results --last 7")
def history(
    results: Annotated[Path, typer.Option(help="Results directory.")] = Path("results"),
    reports: Annotated[
        Path, typer.Option(help="Where the nightly summaries are.")
    ] = NightlySettings.model_fields["reports"].default,
    last: Annotated[int, typer.Option(min=1, help="Show the last N runs.")] = 30,
    format: OutputFormat = Format.human,
) -> None:
    """The runs in a results directory, oldest first, with their status."""
    from sweeper import history as history_

    try:
        runs = history_.runs(results, reports).tail(last)
    except FileNotFoundError as exc:
        raise _fail(BadInput(str(exc))) from None
    if format is Format.json:
        print(json.dumps(history_.records(runs), indent=1))
    else:
        history_.print_runs(runs)


@config_app.command("schema")
def config_schema() -> None:
    """Print the JSON Schema of a profile (for editors and CI checks)."""
    print(json.dumps(Profile.model_json_schema(), indent=2))


@app.command(epilog="Examples: sweeper topo | sweeper topo --nodes 2 --format json")
def topo(
    address: Address = None,
    backend: Backend = None,
    world: World = None,
    nodes: Nodes = None,
    gpus_per_node: GpusPerNode = None,
    tiers: Annotated[str, typer.Option(help="Tiers whose groups to list.")] = "all",
    pairs: Pairs = None,
    force_network: ForceNetwork = None,
    format: OutputFormat = Format.human,
) -> None:
    """Nodes, GPUs, the link matrix (like nvidia-smi topo -m) and the groups each tier runs."""
    options: dict[str, Any] = dict(locals())
    output_format = options.pop("format")
    try:
        spec = build_spec(**options)
        from sweeper import console, sweep

        survey = sweep.survey(spec)
    except SweeperError as exc:
        raise _fail(exc) from None
    if output_format is Format.json:
        console.print_json(console.topology_json(survey))
    else:
        console.print_topology(survey)


@app.callback()
def main() -> None:
    """sweeper: collective and peer-to-peer bandwidth of a GPU cluster, on Ray."""
