"""`sweeper nightly`: sweep a profile, judge the run against the history of its cluster and
hardware (`analysis.nightly`), write its report and a JSON summary beside it, and print the
regression table.

A profile with a `scan:` section makes the nightly run a fleet scan (`driver.scan`; its rows
are run_kind `nightly`, its verdicts the scan summary beside its record), judged against the
earlier nightly scans. A nightly scan alarms on two counts, both exit 1: a regression, or a
node, GPU or link the scan condemned (slow, failed or unreachable).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

import pandas as pd
import typer
from rich import box
from rich.console import Console
from rich.table import Table

from sweeper.analysis.nightly import (
    NightlyVerdict,
    ScanVerdicts,
    judge,
    metric_name,
    series_name,
    since,
    write_summary,
)
from sweeper.analysis.nightly import summary as verdict_summary
from sweeper.analysis.regression import STATUSES, Policy
from sweeper.analysis.summary import figure
from sweeper.commands.common import EXIT_POINTS_FAILED, EXIT_REGRESSION
from sweeper.commands.options import Format
from sweeper.driver import stops
from sweeper.errors import BadInput
from sweeper.planning.profile import NightlySettings, ScanSection, load_profile
from sweeper.planning.spec import SweepSpec
from sweeper.report import directory, require, run_directory
from sweeper.results import records, scans
from sweeper.results.files import require_directory
from sweeper.results.load import runs
from sweeper.scan.settings import ScanSettings, settings

if TYPE_CHECKING:
    from sweeper.driver.observer import Observer
    from sweeper.driver.run import Resume


@dataclass(frozen=True)
class Night:
    """A nightly run, done: its verdict, and where its summary and report are."""

    verdict: NightlyVerdict
    summary: Path
    report: Path | None


def run(
    spec: SweepSpec,
    policy: Policy,
    observer: Observer,
    resume: Resume | None = None,
    *,
    scan: ScanSection | None = None,
) -> Night:
    """Sweep as `sweeper run` does (run_kind `nightly`, its report included), judge the run
    against its history, and write the summary beside the report. With `resume`, the rest
    of a stopped nightly run, judged and summarized once, as one run. With `scan` (a
    profile's `scan:`), scan the fleet instead of sweeping (`scan_night`)."""
    from sweeper.driver import sweep  # Ray: only a command that sweeps needs it

    reports_dir = directory(spec.results, spec.reports_dir)
    require_directory(reports_dir, f"--reports-dir {reports_dir}")  # the summary's
    if scan is not None:
        return scan_night(spec, policy, observer, scan, reports_dir)
    finished = sweep.run(spec, observer, "nightly", resume)
    with _judging(spec.results, finished.run_id, reports_dir):
        verdict = judge(spec.results, finished.run_id, policy, judged_in=reports_dir)
        return _summarized(spec.results, verdict, reports_dir, finished.report)


def _summarized(
    results: Path, verdict: NightlyVerdict, reports_dir: Path, page: Path | None
) -> Night:
    """The night's summary written into `reports_dir`, then its page (where it has one) with
    the judgment and compared with last night, sharing one plotly.js with the pages there."""
    summary = write_summary(verdict, reports_dir, page)
    if page is not None:
        from sweeper.report import build  # plotly and jinja2: the report extra, --report

        baseline = verdict.history[-1] if verdict.history else None
        build.write(results, verdict.run_id, page, baseline, reports_dir, summaries_dir=reports_dir)
    return Night(verdict, summary, page)


@contextmanager
def _judging(results: Path, run_id: str, reports_dir: Path) -> Iterator[None]:
    """While a complete nightly run is judged, a stop's line says how to judge it later."""
    pending = [judge_command(run_id, results, reports_dir)]
    stops.tell_also(lambda stop: setattr(stop, "unjudged", pending[0] if pending else None))
    yield
    pending.clear()


def judge_command(run_id: str, results: Path, reports_dir: Path) -> str:
    words = ("--judge", run_id, "--results", str(results), "--reports-dir", str(reports_dir))
    return shlex.join(["sweeper", "nightly", *words])


def judge_later(
    results: Path, run_id: str, reports_dir: Path | None, profile: Path | None
) -> Night:
    """A complete nightly run that was never judged (its driver stopped or killed between
    its last point and its summary), judged now as it would have been: against the runs
    judged before it, with the regression settings of `profile` (else of the profile its
    command named), its summary written into `reports_dir` (else its own). BadInput where
    `run_id` is no complete nightly run of `results`."""
    record = records.load(results, run_id)
    if record is None or record.ended != "complete":
        raise BadInput(f"--judge {run_id}: no complete run of that id in {results}")
    kinds = runs(results).set_index("run_id")["run_kind"]
    if kinds.get(run_id) != "nightly":
        raise BadInput(f"--judge {run_id}: not a nightly run ({kinds.get(run_id, 'no rows')})")
    named = profile or _profile_named(record.command)
    settings = load_profile(named).nightly if named else NightlySettings()
    reports = Path(reports_dir) if reports_dir else run_directory(results, record)
    require_directory(reports, f"--reports-dir {reports}")
    document = scans.load(results, run_id)
    scanned = (
        None
        if document is None
        else ScanVerdicts(path=scans.path(results, run_id), document=document)
    )
    verdict = judge(results, run_id, Policy.of(settings), scanned, judged_in=reports)
    page = reports / f"{run_id}.html"
    return _summarized(results, verdict, reports, page if page.is_file() else None)


def scan_settings(section: ScanSection, results: Path | None = None) -> ScanSettings:
    """The scan's settings that a profile's `scan:` section gives; a strategy that is none is
    BadInput naming the key (before Ray starts). With `results`, the seed moved on by the
    scans they hold: a fleet of more rounds of pairs than a scan runs has them tested in
    turn, night after night (`policy.window`: 255 of 4095 a scan at 4096 nodes)."""
    chosen = settings(section, "scan.strategy")
    if results is None:
        return chosen
    strategy = chosen.strategy
    return replace(chosen, strategy=replace(strategy, seed=strategy.seed + scans.count(results)))


def scan_night(
    spec: SweepSpec, policy: Policy, observer: Observer, section: ScanSection, reports_dir: Path
) -> Night:
    """Scan the fleet (run_kind `nightly`), each wave a line as it starts (none for JSON),
    judge the judged figures against the earlier nightly scans, and write the report and
    the summary with the scan's condemned verdicts."""
    from sweeper.driver.scan import scan_fleet  # Ray: a real cluster's scan
    from sweeper.scan.retest import summary

    if spec.report:
        require()  # the report's extra, before Ray starts
    chosen = scan_settings(section, spec.results)
    scanned = scan_fleet(spec, chosen, observer, run_kind="nightly")
    kept = ScanVerdicts(
        path=scans.path(spec.results, scanned.run_id),
        # as the run keeps it: with re-tests
        document=summary(scanned, spec.model_dump(mode="json"), chosen),
    )
    verdict = judge(spec.results, scanned.run_id, policy, kept, judged_in=reports_dir)
    page = reports_dir / f"{scanned.run_id}.html" if spec.report and scanned.rows else None
    return _summarized(spec.results, verdict, reports_dir, page)


def policy_of(command: str) -> Policy:
    """The regression settings of a nightly run by the command that started it: its
    profile's `nightly:` section as `--profile` named it, else the defaults (a run record
    keeps the sweep's options, which these are not). A nightly scan is not resumed: its
    waves follow from the verdicts so far, which a new scan finds again in minutes."""
    named = _profile_named(command)
    if named is None:
        return Policy.of(NightlySettings())
    profile = load_profile(named)
    if profile.scan is not None:
        raise BadInput("--resume: a nightly scan is not resumed; run sweeper nightly again")
    return Policy.of(profile.nightly)


def _profile_named(command: str) -> Path | None:
    """The profile a run's command line named (`--profile`), if it named one."""
    words = shlex.split(command)
    named = [word.split("=", 1)[1] for word in words if word.startswith("--profile=")]
    named += [after for word, after in pairwise(words) if word == "--profile"]
    return Path(named[-1]) if named else None


def _metric(finding: Mapping[Hashable, Any]) -> str:
    return f"{metric_name(finding)} ({finding['unit']})"


def _table(title: str) -> Table:
    """A table as the sweep's closing one is drawn, to read at 80 columns: a rule under its
    head, no edges; its text columns fold, its numbers never wrap."""
    return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0))


def _print_fail_slow(console: Console, verdict: NightlyVerdict) -> None:
    """The fail-slow groups, each with its noise against its peers' and its series'."""
    flagged = verdict.fail_slow()
    if not flagged:
        return
    table = _table("fail-slow: groups that vary night to night more than their peers")
    table.add_column("group", overflow="fold")
    table.add_column("x peers' noise", justify="right", no_wrap=True)
    table.add_column("series: noise (sigma / median)", overflow="fold")
    for group in flagged:
        named = "; ".join(f"{s['series']} {s['metric']}: {s['noise']:.1%}" for s in group["series"])
        table.add_row(group["group_id"], f"{group['noise_ratio']:.2f}", named)
    console.print(table)


def _print_scan(console: Console, scan: ScanVerdicts) -> None:
    """The scan's nodes by verdict, and what it condemned with the evidence."""
    health = ", ".join(f"{n} {verdict}" for verdict, n in scan.document["health"].items())
    console.print(f"scan: {len(scan.document['nodes'])} nodes: {health}", soft_wrap=True)
    if condemned := scan.condemned:
        table = _table("condemned by the scan (its summary has every verdict)")
        for column in ("name", "health", "evidence"):
            table.add_column(column, overflow="fold")
        for v in condemned:
            table.add_row(v["name"], v["health"], v["evidence"])
        console.print(table)


def print_night(night: Night, out: TextIO | None = None) -> None:
    """The scan's verdicts, if the night was a scan; the regression table (regressions, then
    series worse tonight only), and a line of counts, the versions that changed and where
    the summary and a scan's report are."""
    verdict = night.verdict
    console = Console(file=out or sys.stdout, highlight=False)  # the terminal's width
    fp = verdict.fingerprint
    what = f"{fp.cluster_name} ({fp.gpu_model or 'no GPU'}, {fp.backend})"
    if verdict.history:
        policy = verdict.policy
        console.print(
            f"nightly {verdict.run_id}: {what} compared with {len(verdict.history)} earlier "
            f"nightly runs: a baseline of up to {policy.window}, and {policy.persistence} runs "
            "in a row worse than it to alarm",
        )
    else:
        console.print(
            f"nightly {verdict.run_id}: no earlier nightly run of {what}; this one starts its "
            "history",
        )
    if verdict.scan is not None:
        _print_scan(console, verdict.scan)
    shown = verdict.findings[verdict.findings["status"].isin(["regression", "worse"])]
    titles = {
        "regression": "regressions",
        "worse": "series worse tonight (they alarm if it persists)",
    }
    for status, title in titles.items():
        part = shown[shown["status"] == status]
        if part.empty:
            continue
        table = _table(f"{title}: {len(part)}")
        for column in ("series", "metric"):
            table.add_column(column, overflow="fold")
        for column in ("tonight", "baseline", "change", "z", "noise"):
            table.add_column(column, justify="right", no_wrap=True)
        table.add_column("since", overflow="fold")
        for finding in part.to_dict("records"):
            table.add_row(
                series_name(finding),
                _metric(finding),
                figure(finding["value"]),
                figure(finding["baseline"]),
                f"{finding['change']:+.1%}",
                f"{finding['z']:+.1f}",
                "-" if pd.isna(finding["noise"]) else f"{finding['noise']:.1%}",
                since(finding),
            )
        console.print(table)
    _print_fail_slow(console, verdict)
    counts = verdict.findings["status"].value_counts()
    console.print(
        f"{len(verdict.findings)} series x metrics: "
        + ", ".join(f"{int(counts.get(s, 0))} {s}" for s in STATUSES)
        + f" (new: fewer than {verdict.policy.min_history} earlier runs)",
    )
    for name, (before, now) in verdict.changed_versions().items():
        console.print(f"{name} changed since the previous run: {before} -> {now}")
    if verdict.failed:
        console.print(f"{verdict.failed} of {verdict.points} points failed (their rows say why)")
    if verdict.scan is not None and night.report:  # a sweep's observer said where it is
        console.print(f"report: {night.report}", soft_wrap=True)
    console.print(f"summary: {night.summary}", soft_wrap=True)


def show_night(night: Night, output_format: Format) -> NoReturn:
    """A judged nightly run: its verdict shown, and its exit (1: a regression or a condemned
    node, GPU or link; 4: neither, but some points failed)."""
    if output_format is Format.json:
        event = {"event": "nightly", "summary": str(night.summary)}
        print(json.dumps({**event, **verdict_summary(night.verdict, night.report)}))
    else:
        print_night(night)
    if len(night.verdict.regressions) or night.verdict.condemned:
        raise typer.Exit(EXIT_REGRESSION)
    raise typer.Exit(EXIT_POINTS_FAILED if night.verdict.failed else 0)
