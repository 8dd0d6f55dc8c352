"""Three `sweeper run`s through the CLI on the session's Ray, run once for the session
(tests/conftest.py's `cli_runs`): the tests that read a real sweep's output, rows, records
and reports back share them, and only look. On two cores a sweep's rank actors take longer
to start than its points here take to run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app

# Five operations (two of them composites) to 64K, each iteration's time kept: a report of
# them has every section a CPU run can have, each with its figures.
OPS = ("all_reduce", "reduce_scatter+all_gather", "reduce+broadcast", "all_to_all", "broadcast")
RUN = ("--ops", ",".join(OPS), "--max-size", "64K", "--iters", "5", "--warmup", "1", "--samples")
# Two operations to 4K, three iterations a block, each iteration's time kept; no report.
BARE = (
    *("--ops", "all_reduce,all_to_all", "--max-size", "4K", "--iters", "3", "--warmup", "1"),
    *("--samples", "--no-report"),
)


@dataclass(frozen=True)
class Runs:
    root: Path
    first: str  # RUN into root/results, --format json, its report beside them (root/reports)
    first_stdout: str
    second: str  # RUN into root/results after it, plain output, its report in root/pages
    second_stdout: str
    bare: str  # BARE into root/bare/results, alone, --format json
    bare_stdout: str

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def bare_results(self) -> Path:
        return self.root / "bare" / "results"


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _json_run_id(stdout: str) -> str:
    finished = json.loads(stdout.splitlines()[-1])
    return str(finished["run_id"])


def run_all(root: Path) -> Runs:
    """The three runs, one after another, under `root`."""
    results = str(root / "results")
    first = _run(*RUN, "--results", results, "--format", "json")
    second = _run(*RUN, "--results", results, "--reports-dir", str(root / "pages"))
    second_id = second.rsplit("run_id ", 1)[1].split(")")[0]
    bare = _run(*BARE, "--results", str(root / "bare" / "results"), "--format", "json")
    return Runs(root, _json_run_id(first), first, second_id, second, _json_run_id(bare), bare)
