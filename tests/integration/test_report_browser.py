"""Reports opened in headless Chromium (Debian's chromium, driven by Playwright): every
section there with its figures drawn, no console error, no request beyond the page's own
files, and text from the cluster shown as text."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner, Result

from sweeper.cli import app
from sweeper.report import browser, build
from sweeper.results import records
from sweeper.scan.verdict import Subject
from tests import report_data, scan_data
from tests.cli_runs import Runs
from tests.synthetic import History, every_series

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytest.importorskip("playwright.sync_api", reason="needs Playwright for Python (the dev extra)")

SIX_MB = 6 * 10**6
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
CPU_SECTIONS = (
    "run",
    "status",
    "topology",
    "operations",
    "peaks",
    "algorithms",
    "composites",
    "max-size",
    "fits",
    "baseline",
)
GPU_SECTIONS = (
    "topology",
    "gpus",
    "operations",
    "p2p",
    "algorithms",
    "nccl-algo",
    "host",
    "experiments",
    "baseline",
)


@dataclass
class Visit:
    """What a page did in the browser."""

    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sections: dict[str, dict[str, int]] = field(default_factory=dict)
    text: str = ""
    pwned: object = None
    then: str = ""  # what visit's `then` read of the page


_SECTIONS = """() => Object.fromEntries([...document.querySelectorAll("main > section")].map(
  (s) => [s.id, {
    figures: s.querySelectorAll("[data-figure]").length,
    drawn: [...s.querySelectorAll("[data-figure]")].filter(
      (f) => f.classList.contains("js-plotly-plot") && f.querySelector(".main-svg")).length,
    traces: s.querySelectorAll(".js-plotly-plot g.trace, .js-plotly-plot .hm").length,
    tables: s.querySelectorAll("table").length,
    content: s.querySelectorAll("table, dl, p").length,
  }]))"""


def visit(chromium: Path, page_file: Path, then: Callable[[Page], str] | None = None) -> Visit:
    """`page_file` in a Chromium of its own (the product's browser.page), closed after."""
    with browser.page(chromium) as page:
        return _seen(page, page_file, then)


def _seen(page: Page, page_file: Path, then: Callable[[Page], str] | None) -> Visit:
    seen = Visit()
    page.on("request", lambda request: seen.requests.append(request.url))
    page.on("console", lambda m: seen.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: seen.errors.append(str(exc)))
    # Anything that is not one of the page's files fails, so a stray fetch cannot pass.
    page.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith("file://") else route.abort()
        ),
    )
    browser.show(page, page_file)
    seen.sections = page.evaluate(_SECTIONS)
    seen.text = page.inner_text("body")
    seen.pwned = page.evaluate("() => window.__pwned")
    seen.then = then(page) if then else ""
    return seen


@dataclass(frozen=True)
class OneChromium:
    """One Chromium, started with the product's arguments, for the module's visits (each
    start costs seconds of CPU), each in a browser context of its own: a fresh profile that
    sees only its page's requests and console errors. Playwright runs in a thread of its own,
    as its sync API starts once a thread and the screenshot test's `sweeper report` starts it
    in the test's."""

    thread: ThreadPoolExecutor
    launched: Browser

    def visit(self, page_file: Path, then: Callable[[Page], str] | None = None) -> Visit:
        return self.thread.submit(self._visit, page_file, then).result()

    def _visit(self, page_file: Path, then: Callable[[Page], str] | None) -> Visit:
        context = self.launched.new_context(viewport=browser.VIEWPORT)  # type: ignore[arg-type]
        try:
            return _seen(context.new_page(), page_file, then)
        finally:
            context.close()


def _launch(chromium: Path, stack: ExitStack) -> Browser:
    from playwright.sync_api import sync_playwright

    pw = stack.enter_context(sync_playwright())
    launched = pw.chromium.launch(
        executable_path=str(chromium), headless=True, args=list(browser.CHROMIUM_ARGS)
    )
    stack.callback(launched.close)
    return launched


@pytest.fixture(scope="module")
def one_chromium(chromium: Path) -> Iterator[OneChromium]:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="chromium") as thread:
        stack = ExitStack()
        try:
            yield OneChromium(thread, thread.submit(_launch, chromium, stack).result())
        finally:
            thread.submit(stack.close).result()


def assert_drawn(seen: Visit, expected: tuple[str, ...]) -> None:
    assert seen.errors == []
    assert set(expected) <= set(seen.sections)
    for name, section in seen.sections.items():
        assert section["drawn"] == section["figures"], name
        assert section["traces"] >= section["figures"], name
        assert section["figures"] or section["content"], name


@pytest.fixture(scope="module")
def cpu_report(cli_runs: Runs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real small sweeps (gloo ranks on a local Ray, tests/cli_runs.py's), the second's
    report against the first."""
    page = tmp_path_factory.mktemp("cpu") / "report.html"
    return build.write(cli_runs.results, cli_runs.second, page, baseline=cli_runs.first)


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic 4x H200 run (p2p matrices, algorithms, MoE, each GPU's NVML readings
    and host copies) against a faster one."""
    root = tmp_path_factory.mktemp("gpu")
    report_data.write_run(root / "results", "base", slow=0.8)
    report_data.write_run(root / "results", "new", health=True)
    return build.write(root / "results", "new", root / "report.html", baseline="base")


def test_a_real_sweeps_report_draws_every_section_offline(
    one_chromium: OneChromium, cpu_report: Path
) -> None:
    seen = one_chromium.visit(cpu_report)
    assert seen.requests == [cpu_report.resolve().as_uri()]
    assert_drawn(seen, CPU_SECTIONS)
    assert seen.sections["operations"]["figures"] == 5
    assert seen.sections["composites"]["figures"] == 1
    assert seen.sections["baseline"]["figures"] == 1
    assert cpu_report.stat().st_size < SIX_MB


# Each figure's box (inside its border) and plot as drawn, and its layout's height
_SIZES = """() => [...document.querySelectorAll("[data-figure]")].map((f) => [
  f.clientHeight, f.querySelector(".main-svg").getBoundingClientRect().height,
  f.querySelector(".main-svg").getBoundingClientRect().width,
  JSON.parse(f.nextElementSibling.textContent).layout.height])"""
# Every figure redrawn to its container's new width
_REDRAWN = """() => [...document.querySelectorAll("[data-figure]")].every((f) =>
  Math.abs(f.querySelector(".main-svg").getBoundingClientRect().width - f.clientWidth) < 2)"""


def _resized(page: Page) -> str:
    """Each figure's box and plot before and after the window narrows, against its layout's
    height (plotly takes the box's size on a resize: a box of no height of its own shrank to
    its min-height, 120 px, and cut the plot off)."""
    before = page.evaluate(_SIZES)
    page.set_viewport_size({"width": 900, "height": 700})
    page.wait_for_function(_REDRAWN, timeout=30_000)
    after = page.evaluate(_SIZES)
    wrong = [
        (i, old, new)
        for i, (old, new) in enumerate(zip(before, after, strict=True))
        if not (old[0] == old[1] == new[0] == new[1] == old[3] and new[2] < old[2])
    ]
    return f"{len(after)} figures, wrong after the resize: {wrong}"


def test_gpu_sections_draw_matrices_and_algorithm_tables_and_keep_their_height_on_resize(
    one_chromium: OneChromium, gpu_report: Path
) -> None:
    seen = one_chromium.visit(gpu_report, _resized)
    drawn = sum(section["figures"] for section in seen.sections.values())
    assert drawn >= 16
    assert seen.then == f"{drawn} figures, wrong after the resize: []"
    assert seen.requests == [gpu_report.resolve().as_uri()]
    assert_drawn(seen, GPU_SECTIONS)
    assert seen.sections["p2p"]["figures"] == 6  # p2p uni, bi, copy uni: bandwidth, latency
    assert seen.sections["algorithms"]["tables"] == 2  # all_reduce, all_to_all
    assert "n0 GPU2 -> n0 GPU3" in seen.text  # the weak pair, in the outlier table
    assert "NV18" in seen.text
    assert "native [algo=Ring]" in seen.text  # a candidate, named without its operation
    assert "route: NVLink (18 links). n0 GPU2: SM clock 1.41 GHz against 1.98 GHz" in seen.text
    assert "PCIe link x8 of x16" in seen.text


def test_a_swept_nccl_variable_gets_a_section_of_figures_and_best_value_tables(
    one_chromium: OneChromium, tmp_path: Path
) -> None:
    report_data.write_run(tmp_path / "results", "r1", knobs=True)
    page = build.write(tmp_path / "results", "r1", tmp_path / "r1.html")
    seen = one_chromium.visit(page)
    assert_drawn(seen, ("nccl-algo", "nccl-proto"))
    proto = seen.sections["nccl-proto"]
    assert proto["figures"] == proto["tables"] == 2  # all_reduce and all_gather
    assert proto["traces"] >= 2 * 3  # default, LL, Simple in each
    assert "NCCL_PROTO: all_reduce on nvlink x4, bfloat16" in seen.text
    assert "default busbw GB/s" in seen.text


def test_a_script_in_a_host_name_is_shown_as_text(
    one_chromium: OneChromium, tmp_path: Path
) -> None:
    report_data.write_run(tmp_path / "results", "r1", host=HOSTILE, error=f"</script>{HOSTILE}")
    page = build.write(tmp_path / "results", "r1", tmp_path / "r1.html")
    seen = one_chromium.visit(page)
    assert seen.pwned is None
    assert seen.errors == []
    assert HOSTILE in seen.text  # hosts, the topology caption, the error, the NCCL variable
    assert seen.text.count(HOSTILE) >= 4
    assert seen.requests == [page.resolve().as_uri()]


def _hover_first_pair(page: Page) -> str:
    """What the fleet map (16 nodes) shows on hover over its first row's second cell."""
    heatmap = page.locator("#fleet .hm image")
    heatmap.scroll_into_view_if_needed()
    box = heatmap.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 1.5 / 16, box["y"] + box["height"] * 0.5 / 16)
    return str(page.locator("#fleet .hoverlayer .hovertext").text_content())


def test_a_scans_fleet_section_draws_its_map_and_lists_the_condemned(
    one_chromium: OneChromium, tmp_path: Path
) -> None:
    """A simulated scan's rows, record and summary written as a run, no cluster: 16 nodes,
    a slow node, a slow link, a dead node and a slow GPU."""
    scan = scan_data.scanned(16, 2, strategy=scan_data.ADAPTIVE)
    scan_data.write_scan(tmp_path / "results", scan)
    page = build.write(tmp_path / "results", scan.run_id, tmp_path / "scan.html")
    seen = one_chromium.visit(page, _hover_first_pair)
    assert seen.requests == [page.resolve().as_uri()]
    assert_drawn(seen, ("run", "fleet", "status"))
    assert list(seen.sections)[:2] == ["run", "fleet"]
    fleet = seen.sections["fleet"]
    assert fleet["figures"] == 2  # the map and the timeline
    # the fleet's findings first, condemned, stages: with the slow GPU named beside proven GPUs
    # of other nodes (73290ea), nothing is left unconfirmed and its node is healthy
    assert fleet["tables"] == 3
    assert seen.text.index("The fleet as a whole") < seen.text.index("Healthy: 14 of 16")
    # a condemned node's GPUs go with it; the faults' nodes are drawn by the seed
    gone = {v.nodes[0] for v in scan.verdicts if v.subject is Subject.NODE and v.condemned}
    for v in scan.verdicts:
        if v.condemned and not (v.subject is Subject.GPU and v.nodes[0] in gone):
            assert v.evidence in seen.text
    assert "Healthy: 14 of 16 nodes" in seen.text
    # the first pair the screen's plane put together: two hosts, their health, their figure
    pair = r"host\d{4} healthyhost\d{4} healthybest busbw together: [\d.]+ GB/s"
    assert re.fullmatch(pair, seen.then), seen.then


def test_a_scan_of_one_node_shows_a_table_of_it_not_a_one_cell_map(
    one_chromium: OneChromium, tmp_path: Path
) -> None:
    scan = scan_data.scanned(1, 2, faults=(), strategy=scan_data.ADAPTIVE)
    scan_data.write_scan(tmp_path / "results", scan)
    page = build.write(tmp_path / "results", scan.run_id, tmp_path / "one.html")
    seen = one_chromium.visit(page)
    assert seen.requests == [page.resolve().as_uri()]
    assert_drawn(seen, ("run", "fleet", "status"))
    assert seen.sections["fleet"]["figures"] == 0
    (host,) = (n.host for n in scan.fleet.nodes)
    assert re.search(rf"\n{host}\thealthy\t[\d.]+\n", seen.text), seen.text


def test_pages_sharing_one_plotly_file_load_only_it(
    one_chromium: OneChromium, tmp_path: Path
) -> None:
    report_data.write_run(tmp_path / "results", "r1", health=True)
    page = build.write(
        tmp_path / "results", "r1", tmp_path / "site" / "r1.html", js_dir=tmp_path / "js"
    )
    seen = one_chromium.visit(page)
    shared = tmp_path / "js" / build.plotly_js_name()
    assert seen.requests == [page.resolve().as_uri(), shared.as_uri()]
    assert_drawn(seen, GPU_SECTIONS[:-1])


def test_nightly_pages_share_one_plotly_file_and_each_shows_its_judgment(
    one_chromium: OneChromium, tmp_path: Path
) -> None:
    """Ten synthetic nights, each judged by `sweeper nightly --judge` (the nightly's own
    path from a night's page, as the sweep wrote it, to its judgment); the last two slower
    in one series: two regressions on the last night."""
    results, reports = tmp_path / "results", tmp_path / "reports"
    series = every_series(groups=1, ops=2, dtypes=1)
    history = History(results, series, noise=0.01)
    nights = history.nights(10, lambda night, s: 1.25 if night >= 8 and s == series[0] else 1.0)
    for run_id in nights:
        records.save(results, records.RunRecord(run_id, "sweeper nightly", {}, (), "complete"))
        if run_id in nights[-2:]:  # as the sweep writes a night's page, before its judgment
            build.write(results, run_id, reports / f"{run_id}.html", js_dir=reports)
        judged = CliRunner().invoke(app, ["nightly", "--judge", run_id, "--results", str(results)])
        assert judged.exit_code == (1 if run_id == nights[-1] else 0), judged.output
    shared = reports / build.plotly_js_name()
    assert sorted(reports.glob("*.js")) == [shared]
    for run_id in nights[-2:]:
        page = reports / f"{run_id}.html"
        assert page.stat().st_size < 100_000  # plotly.js is 4.8 MB of it inlined
        seen = one_chromium.visit(page)
        assert seen.requests == [page.resolve().as_uri(), shared.as_uri()]
        assert_drawn(seen, ("run", "nightly", "baseline"))
    assert "2 regression(s)" in seen.text
    compared = rf"compared with\s+9 earlier nightly runs, {nights[0]} to {nights[-2]}"
    assert re.search(compared, seen.text)
    figure = rf"{re.escape(series[0].name)}\tpeak busbw @1G\t[\d.]+ GB/s\t[\d.]+ GB/s"
    assert re.search(figure, seen.text)  # tonight's, then its baseline


def _screenshot(tmp_path: Path, chromium: Path) -> Result:
    """`sweeper report --screenshot` of the synthetic run: (result, png)."""
    report_data.write_run(tmp_path / "results", "r1")
    results, page, png = tmp_path / "results", tmp_path / "r1.html", tmp_path / "r1.png"
    args = ["--results", str(results), "-o", str(page), "--screenshot", str(png)]
    return CliRunner().invoke(app, ["report", *args, "--chromium", str(chromium)])


def test_report_saves_a_screenshot(chromium: Path, tmp_path: Path) -> None:
    result = _screenshot(tmp_path, chromium)
    assert result.exit_code == 0, result.output
    png = tmp_path / "r1.png"
    assert result.stdout.splitlines()[-1] == f"screenshot: {png}"
    header = png.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(header[16:20], "big") == browser.VIEWPORT["width"]
    assert int.from_bytes(header[20:24], "big") > 3000  # the whole page, not the window


def test_a_screenshot_without_chromium_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no-chromium"
    result = _screenshot(tmp_path, missing)
    assert result.exit_code == 2
    assert result.stderr.strip() == f"sweeper: error: no Chromium executable at {missing}"
    assert not (tmp_path / "r1.html").exists()
