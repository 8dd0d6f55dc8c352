"""The `sweeper` command line. Thin: options -> SweepSpec -> sweep -> exit code. The sweep's
options are declared once, in sweeper/commands/options.py.
Exit codes: 0 done, 1 regression, 2 bad input, 3 infrastructure, 4 some points failed;
130 and 143: stopped by SIGINT or SIGTERM (what was measured is kept).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TextIO

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from sweeper._version import __version__
from sweeper.commands.options import (
    EXPERIMENTS,
    MEASURE,
    SWEEP_OPTIONS,
    WHERE,
    Address,
    Backend,
    ConnectTimeout,
    ForceNetwork,
    Format,
    GpusPerNode,
    Nodes,
    OutputFormat,
    Pairs,
    ProfileFile,
    World,
    sweep_options,
)
from sweeper.driver import stops
from sweeper.errors import BadInput, InfrastructureError, SweeperError, SweeperWarning
from sweeper.planning.profile import (
    SCAN_OPTIONS,
    SCAN_TAKES,
    Profile,
    build_spec,
    load_profile,
    load_sweep_profile,
)
from sweeper.planning.spec import SweepSpec
from sweeper.scan import document

if TYPE_CHECKING:
    from sweeper.commands.nightly_run import Night
    from sweeper.driver.console import HumanConsole, JsonConsole
    from sweeper.driver.sweep import Resume

EXIT_REGRESSION = 1
EXIT_POINTS_FAILED = 4


def _fail(exc: SweeperError) -> typer.Exit:
    if os.environ.get("SWEEPER_DEBUG") == "1":
        raise exc
    hint = f" ({exc.hint})" if exc.hint else ""
    print(f"sweeper: error: {exc}{hint}", file=sys.stderr)
    return typer.Exit(exc.exit_code)


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


class _Command(TyperCommand):
    """Every command's class: its help by metavar (`_by_metavar`)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _by_metavar(self.get_params(ctx))
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
                print(f"sweeper: error: {exc.format_message()}{where}", file=sys.stderr)
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
                f"{exc.param.opts[0]}: {exc.message}"
                if exc.param and exc.message
                else exc.format_message()
            )
            raise _fail(BadInput(named)) from None


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
config_app = typer.Typer(
    cls=_Group,
    help="Profiles: YAML files whose keys are `sweeper run`'s options (and `nightly:`).",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")


def _examples(*lines: str) -> str:
    """A command's examples, one a line (help is rich markup, which keeps single line breaks)."""
    return "\n".join(["Examples:", *(f"  {line}" for line in lines)])


def _profile(path: Path | None) -> Profile | None:
    return load_profile(path) if path is not None else None


def _sweep_profile(path: Path | None) -> Profile | None:
    return load_sweep_profile(path) if path is not None else None


def _observer(output_format: Format) -> HumanConsole | JsonConsole:
    """What a sweep shows while it works, for `run` and `nightly` alike."""
    # brings Ray and pandas, which `sweeper --help` need not load
    from sweeper.driver import console

    return console.JsonConsole() if output_format is Format.json else console.HumanConsole()


@contextmanager
def _stoppable(observer: HumanConsole | JsonConsole) -> Iterator[None]:
    """A sweep that SIGINT or SIGTERM stops gracefully: its rows written, its record marked
    interrupted, the terminal restored, one line on resuming, exit 130 or 143. The terminal
    is restored before any closing line, an error's included."""
    try:
        with stops.graceful():
            yield
    except stops.Stopped as stop:
        observer.close()
        print(f"sweeper: {stop.line()}", file=sys.stderr)
        raise typer.Exit(stop.exit_code) from None
    finally:
        observer.close()


@contextmanager
def _printing() -> Iterator[None]:
    """Where a command prints its result, once the work is done: a stdout that refuses it (a
    full disk, /dev/full) is one line on stderr and exit 3, not a traceback at exit; a reader
    that went away (`| head`) ends it quietly with exit 1, as rich does for its tables and
    Python's documentation does for SIGPIPE."""
    try:
        yield
        sys.stdout.flush()
    except OSError as exc:
        with suppress(OSError, ValueError):  # what is left in the buffer goes nowhere at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if isinstance(exc, BrokenPipeError):
            raise typer.Exit(1) from None
        raise _fail(InfrastructureError(f"cannot write to stdout: {exc.strerror or exc}")) from None


@app.command(
    cls=_Command,
    epilog=_examples(
        "sweeper run",
        "sweeper run --ops all_reduce,all_gather --max-size 4G --dtypes bfloat16",
        "sweeper run --nodes 2 --tiers all --force-network",
        "sweeper run --ops 'p2p*' --tiers nvlink --concurrent --copy-engine",
        "sweeper run --ops 'all_to_all*,moe*' --moe tokens=8192,zipf=1.2",
        "sweeper run --ops 'all_reduce*,reduce_scatter+all_gather' --nccl-algos ring,tree",
        "sweeper run --ops all_reduce,all_to_all --nccl-env NCCL_PROTO=LL,LL128,Simple "
        "--nccl-env NCCL_MAX_NCHANNELS=1,4,32",
        "sweeper run --address ray://head:10001 --format json",
        "sweeper run --no-report",
        "sweeper run --profile jobs/weekly.yaml --max-size 1G",
    ),
)
@sweep_options(after="profile")
def run(
    profile: ProfileFile = None,
    resume: Annotated[
        str | None,
        typer.Option(
            metavar="RUN_ID",
            help="Go on with an interrupted or killed run (its id, from `sweeper history`) "
            "under --results, with the options it was started with: the points it has rows "
            "for are not measured again.",
        ),
    ] = None,
    format: OutputFormat = Format.human,
    **options: Any,
) -> None:
    """Sweep every collective over a range of sizes; write rows to the results dataset."""
    options["plugins"] = options.pop("plugin")
    observer = _observer(format)
    try:
        with _stoppable(observer):
            from sweeper.driver import sweep  # Ray and pandas: loaded only for a sweep

            if resume is None:
                finished = sweep.run(build_spec(_sweep_profile(profile), **options), observer)
            else:
                spec, stopped = _resumed(resume, {"profile": profile, **options})
                if stopped.run_kind == "nightly":  # one nightly run, judged once at its end
                    from sweeper.commands import nightly_run as nightly

                    policy = nightly.policy_of(stopped.command)
                    night = nightly.run(spec, policy, observer, stopped)
                else:
                    finished = sweep.run(spec, observer, resume=stopped)
    except SweeperError as exc:
        raise _fail(exc) from None
    if resume is not None and stopped.run_kind == "nightly":
        _show_night(night, format)
    if finished.failed:
        raise typer.Exit(EXIT_POINTS_FAILED)


# what may change between a run and its resumption: where it is, not what it measures
RESUME_MAY_SET = frozenset({"output", "address", "connect_timeout"})


def _resumed(run_id: str, options: dict[str, Any]) -> tuple[SweepSpec, Resume]:
    """The spec a run was started with, where it is now, and where the run stopped."""
    from sweeper.driver import sweep  # Ray and pandas: loaded only for a sweep
    from sweeper.report import require_directory  # here: this module's `report` command

    given = sorted(k for k, v in options.items() if v is not None and k not in RESUME_MAY_SET)
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise BadInput(f"--resume runs with the run's own options; drop {flags}")
    output = options["output"] or SweepSpec.model_fields["output"].default
    require_directory(output, f"--output {output}")  # a file there is no results directory
    started, resume = sweep.resumable(output, run_id)
    where = {k: v for k, v in options.items() if k in RESUME_MAY_SET and v is not None}
    return build_spec(None, **{**started, **where, "output": output}), resume


@app.command(
    "nightly",
    cls=_Command,
    epilog=_examples(
        "sweeper nightly --profile jobs/nightly.yaml",
        "sweeper nightly --profile jobs/nightly.yaml --results /data/results "
        "--reports-dir /data/reports",
        "sweeper nightly --profile jobs/nightly.yaml --nodes 2 --max-size 1G",
        "sweeper nightly --profile jobs/nightly.yaml --format json",
    ),
)
@sweep_options(after="profile")  # every one of run's: flags override the profile's keys
def nightly_command(
    profile: ProfileFile = None,
    format: OutputFormat = Format.human,
    **options: Any,
) -> None:
    """Sweep a profile (or scan the fleet, with a scan: section), compare the run with the
    history of this cluster and hardware, write the report and a JSON summary beside it; exit 1
    on a regression or a condemned node, GPU or link (4: neither, but some points failed)."""
    options["plugins"] = options.pop("plugin")
    observer = _observer(format)
    try:
        with _stoppable(observer):
            loaded = _profile(profile) or Profile()
            given = sorted(k for k, v in options.items() if v is not None)
            if loaded.scan is not None and (
                sweeps := [k for k in given if k not in NIGHTLY_SCAN_TAKES]
            ):
                flags = ", ".join("--" + k.replace("_", "-") for k in sweeps)
                raise BadInput(f"the profile's scan: chooses what a scan measures; drop {flags}")
            spec = build_spec(loaded, **options)
            # pandas and Ray (not started): once the options are good
            from sweeper.analysis.regression import Policy
            from sweeper.commands import nightly_run as nightly

            night = nightly.run(spec, Policy.of(loaded.nightly), observer, scan=loaded.scan)
    except SweeperError as exc:
        raise _fail(exc) from None
    _show_night(night, format)


def _show_night(night: Night, output_format: Format) -> NoReturn:
    """A judged nightly run: its verdict shown, and its exit (1: a regression or a condemned
    node, GPU or link; 4: neither, but some points failed)."""
    from sweeper.commands import nightly_run as nightly

    if output_format is Format.json:
        event = {"event": "nightly", "summary": str(night.summary)}
        print(json.dumps({**event, **nightly.summary(night.verdict, night.report)}))
    else:
        nightly.print_night(night)
    if len(night.verdict.regressions) or night.verdict.condemned:
        raise typer.Exit(EXIT_REGRESSION)
    raise typer.Exit(EXIT_POINTS_FAILED if night.verdict.failed else 0)


# what a nightly of a profile with a scan: section takes, by the names here
NIGHTLY_SCAN_TAKES = SCAN_TAKES | {"old_output"}
# the sweep's options a scan takes, by their names here (--plugin, and --output's old name)
SCAN_SWEEP_OPTIONS = {"plugin" if o == "plugins" else o for o in SCAN_OPTIONS} | {"old_output"}


# what a scan's verdicts are judged against
VERDICTS = "Verdicts"


@app.command(
    "scan",
    cls=_Command,
    epilog=_examples(
        "sweeper scan",
        "sweeper scan --nodes 64 --domain-label rack",
        "sweeper scan --strategy random:5 --seed 7 --format json",
        "sweeper scan --simulate --nodes 1024 --gpus-per-node 8 --faults 3",
    ),
)
@sweep_options(after="op", leave_out=set(SWEEP_OPTIONS) - SCAN_SWEEP_OPTIONS)
def scan_command(
    nodes: Annotated[
        int | None,
        typer.Option(
            metavar="N", rich_help_panel=WHERE, min=1, help="Nodes to scan; default every node."
        ),
    ] = None,
    strategy: Annotated[
        str,
        typer.Option(
            metavar="STRATEGY",
            rich_help_panel=MEASURE,
            help="adaptive, ring, bisect, random:K or all.",
        ),
    ] = "adaptive",
    domain_label: Annotated[
        str | None,
        typer.Option(
            metavar="LABEL",
            rich_help_panel=WHERE,
            help="A Ray node label (rack, an NVLink domain): the screen's groups.",
        ),
    ] = None,
    sizes: Annotated[
        str | None,
        typer.Option(
            metavar="SIZES",
            rich_help_panel=MEASURE,
            help="The latency and bandwidth sizes, e.g. 8,1G \\[default: 8 and 1G, "
            "or the largest below it that fits; 1M on CPU ranks].",
        ),
    ] = None,
    min_busbw: Annotated[
        list[str] | None,
        typer.Option(
            metavar="TIER=GB/S",
            rich_help_panel=VERDICTS,
            help="An absolute floor, TIER=GB/s (internode=40); repeatable.",
        ),
    ] = None,
    sigmas: Annotated[
        float | None,
        typer.Option(
            metavar="SIGMAS",
            rich_help_panel=VERDICTS,
            min=0,
            help="Robust sigmas below the fleet's median.",
        ),
    ] = None,
    min_ratio: Annotated[
        float | None,
        typer.Option(
            metavar="RATIO",
            rich_help_panel=VERDICTS,
            min=0,
            max=1,
            help="Share of the fleet's median.",
        ),
    ] = None,
    op: Annotated[
        str, typer.Option(metavar="OP", rich_help_panel=MEASURE, help="The judged operation.")
    ] = "all_reduce",
    simulate: Annotated[
        bool,
        typer.Option(
            metavar="",
            rich_help_panel=EXPERIMENTS,
            help="A simulated fleet with planted faults; no cluster.",
        ),
    ] = False,
    faults: Annotated[
        str,
        typer.Option(
            metavar="FAULTS",
            rich_help_panel=EXPERIMENTS,
            help="--simulate: how many faults, or their names (slow-node,...).",
        ),
    ] = "3",
    seed: Annotated[
        int,
        typer.Option(
            metavar="N",
            rich_help_panel=EXPERIMENTS,
            help="Random matchings' and the simulation's seed.",
        ),
    ] = 0,
    format: OutputFormat = Format.human,
    **options: Any,
) -> None:
    """A verdict for every node, GPU and link: healthy, slow, failed, unreachable or
    unconfirmed, each with its evidence; exit 1 when something is condemned."""
    from sweeper.commands import scan as scan_

    try:
        chosen = scan_.strategy(strategy, seed)
        limits = scan_.thresholds(min_busbw or [], sigmas, min_ratio)
        if simulate:
            from sweeper.scan.simulate import simulate as simulated

            sim = simulated(
                nodes=nodes or 64,
                gpus_per_node=options["gpus_per_node"] or 8,
                faults=scan_.faults(faults),
                strategy=chosen,
                seed=seed,
                thresholds=limits,
            )
            if format is Format.json:
                print(json.dumps(scan_.simulation_record(sim), indent=1, default=str))
            else:
                scan_.print_simulation(sim)
            return
        from sweeper.driver.scan import ScanSettings  # Ray (not started): the options are good

        settings = ScanSettings(
            strategy=chosen,
            thresholds=limits,
            op=op,
            nodes=nodes,
            domain_label=domain_label,
            sizes=scan_.sizes(sizes),
        )
        options["plugins"] = options.pop("plugin")
        spec = build_spec(**options)
        scanned = scan_.run(spec, settings, format is Format.json)
    except SweeperError as exc:
        raise _fail(exc) from None
    if any(v.condemned for v in scanned.verdicts):
        raise typer.Exit(EXIT_REGRESSION)


RunId = Annotated[str, typer.Argument(metavar="RUN_ID", help="A run id of the results, or latest.")]
Results = Annotated[
    Path, typer.Option(metavar="DIR", help="Results directory (a Parquet dataset).")
]


@app.command(
    cls=_Command,
    epilog=_examples(
        "sweeper compare 20261121T020000Z-a1b2c3 latest",
        "sweeper compare RUN_A RUN_B --results /data/results --threshold 0.03 --all --format json",
    ),
)
def compare(
    base: Annotated[
        str, typer.Argument(metavar="BASE", help="The run compared with: a run id, or latest.")
    ],
    new: Annotated[
        str, typer.Argument(metavar="NEW", help="The run compared: a run id, or latest.")
    ],
    results: Results = Path("results"),
    threshold: Annotated[
        float | None,
        typer.Option(
            metavar="RATIO",
            min=0,
            help="Smallest change of bus bandwidth that counts \\[default: 0.05].",
        ),
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option(
            metavar="ALPHA",
            min=0,
            max=1,
            help="Significance level of the test on per-iteration samples \\[default: 0.01].",
        ),
    ] = None,
    every: Annotated[
        bool,
        typer.Option(
            "--all", metavar="", help="Every point, not only regressions and improvements."
        ),
    ] = False,
    format: OutputFormat = Format.human,
) -> None:
    """Two runs point by point: each point's change, significance where both runs kept
    samples, and which points regressed; exit 1 on a regression."""
    from sweeper.analysis import RegressionRule  # pandas too
    from sweeper.commands import compare_runs as compare_  # pandas: loaded only for a comparison

    given = {"threshold": threshold, "alpha": alpha}
    rule = RegressionRule(**{name: value for name, value in given.items() if value is not None})
    try:
        comparison = compare_.compare(results, base, new, rule)
    except SweeperError as exc:
        raise _fail(exc) from None
    with _printing():
        if format is Format.json:
            print(json.dumps(compare_.records(comparison, every), indent=1))
        else:
            compare_.print_comparison(comparison, every)
    if comparison.regressions:
        raise typer.Exit(EXIT_REGRESSION)


@app.command(
    cls=_Command,
    epilog=_examples(
        "sweeper history",
        "sweeper history --results /data/results --last 7",
        "sweeper history --format json",
    ),
)
def history(
    results: Results = Path("results"),
    reports_dir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Where the nightly summaries are; default reports/ beside --results.",
        ),
    ] = None,
    last: Annotated[int, typer.Option(metavar="N", min=1, help="Show the last N runs.")] = 30,
    format: OutputFormat = Format.human,
) -> None:
    """The runs in a results directory, oldest first, with their status: ok, failed (some
    points failed), regression, condemned (a nightly scan condemned a node, GPU or link), or
    unjudged (a nightly run without its summary)."""
    from sweeper import report  # here: this module's `report` command has its name
    from sweeper.commands import history_runs as history_  # pandas: loaded only for a history

    try:
        runs = history_.runs(results, report.directory(results, reports_dir)).tail(last)
    except FileNotFoundError as exc:
        raise _fail(BadInput(str(exc))) from None
    with _printing():
        if format is Format.json:
            print(json.dumps(history_.records(runs), indent=1))
        else:
            history_.print_runs(runs)


@app.command(
    cls=_Command,
    epilog=_examples(
        "sweeper export --prometheus /var/lib/prometheus/node-exporter/sweeper.prom",
        "sweeper export 20261122T013412Z-33627a --results /data/results --per-host /data/prom",
    ),
)
def export(
    run_id: RunId = "latest",
    results: Results = Path("results"),
    prometheus: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Write every host's series to this file (node_exporter reads *.prom).",
        ),
    ] = None,
    per_host: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Write one file per host into this directory: <host>.prom."
        ),
    ] = None,
) -> None:
    """Write a run's figures as Prometheus textfiles for node_exporter's textfile collector:
    bus bandwidth at the largest size, latency at the smallest, the run's versions, duration
    and end."""
    from sweeper.commands import export_textfiles as export_  # pandas: loaded only for an export

    try:
        said = export_.export(results, run_id, prometheus, per_host)
    except SweeperError as exc:
        raise _fail(exc) from None
    print("\n".join(said))


@config_app.command("schema", cls=_Command)
def config_schema(
    verdicts: Annotated[
        bool, typer.Option("--verdicts", help="The scan summary's schema instead.")
    ] = False,
) -> None:
    """Print the JSON Schema of a profile, or of a scan's summary (for editors and CI checks)."""
    with _printing():
        print(json.dumps(document.SCHEMA if verdicts else Profile.model_json_schema(), indent=2))


@app.command(
    cls=_Command,
    epilog=_examples(
        "sweeper topo",
        "sweeper topo --nodes 2 --format json",
    ),
)
def topo(
    address: Address = None,
    connect_timeout: ConnectTimeout = None,
    backend: Backend = None,
    world: World = None,
    nodes: Nodes = None,
    gpus_per_node: GpusPerNode = None,
    tiers: Annotated[
        str, typer.Option(metavar="TIERS", help="Tiers whose groups to list.")
    ] = "all",
    pairs: Pairs = None,
    force_network: ForceNetwork = None,
    format: OutputFormat = Format.human,
) -> None:
    """Nodes, GPUs, the link matrix (like nvidia-smi topo -m) and the groups each tier runs."""
    options: dict[str, Any] = dict(locals())
    output_format = options.pop("format")
    try:
        spec = build_spec(**options)
        # Ray and pandas: loaded once the options are good
        from sweeper.driver import console, sweep

        survey = sweep.survey(spec)
    except SweeperError as exc:
        raise _fail(exc) from None
    with _printing():
        if output_format is Format.json:
            console.print_json(console.topology_json(survey))
        else:
            console.print_topology(survey)


# what a plan does not ask: how points are timed and checked, where rows and reports go
PLAN_LEAVES_OUT = (
    "launch",
    "engine",
    "register_buffers",
    "check",
    "samples",
    "timeout",
    "seed",
    "output",
    "old_output",
    "copy_engine",
    "report",
    "reports_dir",
    "cluster_name",
)


@app.command(
    "plan",
    cls=_Command,
    epilog=_examples(
        "sweeper plan --topology tests/data/topologies/dgx-h100-nvswitch.json --nodes 1024 "
        "--profile jobs/weekly.yaml",
        "sweeper plan --tiers all --format json",
        "sweeper plan --topology node.json --nodes 16 --tiers all --results results",
    ),
)
@sweep_options(after="results", leave_out=PLAN_LEAVES_OUT)
def plan_command(
    profile: ProfileFile = None,
    topology: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="A recorded topology (one node's NVML record), replicated --nodes times: "
            "plan with no cluster.",
        ),
    ] = None,
    results: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR", help="Fit the cost model to the rows of an earlier run's results."
        ),
    ] = None,
    format: OutputFormat = Format.human,
    **options: Any,
) -> None:
    """The schedule a sweep would run: actor sets, waves of groups that share no link, points,
    and the estimated duration (in waves, and one group at a time)."""
    options["plugins"] = options.pop("plugin")
    try:
        spec = build_spec(_sweep_profile(profile), **options)
        # pandas (the cost model): once the options are good
        from sweeper.commands import plan_estimate as plan

        found = plan.plan(spec, topology, results)
    except SweeperError as exc:
        raise _fail(exc) from None
    with _printing():
        if format is Format.json:
            print(json.dumps(plan.records(found), indent=1))
        else:
            plan.print_plan(found)


@app.command(
    cls=_Command,
    epilog=_examples(
        "sweeper report",
        "sweeper report 20261122T013412Z-33627a -o run.html",
        "sweeper report latest --baseline 20261121T230000Z-a1b2c3",
        "sweeper report --js reports/ -o reports/today.html",
        "sweeper report --screenshot run.png",
    ),
)
def report(
    run_id: RunId = "latest",
    results: Results = Path("results"),
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="The HTML file; default reports/<run_id>.html beside --results.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            metavar="RUN_ID", help="A run id of the results to compare with, point by point."
        ),
    ] = None,
    js: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Write one shared plotly.min.js into this directory and point at it, "
            "instead of inlining it (archives of many pages).",
        ),
    ] = None,
    screenshot: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE", help="Also save a full-page PNG, through Playwright and Chromium."
        ),
    ] = None,
    chromium: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Chromium for --screenshot; default $SWEEPER_CHROMIUM, else on PATH.",
        ),
    ] = None,
) -> None:
    """Write the HTML report of a run: one self-contained page that works offline."""
    try:
        from sweeper.report import require  # here: this module's `report` command has its name

        require()
        from sweeper.report import browser, build  # plotly: loaded once `require` found it

        if screenshot:  # before the page is written: both or neither
            browser.require_png(screenshot)
        executable = browser.require(chromium) if screenshot else None
        page = build.write(results, run_id, output, baseline, js)
        print(f"report: {page}")
        if screenshot:
            print(f"screenshot: {browser.screenshot(page, screenshot, executable)}")
    except SweeperError as exc:
        raise _fail(exc) from None


def _warn_in_one_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """sweeper's own warnings (a corrupt results file skipped) as one line, like its errors;
    everyone else's as Python shows them."""
    if issubclass(category, SweeperWarning):
        print(f"sweeper: warning: {message}", file=sys.stderr)
    else:
        _show_warning(message, category, filename, lineno, file, line)


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
    warnings.showwarning = _warn_in_one_line
