"""A nightly run's JSON summary, `<reports_dir>/<run_id>.summary.json`, beside its report:
written by `sweeper nightly`, read by `sweeper history`."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.errors import CorruptResults, ResultsUnwritable
from sweeper.results.files import read_bounded, run_name, write_text


def path(reports_dir: Path, run_id: str) -> Path:
    return Path(reports_dir) / f"{run_name(run_id)}.summary.json"


def write(reports_dir: Path, run_id: str, summary: dict[str, Any]) -> Path:
    """The summary of `run_id`, written whole or not at all (ResultsUnwritable where the
    disk refuses it)."""
    try:
        return write_text(path(reports_dir, run_id), json.dumps(summary, indent=1) + "\n")
    except OSError as exc:
        raise ResultsUnwritable.of(reports_dir, exc) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class SummaryCounts:
    """What a nightly run's summary found: regressed series, and what its scan condemned
    (none for a sweep)."""

    regressions: int
    condemned: int


def load(reports_dir: Path, run_id: str) -> dict[str, Any] | None:
    """A nightly run's summary; None when there is none, or a file that is not one (skipped
    with a CorruptResults warning naming it)."""
    where = path(reports_dir, run_id)
    try:
        summary = json.loads(read_bounded(where))
        if isinstance(summary, dict) and isinstance(summary.get("regressions"), int):
            return summary
        reason = "not a nightly summary (no count of regressions)"
    except FileNotFoundError:
        return None
    except OSError as exc:  # not a regular file (a FIFO would block the read), or too large
        reason = exc.strerror or str(exc)
    except RecursionError:
        reason = "nested deeper than Python's recursion limit"
    except ValueError as exc:  # malformed JSON
        reason = f"not a nightly summary ({str(exc).splitlines()[0] if str(exc) else exc!r})"
    warnings.warn(f"skipped {where}: {reason}", CorruptResults, stacklevel=2)
    return None


def judged(reports_dir: Path, run_id: str) -> SummaryCounts | None:
    """The counts a nightly run's summary holds (`load`); None without one."""
    summary = load(reports_dir, run_id)
    if summary is None:
        return None
    condemned = summary.get("condemned")
    return SummaryCounts(
        regressions=summary["regressions"],
        condemned=len(condemned) if isinstance(condemned, list) else 0,
    )
