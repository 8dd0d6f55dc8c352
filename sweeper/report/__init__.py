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
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.errors import BadInput

if TYPE_CHECKING:
    from sweeper.results.records import RunRecord

_LIBRARIES = ("plotly", "jinja2")


def require() -> None:
    """BadInput, before anything runs, when the report's libraries are not installed."""
    missing = [name for name in _LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        raise BadInput(
            f"the HTML report needs {' and '.join(missing)}",
            hint="install sweeper with its report extra (pip install '.[report]' in its "
            "clone), or run with --no-report",
        )


def directory(results: Path, reports_dir: Path | None = None) -> Path:
    """Where reports go: `reports_dir`, else reports/ beside the results directory (./reports
    for ./results); a nightly run's JSON summary goes there too."""
    return Path(reports_dir) if reports_dir else Path(results).parent / "reports"


def run_directory(results: Path, record: RunRecord | None) -> Path:
    """The reports directory a run of `results` wrote to, by its record: its --reports-dir,
    else reports/ beside the results."""
    own = record.options.get("reports_dir") if record else None
    return directory(results, Path(own) if isinstance(own, str) else None)
