"""The run as the report's sections read it (report/view.py), from the synthetic 4x H200 run
timed both ways with each GPU's NVML readings (tests/report_data.py): each point's preferred
row picked once for the whole page, the GPUs' names, health and links worked out once."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sweeper.report import build, view
from sweeper.report.sections import collectives, pairs
from sweeper.report.view import LinkPeak, RunView
from sweeper.results import records
from sweeper.results.load import run_rows
from tests import report_data


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view")
    report_data.write_run(root, "r1", launches=report_data.BOTH, health=True)
    return root


@pytest.fixture(scope="module")
def rows(results: Path) -> pd.DataFrame:
    return run_rows(results, "r1")


@pytest.fixture(scope="module")
def run(results: Path, rows: pd.DataFrame) -> RunView:
    return RunView.of(rows, records.load(results, "r1"))


def _launches(frame: pd.DataFrame) -> dict[str, set[str]]:
    return {str(kind): set(part["launch"]) for kind, part in frame.groupby("kind")}


def test_a_report_picks_each_points_preferred_row_once_for_all_its_sections(
    rows: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    real, calls = view.preferred, []

    def counted(frame: pd.DataFrame) -> pd.DataFrame:
        calls.append(len(frame))
        return real(frame)

    monkeypatch.setattr(view, "preferred", counted)
    build.render(rows, None, rows)
    assert calls == [len(rows)]


def test_the_view_keeps_every_row_and_each_points_graph_row(
    rows: pd.DataFrame, run: RunView
) -> None:
    both = {"graph", "eager"}
    assert _launches(run.rows) == {
        kind: both for kind in ("collective", "composite", "copy", "experiment", "p2p")
    }
    # the copy engine's rows are eager only: those points keep them
    assert _launches(run.preferred) == {
        "collective": {"graph"},
        "composite": {"graph"},
        "copy": both,
        "experiment": {"graph"},
        "p2p": {"graph"},
    }
    assert len(run.preferred[run.preferred["kind"] != "copy"]) * 2 == len(
        rows[rows["kind"] != "copy"]
    )
    assert _launches(run.collectives) == {"collective": both, "composite": both}
    assert len(run.preferred_collectives) * 2 == len(run.collectives)
    ok = run.preferred_collectives["status"] == "ok"
    assert run.ok_collectives.equals(run.preferred_collectives[ok])
    assert not ok.all()  # the synthetic run's failed points are left out of the figures


def test_the_view_names_each_gpu_and_rank_and_the_link_each_group_crosses(run: RunView) -> None:
    gpus = {gpu.index: gpu.uuid for gpu in run.nodes[0].gpus}
    assert {run.gpu_names[uuid] for uuid in gpus.values()} == {f"n0 GPU{i}" for i in range(4)}
    assert run.rank_labels == {i: f"n0 GPU{i}" for i in range(4)}
    assert set(run.health.evidence) == {gpus[1], gpus[2], gpus[3]}  # GPU0 reads like its peers
    # 18 NVLinks x 26.5625 GB/s, for every actor set of the tier
    nvlink = LinkPeak(name="NVLink", peak_gb_per_s=478.125)
    assert run.link_peaks == {
        ("nvlink", 4): nvlink,
        ("nvlink/algo=Ring", 4): nvlink,
        ("nvlink/algo=Tree", 4): nvlink,
    }


def test_each_shape_and_operation_gets_the_reference_of_its_gpu_model_and_nccl_algorithm(
    run: RunView,
) -> None:
    """4 H200: NCCL's own all_reduce against the measured ring figure, as it is and where a
    variant pins NCCL_ALGO=Ring; NCCL_ALGO=Tree has none, nor a composite or a symmetric
    all_reduce; a pair one way against the pairs measured here."""
    names = {key: ref.name for key, ref in run.references.items()}
    assert names[("nvlink", 4, "all_reduce")] == "H200 nvlink x4 all_reduce RING"
    assert names[("nvlink/algo=Ring", 4, "all_reduce")] == "H200 nvlink x4 all_reduce RING"
    assert ("nvlink/algo=Tree", 4, "all_reduce") not in names
    assert names[("nvlink", 4, "all_gather")] == "H200 nvlink x4 all_gather RING"
    assert names[("nvlink", 2, "p2p (uni)")] == "H200 nvlink x2 p2p (uni)"
    assert not [key for key in names if "(" in key[2] and key[1] == 4]  # composites
    unnamed = RunView.of(run.rows.assign(gpu_model=None), None)
    assert not unnamed.references  # no model, no figure: no column either
    (peaks,) = collectives.peaks(unnamed).blocks  # type: ignore[union-attr]
    assert "% of reference" not in peaks.columns  # type: ignore[union-attr]


def test_the_peaks_and_the_weak_pairs_give_their_share_of_the_reference_and_its_source(
    run: RunView,
) -> None:
    (peaks,) = collectives.peaks(run).blocks  # type: ignore[union-attr]
    columns = list(peaks.columns)  # type: ignore[union-attr]
    rows = {(row[0].text, row[2].text, row[3].text): row for row in peaks.rows}  # type: ignore[union-attr]
    ok = run.ok_collectives
    native = ok[(ok["op"] == "all_reduce") & (ok["algorithm"] == "native")]
    peak = native[native["variant"] == "default"]["busbw_gb_per_s"].max()
    cell = rows[("nvlink", "all_reduce", "graph")][columns.index("% of reference")]
    assert cell.text == f"{100 * peak / 361.0:.0f}"
    assert cell.title.startswith("H200 nvlink x4 all_reduce RING: measured here: nccl-tests")
    tree = rows[("nvlink/algo=Tree", "all_reduce", "graph")]
    assert tree[columns.index("% of reference")].text == "-"
    (weak,) = (block for block in pairs.p2p(run).blocks if hasattr(block, "columns"))
    share = weak.columns.index("% of reference")  # type: ignore[union-attr]
    lines = {line[0].text: line for line in weak.rows}  # type: ignore[union-attr]
    uni, copy = lines["p2p uni"], lines["copy uni"]  # the weak pair, at half the others'
    value = float(uni[weak.columns.index("value")].text)  # type: ignore[union-attr]
    assert uni[share].text == f"{100 * value / 365.0:.0f}"
    assert uni[share].title.startswith("H200 nvlink x2 p2p (uni): measured here")
    assert copy[share].text == "-"  # no figure for a copy engine's
