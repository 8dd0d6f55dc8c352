"""Inputs that were taken, or ended in a traceback, a hang or gigabytes (issue 55's list):
each refused in one line, exit 2, before any work. The cases that grew without bound, ended
the process from inside a plugin or need a fresh process's signal handlers run as `python -m
sweeper` in a child under RLIMIT_AS 2 GiB and a deadline, so a regression fails fast."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from tests.synthetic import History, every_series

_TOPOLOGY = Path(__file__).parents[1] / "data" / "topologies" / "cpu-no-nvml.json"
_LIMIT_BYTES = 2 * 2**30
_DEADLINE_S = 120
_LATER = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_LIMIT_BYTES, _LIMIT_BYTES))


def _sweeper(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args],
        capture_output=True,
        text=True,
        timeout=_DEADLINE_S,
        env={**os.environ, **(env or {})},
        preexec_fn=_bounded,
        check=False,
    )


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("random", "--strategy random:99999999999: strategy 'random:99999999999': 1 to 1024"),
        ("os._exit", "--plugins a_plugin: it calls os._exit(0) as it is imported"),
        ("KeyboardInterrupt", "--plugins a_plugin: it raises KeyboardInterrupt as it is imported"),
        ("TMPDIR", "$TMPDIR '/dev/null' is not a directory: an embedded Ray keeps its session"),
    ],
)
def test_an_input_that_ran_away_or_ended_sweeper_is_one_line_and_exit_2(
    tmp_path: Path, case: str, said: str
) -> None:
    """random:99999999999 grew to 2.2 GB and never answered; a plugin's os._exit(0) exited 0
    having done nothing, its KeyboardInterrupt 130 with no line; TMPDIR=/dev/null was a
    traceback from ray.init."""
    plugin = {
        "os._exit": "import os\nos._exit(0)\n",
        "KeyboardInterrupt": "raise KeyboardInterrupt\n",
    }
    if case == "random":
        ran = _sweeper("scan", "--simulate", "--strategy", "random:99999999999")
    elif case == "TMPDIR":
        ran = _sweeper("plan", env={"TMPDIR": "/dev/null"})
    else:
        (tmp_path / "a_plugin.py").write_text(plugin[case])
        path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
        ran = _sweeper("plan", "--plugins", "a_plugin", env={"PYTHONPATH": path})
    assert ran.returncode == 2, ran.stderr
    (line,) = ran.stderr.splitlines()
    assert line.startswith(f"sweeper: error: {said}")


def _digits(tmp_path: Path) -> list[str]:
    profile = tmp_path / "profile.yaml"
    profile.write_text(f"iters: {'9' * 5000}\n")
    return ["plan", "--profile", str(profile)]


def _cpus(tmp_path: Path) -> list[str]:
    record = json.loads(_TOPOLOGY.read_text())
    topology = tmp_path / "node.json"
    topology.write_text(json.dumps({**record, "cpus": -5}))
    return ["plan", "--topology", str(topology)]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (_digits, "{tmp}/profile.yaml: a value no profile holds (Exceeds the limit (4300 digits)"),
        (_cpus, "--topology {tmp}/node.json: not a topology record (cpus -5: a count of 0 to"),
        (["scan", "--simulate", "--gpus-per-node", "0"], "--gpus-per-node: must be at least 1"),
        (
            ["scan", "--simulate", "--cluster-name", "a\x1b[31mb"],
            "--cluster-name: 'a\\x1b[31mb' holds a control character",
        ),
        (
            ["scan", "--simulate", "--domain-label", "a\x1b[31mb"],
            "--domain-label: 'a\\x1b[31mb' holds a control character",
        ),
        (["scan", "--nodes", "a\x1b[31mb,c"], "--nodes: 'a\\x1b[31mb' holds a space or a control"),
    ],
)
def test_an_input_that_was_taken_or_a_traceback_is_one_line_and_exit_2(
    tmp_path: Path, args: object, said: str
) -> None:
    given = args(tmp_path) if callable(args) else args
    result = CliRunner().invoke(app, given)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"sweeper: error: {said.format(tmp=tmp_path)}")


def test_compare_of_two_runs_with_no_point_in_common_is_one_line_and_exit_2(
    tmp_path: Path,
) -> None:
    """It said "0 points in both, 0 regression" and exit 0: nothing compared read as good."""
    results = tmp_path / "results"
    one, another = every_series(groups=2, ops=1, dtypes=1)  # two groups: no point shared
    (first,) = History(results, [one], noise=0.0).nights(1)
    (other,) = History(results, [another], noise=0.0, start=_LATER).nights(1)
    result = CliRunner().invoke(app, ["compare", first, other, "--results", str(results)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"sweeper: error: runs {first} and {other} measured no point in common (the same "
        "group, operation, dtype, size, launch and engine) (compare runs of the same sweep)"
    ]
