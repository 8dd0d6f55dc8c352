"""The report of a run with no GPU reads calmly: expected skips grey, NVML's absence said
once in words, no NCCL variables for gloo, outliers with one explanation in one line, a
best algorithm only where it beats the others' spread, and fits that do not fit say so."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest

from sweeper.analysis import ties
from sweeper.report import build, page
from sweeper.report.blocks import Cell, Figure, Section, Table, Text
from sweeper.report.sections.alternatives import algorithms
from sweeper.report.sections.collectives import alpha_beta, operations, peaks
from sweeper.report.sections.decisions import start_up
from sweeper.report.sections.run import no_gpus, run_header, status, topology
from sweeper.report.view import RunView
from sweeper.results.load import frame
from tests import report_data

NCCL_TABLE = "NCCL variables of each actor set"


def _view(spread: float = 0.5) -> RunView:
    rows = frame(list(report_data.cpu_rows("cpu", spread)))
    return RunView.of(rows, report_data.cpu_record("cpu"))


@pytest.fixture(scope="module")
def view() -> RunView:
    return _view()


def _tables(section: Section | None) -> list[Table]:
    assert section is not None
    return [block for block in section.blocks if isinstance(block, Table)]


def _texts(section: Section | None) -> list[str]:
    assert section is not None
    return [block.text for block in section.blocks if isinstance(block, Text)]


def _column(table: Table, name: str) -> list[Cell]:
    at = table.columns.index(name)
    return [row[at] for row in table.rows]


def test_expected_skips_are_grey_and_failures_still_red(view: RunView) -> None:
    (table,) = _tables(status(view))
    assert {(c.text, c.css) for c in _column(table, "status")} == {("skipped", "muted")}
    assert _texts(status(view)) == ["Every point that can run here ran; 2 cannot, each saying why."]
    failed = view.rows.assign(status=view.rows["status"].replace("skipped", "timeout"))
    (table,) = _tables(status(RunView.of(failed, view.record)))
    assert {c.css for c in _column(table, "status")} == {"bad"}
    assert _texts(status(RunView.of(failed, view.record))) == []


def test_nvml_absence_is_said_once_in_words(view: RunView) -> None:
    page = html.unescape(build.render(view.rows, view.record))
    words = "no GPUs: the NVIDIA driver's library (NVML) is not installed"
    assert page.count(words) == 1
    assert "LibraryNotFound" not in page
    assert _texts(topology(view)) == [f"n0 cpu-box: {words}."]


def test_nvml_reasons_read_as_words() -> None:
    assert no_gpus("NVMLError_DriverNotLoaded: Driver Not Loaded") == (
        "no GPUs: the NVIDIA driver is not loaded"
    )
    assert no_gpus("No module named 'pynvml'") == "no GPUs: nvidia-ml-py is not installed"
    assert no_gpus("NVMLError_Unknown: Unknown Error") == (
        "no GPUs: NVML did not start (NVMLError_Unknown: Unknown Error)"
    )
    assert no_gpus(None) == "no GPUs seen by NVML"


def test_a_gloo_run_has_no_nccl_variables_and_an_nccl_run_has_them(view: RunView) -> None:
    assert NCCL_TABLE not in [t.caption for t in _tables(run_header(view))]
    gpu = frame(list(report_data.gpu_rows("gpu")))
    assert NCCL_TABLE in [t.caption for t in _tables(run_header(RunView.of(gpu, None)))]


def test_outliers_with_the_same_why_are_one_line_with_their_count(view: RunView) -> None:
    (table,) = _tables(operations(view))
    (line,) = table.rows
    cells = dict(zip(table.columns, (c.text for c in line), strict=True))
    assert cells["points"] == "4"  # the native call's odd sizes but the last
    assert cells["operation"] == "all_reduce"
    assert cells["size"] == "32B to 128K"
    assert cells["why"].startswith("no GPU readings at this point")


def test_a_lone_outlier_keeps_its_own_line(view: RunView) -> None:
    rows = view.rows
    native = (rows["algorithm"] == "native") & rows["size_bytes"].isin([32, 512, 8192])
    smooth = rows.assign(time_us=rows["time_us"].where(~native, rows["time_us"] / 3))
    (table,) = _tables(operations(RunView.of(smooth, view.record)))
    (line,) = table.rows
    texts = [c.text for c in line]
    assert texts[:6] == ["1", "cpu:n0r0,1", "all_reduce", "float32", "eager", "128K"]
    assert float(texts[6].replace(",", "")) > 2 * float(texts[7].replace(",", ""))


def test_noisy_blocks_make_a_tie_not_a_best(view: RunView) -> None:
    (table,) = _tables(algorithms(view))
    best = _column(table, "best")
    assert {c.text for c in best} == {"tie"}
    assert all(c.css == "muted" and c.title for c in best)
    assert not any("best" in c.css for row in table.rows for c in row)
    # where the native call is in the tie, a speedup over it means nothing
    with_native = [i for i, c in enumerate(best) if "native" in c.title]
    assert with_native
    assert {_column(table, "speedup")[i].text for i in with_native} == {"-"}


def test_tight_blocks_name_the_best() -> None:
    (table,) = _tables(algorithms(_view(spread=0.0)))
    best = [c.text for c in _column(table, "best")]
    assert "tie" not in best
    assert {"native", "reduce_scatter+all_gather"} <= set(best)  # slow odd sizes: a composite
    marked = [c.text for row in table.rows for c in row if "best" in c.css]
    assert len(marked) == len(table.rows)


def test_ties_lists_the_candidates_within_the_bests_spread(view: RunView) -> None:
    found = ties(view.rows, "all_reduce").set_index("size_bytes")
    assert found.loc[8, "best"] == "all_reduce"
    assert set(found.loc[8, "tied"]) == {
        "all_reduce (reduce_scatter+all_gather)",
        "all_reduce (reduce+broadcast)",
    }
    clear = ties(_view(spread=0.0).rows, "all_reduce")
    assert clear["tied"].map(len).eq(0).all()


def test_rows_without_blocks_compete_on_their_own_busbw(view: RunView) -> None:
    bare = view.rows.assign(time_us_blocks=pd.Series([None] * len(view.rows), dtype=object))
    assert ties(bare, "all_reduce")["tied"].map(len).eq(0).all()


def test_fits_with_a_large_median_error_say_so(view: RunView) -> None:
    (line,) = _texts(alpha_beta(view))
    assert re.match(r"1 of 3 fits have a median error above 25%", line)
    gpu = frame(list(report_data.gpu_rows("gpu")))
    assert _texts(alpha_beta(RunView.of(gpu, None))) == []


def _words(section: Section | None) -> str:
    """Everything a section says: its intro, texts, captions and cells."""
    assert section is not None
    said = [section.intro, *_texts(section)]
    for table in _tables(section):
        said += [table.caption, *table.columns]
        said += [cell.text for row in table.rows for cell in row]
    return " ".join(said)


# What a run on NCCL names: the library, CUDA, CUDA graphs, NCCL's own columns (nccl_init_s).
# nccl-tests is the name of busbw's convention, which holds for gloo's ranks too.
_GPU_WORDS = re.compile(r"CUDA|NCCL|\bgraphs?\b|nccl(?!-tests)")


def _figure_words(section: Section) -> str:
    """Every text a section's figures hold: titles, axes, names, hover templates."""
    return " ".join(b.figure.to_json() for b in section.blocks if isinstance(b, Figure))


def test_no_section_of_a_gloo_runs_report_speaks_of_cuda_graphs_nccl_or_cuda(
    view: RunView,
) -> None:
    """CPU ranks have no CUDA graphs, NCCL, CUDA or driver: every section, its figures
    included, says what was timed, and the versions table leaves out what the run had none
    of."""
    assert set(view.rows["backend"]) == {"gloo"}
    found = page.sections(view)
    assert "start-up" in [section.id for section in found]  # gloo's own process groups
    for section in found:
        said = f"{section.title} {_words(section)} {_figure_words(section)}"
        assert not _GPU_WORDS.search(said), (section.id, _GPU_WORDS.findall(said))
    # a GPU run still says where its figures come from
    rows = frame(list(report_data.gpu_rows("r1")))
    gpu = RunView.of(rows, None)
    assert "CUDA-graph replays" in _words(peaks(gpu))
    assert "NCCL's communicator" in _words(start_up(RunView.of(_started(rows), None)))


def _started(rows: pd.DataFrame) -> pd.DataFrame:
    """The GPU run's rows with their group's start timed, as an NCCL run's rows have it."""
    return rows.assign(comm_start_s=0.5)
