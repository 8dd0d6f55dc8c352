"""A run's report as one HTML page: sections -> jinja2 template -> file.

The page is self-contained: plotly.js is inlined once, gzipped and base64-encoded (the
browser inflates it with DecompressionStream), and every figure is a JSON document it
draws, so the file opens offline and loads nothing from anywhere. For archives of many
pages (a nightly's, always), `js_dir` writes one shared plotly-<version>.min.js there instead
and the pages point at it by a relative path. Autoescaping is on: text from the cluster is
shown as text.
"""

from __future__ import annotations

import base64
import functools
import gzip
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from sweeper.errors import BadInput, ResultsUnwritable
from sweeper.report import directory, page, run_directory
from sweeper.report.view import RunView
from sweeper.results import records, scans, summaries
from sweeper.results.files import (
    NotAFile,
    open_directory,
    read_bounded,
    require_directory,
    require_file,
    run_name,
    write_text,
)
from sweeper.results.load import resolve, run_rows

# Plotly's figure JSON goes inside <script> elements: these characters are written as JSON
# escapes, so no text from the cluster can close the element or open a comment.
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def default_output(results: Path, run_id: str, reports_dir: Path | None = None) -> Path:
    """<run_id>.html in `reports_dir`, else in reports/ beside the results directory
    (./reports for ./results)."""
    return directory(results, reports_dir) / f"{run_name(run_id)}.html"


def _figure_json(figure: Any) -> Markup:
    return Markup(figure.to_json().translate(_SCRIPT_SAFE))


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("sweeper.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["figure_json"] = _figure_json
    return env


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def plotly_js_name() -> str:
    """The shared script's file name, by plotly.js's version: a page keeps the plotly.js it
    was written with when a later sweeper's pages beside it take another."""
    from plotly.offline import get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js"


@functools.cache
def packed_plotly_js() -> str:
    """plotly.js gzipped and in base64, as the page carries it: 1.96 MB for plotly 7.1's
    4.82 MB (docs/measurements/cpu-2026-12-02.md). mtime 0: the same bytes every build."""
    return base64.b64encode(gzip.compress(_plotly_js().encode(), 9, mtime=0)).decode("ascii")


def render(
    df: pd.DataFrame,
    run: records.RunRecord | None,
    base: pd.DataFrame | None = None,
    plotly_src: str | None = None,
    scan: Mapping[str, Any] | None = None,
    nightly: Mapping[str, Any] | None = None,
) -> str:
    """The page for one run's rows (`base`: a baseline run's rows to compare with; `scan`:
    a fleet scan's summary; `nightly`: a nightly run's, its judgment).

    `plotly_src`: a relative path to the shared plotly.js instead of inlining it."""
    found = page.sections(RunView.of(df, run, base, scan, nightly))
    template = _environment().get_template("report.html.j2")
    return template.render(
        run_id=str(df["run_id"].iloc[0]),
        sections=found,
        plotly_src=plotly_src,
        plotly_packed=None if plotly_src else packed_plotly_js(),
    )


def _shared_js(js_dir: Path, page: Path) -> str:
    """Write plotly.js into js_dir (once: a page after the first finds it there, the same
    bytes) and return its path relative to the page."""
    target = js_dir / plotly_js_name()
    code = _plotly_js()
    try:
        same = read_bounded(target, limit=len(code.encode())) == code.encode()
    except (FileNotFoundError, NotAFile):  # none, or not plotly's: written anew
        same = False
    if not same:
        write_text(target, code)
    return Path(os.path.relpath(target.resolve(), page.parent.resolve())).as_posix()


def write(
    results: Path,
    run_id: str,
    output: Path | None = None,
    baseline: str | None = None,
    js_dir: Path | None = None,
    *,
    make_directory: bool = True,
    summaries_dir: Path | None = None,
) -> Path:
    """Write the report of `run_id` (or `latest`) of a results directory; returns its path.
    A nightly run's page has its judgment, from its summary in `summaries_dir` (else in the
    reports directory its run wrote to).

    Bad input (no such directory or run, a run id that is not one, a page or script path
    that a file or directory is in the way of, or that is not a regular file, and without
    `make_directory` a page whose directory is not there) raises BadInput before anything
    is written; a write the disk refuses (full), ResultsUnwritable, nothing half-written."""
    run_id = resolve(results, run_id)
    base_id = resolve(results, baseline) if baseline else None
    if output is not None and not make_directory and not os.path.lexists(output.parent):
        raise BadInput(f"-o {output}: no directory {output.parent}")
    output = output or default_output(results, run_id)
    if os.path.isdir(output):  # False for a name too long, which require_file names
        raise BadInput(f"-o {output} is a directory; -o names the page's file")
    require_directory(output.parent, f"-o {output}")
    require_file(output, f"-o {output}")
    if js_dir:
        require_directory(js_dir, f"--js {js_dir}")
        require_file(js_dir / plotly_js_name(), f"--js {js_dir}")
    df = run_rows(results, run_id)
    base = run_rows(results, base_id) if base_id else None
    record, scan = records.load(results, run_id), scans.load(results, run_id)
    judged = summaries.load(summaries_dir or run_directory(results, record), run_id)
    try:
        os.close(open_directory(output.parent))  # made, and judged, before --js points at it
        src = _shared_js(js_dir, output) if js_dir else None
        write_text(output, render(df, record, base, src, scan, judged))
    except OSError as exc:  # a disk that filled meanwhile: the page is whole or not there
        raise ResultsUnwritable(
            f"cannot write the report {output}: {exc.strerror or exc}",
            hint=f"the run's rows are kept in {results}; sweeper report {run_id} --results "
            f"{results} writes it once there is room",
        ) from None
    return output
