"""The HTML report of a run: `sweeper report`, and the end of `sweeper run`.

`build.write` renders a run of a results directory (read through `sweeper.results`, with its
run record: command line, options, topology) into one self-contained page; `view` works out
once what the sections read of a run's rows, `sections` turns that into what the page shows,
`figures` into plotly figures; `browser` opens a page in Chromium (screenshots). Only
`build`, `figures` and `browser` need the optional libraries (`sweeper-bench[report]`,
Playwright), so importing this package is cheap.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from sweeper.errors import BadInput
from sweeper.results.files import check_directory

_LIBRARIES = ("plotly", "jinja2")
# Room for a run's first batches, its record and a report; less is a disk about to fill.
MIN_FREE_BYTES = 16 * 2**20


def require() -> None:
    """BadInput, before anything runs, when the report's libraries are not installed."""
    missing = [name for name in _LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        raise BadInput(
            f"the HTML report needs {' and '.join(missing)}",
            hint="pip install 'sweeper-bench[report]', or run with --no-report",
        )


def directory(results: Path, reports_dir: Path | None = None) -> Path:
    """Where reports go: `reports_dir`, else reports/ beside the results directory (./reports
    for ./results); a nightly run's JSON summary goes there too."""
    return Path(reports_dir) if reports_dir else Path(results).parent / "reports"


def require_directory(path: Path, named: str) -> None:
    """BadInput, before anything is written, where directory `path` cannot be made or written:
    it, or the nearest of its parents that exists, is a file or is not writable (a read-only
    file system; permissions, except for root), a name in it is longer than its file system
    takes, that file system has less than MIN_FREE_BYTES free, a link on the way leads
    nowhere (dangling, or a loop), or sweeper must not write there (`files.check_directory`:
    another user's link or shared directory). `named` (the option and its value) starts the
    message."""
    # os.path.exists: False for a name too long to look up, where Path.exists raises
    chain = (path, *path.parents)
    found = next((i for i, p in enumerate(chain) if os.path.exists(p)), None)
    if found is None:
        return
    existing = chain[found]
    if found and os.path.islink(chain[found - 1]):  # it is there, and leads nowhere
        raise BadInput(f"{named}: {chain[found - 1]} is a link to nothing (dangling, or a loop)")
    if not existing.is_dir():
        raise BadInput(f"{named}: {existing} is not a directory")
    longest = os.pathconf(existing, "PC_NAME_MAX")
    too_long = next((part for part in path.parts if len(os.fsencode(part)) > longest), None)
    if too_long is not None:
        raise BadInput(f"{named}: a name over {longest} bytes ({too_long[:16]}...)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BadInput(f"{named}: {existing} is not writable")
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise BadInput(f"{named}: only {free // 1024} KiB free on {existing}'s file system")
    try:
        check_directory(existing)
    except BadInput as exc:
        raise BadInput(f"{named}: {exc}", hint=exc.hint) from None
