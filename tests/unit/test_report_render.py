"""The report page as HTML (the browser test opens it): self-contained, escaped, every
section with data present, and only those."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from sweeper.report import build
from sweeper.report.blocks import Facts, Figure, Text
from sweeper.report.sections.alternatives import composites
from sweeper.report.sections.run import run_header
from sweeper.report.view import RunView
from sweeper.results.load import frame, load, run_rows
from sweeper.results.records import RunRecord
from sweeper.topology import Node
from tests import report_data

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic run and a slower baseline, for the module: tests read it and write their
    pages elsewhere."""
    root = tmp_path_factory.mktemp("render") / "results"
    report_data.write_run(root, "base", slow=0.8)
    report_data.write_run(root, "new")
    return root


@pytest.fixture(scope="module")
def page(results: Path) -> str:
    """The run's page against its baseline, rendered once for the tests that only read it."""
    return build.write(results, "new", results.parent / "new.html", baseline="base").read_text()


def _sections(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', page)


def _without_plotly(page: str) -> str:
    bundle = build.packed_plotly_js()
    assert page.count(bundle) == 1
    return page.replace(bundle, "")


def test_plotly_rides_gzipped_so_the_page_weighs_less_than_plotly_js_alone(page: str) -> None:
    """The page carries plotly.js gzipped in base64 (2.05 MB for the synthetic 4-GPU run,
    where inlined as it is the page was 4.91 MB), and it inflates to plotly's own bundle."""
    from plotly.offline import get_plotlyjs

    bundle = get_plotlyjs().encode()
    (packed,) = re.findall(r'<script type="application/gzip;base64" id="plotly-js">([^<]+)<', page)
    assert gzip.decompress(base64.b64decode(packed)) == bundle
    assert len(page.encode()) < 0.5 * len(bundle)


def test_every_section_with_data_is_there_in_reading_order(page: str) -> None:
    assert _sections(page) == [
        "run",
        "status",
        "topology",
        "operations",
        "peaks",
        "p2p",
        "algorithms",
        "nccl-algo",  # the NCCL_ALGO variants: a swept variable's section
        "composites",
        "regret",  # NCCL's default against the settings measured beside it
        "experiments",
        "max-size",
        "fits",
        "baseline",
    ]


def test_sections_without_data_are_left_out(results: Path) -> None:
    rows = run_rows(results, "new")
    collectives = rows[(rows["op"] == "all_gather")]
    page = build.render(collectives, None)
    assert _sections(page) == ["run", "status", "operations", "peaks", "max-size", "fits"]


def test_plotly_is_inlined_once_and_nothing_points_outside(page: str) -> None:
    ours = _without_plotly(page)
    assert "http://" not in ours
    assert "https://" not in ours
    assert "//cdn" not in ours
    assert re.findall(r'\b(?:src|href)="([^"#][^"]*)"', ours) == []
    assert ours.count('<script type="application/json" class="figure-data">') >= 10


def test_a_shared_plotly_file_serves_many_pages(results: Path, tmp_path: Path) -> None:
    """Named by plotly.js's version, so a page keeps its own when a later sweeper's pages
    take another; written once, then found there, and written anew where it is not whole."""
    js = tmp_path / "archive" / "js"
    name = build.plotly_js_name()
    assert re.fullmatch(r"plotly-\d+\.\d+\.\d+\.min\.js", name)
    first = build.write(results, "new", tmp_path / "archive" / "a.html", js_dir=js)
    written = (js / name).stat()
    second = build.write(results, "base", tmp_path / "archive" / "2026" / "b.html", js_dir=js)
    assert written.st_size > 1_000_000
    assert (js / name).stat().st_ino == written.st_ino  # the same file, not written again
    assert [p.name for p in js.iterdir()] == [name]
    assert f'<script src="js/{name}"></script>' in first.read_text()
    assert f'<script src="../js/{name}"></script>' in second.read_text()
    assert first.stat().st_size < 1_000_000
    (js / name).write_text("cut short")
    build.write(results, "new", tmp_path / "archive" / "a.html", js_dir=js)
    assert (js / name).stat().st_size == written.st_size


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


def test_peaks_are_a_share_of_the_nvlink_peak(page: str) -> None:
    peaks = page[page.index('<section id="peaks">') : page.index('<section id="p2p">')]
    row = re.search(r"<td>all_reduce</td>(.*?)</tr>", peaks, re.DOTALL)
    assert row is not None
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    # 18 NVLinks x 26.5625 GB/s; all_reduce's busbw at 512 MiB is 354 GB/s, 98% of the
    # 361 GB/s nccl-tests measured on 4 H200 (scan.reference)
    assert cells[-6:-2] == ["NVLink", "478", "74", "98"]


def test_the_default_page_goes_beside_the_results(tmp_path: Path) -> None:
    assert build.default_output(Path("results"), "r1") == Path("reports/r1.html")
    assert build.default_output(tmp_path / "results", "r1") == tmp_path / "reports" / "r1.html"


def _section(page: str, id_: str) -> str:
    start = page.index(f'<section id="{id_}">')
    return page[start : page.index("</section>", start)]


def _cells(row: str) -> list[str]:
    return re.findall(r"<td[^>]*>([^<]*)</td>", row)


def _column(section: str, name: str) -> list[str]:
    """Every value of one column of a section's first table."""
    headers = re.findall(r"<th>([^<]*)</th>", section)
    at = headers.index(name)
    rows = re.findall(r"<tr>(<td.*?)</tr>", section, re.DOTALL)
    return [_cells(row)[at] for row in rows]


@pytest.fixture(scope="module")
def both_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run timed both ways (--launch graph,eager) beside a graph-only baseline."""
    root = tmp_path_factory.mktemp("both") / "results"
    report_data.write_run(root, "base", slow=0.8)
    report_data.write_run(root, "both", launches=report_data.BOTH)
    return root


@pytest.fixture(scope="module")
def both(both_results: Path) -> str:
    """The page of a run timed both ways (--launch graph,eager), against a graph-only run."""
    page = build.write(both_results, "both", both_results.parent / "both.html", baseline="base")
    return page.read_text()


def test_a_run_timed_both_ways_has_the_launch_cost_after_the_peaks(both: str) -> None:
    assert _sections(both)[4:7] == ["peaks", "launch", "p2p"]
    launch = _section(both, "launch")
    rows = {
        tuple(_cells(row)[:3]): _cells(row)[3:] for row in re.findall(r"<tr>(<td.*?)</tr>", launch)
    }
    # at 8 B: the graph time is the model's alpha, eager adds EAGER_US per call
    assert rows[("nvlink", "4", "all_reduce")] == ["8B", "35", "43", "8", "8", "7"]
    assert rows[("nvlink", "4", "all_reduce (reduce_scatter+all_gather)")][3:5] == ["16", "16"]
    assert rows[("nvlink", "2", "p2p (uni)")][3:] == ["8", "8", "1"]
    assert ("nvlink", "2", "copy (uni)") not in rows  # the copy engine is eager only
    assert "median to 64K us" in launch


def test_every_figure_and_table_says_which_launch_mode_it_shows(both: str) -> None:
    graph = '<p class="muted">Times: CUDA-graph replays (graph).</p>'
    for id_ in ("operations", "algorithms", "composites"):
        assert graph in _section(both, id_), id_
    assert (
        "Times: CUDA-graph replays (graph); eager calls from Python (eager) for copy uni."
        in _section(both, "p2p")
    )
    assert set(_column(_section(both, "peaks"), "launch")) == {"graph"}
    assert set(_column(_section(both, "fits"), "launch")) == {"graph"}
    assert set(_column(_section(both, "experiments"), "launch")) == {"graph"}
    assert "<dt>launch modes</dt><dd>graph, eager</dd>" in both
    baseline = _section(both, "baseline")
    assert "Launch modes: graph, eager; each point is compared" in baseline
    assert set(_column(baseline, "launch")) == {"graph"}  # the eager points: only in this run


def test_peaks_and_fits_read_graph_times_where_a_point_ran_both_ways(both: str) -> None:
    peaks = _section(both, "peaks")
    row = re.search(r"<td>all_reduce</td>(.*?)</tr>", peaks, re.DOTALL)
    assert row is not None
    assert _cells(row.group(1))[-2:] == ["35", "8B"]  # the graph time at 8 B, not 43
    fits = _section(both, "fits")
    row = re.search(r"<td>all_reduce</td>(.*?)</tr>", fits, re.DOTALL)
    assert row is not None
    assert _cells(row.group(1))[:2] == ["graph", "35"]  # alpha: the graph replay's


def test_rows_from_before_launch_modes_read_as_eager(results: Path) -> None:
    rows = frame(run_rows(results, "new").assign(launch=None))
    page = build.render(rows, None)
    assert "launch" not in _sections(page)
    assert '<p class="muted">Times: eager calls from Python (eager).</p>' in page
    assert set(_column(_section(page, "fits"), "launch")) == {"eager"}


def test_a_composite_is_against_the_native_call_in_its_own_launch_mode(
    both_results: Path,
) -> None:
    """The graph capture of one composite failed (eager rows only): it is against the native
    call's eager time, and says it is eager; the other against the native graph replay."""
    rows = run_rows(both_results, "both")
    failed = (rows["algorithm"] == "reduce_scatter+all_gather") & (rows["launch"] == "graph")
    section = composites(RunView.of(rows[~failed], None))
    assert section is not None
    line, figure = section.blocks
    assert isinstance(line, Text)
    assert line.text == (
        "Times: CUDA-graph replays (graph); eager calls from Python (eager) for "
        "all_reduce (reduce_scatter+all_gather)."
    )
    assert isinstance(figure, Figure)
    at_8_bytes = {trace.name.split(" ")[1]: trace.y[0] for trace in figure.figure.data}
    assert at_8_bytes["(reduce_scatter+all_gather)"] == pytest.approx(
        (35 + 8) / (79 + 16), rel=1e-4
    )
    assert at_8_bytes["(reduce+broadcast)"] == pytest.approx(35 / 85, rel=1e-4)


def _words(page: str, name: str) -> str:
    """A section's text, tags and figures taken out, entities read back."""
    start = page.index(f'<section id="{name}">')
    body = page[start : page.index("</section>", start)]
    body = re.sub(r"<script.*?</script>", "", body, flags=re.DOTALL)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


@pytest.fixture(scope="module")
def health(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The page of the 4x H200 run with each GPU's recorded NVML readings and host copies."""
    root = tmp_path_factory.mktemp("health")
    report_data.write_run(root, "h", health=True)
    return build.write(root, "h", root / "h.html").read_text()


def test_a_run_with_gpu_readings_has_the_gpus_and_host_sections(health: str) -> None:
    found = _sections(health)
    assert found[found.index("topology") + 1] == "gpus"
    assert found[found.index("p2p") + 1] == "host"


def test_each_outlier_gpu_has_its_why_line_and_its_peers_none(health: str) -> None:
    gpus = _words(health, "gpus")
    assert "n0 GPU1 192 1980 524 700 46 Gen5 x8 of Gen5 x16 PCIe link x8 of x16 n0 GPU2" in gpus
    assert (
        "SM clock 1.41 GHz against 1.98 GHz; throttle: power cap, sync boost (held to a slower "
        "GPU of its group); power 698 W at its 700 W cap; 67 °C against 46" in gpus
    )
    assert "NVLink: 41 replays, 3 CRC errors, 1 recovery in 1 of 192 points" in gpus  # GPU3
    assert "n0 GPU0 192 1980 524 700 46 Gen5 x16 of Gen5 x16 like its peers" in gpus


def test_the_host_table_gives_each_gpus_pcie_share_and_why_one_falls_short(health: str) -> None:
    host = _words(health, "host")
    # GPU, copy, size, alongside, pinned GB/s, % of peak, pageable GB/s, % of peak, link, why
    assert "n0 GPU0 h2d 256M 0 55.1 87 21 33 Gen5 x16 of Gen5 x16 like its peers" in host
    assert "n0 GPU1 h2d 256M 0 27.6 44 21 33 Gen5 x8 of Gen5 x16 PCIe link x8 of x16" in host
    # GPU2's clocks do not slow its copies: its host rows read like its peers'
    assert "n0 GPU2 h2d 256M 0 55.1 87 21 33 Gen5 x16 of Gen5 x16 like its peers" in host


def test_the_weak_pair_and_the_point_off_its_neighbours_say_why(health: str) -> None:
    p2p = _words(health, "p2p")
    assert "n0 GPU2 -> n0 GPU3 nvlink no 149 294 - route: NVLink (18 links). n0 GPU2: SM" in p2p
    operations = _words(health, "operations")
    assert (
        "all_reduce bfloat16 graph 2M 131 51 n0 GPU3: NVLink: 41 replays, 3 CRC errors, "
        "1 recovery" in operations
    )


def test_a_fanout_is_a_sentence_naming_each_destinations_route(tmp_path: Path) -> None:
    topology = report_data.TOPOLOGY.with_name("a100x4-nvlink-pairs.json")
    node = Node.from_record({**json.loads(topology.read_text()), "host": "a100"})
    report_data.write_fanout(tmp_path, "fan", node, {1: 4.3e3, 2: 53.3e3, 3: 8.5e3})
    run = RunRecord("fan", "sweeper run --copy-matrix", {}, (node,), ended="complete")
    p2p = _words(build.render(run_rows(tmp_path, "fan"), run), "p2p")
    assert (
        "n0 GPU0 copied 256M to n0 GPU1, n0 GPU2 and n0 GPU3 at once: to n0 GPU1 in 4.3 ms over "
        "NVLink (12 links); to n0 GPU2 in 53.3 ms over PCIe and the link between CPU sockets, "
        "no NVLink; to n0 GPU3 in 8.5 ms over PCIe and the link between CPU sockets, no NVLink."
    ) in p2p


def test_the_run_header_says_where_the_buffers_came_from(results: Path) -> None:
    df = load(results, "new")

    def buffers(frame: pd.DataFrame) -> str:
        facts = run_header(RunView.of(frame, None)).blocks[0]
        assert isinstance(facts, Facts)
        return dict(facts.items)["buffers"]

    assert buffers(df) == "torch's caching allocator"
    assert buffers(df.assign(registered=True)) == (
        "NCCL's allocator, registered with each group's communicators"
    )
    assert buffers(df.assign(gpu_model=None)) == "host memory (CPU ranks)"
