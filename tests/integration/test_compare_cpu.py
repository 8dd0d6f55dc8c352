"""`sweeper compare` on real runs: two real gloo sweeps with the same options, and a real
link made 10% slower (`tests.plugins.wire`, `tests.plugins.slower_wire`), on the session's
Ray. Two runs of the same sweep on a busy 2-core box differ by far more than their blocks
spread; compare must call none of it a regression, and must still see the slower link."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sweeper.cli import app

pytestmark = pytest.mark.usefixtures("ray_session")

GLOO = ("--ops", "all_reduce", "--min-size", "1K", "--max-size", "4M", "--iters", "5")
# 1 and 2 MiB over the modelled link: 0.1-0.2 s a call, 3 blocks of 10 calls, so that one
# of the busy box's hiccups (tens of ms) moves a block by a percent or two
WIRE = (
    *("--ops", "wire", "--min-size", "1M", "--max-size", "2M"),
    *("--iters", "10", "--warmup", "1", "--no-check"),
)


def sweep(results: Path, *args: str) -> str:
    options = ("--world", "2", "--no-report", "--results", str(results), "--format", "json")
    result = CliRunner().invoke(app, ["run", *options, *args])
    assert result.exit_code == 0, result.output
    return str(json.loads(result.stdout.splitlines()[-1])["run_id"])


def compare(results: Path, base: str, new: str) -> tuple[int, dict[str, Any]]:
    args = ["compare", base, new, "--results", str(results), "--all", "--format", "json"]
    result = CliRunner().invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


def test_two_identical_gloo_runs_flag_no_point_and_exit_0(tmp_path: Path) -> None:
    first, second = sweep(tmp_path, *GLOO), sweep(tmp_path, *GLOO)
    code, comparison = compare(tmp_path, first, second)
    assert comparison["points"] == 13
    flagged = comparison["regressions"] + comparison["improvements"]
    assert flagged <= 0.01 * comparison["points"], comparison["changes"]
    assert code == 0
    counts = comparison["counts"]
    assert sum(counts.values()) == comparison["points"]


@pytest.mark.usefixtures("isolated_registry")  # the plugins' operations leave with the test
def test_a_link_10_percent_slower_from_1_mib_is_a_regression_at_each_size(
    tmp_path: Path,
) -> None:
    base = sweep(tmp_path, *WIRE, "--plugins", "tests.plugins.wire")
    slower = sweep(tmp_path, *WIRE, "--plugins", "tests.plugins.slower_wire")
    code, comparison = compare(tmp_path, base, slower)
    assert code == 1
    changes = sorted(comparison["changes"], key=lambda c: int(c["size_bytes"]))
    assert [c["size_bytes"] for c in changes] == [2**20, 2**21]
    assert all(c["time_change"] == pytest.approx(0.10, abs=0.04) for c in changes), changes

    seen = [
        {k: c[k] for k in ("size_bytes", "time_change", "base_spread", "new_spread", "noise")}
        for c in changes
    ]
    # a regression wherever the 10% is beyond the point's noise: on an idle box every one
    # (27 of 27 over 3 runs of each link, to 4 MiB); a box loaded by another test run can
    # spread one run's blocks by 5%, and that point is then unclear, never unchanged or faster
    beyond = [abs(math.log1p(c["busbw_change"])) > math.log1p(c["noise"]) for c in changes]
    expected = ["regression" if clear else "unclear" for clear in beyond]
    assert [c["verdict"] for c in changes] == expected, seen
    assert any(beyond), seen
