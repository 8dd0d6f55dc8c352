"""The report page as HTML (the browser test opens it): self-contained, escaped, every
section with data present, and only those."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sweeper.report import build, runs
from tests import report_data

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    report_data.write_run(root, "base", slow=0.8)
    report_data.write_run(root, "new")
    return root


def _sections(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', page)


def _without_plotly(page: str) -> str:
    from plotly.offline import get_plotlyjs

    bundle = get_plotlyjs()
    assert page.count(bundle) == 1
    return page.replace(bundle, "")


def test_every_section_with_data_is_there_in_reading_order(results: Path) -> None:
    page = build.write(results, "new", results.parent / "new.html", baseline="base").read_text()
    assert _sections(page) == [
        "run",
        "status",
        "topology",
        "operations",
        "peaks",
        "p2p",
        "algorithms",
        "composites",
        "experiments",
        "max-size",
        "fits",
        "baseline",
    ]


def test_sections_without_data_are_left_out(results: Path) -> None:
    rows = runs.rows(results, "new")
    collectives = rows[(rows["op"] == "all_gather")]
    page = build.render(collectives, None)
    assert _sections(page) == ["run", "status", "operations", "peaks", "max-size", "fits"]


def test_plotly_is_inlined_once_and_nothing_points_outside(results: Path) -> None:
    page = build.write(results, "new", results.parent / "new.html", baseline="base").read_text()
    ours = _without_plotly(page)
    assert "http://" not in ours
    assert "https://" not in ours
    assert "//cdn" not in ours
    assert re.findall(r'\b(?:src|href)="([^"#][^"]*)"', ours) == []
    assert ours.count('<script type="application/json" class="figure-data">') >= 10


def test_a_shared_plotly_file_serves_many_pages(results: Path, tmp_path: Path) -> None:
    js = tmp_path / "archive" / "js"
    first = build.write(results, "new", tmp_path / "archive" / "a.html", js_dir=js)
    second = build.write(results, "base", tmp_path / "archive" / "2026" / "b.html", js_dir=js)
    assert (js / build.PLOTLY_JS).stat().st_size > 1_000_000
    assert '<script src="js/plotly.min.js"></script>' in first.read_text()
    assert '<script src="../js/plotly.min.js"></script>' in second.read_text()
    assert first.stat().st_size < 1_000_000


def test_text_from_the_cluster_is_escaped(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1", host=HOSTILE, error=f"</script>{HOSTILE}")
    page = _without_plotly(build.write(tmp_path, "r1", tmp_path / "r1.html").read_text())
    assert "<script>window" not in page
    assert "<img" not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    figures = re.findall(r'class="figure-data">(.*?)</script>', page, re.DOTALL)
    assert figures
    for figure in figures:
        assert "<" not in figure
        json.loads(figure)


def test_peaks_are_a_share_of_the_nvlink_peak(results: Path) -> None:
    page = build.write(results, "new", results.parent / "new.html").read_text()
    peaks = page[page.index('<section id="peaks">') : page.index('<section id="p2p">')]
    row = re.search(r"<td>all_reduce</td>(.*?)</tr>", peaks, re.DOTALL)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    # 18 NVLinks x 26.5625 GB/s; all_reduce's busbw at 512 MiB is 354 GB/s
    assert cells[-5:-2] == ["NVLink", "478", "74"]


def test_the_default_page_goes_beside_the_results(tmp_path: Path) -> None:
    assert build.default_output(Path("results"), "r1") == Path("reports/r1.html")
    assert build.default_output(tmp_path / "results", "r1") == tmp_path / "reports" / "r1.html"
