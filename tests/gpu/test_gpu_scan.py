"""On one GPU: `sweeper scan` judges the node's only GPU by what it does alone, its d2d and
host copies against its model's reference, idle and beside a second process that keeps it
busy (docs/measurements/h200-x1-2026-12-02.md, "A GPU shared with another process")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from sweeper.cli import app

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("ray_session")]

# bf16 8192^3 matrix products until killed, as the measurement's second process
BUSY = """
import sys, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ a
torch.cuda.synchronize()
open(sys.argv[1], "w").close()
while True:
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
"""


def _gpu(results: Path) -> tuple[int, dict[str, Any]]:
    """The scan's exit code and its one GPU's verdict."""
    result = CliRunner().invoke(app, ["scan", "--format", "json", "--results", str(results)])
    summary = json.loads(result.stdout)
    (gpu,) = [v for v in summary["verdicts"] if v["subject"] == "gpu"]
    return result.exit_code, gpu


@pytest.mark.skipif(torch.cuda.device_count() != 1, reason="a machine of one GPU")
def test_a_one_gpu_scan_gives_its_copies_and_names_the_gpu_a_busy_process_shares(
    tmp_path: Path,
) -> None:
    code, idle = _gpu(tmp_path / "idle")
    assert (code, idle["health"]) == (0, "healthy"), idle["evidence"]
    assert "d2d" in idle["evidence"]
    assert "host copies" in idle["evidence"]
    assert idle["busbw_gb_per_s"] > 0  # its d2d
    if idle["reference_gb_per_s"]:  # a model the table has copies for (H200)
        assert idle["busbw_gb_per_s"] >= idle["threshold_gb_per_s"], idle["evidence"]
    ready = tmp_path / "busy.ready"
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(ready)])
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert busy.poll() is None, "the busy process ended"
            assert time.monotonic() < deadline, "the busy process never started"
            time.sleep(0.1)
        code, shared = _gpu(tmp_path / "shared")
    finally:
        busy.kill()
        busy.wait()
    # the busy one, and this process where an earlier test opened CUDA in it
    assert re.search(r"\d other compute process(es)? on it \(NVML\)", shared["evidence"])
    if idle["reference_gb_per_s"]:
        assert (code, shared["health"]) == (1, "slow"), shared["evidence"]
        assert shared["busbw_gb_per_s"] < 0.75 * idle["busbw_gb_per_s"]
    else:
        assert shared["health"] == "unconfirmed", shared["evidence"]
