"""A nightly run judged against its history: which earlier runs that is (`Fingerprint`), its
series' findings (`analysis.regression.detect`) and the JSON summary written beside its report.

The history is the earlier nightly runs of the results directory with the same cluster name,
backend and GPU model; software versions are compared with the previous run instead. A nightly
scan's history is the earlier nightly scans, its series named so that they recur night after
night. `series_name` and `json_value` name a series and write a value for `compare` and
`history` too. docs/ARCHITECTURE.md, "Inside the rooms", says why and gives the summary's keys."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweeper.analysis.regression import (
    COLUMNS,
    SCAN_COLUMNS,
    STATUSES,
    Policy,
    detect,
    run_metrics,
    scan_metrics,
)
from sweeper.analysis.summary import label
from sweeper.errors import BadInput
from sweeper.planning.sizes import format_size
from sweeper.results import records, scans, summaries
from sweeper.results.load import load, runs
from sweeper.results.schema import RUN_COLUMNS
from sweeper.wire import Launch

VERSIONS = tuple(column for column in RUN_COLUMNS if column.endswith("_version"))


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
class NightlyVerdict:
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


def judge(
    root: Path,
    run_id: str,
    policy: Policy,
    scan: ScanVerdicts | None = None,
    *,
    judged_in: Path | None = None,
) -> NightlyVerdict:
    """Compare run `run_id` of the results directory `root` with its history; with `scan`,
    the run is a nightly scan with these verdicts, compared with the earlier nightly scans.
    With `judged_in` (the nightly's reports directory), an earlier run sweeper ran (its run
    record in `root`) is history only once judged there (its summary in it): a night killed
    before its judgment is no baseline until it is judged (`sweeper nightly --judge`)."""
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
    if judged_in is not None:
        judged = [_judged(root, earlier_id, judged_in) for earlier_id in earlier["run_id"]]
        earlier = earlier[pd.Series(judged, index=earlier.index, dtype=bool)]
    earlier = earlier.tail(policy.runs - 1)
    order = [*earlier["run_id"], run_id]
    if scan is None:
        metrics = run_metrics(load(root, order, columns=COLUMNS), policy.bandwidth_min_size_bytes)
    else:
        metrics = scan_metrics(load(root, order, columns=SCAN_COLUMNS))
    findings = detect(metrics, order, policy)
    previous = earlier.iloc[-1] if len(earlier) else None
    return NightlyVerdict(
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


def _judged(root: Path, run_id: str, reports_dir: Path) -> bool:
    """Whether an earlier nightly run counts as judged history: its summary is in
    `reports_dir`, or sweeper did not run it (no run record: rows another tool or an older
    sweeper wrote, which nothing judges here)."""
    summary = summaries.path(reports_dir, run_id)
    return summary.is_file() or not records.path(root, run_id).is_file()


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


_METRIC_NAMES = {"peak_busbw_gb_per_s": "peak busbw", "smallest_size_time_us": "time"}


def metric_name(finding: Mapping[Any, Any]) -> str:
    """A finding's metric as people read it, with the size it was measured at: 'peak busbw
    @1G', 'time @8B'."""
    size = finding["size_bytes"]
    at = f" @{format_size(int(size))}" if not pd.isna(size) else ""
    return f"{_METRIC_NAMES.get(finding['metric'], finding['metric'])}{at}"


def since(finding: Mapping[Any, Any]) -> str:
    """Whether a worse series stepped (and from which run) or drifted."""
    if finding["trend"] == "step":
        return f"step from {finding['step_began']} ({finding['step_change']:+.1%})"
    return f"drift ({finding['drift']:+.1%} over the runs)"


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


def summary(verdict: NightlyVerdict, page: Path | None = None) -> dict[str, Any]:
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


def write_summary(verdict: NightlyVerdict, reports_dir: Path, page: Path | None = None) -> Path:
    """The verdict's summary, `<reports_dir>/<run_id>.summary.json`."""
    return summaries.write(reports_dir, verdict.run_id, summary(verdict, page))
