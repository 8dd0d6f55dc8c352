"""Regenerates docs/report.png, the README's picture of a report: a sweep on CPU ranks (two
gloo ranks in an embedded Ray, as `sweeper run` runs on a laptop), its report opened in
headless Chromium as the browser tests open it, and the page saved from its top to the end
of the bandwidth and latency figures, 1280 pixels wide. Needs the `report` extra, Playwright
and a Chromium.

    python docs/screenshot.py                 # writes docs/report.png
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
SECTION = "operations"  # the report's section the picture ends with
# the section's bottom, in pixels from the page's top
_BOTTOM = "(id) => document.getElementById(id).getBoundingClientRect().bottom + window.scrollY"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("report.png"))
    parser.add_argument("--chromium", type=Path, default=None)
    args = parser.parse_args()
    chromium = browser.require(args.chromium)
    out = args.out.resolve()
    with tempfile.TemporaryDirectory(prefix="sweeper-screenshot-") as tmp:
        # the CLI in a folder of its own: results/ and reports/ there, the command as typed
        subprocess.run([sys.executable, "-m", "sweeper", *RUN], cwd=tmp, check=True)
        (page,) = Path(tmp, "reports").glob("*.html")
        with browser.page(chromium) as at:
            width = browser.VIEWPORT["width"]
            # a window taller than the picture: the figures are drawn once, at this size
            at.set_viewport_size({"width": width, "height": 4000})
            browser.show(at, page)
            bottom = round(at.evaluate(_BOTTOM, SECTION))
            at.screenshot(path=str(out), clip={"x": 0, "y": 0, "width": width, "height": bottom})
    print(f"{out}: {out.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
