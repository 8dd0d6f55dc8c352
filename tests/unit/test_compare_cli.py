"""`sweeper compare RUN_A RUN_B`: point by point on runs written as real Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from tests import report_data


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Three runs of the synthetic H200 node: one, the same again, and one 25% slower."""
    root = tmp_path / "results"
    report_data.write_run(root, "monday")
    report_data.write_run(root, "tuesday")
    report_data.write_run(root, "wednesday", slow=1.25)
    return root


def compare(results: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["compare", *args, "--results", str(results)])
    return result.exit_code, result.stdout, result.stderr


def test_a_slower_run_exits_1_and_names_the_points_that_regressed(results: Path) -> None:
    code, out, _ = compare(results, "tuesday", "wednesday")
    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith("wednesday against tuesday: ")
    assert "regressions" in first
    table = [line for line in out.splitlines() if line.startswith("│ regression")]
    assert any("nvlink:n0g2,3 p2p (uni) bfloat16 graph 2->3" in line for line in table)
    assert any("-20.0%" in line for line in table)


def test_the_same_measurements_again_exit_0(results: Path) -> None:
    code, out, _ = compare(results, "monday", "tuesday")
    assert code == 0, out
    assert " 0 regressions, 0 improvements" in out
    assert "│" not in out  # nothing to tabulate


def test_json_lists_every_point_with_its_change(results: Path) -> None:
    code, out, _ = compare(results, "tuesday", "wednesday", "--all", "--format", "json")
    assert code == 1
    comparison = json.loads(out)
    assert (comparison["base"], comparison["new"]) == ("tuesday", "wednesday")
    assert comparison["rule"] == {"threshold": 0.05, "alpha": 0.01}
    changes = comparison["changes"]
    ran = [c for c in changes if c["new_status"] == "ok"]
    assert len(ran) == comparison["points"] - 1  # the point out of memory in both
    assert comparison["regressions"] == len(ran)
    assert all(c["busbw_change"] == pytest.approx(1 / 1.25 - 1) for c in ran)
    pair = next(c for c in changes if c["op"] == "p2p")
    assert isinstance(pair["src_rank"], int)
    oom = next(c for c in changes if c["new_status"] == "oom")
    assert oom["busbw_change"] is None
    assert not oom["regression"]


def test_a_threshold_above_the_change_exits_0(results: Path) -> None:
    code, out, _ = compare(results, "tuesday", "wednesday", "--threshold", "0.25")
    assert code == 0, out
    assert "at least 25%" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tuesday", "friday"], "no run 'friday' in {results}"),
        (["friday", "tuesday"], "no run 'friday' in {results}"),
    ],
)
def test_an_unknown_run_is_one_line_and_exit_2(
    results: Path, args: list[str], message: str
) -> None:
    code, out, err = compare(results, *args)
    assert code == 2
    assert out == ""
    assert err.startswith(f"sweeper: error: {message.format(results=results)}")
    assert len(err.strip().splitlines()) == 1


def test_a_missing_results_directory_is_bad_input(tmp_path: Path) -> None:
    code, _, err = compare(tmp_path / "none", "a", "b")
    assert code == 2
    assert err.startswith(f"sweeper: error: no results directory at {tmp_path / 'none'}")
