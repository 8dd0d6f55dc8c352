"""A scan's finished waves, `<results>/_runs/<run_id>.waves.json` beside its record: each
wave's outcomes as the scan's driver wrote them when the wave ended (`scan.waves` gives them
meaning), so that a resumed scan replays them instead of measuring them again.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweeper.errors import CorruptResults, ResultsUnwritable
from sweeper.results.files import read_bounded, run_name, write_text
from sweeper.results.records import RECORDS_DIR


def path(results: Path, run_id: str) -> Path:
    return Path(results) / RECORDS_DIR / f"{run_name(run_id)}.waves.json"


def save(results: Path, run_id: str, waves: Sequence[dict[str, Any]]) -> Path:
    """The scan's finished waves so far, written whole or not at all."""
    try:
        return write_text(path(results, run_id), json.dumps(list(waves)) + "\n")
    except OSError as exc:
        raise ResultsUnwritable.of(results, exc) from None


def load(results: Path, run_id: str) -> list[dict[str, Any]]:
    """The scan's finished waves; none for a scan that finished none, or a file that is not
    such a list (skipped with a CorruptResults warning naming it: its waves run again)."""
    where = path(results, run_id)
    try:
        waves = json.loads(read_bounded(where))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, RecursionError) as exc:
        warnings.warn(f"skipped {where}: {exc}", CorruptResults, stacklevel=2)
        return []
    if not isinstance(waves, list) or not all(isinstance(w, dict) for w in waves):
        warnings.warn(f"skipped {where}: not a list of waves", CorruptResults, stacklevel=2)
        return []
    return waves
