"""`sweeper run --resume`: a run stopped part-way, taken up again, ends with exactly the rows
of a run that was never stopped (gloo ranks on the session's Ray)."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.driver.console import JsonConsole
from sweeper.driver.measurement import ResultRow
from sweeper.driver.stops import Stopped
from sweeper.driver.sweep import run
from sweeper.planning.profile import build_spec
from sweeper.results import summaries
from sweeper.results.writer import columns

pytestmark = pytest.mark.usefixtures("ray_session")

# probed series (the budgets decide each one's bound) and a grid-free point-to-point one
OPTIONS = {
    "world": 2,
    "ops": "all_reduce,all_gather,send_recv",
    "dtypes": "float32,int32",
    "max_size": "auto",
    "mem_limit": "2M",
    "step_factor": 16,
    "iters": 2,
    "warmup": 1,
    "report": False,
}
KEY = ["group_id", "op", "algorithm", "dtype", "size_bytes", "engine", "launch", "status"]


class StopAfter(JsonConsole):
    """Stops the run as SIGTERM would, after `points` rows."""

    def __init__(self, points: int) -> None:
        super().__init__(io.StringIO())
        self.left = points

    def point(self, row: ResultRow) -> None:
        super().point(row)
        self.left -= 1
        if self.left == 0:
            raise Stopped(signal.SIGTERM)


def _keys(df: pd.DataFrame) -> list[tuple[object, ...]]:
    return sorted(df[KEY].itertuples(index=False, name=None))


def test_a_resumed_run_has_exactly_the_rows_of_a_run_never_stopped(tmp_path: Path) -> None:
    clean = run(build_spec(results=tmp_path / "clean", **OPTIONS), JsonConsole(io.StringIO()))
    out = tmp_path / "stopped"
    with pytest.raises(Stopped) as stopped:
        run(build_spec(results=out, **OPTIONS), StopAfter(7))
    run_id = stopped.value.run_id
    assert run_id is not None
    assert len(sweeper.load(out)) == 7

    cli = CliRunner()
    done = cli.invoke(app, ["run", "--resume", run_id, "--results", str(out), "--format", "json"])
    assert done.exit_code == 0, done.output
    rows = sweeper.load(out)
    assert set(rows["run_id"]) == {run_id}
    assert _keys(rows) == _keys(
        pd.DataFrame([columns(row) for row in clean.rows])
    )  # no gap, no duplicate
    assert rows["run_started_at"].nunique() == 1
    # the limits a probe found before the stop are the ones it kept after it
    probed = rows.dropna(subset=["max_size_bytes"])
    assert probed.groupby(["op", "dtype"])["max_size_bytes"].nunique().eq(1).all()

    history = cli.invoke(app, ["history", "--results", str(out), "--format", "json"])
    assert history.exit_code == 0, history.output
    assert '"complete"' in history.output
    again = cli.invoke(app, ["run", "--resume", run_id, "--results", str(out)])
    assert again.exit_code == 2
    assert "the run is complete" in again.stderr


def test_resume_refuses_options_of_its_own_and_unknown_runs(tmp_path: Path) -> None:
    cli = CliRunner()
    other = cli.invoke(app, ["run", "--resume", "x", "--results", str(tmp_path), "--ops", "gather"])
    assert other.exit_code == 2
    assert other.stderr.startswith("sweeper: error: --resume runs with the run's own options")
    unknown = cli.invoke(
        app, ["run", "--resume", "20260101T000000Z-abcdef", "--results", str(tmp_path)]
    )
    assert unknown.exit_code == 2
    assert "no such run" in unknown.stderr
    assert not any(tmp_path.iterdir())  # nothing written


def test_a_resumed_nightly_run_stays_one_nightly_run_judged_and_summarized_once(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results"
    with pytest.raises(Stopped) as stopped:
        run(build_spec(results=out, **OPTIONS), StopAfter(5), "nightly")
    run_id = stopped.value.run_id
    assert run_id is not None
    assert not summaries.path(tmp_path / "reports", run_id).exists()

    cli = CliRunner()
    done = cli.invoke(app, ["run", "--resume", run_id, "--results", str(out), "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout.splitlines()[-1])["event"] == "nightly"
    rows = sweeper.load(out)
    assert len(rows) > 5
    assert set(rows["run_kind"]) == {"nightly"}
    assert json.loads(summaries.path(tmp_path / "reports", run_id).read_text())["run_id"] == run_id
    history = cli.invoke(app, ["history", "--results", str(out), "--format", "json"])
    assert [(r["run_id"], r["status"]) for r in json.loads(history.stdout)] == [(run_id, "ok")]
