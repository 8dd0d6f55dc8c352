"""`sweeper scan`: a verdict for every node, GPU and link of a fleet, from a real scan
(`driver.scan`, inside the sweep's run) or a simulated one (`scan.simulate`, the same policy
and judge). The scan's own options are its settings' fields (`planning.profile.ScanSection`,
also a profile's `scan:` section), read here into the scan's settings, bad input before Ray
starts; the verdicts come out as a table or as the scan's summary document.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin

import typer
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from sweeper.commands.common import EXIT_REGRESSION, examples, fail, stoppable, sweep_console
from sweeper.commands.options import (
    EXPERIMENTS,
    MEASURE,
    SWEEP_OPTIONS,
    WHERE,
    Format,
    OutputFormat,
    given_options,
    option,
    sweep_options,
)
from sweeper.errors import BadInput, SweeperError
from sweeper.planning.profile import SCAN_OPTIONS, ScanSection, build_spec, describe
from sweeper.planning.sizes import parse_size
from sweeper.planning.spec import SweepSpec
from sweeper.scan.settings import STRATEGY_NAMES, ScanSettings, settings
from sweeper.scan.simulate import Fault, parse_faults
from sweeper.scan.simulate import simulate as simulated
from sweeper.scan.simulate_print import folded, folded_command, keep, show
from sweeper.scan.simulate_print import width as terminal_width
from sweeper.scan.thresholds import Finding
from sweeper.scan.verdict import Health, Subject, Verdict, named
from sweeper.wire import Tier

if TYPE_CHECKING:
    from sweeper.driver.console import HumanConsole, JsonConsole
    from sweeper.driver.scan import Resumed
    from sweeper.scan.document import Scanned

# what a scan's verdicts are judged against
VERDICTS = "Verdicts"
SIMULATED_NODES = 64
SIMULATED_GPUS = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class Shown:
    """How a scan setting shows on the command line; its help, default and rules are its
    ScanSection field's."""

    panel: str
    metavar: str
    flag: str | None = None  # where the option is not --field-name
    more: str = ""  # said after the field's description
    read: Callable[[Any], Any] | None = None  # the option's text -> the field's value


def parse_sizes(text: str) -> tuple[int, int]:
    """`--sizes LATENCY,BANDWIDTH` (8,1G): the judged operation's two sizes."""
    parts = [p.strip() for p in text.split(",")]
    try:
        found = [parse_size(p) for p in parts]
    except ValueError as exc:
        raise BadInput(f"--sizes: {exc}") from None
    if len(found) != 2 or found[0] >= found[1]:
        raise BadInput(f"--sizes {text}: two sizes, the latency one first (such as 8,1G)")
    return found[0], found[1]


def floors(min_busbw: Sequence[str]) -> dict[Tier, float]:
    """`--min-busbw internode=40` (GB/s, per tier; a bare figure is the internode tier's)."""
    out: dict[Tier, float] = {}
    for given in min_busbw:
        tier, _, figure = given.rpartition("=")
        try:
            floor = out[Tier(tier or Tier.INTERNODE)] = float(figure)
        except ValueError:
            raise BadInput(
                f"--min-busbw {given}: TIER=GB/s, such as internode=40 (tiers: "
                f"{', '.join(Tier.values())})"
            ) from None
        if not (math.isfinite(floor) and floor > 0):
            raise BadInput(f"--min-busbw {given}: a floor is a finite figure above 0 GB/s")
    return out


# Every ScanSection field, as `sweeper scan` shows it, in the order its help lists them
SHOWN = {
    "nodes": Shown(panel=WHERE, metavar="N|NODES"),
    "strategy": Shown(panel=MEASURE, metavar="STRATEGY", more=f" One of {STRATEGY_NAMES}."),
    "domain_label": Shown(panel=WHERE, metavar="LABEL"),
    "sizes": Shown(panel=MEASURE, metavar="SIZES", read=parse_sizes),
    "pair_rounds": Shown(panel=MEASURE, metavar="N"),
    "min_busbw_gb_per_s": Shown(
        panel=VERDICTS, metavar="TIER=GB/S", flag="--min-busbw", more=" Repeatable.", read=floors
    ),
    "sigmas": Shown(panel=VERDICTS, metavar="SIGMAS"),
    "min_ratio": Shown(panel=VERDICTS, metavar="RATIO"),
    "op": Shown(panel=MEASURE, metavar="OP"),
    "seed": Shown(panel=EXPERIMENTS, metavar="N"),
}


def typed(field: FieldInfo) -> Any:
    """The type an option of a ScanSection field takes (None: not given): the field's own
    where it is a number or text, text the option's reader reads where it is more (8,1G),
    and text given again for each key of a mapping (--min-busbw internode=40)."""
    kinds = [k for k in get_args(field.annotation) or (field.annotation,) if k is not type(None)]
    if kinds in ([int], [float], [str]):
        return kinds[0] | None
    return list[str] | None if get_origin(field.annotation) is dict else str | None


# The scan's settings as options, made from its section's fields (the model validates them)
SCAN_SETTINGS: dict[str, Any] = {
    name: Annotated[
        typed(ScanSection.model_fields[name]),
        option(
            ScanSection,
            name,
            shown.panel,
            shown.metavar,
            *((shown.flag,) if shown.flag else ()),
            more=shown.more,
        ),
    ]
    for name, shown in SHOWN.items()
}


EXAMPLES = examples(
    "sweeper scan",
    "sweeper scan --nodes 64 --domain-label rack",
    "sweeper scan --nodes gpu-17,gpu-40 --results /data/results",
    "sweeper scan --strategy random:5 --seed 7 --format json",
    "sweeper scan --resume 20261122T013412Z-33627a --results /data/results",
    "sweeper scan --simulate --nodes 1024 --gpus-per-node 8 --faults 3",
)


@sweep_options(after="op", leave_out=set(SWEEP_OPTIONS) - SCAN_OPTIONS)
@given_options(SCAN_SETTINGS, after=None)
def scan(
    simulate: Annotated[
        bool,
        typer.Option(
            metavar="",
            rich_help_panel=EXPERIMENTS,
            help="A simulated fleet with planted faults; no cluster. With --results, its "
            "verdicts are kept there as a scan's summary.",
        ),
    ] = False,
    faults: Annotated[
        str,
        typer.Option(
            metavar="FAULTS",
            rich_help_panel=EXPERIMENTS,
            help="--simulate: how many faults, or their names (slow-node,...), each with "
            "=COUNT where more than one (slow-node=26,slow-link=2).",
        ),
    ] = "3",
    slowdown: Annotated[
        float | None,
        typer.Option(
            metavar="SHARE",
            rich_help_panel=EXPERIMENTS,
            help="--simulate: what each slow fault takes off its speed (0.15: 85% left); "
            "default: each fault's own, about a half.",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            metavar="RUN_ID",
            help="Go on with a stopped scan (its id) under --results, with the settings it "
            "was started with: the same waves, and the same verdicts.",
        ),
    ] = None,
    format: OutputFormat = Format.human,
    **options: Any,
) -> None:
    """A verdict for every node, GPU and link: healthy, slow, failed, flaky, unreachable or
    unconfirmed, each with its evidence (and a condemned one with the command that re-tests
    it); exit 1 when something is condemned."""
    try:
        asked = {name: _read(name, options.pop(name)) for name in SHOWN}
        if resume is not None:
            given = {"simulate": simulate or None, **asked, **options}
            spec, chosen, resumed = _resumed(resume, given)
        else:
            chosen, resumed = settings(section(asked)), None
            spec = build_spec(**options)  # checked as a real scan's: --simulate's too
            if simulate:
                _simulate(chosen, parse_faults(faults), slowdown, options, format)  # exits
        observer = sweep_console(format)
        with stoppable(observer):
            scanned = run(spec, chosen, observer, resumed)
    except SweeperError as exc:
        raise fail(exc) from None
    if any(v.condemned for v in scanned.verdicts):
        raise typer.Exit(EXIT_REGRESSION)


def _read(name: str, value: Any) -> Any:
    """A scan setting's option as its field's value (None: not given)."""
    reader = SHOWN[name].read
    return reader(value) if reader is not None and value is not None else value


def section(asked: dict[str, Any]) -> ScanSection:
    """The scan's settings as given (None: not given, the model's default); a value the model
    refuses is BadInput naming its option."""
    try:
        return ScanSection(**{k: v for k, v in asked.items() if v is not None})
    except ValidationError as exc:
        raise BadInput(describe(exc)) from None


def _resumed(run_id: str, given: dict[str, Any]) -> tuple[SweepSpec, ScanSettings, Resumed]:
    """The spec and settings a scan was started with, where it is now, and where it stopped."""
    from sweeper.driver.run import resumed  # Ray (not started): the options are good
    from sweeper.driver.scan import resumable

    spec, (plain, stopped) = resumed(run_id, given, "the scan's own settings", resumable)
    return spec, settings(ScanSection.model_validate(plain)), stopped


def _simulate(
    chosen: ScanSettings,
    faults: Sequence[Fault],
    slowdown: float | None,
    options: dict[str, Any],
    output_format: Format,
) -> None:
    """The simulation of the scan: printed, kept under --results (where given) as a scan's
    summary, and its exit: 1 when it condemned something."""
    count = chosen.nodes if isinstance(chosen.nodes, int) else None
    if isinstance(chosen.nodes, tuple):
        raise BadInput("--simulate --nodes: a count; a simulated fleet has no named nodes")
    if chosen.op is not None or chosen.sizes is not None:  # what its oracle models
        raise BadInput(
            "--simulate times each stage's own operation at 8 B and 1G: drop --op, --sizes"
        )
    sim = simulated(
        nodes=count or SIMULATED_NODES,
        gpus_per_node=SIMULATED_GPUS
        if options["gpus_per_node"] is None
        else options["gpus_per_node"],
        faults=faults,
        strategy=chosen.strategy,
        seed=chosen.strategy.seed,
        thresholds=chosen.thresholds,
        slowdown=slowdown,
    )
    show(sim, output_format is Format.json, keep(sim, options["results"]))
    raise typer.Exit(EXIT_REGRESSION if any(v.condemned for v in sim.verdicts) else 0)


EVIDENCE_COLUMNS = 60  # the narrowest a verdict's evidence folds into beneath its column


def print_verdicts(
    verdicts: Sequence[Verdict],
    retests: dict[str, str] | None = None,
    findings: Sequence[Finding] = (),
    names: Mapping[str, str] | None = None,
) -> None:
    """The fleet findings first, then every node's verdict, then the GPUs, links and groups
    that name something, and the GPU of a node of one; under each condemned one, the command
    that re-tests it (`retests`, by verdict name). `names`: how each node id is shown (its
    host)."""
    shown_as = names or {}

    def named_(text: str) -> str:
        return re.sub(r"[\w.-]+", lambda word: shown_as.get(word[0], word[0]), text)

    for f in findings:
        print(folded(named_(f.line)))
    shown = [v for v in verdicts if v.subject is Subject.NODE]
    shown += [v for v in named(verdicts) if v.subject is not Subject.NODE]
    # a node of one GPU has no collective to time: its GPU's copies are its figures
    gpus = Counter(v.nodes[0] for v in verdicts if v.subject is Subject.GPU)
    shown += [
        v
        for v in verdicts
        if v.subject is Subject.GPU and v.health is Health.HEALTHY and gpus[v.nodes[0]] == 1
    ]
    width = max((len(named_(v.name)) for v in shown), default=4)
    print(f"{'name':<{width}}  {'health':<11}  {'stage':<12}  evidence")
    # the evidence's lines hang beneath its column where that leaves room, else beneath the row
    evidence = width + 29
    hang = evidence if terminal_width() - evidence >= EVIDENCE_COLUMNS else 4
    for v in shown:
        row = f"{named_(v.name):<{width}}  {v.health:<11}  {v.stage or '':<12}  "
        row += named_(v.evidence)
        print(folded(row, indent=hang))
        if retest := (retests or {}).get(v.name):
            print(folded_command(f"{'':<{width}}  re-test:", retest, indent=width + 4))
    counts = Counter(str(v.health) for v in verdicts if v.subject is Subject.NODE)
    print(folded("nodes: " + ", ".join(f"{n} {health}" for health, n in sorted(counts.items()))))


def run(
    spec: SweepSpec,
    chosen: ScanSettings,
    observer: HumanConsole | JsonConsole,
    resumed: Resumed | None = None,
) -> Scanned:
    """The scan on the cluster, each wave a line as it starts; its verdicts printed as a
    table, or as the scan's summary document (the file the run keeps)."""
    from sweeper.driver.console import JsonConsole
    from sweeper.driver.scan import scan_fleet  # Ray: a real cluster's scan
    from sweeper.scan.retest import host_names, summary

    scanned = scan_fleet(spec, chosen, observer, resumed=resumed)
    doc = summary(scanned, spec.model_dump(mode="json"), chosen)
    if isinstance(observer, JsonConsole):
        observer.document(doc)  # stdout is the observer's alone while the scan runs
    else:
        print(
            folded(
                f"scan {scanned.run_id}: {len(scanned.fleet.nodes)} nodes, "
                f"{len(scanned.outcomes)} groups, {scanned.rows} rows in {scanned.seconds:.0f} s "
                f"-> {spec.results}"
            )
        )
        retests = {v["name"]: v["retest"] for v in doc["verdicts"] if v.get("retest")}
        names = host_names(scanned.fleet.nodes)
        print_verdicts(scanned.verdicts, retests, scanned.findings, names)
    return scanned
