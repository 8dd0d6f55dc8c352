"""`sweeper nightly`: sweep a profile, judge the run against the history of its cluster and
hardware, write its report and a JSON summary beside it, and print the regression table.

The history of a run is the earlier nightly runs (run_kind `nightly`) in the same results
directory with the same fingerprint: cluster name, backend and GPU model. Software
versions (driver, CUDA, NCCL, torch, Ray, sweeper) are deliberately not part of it: an
upgrade that slows a collective is exactly the regression to report, so versions are
compared with the previous run and named in the summary instead. A change of shape (more
nodes, another GPU count) needs no fingerprint either: its groups are other series, new
until they have a history of their own.

A profile with a `scan:` section makes the nightly run a fleet scan (`driver.scan`; its rows
are run_kind `nightly`, its verdicts the scan summary beside its record). Its history is the
earlier nightly *scans* of the fingerprint: a nightly sweep and a nightly scan measure other
things and never share one. A scan's series are the figures its judge reads, under names that
recur night after night (`analysis.regression.scan_metrics`): each node's gate (its own GPUs'
all_reduce, and each GPU's host copies) by its host name and GPU UUID, and each screen or
cross-domain group by its members' host names. A screen group is the same group night after
night while the fleet is (the screen cuts the fleet in its order, by host name); a node
added, removed or kept out by its gate reshapes some groups, which are then new series. The
bisection and confirmation groups are no series: they exist only where something failed, with
whichever partners were free. So the regression table catches what the scan, judging each
night against the fleet's own median, cannot: the whole fleet slower after an upgrade, or a
node drifting down night after night while still within the fleet's spread.

A nightly scan alarms on two counts, both exit 1: a regression, or a node, GPU or link the
scan condemned (slow, failed or unreachable). Its summary then has, beside `regressions`,
`condemned`: one object per condemned verdict, `{"name", "subject", "health", "nodes",
"hosts", "gpu", "evidence", "retest"}` (the scan summary's fields of the same names: `retest`
is the command that scans it again), and `scan`: `{"summary"`
(the scan summary's path), `"strategy"`, `"seed"`, `"nodes"`, `"health"` (nodes per
verdict)`}`. A nightly sweep's summary has neither key.
"""

from __future__ import annotations

import math
import shlex
import sys
from collections.abc import Hashable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from sweeper.analysis import label
from sweeper.analysis.regression import (
    COLUMNS,
    SCAN_COLUMNS,
    STATUSES,
    Policy,
    detect,
    run_metrics,
    scan_metrics,
)
from sweeper.commands.scan import settings
from sweeper.errors import BadInput
from sweeper.planning.profile import NightlySettings, ScanSection, load_profile
from sweeper.planning.sizes import format_size
from sweeper.planning.spec import SweepSpec
from sweeper.report import directory, require
from sweeper.results import scans, summaries
from sweeper.results.files import require_directory
from sweeper.results.load import load, runs
from sweeper.results.schema import RUN_COLUMNS
from sweeper.wire import Launch

if TYPE_CHECKING:
    from sweeper.driver.observer import Observer
    from sweeper.driver.scan import ScanSettings
    from sweeper.driver.sweep import Resume

VERSIONS = tuple(column for column in RUN_COLUMNS if column.endswith("_version"))
_METRIC_NAMES = {"peak_busbw_gb_per_s": "peak busbw", "smallest_size_time_us": "time"}


@dataclass(frozen=True)
class Fingerprint:
    """What must be equal for two nightly runs to be compared."""

    cluster_name: str
    backend: str
    gpu_model: str | None  # None: CPU ranks

    @classmethod
    def of(cls, run: Mapping[str, Any]) -> Fingerprint:
        return cls(str(run["cluster_name"]), str(run["backend"]), _text(run["gpu_model"]))

    def matches(self, runs: pd.DataFrame) -> pd.Series:
        """Which of `results.load.runs`' rows have this fingerprint."""
        same: pd.Series = pd.Series(True, index=runs.index)
        for field, value in asdict(self).items():
            same = same & (runs[field].fillna("") == (value or ""))
        return same


def _text(value: Any) -> str | None:
    return None if pd.isna(value) else str(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanVerdicts:
    """A nightly scan's own verdicts: its scan summary (`scan.document`) and where it is."""

    path: Path
    document: Mapping[str, Any]

    @property
    def condemned(self) -> list[dict[str, Any]]:
        """The condemned verdicts (the summary's `condemned`), each as the nightly summary
        names it."""
        named = set(self.document["condemned"])
        keys = ("name", "subject", "health", "nodes", "hosts", "gpu", "evidence", "retest")
        return [
            {key: v[key] for key in keys} for v in self.document["verdicts"] if v["name"] in named
        ]

    def record(self) -> dict[str, Any]:
        doc = self.document
        return {
            "summary": str(self.path),
            "strategy": doc["strategy"],
            "seed": doc["seed"],
            "nodes": len(doc["nodes"]),
            "health": doc["health"],
        }


@dataclass(frozen=True)
class Verdict:
    """A nightly run judged against its history (and a nightly scan's own verdicts)."""

    run_id: str
    run_started_at: datetime
    fingerprint: Fingerprint
    history: tuple[str, ...]  # the earlier runs compared with, oldest first
    findings: pd.DataFrame  # regression.detect's frame
    versions: dict[str, str | None]
    previous_versions: dict[str, str | None] | None  # of the latest run in the history
    policy: Policy
    points: int
    failed: int
    scan: ScanVerdicts | None = None

    @property
    def condemned(self) -> list[dict[str, Any]]:
        """What the scan condemned; none for a sweep."""
        return self.scan.condemned if self.scan else []

    @property
    def regressions(self) -> pd.DataFrame:
        regressions: pd.DataFrame = self.findings[self.findings["status"] == "regression"]
        return regressions

    def fail_slow(self) -> list[dict[str, Any]]:
        """The groups flagged fail-slow: each group's noise against its peers', and each of
        its series' own noise (sigma over median, night to night)."""
        flagged = self.findings[self.findings["fail_slow"]]
        return [
            {
                "group_id": str(group_id),
                "noise_ratio": json_value(float(part["noise_ratio"].iloc[0])),
                "series": [
                    {
                        "series": series_name(r),
                        "metric": r["metric"],
                        "noise": json_value(r["noise"]),
                    }
                    for r in part.to_dict("records")
                ],
            }
            for group_id, part in flagged.groupby("group_id", sort=True)
        ]

    def changed_versions(self) -> dict[str, tuple[str | None, str | None]]:
        """Versions that differ from the previous run's: {name: (before, now)}."""
        if self.previous_versions is None:
            return {}
        return {
            name: (self.previous_versions[name], now)
            for name, now in self.versions.items()
            if self.previous_versions[name] != now
        }


def judge(root: Path, run_id: str, policy: Policy, scan: ScanVerdicts | None = None) -> Verdict:
    """Compare run `run_id` of the results directory `root` with its history; with `scan`,
    the run is a nightly scan with these verdicts, compared with the earlier nightly scans."""
    every = runs(root) if Path(root).is_dir() else None
    if every is None or run_id not in set(every["run_id"]):
        raise BadInput(f"run {run_id} measured nothing: no group of its tiers exists here")
    tonight = every[every["run_id"] == run_id].iloc[0]
    fingerprint = Fingerprint.of(tonight)
    earlier = every[
        every["run_kind"].isin(["nightly"])
        & fingerprint.matches(every)
        & (every["run_started_at"] < tonight["run_started_at"])
    ]
    # a scan is the nightly run with a scan summary: scans and sweeps have histories apart
    scanned = [scans.path(root, earlier_id).is_file() for earlier_id in earlier["run_id"]]
    earlier = earlier[pd.Series(scanned, index=earlier.index, dtype=bool) == (scan is not None)]
    earlier = earlier.tail(policy.runs - 1)
    order = [*earlier["run_id"], run_id]
    if scan is None:
        metrics = run_metrics(load(root, order, columns=COLUMNS), policy.bandwidth_min_size_bytes)
    else:
        metrics = scan_metrics(load(root, order, columns=SCAN_COLUMNS))
    findings = detect(metrics, order, policy)
    previous = earlier.iloc[-1] if len(earlier) else None
    return Verdict(
        run_id=run_id,
        run_started_at=tonight["run_started_at"].to_pydatetime(),
        fingerprint=fingerprint,
        history=tuple(earlier["run_id"]),
        findings=findings,
        versions={name: _text(tonight[name]) for name in VERSIONS},
        previous_versions=None if previous is None else {n: _text(previous[n]) for n in VERSIONS},
        policy=policy,
        points=int(tonight["points"]),
        failed=int(tonight["failed"]),
        scan=scan,
    )


def series_name(finding: Mapping[Hashable, Any]) -> str:
    """A series as people read it: its group, operation and dtype (nvlink:n0g0,1 all_reduce
    bfloat16), `graph` for CUDA-graph replays, and where the series has them its pair (0->1),
    parameters and rounds. Eager series are not marked: so the names of series from before
    launch modes, which were eager, stay as they were."""
    parts = [str(finding["group_id"]), label(finding["op"], finding["algorithm"])]
    parts.append(str(finding["dtype"]))
    if finding["launch"] == Launch.GRAPH:
        parts.append(Launch.GRAPH.value)
    if not pd.isna(finding["src_rank"]):
        parts.append(f"{finding['src_rank']}->{finding['dst_rank']}")
    if finding["params"]:
        parts.append(f"[{finding['params']}]")
    if not pd.isna(finding["concurrent"]) and finding["concurrent"]:
        parts.append("concurrent")
    return " ".join(parts)


def json_value(value: Any) -> Any:
    """A JSON value: numpy scalars as Python's, times in ISO 8601, NaN, infinity and NA as
    null."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, datetime):
        return value.isoformat()
    if value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def summary(verdict: Verdict, page: Path | None = None) -> dict[str, Any]:
    """The JSON summary: the run, its report, what it was compared with and how, and every
    series."""
    records = verdict.findings.to_dict("records")
    findings = verdict.findings.assign(series=[series_name(record) for record in records])
    counts = findings["status"].value_counts()
    scanned = (
        {"condemned": verdict.condemned, "scan": verdict.scan.record()} if verdict.scan else {}
    )
    return {
        "run_id": verdict.run_id,
        "run_started_at": verdict.run_started_at.isoformat(),
        "report": str(page) if page else None,
        "fingerprint": asdict(verdict.fingerprint),
        "history": list(verdict.history),
        "versions": verdict.versions,
        "versions_changed": {
            name: {"before": before, "now": now}
            for name, (before, now) in verdict.changed_versions().items()
        },
        "policy": {
            "window": verdict.policy.window,
            "min_history": verdict.policy.min_history,
            "persistence": verdict.policy.persistence,
            "checks": [{"rule": type(c).__name__, **vars(c)} for c in verdict.policy.checks],
            "bandwidth_min_size_bytes": verdict.policy.bandwidth_min_size_bytes,
        },
        "points": verdict.points,
        "failed": verdict.failed,
        "regressions": len(verdict.regressions),
        "fail_slow": verdict.fail_slow(),
        **scanned,
        "counts": {status: int(counts.get(status, 0)) for status in STATUSES},
        "series": [
            {key: json_value(value) for key, value in record.items()}
            for record in findings.to_dict("records")
        ],
    }


def write_summary(verdict: Verdict, reports_dir: Path, page: Path | None = None) -> Path:
    """The verdict's summary, `<reports_dir>/<run_id>.summary.json`."""
    return summaries.write(reports_dir, verdict.run_id, summary(verdict, page))


@dataclass(frozen=True)
class Night:
    """A nightly run, done: its verdict, and where its summary and report are."""

    verdict: Verdict
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

    outputs = spec.outputs
    reports_dir = directory(outputs.results, outputs.reports_dir)
    require_directory(reports_dir, f"--reports-dir {reports_dir}")  # the summary's
    if scan is not None:
        return scan_night(spec, policy, observer, scan, reports_dir)
    finished = sweep.run(spec, observer, "nightly", resume)
    verdict = judge(outputs.results, finished.run_id, policy)
    if finished.report and verdict.history:
        from sweeper.report import build  # plotly and jinja2: the report extra, --report only

        # the page again, now that the verdict names the run to compare it with: last night
        build.write(outputs.results, verdict.run_id, finished.report, verdict.history[-1])
    return Night(verdict, write_summary(verdict, reports_dir, finished.report), finished.report)


def scan_settings(section: ScanSection) -> ScanSettings:
    """The scan's settings that a profile's `scan:` section gives; a strategy that is none is
    BadInput naming the key (before Ray starts)."""
    return settings(section, "scan.strategy")


def scan_night(
    spec: SweepSpec, policy: Policy, observer: Observer, section: ScanSection, reports_dir: Path
) -> Night:
    """Scan the fleet (run_kind `nightly`), each wave a line as it starts (none for JSON),
    judge the judged figures against the earlier nightly scans, and write the report and
    the summary with the scan's condemned verdicts."""
    from sweeper.driver.scan import scan_fleet, summary  # Ray: a real cluster's scan

    outputs = spec.outputs
    if outputs.report:
        require()  # the report's extra, before Ray starts
    chosen = scan_settings(section)
    scanned = scan_fleet(spec, chosen, observer, run_kind="nightly")
    kept = ScanVerdicts(
        path=scans.path(outputs.results, scanned.run_id),
        document=summary(scanned, spec, chosen),  # as the run keeps it: with re-tests
    )
    verdict = judge(outputs.results, scanned.run_id, policy, kept)
    page = None
    if outputs.report and scanned.rows:
        from sweeper.report import build  # plotly and jinja2: the report extra

        where = build.default_output(outputs.results, scanned.run_id, outputs.reports_dir)
        baseline = verdict.history[-1] if verdict.history else None
        page = build.write(outputs.results, scanned.run_id, where, baseline)
    return Night(verdict, write_summary(verdict, reports_dir, page), page)


def policy_of(command: str) -> Policy:
    """The regression settings of a nightly run by the command that started it: its
    profile's `nightly:` section as `--profile` named it, else the defaults (a run record
    keeps the sweep's options, which these are not). A nightly scan is not resumed: its
    waves follow from the verdicts so far, which a new scan finds again in minutes."""
    words = shlex.split(command)
    named = [word.split("=", 1)[1] for word in words if word.startswith("--profile=")]
    named += [after for word, after in pairwise(words) if word == "--profile"]
    if not named:
        return Policy.of(NightlySettings())
    profile = load_profile(Path(named[-1]))
    if profile.scan is not None:
        raise BadInput("--resume: a nightly scan is not resumed; run sweeper nightly again")
    return Policy.of(profile.nightly)


def _value(finding: Mapping[Hashable, Any], value: float) -> str:
    return f"{value:.2f}" if finding["unit"] == "GB/s" else f"{value:.1f}"


def _metric(finding: Mapping[Hashable, Any]) -> str:
    size = finding["size_bytes"]
    at = f" @{format_size(int(size))}" if not pd.isna(size) else ""
    return f"{_METRIC_NAMES.get(finding['metric'], finding['metric'])}{at} ({finding['unit']})"


def _since(finding: Mapping[Hashable, Any]) -> str:
    """Whether a worse series stepped (and from which run) or drifted."""
    if finding["trend"] == "step":
        return f"step from {finding['step_began']} ({finding['step_change']:+.1%})"
    return f"drift ({finding['drift']:+.1%} over the runs)"


def _print_fail_slow(console: Console, verdict: Verdict) -> None:
    """The fail-slow groups, each with its noise against its peers' and its series'."""
    flagged = verdict.fail_slow()
    if not flagged:
        return
    table = Table(title="fail-slow: groups that vary night to night more than their peers")
    for column in ("group", "x peers' noise", "series: noise (sigma / median)"):
        table.add_column(column)
    for group in flagged:
        named = "; ".join(f"{s['series']} {s['metric']}: {s['noise']:.1%}" for s in group["series"])
        table.add_row(group["group_id"], f"{group['noise_ratio']:.2f}", named)
    console.print(table)


def _print_scan(console: Console, scan: ScanVerdicts) -> None:
    """The scan's nodes by verdict, and what it condemned with the evidence."""
    health = ", ".join(f"{n} {verdict}" for verdict, n in scan.document["health"].items())
    console.print(f"scan: {len(scan.document['nodes'])} nodes: {health}", soft_wrap=True)
    if condemned := scan.condemned:
        table = Table(title="condemned by the scan (its summary has every verdict)")
        for column in ("name", "health", "evidence"):
            table.add_column(column)
        for v in condemned:
            table.add_row(v["name"], v["health"], v["evidence"])
        console.print(table)


def print_night(night: Night, out: TextIO | None = None) -> None:
    """The scan's verdicts, if the night was a scan; the regression table (regressions, then
    series worse tonight only), and a line of counts, the versions that changed and where
    the summary and a scan's report are."""
    verdict = night.verdict
    console = Console(file=out or sys.stdout, highlight=False, width=160)
    fp = verdict.fingerprint
    what = f"{fp.cluster_name} ({fp.gpu_model or 'no GPU'}, {fp.backend})"
    if verdict.history:
        policy = verdict.policy
        console.print(
            f"nightly {verdict.run_id}: {what} compared with {len(verdict.history)} earlier "
            f"nightly runs: a baseline of up to {policy.window}, and {policy.persistence} runs "
            "in a row worse than it to alarm",
            soft_wrap=True,
        )
    else:
        console.print(
            f"nightly {verdict.run_id}: no earlier nightly run of {what}; this one starts its "
            "history",
            soft_wrap=True,
        )
    if verdict.scan is not None:
        _print_scan(console, verdict.scan)
    shown = verdict.findings[verdict.findings["status"].isin(["regression", "worse"])]
    if len(shown):
        table = Table(title="regressions, and series worse tonight (they alarm if it persists)")
        columns = ("status", "series", "metric", "tonight", "baseline", "change", "z", "noise")
        for column in (*columns, "since"):
            table.add_column(column, justify="right" if column in columns[2:] else "left")
        ordered = shown.sort_values("status", key=lambda s: s.map(STATUSES.index))
        for finding in ordered.to_dict("records"):
            table.add_row(
                finding["status"],
                series_name(finding),
                _metric(finding),
                _value(finding, finding["value"]),
                _value(finding, finding["baseline"]),
                f"{finding['change']:+.1%}",
                f"{finding['z']:+.1f}",
                "-" if pd.isna(finding["noise"]) else f"{finding['noise']:.1%}",
                _since(finding),
            )
        console.print(table)
    _print_fail_slow(console, verdict)
    counts = verdict.findings["status"].value_counts()
    console.print(
        f"{len(verdict.findings)} series x metrics: "
        + ", ".join(f"{int(counts.get(s, 0))} {s}" for s in STATUSES)
        + f" (new: fewer than {verdict.policy.min_history} earlier runs)",
        soft_wrap=True,
    )
    for name, (before, now) in verdict.changed_versions().items():
        console.print(f"{name} changed since the previous run: {before} -> {now}", soft_wrap=True)
    if verdict.failed:
        console.print(f"{verdict.failed} of {verdict.points} points failed (their rows say why)")
    if verdict.scan is not None and night.report:  # a sweep's observer said where it is
        console.print(f"report: {night.report}", soft_wrap=True)
    console.print(f"summary: {night.summary}", soft_wrap=True)
