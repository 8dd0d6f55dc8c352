"""The report's regret, energy and start-up sections opened in headless Chromium: each figure
drawn with its traces, no console error, on the recorded 4-H200 grid made one run's
(tests/unit/test_report_decisions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import sweeper
from sweeper.report import build
from tests.integration.test_report_browser import assert_drawn, visit
from tests.unit.test_regret import GRID
from tests.unit.test_report_decisions import FIRST, one_run, with_figures
from tests.unit.test_tune import write

pytest.importorskip("playwright.sync_api", reason="needs Playwright for Python (the dev extra)")


def test_the_decision_sections_draw_their_figures_in_chromium(
    chromium: Path, tmp_path: Path
) -> None:
    results = write(with_figures(one_run(sweeper.load(GRID))), tmp_path / "results")
    page = build.write(results, FIRST, tmp_path / "page.html")
    seen = visit(chromium, page)
    assert_drawn(seen, ("regret", "energy", "start-up"))
    assert seen.sections["regret"]["traces"] >= 3
    assert seen.sections["energy"]["traces"] >= 6
    assert seen.sections["start-up"]["tables"] == 1
