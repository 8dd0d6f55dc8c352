"""`sweeper compare RUN_A RUN_B`: point by point on runs written as real Parquet."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.analysis.changes import change_text
from sweeper.cli import app
from sweeper.results import records
from sweeper.results.writer import ResultWriter
from tests import report_data


def write_run(root: Path, run_id: str, slow: float = 1.0) -> None:
    """The synthetic H200 node's run, each point with three blocks 0.1% either side of its
    time, as a steady GPU times them."""
    writer = ResultWriter(root, run_id, report_data.STARTED.strftime("%Y-%m-%d"))
    for row in report_data.gpu_rows(run_id, slow=slow):
        t = row.get("time_us")
        blocks = None if t is None else [t * 0.999, t, t * 1.001]
        writer.append({**row, "time_us_blocks": blocks})
    writer.flush()
    records.save(root, report_data.h200_record(run_id))


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three runs of the synthetic H200 node: one, the same again, and one 25% slower. Written
    once for the module: `sweeper compare` only reads them."""
    root = tmp_path_factory.mktemp("compare") / "results"
    write_run(root, "monday")
    write_run(root, "tuesday")
    write_run(root, "wednesday", slow=1.25)
    return root


def compare(results: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["compare", *args, "--results", str(results)])
    return result.exit_code, result.stdout, result.stderr


def test_a_slower_run_exits_1_and_names_the_series_that_regressed(results: Path) -> None:
    code, out, _ = compare(results, "tuesday", "wednesday")
    assert code == 1, out
    first, counts = out.splitlines()[:2]
    assert first == "wednesday against tuesday: 217 points in both"
    assert counts.startswith("110 regression, 0 improvement, ")
    regressed = out.split("regression: 110 points in ", 1)[1].splitlines()
    row = next(line for line in regressed if "nvlink:n0g2,3 p2p (uni) bfloat16 graph 2->3" in line)
    assert row.split()[-4:] == ["256M", "1", "-20.0%", "5.0%"]  # sizes, points, change, noise
    assert re.search(r"nvlink:n0g0,1,2,3 all_gather bfloat16 graph +128K\.\.512M +7 -20\.0%", out)


def test_compare_prints_a_table_per_operation_that_fits_80_columns(results: Path) -> None:
    """Where it printed one 400-character sentence and a table 160 columns wide: a line of
    counts, the rule in a few lines, then per operation the peaks and the points' verdicts."""
    result = CliRunner().invoke(
        app, ["compare", "tuesday", "wednesday", "--results", str(results)], env={"COLUMNS": "80"}
    )
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    head = next(i for i, line in enumerate(lines) if line.startswith("operation "))
    assert lines[head].split() == [
        "operation",
        "base",
        "new",
        "change",
        "regr.",
        "impr.",
        "unclear",
        "unch.",
    ]
    rows = {line.split()[0]: line.split()[1:] for line in lines[head + 2 : head + 6]}
    assert rows["p2p"] == ["(uni)", "385", "308", "-20.0%", "12", "0", "12", "0"]
    assert rows["all_reduce"] == ["360", "288", "-20.0%", "21", "0", "21", "0"]


def test_the_same_measurements_again_exit_0(results: Path) -> None:
    code, out, _ = compare(results, "monday", "tuesday")
    assert code == 0, out
    assert "0 regression, 0 improvement, 0 unclear, " in out
    assert "regression:" not in out  # no series to list
    assert re.search(r"^all_reduce +\d+ +\d+ +\+0\.0% +0 +0 +0 +42$", out, re.M)


def test_a_noise_or_a_change_beyond_100_percent_reads_as_a_factor() -> None:
    assert change_text(1655.98) == "1,657x"  # where compare printed 165598.0%
    assert change_text(1.5, signed=True) == "2.5x"
    assert change_text(0.05) == "5.0%"
    assert change_text(-0.2, signed=True) == "-20.0%"
    assert change_text(float("nan")) == "-"


def test_json_lists_every_point_with_its_change(results: Path) -> None:
    code, out, _ = compare(results, "tuesday", "wednesday", "--all", "--format", "json")
    assert code == 1
    comparison = json.loads(out)
    assert (comparison["base"], comparison["new"]) == ("tuesday", "wednesday")
    assert comparison["rule"] == {"threshold": 0.05, "k": 3.0}
    changes = comparison["changes"]
    ran = [c for c in changes if c["new_status"] == "ok"]
    assert len(ran) == comparison["points"] - 1  # the point out of memory in both
    assert all(c["busbw_change"] == pytest.approx(1 / 1.25 - 1) for c in ran)
    # 20% less: beyond the floor from 64 KiB, within it (50%) below
    small = [c for c in ran if c["size_bytes"] < 64 * 2**10]
    assert {c["verdict"] for c in small} == {"unclear"}
    assert comparison["regressions"] == len(ran) - len(small) > 0
    counts = comparison["counts"]
    assert counts == {
        "regression": len(ran) - len(small),
        "improvement": 0,
        "unclear": len(small),
        "unchanged": 1,
    }
    pair = next(c for c in changes if c["op"] == "p2p")
    assert isinstance(pair["src_rank"], int)
    oom = next(c for c in changes if c["new_status"] == "oom")
    assert oom["busbw_change"] is None
    assert not oom["regression"]
    assert oom["verdict"] == "unchanged"  # out of memory in both


def test_a_threshold_above_the_change_exits_0(results: Path) -> None:
    code, out, _ = compare(results, "tuesday", "wednesday", "--threshold", "0.3")
    assert code == 0, out
    assert "beyond 30%" in out


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
