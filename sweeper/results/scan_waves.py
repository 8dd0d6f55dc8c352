"""A scan's finished waves, `<results>/_runs/<run_id>.waves.json` beside its record: each
wave's outcomes as the scan's driver wrote them when the wave ended (`scan.waves` gives them
meaning), so that a resumed scan replays them instead of measuring them again. One JSON line
a wave, appended as it ends: rewriting the whole file at every wave wrote over 100 GB in a
scan of 1024 nodes' every pair (some 1100 waves, 528 292 outcomes of about 420 bytes).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweeper.errors import CorruptResults, ResultsUnwritable
from sweeper.results.files import append_bytes, read_bounded, run_name, write_text
from sweeper.results.records import RECORDS_DIR


def path(results: Path, run_id: str) -> Path:
    return Path(results) / RECORDS_DIR / f"{run_name(run_id)}.waves.json"


# The most a waves file may hold: a scan of 1024 nodes' every pair writes about 220 MB.
WAVES_LIMIT_BYTES = 2**30


def save(results: Path, run_id: str, waves: Sequence[dict[str, Any]]) -> Path:
    """The scan's finished waves so far, written whole or not at all (the first, or where a
    resumed scan's policy gave another wave than the one on file: the waves after it go)."""
    text = "".join(json.dumps(wave) + "\n" for wave in waves)
    try:
        return write_text(path(results, run_id), text)
    except OSError as exc:
        raise ResultsUnwritable.of(results, exc) from None


def append(results: Path, run_id: str, wave: dict[str, Any]) -> Path:
    """One more finished wave, a line appended to the waves on file (and fsync'd); the first
    is written as `save` writes. A line a killed writer tore is skipped by `load`."""
    try:
        append_bytes(path(results, run_id), (json.dumps(wave) + "\n").encode())
    except FileNotFoundError:
        return save(results, run_id, [wave])
    except OSError as exc:
        raise ResultsUnwritable.of(results, exc) from None
    return path(results, run_id)


def load(results: Path, run_id: str) -> list[dict[str, Any]]:
    """The scan's finished waves; none for a scan that finished none, or a file whose lines
    are not such waves (skipped with a CorruptResults warning naming it: its waves run
    again). A last line that does not parse is a wave a killed writer tore: left out."""
    where = path(results, run_id)
    try:
        lines = read_bounded(where, WAVES_LIMIT_BYTES).splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        warnings.warn(f"skipped {where}: {exc}", CorruptResults, stacklevel=2)
        return []
    waves: list[Any] = []
    for i, line in enumerate(lines):
        try:
            waves.append(json.loads(line))
        except (ValueError, RecursionError) as exc:
            if i == len(lines) - 1 and waves:
                break
            warnings.warn(f"skipped {where}: line {i + 1}: {exc}", CorruptResults, stacklevel=2)
            return []
    if not all(isinstance(w, dict) for w in waves):
        warnings.warn(f"skipped {where}: not a list of waves", CorruptResults, stacklevel=2)
        return []
    return waves
