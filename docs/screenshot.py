"""Regenerates docs/report.png, the README's picture of a report: a report opened in headless
Chromium as the browser tests open it, and the page saved from its top to the end of its
first operation's bandwidth and latency figures, 1280 pixels wide. The report is a GPU run's,
brought back from the machine that ran it (`--page`), or where there is none a sweep on CPU
ranks made here (two gloo ranks in an embedded Ray, as `sweeper run` runs on a laptop). Needs
the `report` extra, Playwright and a Chromium.

    python docs/screenshot.py --page reports/RUN.html   # the default run on a GPU node
    python docs/screenshot.py                           # a CPU sweep made here
    python docs/screenshot.py --out report.png --chromium /path/to/chromium
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from sweeper.report import browser

# what the picture's run measured, as its record shows the command
RUN = ["run", "--world", "2", "--ops", "all_reduce,all_gather", "--max-size", "4M"]
SECTION = "operations"  # the report's section whose first figures end the picture
# the bottom of the section's first figure (its first operation's two), from the page's top
_BOTTOM = (
    "(id) => document.getElementById(id).querySelector('.js-plotly-plot')"
    ".getBoundingClientRect().bottom + window.scrollY"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("report.png"))
    parser.add_argument("--chromium", type=Path, default=None)
    parser.add_argument("--page", type=Path, default=None, help="a report to picture as it is")
    args = parser.parse_args()
    chromium = browser.require(args.chromium)
    out = args.out.resolve()
    if args.page is not None:
        _picture(chromium, args.page.resolve(), out)
    else:
        with tempfile.TemporaryDirectory(prefix="sweeper-screenshot-") as tmp:
            # the CLI in a folder of its own: results/ and reports/ there, the command as typed
            subprocess.run([sys.executable, "-m", "sweeper", *RUN], cwd=tmp, check=True)
            (page,) = Path(tmp, "reports").glob("*.html")
            _picture(chromium, page, out)
    print(f"{out}: {out.stat().st_size // 1024} KiB")


def _picture(chromium: Path, page: Path, out: Path) -> None:
    with browser.page(chromium) as at:
        width = browser.VIEWPORT["width"]
        # a window taller than the picture: the figures are drawn once, at this size
        at.set_viewport_size({"width": width, "height": 4000})
        browser.show(at, page)
        bottom = round(at.evaluate(_BOTTOM, SECTION))
        at.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": bottom})


if __name__ == "__main__":
    main()
