"""`sweeper.run` on the session's real local Ray: one small sweep, its rows as a DataFrame."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import sweeper

pytestmark = pytest.mark.usefixtures("ray_session")


def test_run_returns_its_rows_as_load_reads_them_and_its_id_without_progress_if_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    done = sweeper.run(
        world=2,
        ops=["all_reduce", "all_gather"],
        max_size="64K",
        step_factor=8,
        iters=2,
        warmup=1,
        results=results,
        report=False,
        progress=False,  # a notebook's: the first line and the summary, no point
    )
    said = capsys.readouterr().err
    assert said.startswith(f"sweeper {done.run_id}: gloo")
    assert "all_gather" in said  # the summary's
    assert " 4096 " not in said  # no point's line (each names its size in bytes)
    rows = done.rows
    assert isinstance(rows, pd.DataFrame)
    assert set(rows["run_id"]) == {done.run_id}
    assert done.report is None
    sizes = [8, 64, 512, 4096, 32768]
    assert sorted(zip(rows["op"], rows["size_bytes"], strict=True)) == sorted(
        (op, size) for op in ("all_gather", "all_reduce") for size in sizes
    )
    assert set(rows["status"]) == {"ok"}
    assert set(rows["world_size"]) == {2}
    assert set(rows["backend"]) == {"gloo"}
    # gloo ranks go through no NCCL: no transport, and nothing for its contract to judge
    fabric = ["transport", "transport_flag", "nccl_connections", "nccl_channels", "nccl_algo"]
    assert rows[fabric].isna().all().all()
    stored = sweeper.load(results)
    assert list(rows.columns) == list(stored.columns)  # every column, the date's too
    pd.testing.assert_frame_equal(
        rows.sort_values(["op", "size_bytes"], ignore_index=True),
        stored.sort_values(["op", "size_bytes"], ignore_index=True),
    )


def test_the_api_pages_worked_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = (Path(__file__).parents[2] / "docs" / "API.md").read_text()
    example = page.split("## A worked example", 1)[1].split("```python\n", 1)[1].split("```")[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "docs/API.md", "exec"), {})  # the page's code, as a notebook runs it
    printed = capsys.readouterr().out.splitlines()
    run_id, points, _ = printed[0].split()
    assert int(points) == (sweeper.load(tmp_path / "results").run_id == run_id).sum()
    assert "'all_reduce'" in printed[1]
    assert "'all_gather'" in printed[1]
