"""A scan's summary, `<results>/_runs/<run_id>.scan.json`, beside the run's record: the
verdicts document (`scan.document`), written by the scan's driver, read by `sweeper export`.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from sweeper.errors import CorruptResults, ResultsUnwritable
from sweeper.results.files import read_bounded, run_name, write_text
from sweeper.results.records import RECORDS_DIR

VERSION = 1  # the document versions this reader knows


def path(results: Path, run_id: str) -> Path:
    return Path(results) / RECORDS_DIR / f"{run_name(run_id)}.scan.json"


def count(results: Path) -> int:
    """How many scans' summaries `results` holds."""
    return sum(1 for _ in (Path(results) / RECORDS_DIR).glob("*.scan.json"))


def save(results: Path, run_id: str, summary: dict[str, Any]) -> Path:
    """The scan's summary, written whole or not at all."""
    try:
        return write_text(path(results, run_id), json.dumps(summary, indent=1) + "\n")
    except OSError as exc:
        raise ResultsUnwritable.of(results, exc) from None


def load(results: Path, run_id: str) -> dict[str, Any] | None:
    """The scan's summary; None for a run that was no scan, or a file that is not a summary
    this sweeper reads (skipped with a CorruptResults warning naming it)."""
    where = path(results, run_id)
    try:
        summary = json.loads(read_bounded(where))
    except FileNotFoundError:
        return None
    except OSError as exc:  # not a regular file (a FIFO would block the read), or too large
        warnings.warn(f"skipped {where}: {exc.strerror or exc}", CorruptResults, stacklevel=2)
        return None
    except RecursionError:
        why = f"skipped {where}: nested deeper than Python's recursion limit"
        warnings.warn(why, CorruptResults, stacklevel=2)
        return None
    except ValueError as exc:
        warnings.warn(f"skipped {where}: {exc}", CorruptResults, stacklevel=2)
        return None
    if not isinstance(summary, dict) or summary.get("version") != VERSION:
        why = f"skipped {where}: not a version {VERSION} scan summary"
        warnings.warn(why, CorruptResults, stacklevel=2)
        return None
    return summary
