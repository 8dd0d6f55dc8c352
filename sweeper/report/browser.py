"""A report in headless Chromium, driven by Playwright for Python: screenshots, and what the
browser test looks at.

The system's Chromium is used (Debian's `chromium`; `--chromium PATH` or $SWEEPER_CHROMIUM
for another): nothing is downloaded, `playwright install` is never needed. Chromium runs
with its background networking off and a fresh profile, so the only requests a page makes
are its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sweeper.errors import BadInput, InfrastructureError
from sweeper.results.files import atomic_write, require_directory, require_file

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
VIEWPORT = {"width": 1280, "height": 900}
_DRAW_TIMEOUT_MS = 60_000
# Every figure container drawn by plotly, with its SVG in place.
_ALL_DRAWN = """() => {
  const figures = document.querySelectorAll("[data-figure]");
  return [...figures].every((f) => f.classList.contains("js-plotly-plot")
                                   && f.querySelector("svg.main-svg") !== null);
}"""


def find_chromium(path: Path | None = None) -> Path:
    """The Chromium to use: `path`, else $SWEEPER_CHROMIUM, else the first of chromium,
    chromium-browser, google-chrome on PATH. BadInput when there is none."""
    given = path or (
        Path(os.environ["SWEEPER_CHROMIUM"]) if os.environ.get("SWEEPER_CHROMIUM") else None
    )
    if given is not None:
        if not (given.is_file() and os.access(given, os.X_OK)):
            raise BadInput(f"no Chromium executable at {given}")
        return given
    for name in _NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    raise BadInput(
        "no Chromium found (looked for " + ", ".join(_NAMES) + " on PATH)",
        hint="apt-get install chromium, or give --chromium PATH",
    )


def require(path: Path | None = None) -> Path:
    """Chromium's path, once Playwright is known to be importable; BadInput otherwise."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise BadInput(
            "screenshots need Playwright for Python", hint="pip install playwright"
        ) from None
    return find_chromium(path)


@contextmanager
def page(chromium: Path) -> Iterator[Page]:
    """A blank page of a headless Chromium with a fresh profile, closed afterwards."""
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory(prefix="sweeper-chromium-") as profile,
        sync_playwright() as pw,
    ):
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=str(chromium),
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport=VIEWPORT,  # type: ignore[arg-type]
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def show(at: Page, html: Path) -> None:
    """Open a report and wait until plotly has drawn every figure."""
    at.goto(html.resolve().as_uri())
    at.wait_for_function(_ALL_DRAWN, timeout=_DRAW_TIMEOUT_MS)


def require_png(png: Path) -> None:
    """BadInput where a screenshot cannot be written at `png` (a file in the way of its
    directory, a name too long, a path that is not a regular file)."""
    require_directory(png.parent, f"--screenshot {png}")
    require_file(png, f"--screenshot {png}")


def screenshot(html: Path, png: Path, chromium: Path | None = None) -> Path:
    """A full-page PNG of a report, as a 1280-pixel-wide window shows it, written as every
    file of sweeper's is (`files.atomic_write`: no link planted at `png` is followed)."""
    executable = require(chromium)
    from playwright.sync_api import Error

    try:
        with page(executable) as at:
            show(at, html)
            image = at.screenshot(full_page=True)
    except Error as exc:  # Chromium would not start, or the page would not draw
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InfrastructureError(
            f"Chromium at {executable} could not show {html}: {first}"
        ) from None
    return atomic_write(png, lambda file: file.write(image))
