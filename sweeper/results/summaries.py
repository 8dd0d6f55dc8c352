"""A nightly run's JSON summary, `<reports_dir>/<run_id>.summary.json`, beside its report:
written by `sweeper nightly`, read by `sweeper history`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sweeper.results.files import run_name, write_text


def path(reports_dir: Path, run_id: str) -> Path:
    return Path(reports_dir) / f"{run_name(run_id)}.summary.json"


def write(reports_dir: Path, run_id: str, summary: dict[str, Any]) -> Path:
    """The summary of `run_id`, written whole or not at all."""
    return write_text(path(reports_dir, run_id), json.dumps(summary, indent=1) + "\n")


def regressions(reports_dir: Path, run_id: str) -> int | None:
    """The regressions a nightly run's summary counted; None when there is no summary."""
    try:
        return int(json.loads(path(reports_dir, run_id).read_text())["regressions"])
    except FileNotFoundError:
        return None
