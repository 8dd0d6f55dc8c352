"""`sweeper scan`: a verdict for every node, GPU and link of a fleet, from a real scan
(`driver.scan`) or a simulated one (`scan.simulate`, the same policy and judge). The options
are read here into the scan's settings, bad input before Ray starts; the verdicts come out
as a table or as the
scan's summary document.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sweeper.commands.common import EXIT_REGRESSION, examples, fail
from sweeper.commands.options import (
    EXPERIMENTS,
    MEASURE,
    SWEEP_OPTIONS,
    WHERE,
    Format,
    OutputFormat,
    sweep_options,
)
from sweeper.errors import BadInput, SweeperError
from sweeper.planning.profile import SCAN_OPTIONS, build_spec
from sweeper.planning.sizes import parse_size
from sweeper.planning.spec import SweepSpec
from sweeper.scan.document import Scanned, document
from sweeper.scan.fleet import Wave
from sweeper.scan.judge import Subject, Verdict, named
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import MAX_FAULTS, Fault, Simulation, cycle
from sweeper.scan.simulate import simulate as simulated
from sweeper.scan.thresholds import Thresholds
from sweeper.wire import Tier

if TYPE_CHECKING:
    from sweeper.driver.scan import ScanSettings

# the sweep's options a scan takes, by their names here (--plugin, and --output's old name)
SCAN_SWEEP_OPTIONS = {"plugin" if o == "plugins" else o for o in SCAN_OPTIONS} | {"old_output"}


# what a scan's verdicts are judged against
VERDICTS = "Verdicts"
SIMULATED_OP = "all_reduce"  # the operation whose traffic the simulation's oracle models


EXAMPLES = examples(
    "sweeper scan",
    "sweeper scan --nodes 64 --domain-label rack",
    "sweeper scan --strategy random:5 --seed 7 --format json",
    "sweeper scan --simulate --nodes 1024 --gpus-per-node 8 --faults 3",
)


@sweep_options(after="op", leave_out=set(SWEEP_OPTIONS) - SCAN_SWEEP_OPTIONS)
def scan(
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
    try:
        chosen = parse_strategy(strategy, seed)
        limits = thresholds(min_busbw or [], sigmas, min_ratio)
        if simulate:
            if parse_sizes(sizes) is not None or op != SIMULATED_OP:  # what its oracle models
                raise BadInput(
                    f"--simulate times {SIMULATED_OP} at 8 bytes and 1G: drop --op, --sizes"
                )
            sim = simulated(
                nodes=nodes or 64,
                gpus_per_node=options["gpus_per_node"] or 8,
                faults=parse_faults(faults),
                strategy=chosen,
                seed=seed,
                thresholds=limits,
            )
            if format is Format.json:
                print(json.dumps(simulation_record(sim), indent=1, default=str))
            else:
                print_simulation(sim)
            return
        from sweeper.driver.scan import ScanSettings  # Ray (not started): the options are good

        settings = ScanSettings(
            strategy=chosen,
            thresholds=limits,
            op=op,
            nodes=nodes,
            domain_label=domain_label,
            sizes=parse_sizes(sizes),
        )
        options["plugins"] = options.pop("plugin")
        spec = build_spec(**options)
        scanned = run(spec, settings, format is Format.json)
    except SweeperError as exc:
        raise fail(exc) from None
    if any(v.condemned for v in scanned.verdicts):
        raise typer.Exit(EXIT_REGRESSION)


def parse_strategy(text: str, seed: int, given_as: str | None = None) -> Strategy:
    """The strategy `text` names; BadInput naming where it was given (default `--strategy`)."""
    try:
        return Strategy.parse(text, seed=seed)
    except ValueError as exc:
        known = "adaptive, ring, bisect, random:K, all"
        where = given_as or f"--strategy {text}"
        raise BadInput(f"{where}: {exc}".rstrip(), hint=f"one of {known}") from None


def parse_sizes(text: str | None) -> tuple[int, int] | None:
    """`--sizes LATENCY,BANDWIDTH` (8,1G): the judged operation's two sizes."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        found = [parse_size(p) for p in parts]
    except ValueError as exc:
        raise BadInput(f"--sizes: {exc}") from None
    if len(found) != 2 or found[0] >= found[1]:
        raise BadInput(f"--sizes {text}: two sizes, the latency one first (such as 8,1G)")
    return found[0], found[1]


def thresholds(
    min_busbw: Sequence[str], sigmas: float | None, min_ratio: float | None
) -> Thresholds:
    """`--min-busbw internode=40` (GB/s, per tier; a bare figure is the internode tier's) and
    the relative limits."""
    floors: dict[Tier, float] = {}
    for given in min_busbw:
        tier, _, figure = given.rpartition("=")
        try:
            floor = floors[Tier(tier or Tier.INTERNODE)] = float(figure)
        except ValueError:
            raise BadInput(
                f"--min-busbw {given}: TIER=GB/s, such as internode=40 (tiers: "
                f"{', '.join(Tier.values())})"
            ) from None
        if not (math.isfinite(floor) and floor > 0):
            raise BadInput(f"--min-busbw {given}: a floor is a finite figure above 0 GB/s")
    limits = Thresholds(min_busbw_gb_per_s=floors)
    if sigmas is not None:
        limits = replace(limits, sigmas=sigmas)
    if min_ratio is not None:
        limits = replace(limits, min_ratio=min_ratio)
    return limits


def parse_faults(text: str) -> tuple[Fault, ...]:
    """`--faults 3` (that many: a slow node, a slow link, a dead node, then the others in
    turn) or names (slow-node,flapping)."""
    if text.isascii() and text.isdigit():
        if int(text) > MAX_FAULTS:  # refused before a fault is listed
            raise BadInput(f"--faults {text}: the simulation plants at most {MAX_FAULTS}")
        return cycle(int(text))
    try:
        return tuple(Fault(name.strip()) for name in text.split(",") if name.strip())
    except ValueError:
        raise BadInput(
            f"--faults {text}: a count, or names among {', '.join(Fault.values())}"
        ) from None


class WaveLines:
    """Each wave as it starts, one line (the table's observer)."""

    def wave(self, wave: Wave) -> None:
        largest = max(len(g.nodes) for g in wave.groups)
        print(
            f"wave {wave.index:>3} {wave.stage:<12} {len(wave.groups):>5} groups of up to "
            f"{largest} nodes",
            flush=True,
        )


class NoLines:
    def wave(self, wave: Wave) -> None:
        pass


def print_verdicts(verdicts: Sequence[Verdict]) -> None:
    """Every node's verdict, then the GPUs, links and groups that name something."""
    shown = [v for v in verdicts if v.subject is Subject.NODE]
    shown += [v for v in named(verdicts) if v.subject is not Subject.NODE]
    width = max((len(v.name) for v in shown), default=4)
    print(f"{'name':<{width}}  {'health':<11}  {'stage':<12}  evidence")
    for v in shown:
        print(f"{v.name:<{width}}  {v.health:<11}  {v.stage or '':<12}  {v.evidence}")
    counts = Counter(str(v.health) for v in verdicts if v.subject is Subject.NODE)
    print("nodes: " + ", ".join(f"{n} {health}" for health, n in sorted(counts.items())))


def simulation_record(sim: Simulation) -> dict[str, Any]:
    return {
        "nodes": sim.nodes,
        "gpus_per_node": sim.gpus_per_node,
        "strategy": sim.strategy,
        "seed": sim.seed,
        "planted": [asdict(p) for p in sim.planted],
        "stages": sim.stages(),
        "waves": len(sim.waves),
        "groups": sim.groups,
        "minutes": round(sim.seconds / 60, 2),
        "precision": round(sim.score.precision, 3),
        "recall": round(sim.score.recall, 3),
        "healthy_condemned": list(sim.score.healthy_condemned),
        "verdicts": [
            {"name": v.name, "health": str(v.health), "evidence": v.evidence}
            for v in named(sim.verdicts)
        ],
    }


def print_simulation(sim: Simulation) -> None:
    print(
        f"{sim.nodes} nodes x {sim.gpus_per_node} GPUs, {sim.strategy}, seed {sim.seed}: "
        f"{len(sim.waves)} waves, {sim.groups} groups, {sim.seconds / 60:.1f} min "
        f"(actor start {sim.start_s:.0f} s)"
    )
    for w in sim.waves:
        print(
            f"  wave {w.index:>3} {w.stage:<12} {w.groups:>6} groups of up to {w.largest:>3} "
            f"nodes {w.seconds:6.1f} s"
        )
    planted = ", ".join(f"{p.fault} {'-'.join(p.nodes)}" for p in sim.planted)
    print(f"planted: {planted or 'nothing'}")
    for v in named(sim.verdicts):
        print(f"  {v.health:<12} {v.evidence}")
    print(f"precision {sim.score.precision:.2f}, recall {sim.score.recall:.2f}")


def run(spec: SweepSpec, settings: ScanSettings, machine: bool) -> Scanned:
    """The scan on the cluster, each wave a line as it starts; its verdicts printed as a
    table, or as the scan's summary document (`scan.document`, the file the run keeps)."""
    from sweeper.driver.scan import scan_fleet  # Ray: only for a scan of a real cluster

    scanned = scan_fleet(spec, settings, NoLines() if machine else WaveLines())
    if machine:
        print(json.dumps(document(scanned), indent=1))
    else:
        print(
            f"scan {scanned.run_id}: {len(scanned.fleet.nodes)} nodes, "
            f"{len(scanned.outcomes)} groups, {scanned.rows} rows in {scanned.seconds:.0f} s "
            f"-> {spec.outputs.results}"
        )
        print_verdicts(scanned.verdicts)
    return scanned
