"""The run as the report's sections read it (report/view.py), from the synthetic 4x H200 run
timed both ways with each GPU's NVML readings (tests/report_data.py): each point's preferred
row picked once for the whole page, the GPUs' names, health and links worked out once."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sweeper.report import build, view
from sweeper.report.view import Link, RunView
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
    nvlink = Link(name="NVLink", peak_gb_per_s=478.125)
    assert run.link_peaks == {
        ("nvlink", 4): nvlink,
        ("nvlink/algo=Ring", 4): nvlink,
        ("nvlink/algo=Tree", 4): nvlink,
    }
