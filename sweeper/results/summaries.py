"""A nightly run's JSON summary, `<reports_dir>/<run_id>.summary.json`, beside its report:
written by `sweeper nightly`, read by `sweeper history`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.results.files import run_name, write_text


def path(reports_dir: Path, run_id: str) -> Path:
    return Path(reports_dir) / f"{run_name(run_id)}.summary.json"


def write(reports_dir: Path, run_id: str, summary: dict[str, Any]) -> Path:
    """The summary of `run_id`, written whole or not at all."""
    return write_text(path(reports_dir, run_id), json.dumps(summary, indent=1) + "\n")


@dataclass(frozen=True, kw_only=True, slots=True)
class Judged:
    """What a nightly run's summary found: regressed series, and what its scan condemned
    (none for a sweep)."""

    regressions: int
    condemned: int


def judged(reports_dir: Path, run_id: str) -> Judged | None:
    """The counts a nightly run's summary holds; None when there is no summary."""
    try:
        summary = json.loads(path(reports_dir, run_id).read_text())
    except FileNotFoundError:
        return None
    return Judged(
        regressions=int(summary["regressions"]), condemned=len(summary.get("condemned", ()))
    )
