"""Files in a directory other users share: sweeper writes through no link planted there
and writes nothing into another user's shared directory; no FIFO, device or planted file
makes a reader wait for ever or fail with a traceback; a run is seen from the moment it has
a record. The links are planted by a second user (`nobody`, through setpriv) where the box
allows it; the readers of FIFOs run in a child with a deadline, so a regression fails
instead of hanging the suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.errors import BadInput, CorruptResults
from sweeper.planning.spec import SweepSpec
from sweeper.results import records
from sweeper.results.journal import JOURNAL_DIR
from sweeper.results.writer import ResultWriter
from tests import report_data

NOBODY = 65534
_ROOT_FILE = "precious"  # a file of root's that a planted link points at
_BEFORE = "root's own bytes\n"
RUN = "20261127T120000Z-abcdef"


def _nobody(*argv: str) -> None:
    """`argv` run as the user nobody, as another user on the node would run it."""
    subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
        check=True,
    )


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user may write, with no sticky bit (a team share), in /tmp so
    nobody can reach it, and a file of root's beside it; skipped where we cannot be
    another user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("planting files as another user needs root and setpriv")
    top = Path(tempfile.mkdtemp(prefix="sweeper-shared-"))
    try:
        top.chmod(0o755)
        (top / _ROOT_FILE).write_text(_BEFORE)
        share = top / "share"
        share.mkdir()
        share.chmod(0o777)
        yield share
    finally:
        shutil.rmtree(top)


def _untouched(share: Path) -> bool:
    return (share.parent / _ROOT_FILE).read_text() == _BEFORE


@pytest.mark.filterwarnings("default::sweeper.errors.SweeperWarning")
def test_a_report_into_a_share_writes_through_no_link_planted_there(shared: Path) -> None:
    results = shared.parent / "results"
    report_data.write_run(results, "r1")
    target = str(shared.parent / _ROOT_FILE)
    for name in ("x.html", "_inflight-x.html"):  # the page, and what older sweepers wrote first
        _nobody("ln", "-s", target, str(shared / name))
    result = CliRunner().invoke(
        app, ["report", "r1", "--results", str(results), "-o", str(shared / "x.html")]
    )
    assert result.exit_code == 0, result.output
    assert _untouched(shared)
    page = shared / "x.html"
    assert not page.is_symlink()
    assert page.read_text().startswith("<!doctype html>")
    # the share is root's and anyone may write it: said once, and written all the same
    assert result.stderr == (
        f"sweeper: warning: {shared} may be written by any user (no sticky bit): they may "
        f"remove or replace sweeper's files there (chmod +t {shared})\n"
    )


def test_a_run_writes_its_journal_and_batches_through_no_link_in_its_results(
    shared: Path,
) -> None:
    """The results are ours; nobody owns the _journal and partition folders (made before
    the run, 0755) and plants the names sweeper writes first."""
    results = shared.parent / "results"
    results.mkdir()
    results.chmod(0o755)
    target = str(shared.parent / _ROOT_FILE)
    for folder in (JOURNAL_DIR, "date=2026-11-27"):
        (results / folder).mkdir()
        os.chown(results / folder, NOBODY, NOBODY)
    for planted in (f".{RUN}.arrows.new", f"{RUN}.arrows"):
        _nobody("ln", "-s", target, str(results / JOURNAL_DIR / planted))
    _nobody("ln", "-s", target, str(results / f"date=2026-11-27/_inflight-{RUN}-00000.parquet"))
    with pytest.warns(CorruptResults, match="a symbolic link, not a regular file"):
        writer = ResultWriter(results, RUN, "2026-11-27")  # the link is taken for no journal
    writer.append({"run_id": RUN, "status": "ok", "size_bytes": 8})
    writer.flush()
    writer.close()
    assert _untouched(shared)
    batch = results / "date=2026-11-27" / f"{RUN}-00000.parquet"
    assert batch.is_file()
    assert not batch.is_symlink()


@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_another_users_shared_directory_is_refused_a_sticky_one_taken(
    shared: Path, mode: int
) -> None:
    """Owned by nobody, writable by all: refused unless sticky (as /tmp is), where no one
    may rename another's entries."""
    theirs = shared.parent / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    theirs.chmod(mode)
    results = theirs / "results"
    if mode == 0o1777:
        ResultWriter(results, RUN, "2026-11-27").close()
        assert (results / JOURNAL_DIR).is_dir()
        return
    with pytest.raises(BadInput, match=rf"{theirs} is owned by uid {NOBODY} and any user"):
        ResultWriter(results, RUN, "2026-11-27")
    assert list(theirs.iterdir()) == []


def test_a_report_or_export_into_another_users_share_is_one_line_and_writes_nothing(
    shared: Path,
) -> None:
    results = shared.parent / "results"
    report_data.write_run(results, "r1")
    theirs = shared / "theirs"
    _nobody("mkdir", "-m", "777", str(theirs))
    _nobody("ln", "-s", str(shared.parent), str(shared / "link"))
    cli = CliRunner()
    for args, named in [
        (["report", "r1", "-o", str(theirs / "x.html")], f"-o {theirs / 'x.html'}"),
        (["export", "r1", "--prometheus", str(theirs / "x.prom")], None),
        (["report", "r1", "--js", str(shared / "link")], f"--js {shared / 'link'}"),
    ]:
        result = cli.invoke(app, [*args, "--results", str(results)])
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"sweeper: error: {named + ': ' if named else ''}{theirs}") or (
            "is a link owned by uid 65534" in line
        ), line
    assert list(theirs.iterdir()) == []
    assert sorted(p.name for p in shared.parent.iterdir()) == [_ROOT_FILE, "results", "share"]


# Readers that a FIFO in the results would block in open(): each in a child with a
# deadline. Each prints what it found; warnings go to stderr.
_READERS = """
import sys, warnings
from pathlib import Path
warnings.simplefilter("default")
from sweeper.commands import history_runs
from sweeper.results import records, scans, summaries
from sweeper.results.load import load
results, reports = Path(sys.argv[1]), Path(sys.argv[2])
print(len(load(results)))
print(list(history_runs.runs(results, reports)["run_id"]))
print(records.load(results, "fifo"), scans.load(results, "fifo"))
"""


def test_no_fifo_in_the_results_or_reports_makes_a_reader_wait(tmp_path: Path) -> None:
    results, reports = tmp_path / "results", tmp_path / "reports"
    report_data.write_run(results, "r1")
    reports.mkdir()
    fifos = [
        results / JOURNAL_DIR / "fifo.arrows",  # the journal of a run
        results / JOURNAL_DIR / "fifo.lock",  # its lock
        results / "_runs" / "fifo.json",
        results / "_runs" / "fifo.scan.json",
        next(results.glob("date=*")) / "fifo-00000.parquet",
        reports / "r1.summary.json",  # a nightly run's summary
    ]
    for fifo in fifos:
        os.mkfifo(fifo)
    # r1 as a nightly run, so history looks for its summary
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    (batch,) = results.glob("date=*/r1-00000.parquet")
    rows = pq.read_table(batch)
    nightly = pc.if_else(pc.is_valid(rows["run_kind"]), "nightly", rows["run_kind"])
    pq.write_table(
        rows.set_column(rows.schema.get_field_index("run_kind"), "run_kind", nightly), batch
    )
    done = subprocess.run(
        [sys.executable, "-c", _READERS, str(results), str(reports)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["['r1']", "None None"]
    skipped = [line for line in done.stderr.splitlines() if "skipped" in line]
    for fifo in fifos:
        if fifo.name != "fifo.lock":  # a lock is only asked whether it is held
            assert any(f"skipped {fifo}: not a regular file" in line for line in skipped), fifo


def test_a_fifo_as_a_runs_lock_is_bad_input_not_a_wait(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_DIR).mkdir()
    os.mkfifo(tmp_path / JOURNAL_DIR / f"{RUN}.lock")
    code = (
        "import sys\nfrom sweeper.results.writer import ResultWriter\n"
        "ResultWriter(sys.argv[1], sys.argv[2], '2026-11-27')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), RUN],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "is not a regular file: not sweeper's lock" in done.stderr.splitlines()[-1]


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")
def test_a_run_id_that_is_a_path_is_skipped_by_history_in_one_line(tmp_path: Path) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    report_data.write_run(results, "r2")
    (batch,) = results.glob("date=*/r1-00000.parquet")
    rows = pq.read_table(batch)
    evil = pc.if_else(pc.is_valid(rows["run_id"]), "../../../x", rows["run_id"])
    pq.write_table(rows.set_column(rows.schema.get_field_index("run_id"), "run_id", evil), batch)
    result = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [run["run_id"] for run in json.loads(result.stdout)] == ["r2"]
    assert result.stderr == (
        "sweeper: warning: skipped run '../../../x': not a run id "
        "(a file name of letters, digits, _ . + -)\n"
    )


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")
def test_a_run_record_nested_past_the_recursion_limit_or_too_large_is_skipped(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    report_data.write_run(results, "r2")
    record = results / "_runs" / "r1.json"
    record.write_text("[" * 100_000 + "]" * 100_000)
    with (results / "_runs" / "r2.json").open("r+b") as large:  # sparse: 65 MiB of nothing
        large.truncate(65 * 2**20)
    cli = CliRunner()
    shown = cli.invoke(app, ["history", "--results", str(results), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert [run["run_id"] for run in json.loads(shown.stdout)] == ["r1", "r2"]
    assert shown.stderr.splitlines() == [
        f"sweeper: warning: skipped {record}: not a run record "
        "(nested deeper than Python's recursion limit)",
        f"sweeper: warning: skipped {results / '_runs' / 'r2.json'}: larger than 64 MiB, "
        "more than sweeper writes there",
    ]
    page = cli.invoke(app, ["report", "r1", "--results", str(results)])
    assert page.exit_code == 0, page.output
    assert "recursion limit" in page.stderr


def test_a_run_stopped_while_its_actors_started_is_in_history(tmp_path: Path) -> None:
    """Its record says how it ended; it has no row."""
    report_data.write_run(tmp_path, "r1")
    spec = SweepSpec(cluster_name="lab")
    records.save(
        tmp_path, records.RunRecord.of(RUN, spec.model_dump(mode="json"), (), "interrupted")
    )
    result = CliRunner().invoke(app, ["history", "--results", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    stopped = json.loads(result.stdout)[-1]
    assert {k: stopped[k] for k in ("run_id", "points", "failed", "ended", "status")} == {
        "run_id": RUN,
        "points": 0,
        "failed": 0,
        "ended": "interrupted",
        "status": "interrupted",
    }
    assert (stopped["run_started_at"], stopped["cluster_name"]) == (
        "2026-11-27T12:00:00+00:00",
        "lab",
    )


def test_a_live_run_before_its_first_batch_is_running_for_every_reader(tmp_path: Path) -> None:
    from sweeper.errors import SweeperWarning
    from sweeper.results.load import load

    report_data.write_run(tmp_path, "r1")
    live = ResultWriter(tmp_path, RUN, "2026-11-27")  # its actors are starting
    records.save(tmp_path, records.RunRecord.of(RUN, SweepSpec().model_dump(mode="json"), ()))
    try:
        cli = CliRunner()
        said = (
            f"sweeper: error: run {RUN} is running: none of its rows are in a batch in "
            f"{tmp_path} yet"
        )
        for args in (["report", RUN], ["export", RUN, "--prometheus", str(tmp_path / "x.prom")]):
            result = cli.invoke(app, [*args, "--results", str(tmp_path)])
            assert result.exit_code == 2, result.output
            assert result.stderr.splitlines()[0].startswith(said)
        with pytest.warns(SweeperWarning, match=f"run {RUN} is running"):
            assert load(tmp_path, RUN).empty
        shown = cli.invoke(app, ["history", "--results", str(tmp_path), "--format", "json"])
        assert [(r["run_id"], r["status"]) for r in json.loads(shown.stdout)][-1] == (
            RUN,
            "running",
        )
    finally:
        live.close()


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_a_link_to_nothing_as_a_reports_or_script_directory_is_one_line(
    tmp_path: Path, kind: str
) -> None:
    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere" if kind == "dangling" else link)
    cli = CliRunner()
    for args, named in [
        (["report", "r1", "--results", str(results), "--js", str(link)], f"--js {link}"),
        (["run", "--reports-dir", str(link), "--ops", "all_reduce"], f"--reports-dir {link}"),
    ]:
        result = cli.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            f"sweeper: error: {named}: {link} is a link to nothing (dangling, or a loop)\n"
        )


def test_a_report_into_a_missing_directory_is_refused_as_an_export_is(tmp_path: Path) -> None:
    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    page = tmp_path / "missing" / "x.html"
    result = CliRunner().invoke(app, ["report", "r1", "--results", str(results), "-o", str(page)])
    assert result.exit_code == 2
    assert result.stderr == f"sweeper: error: -o {page}: no directory {page.parent}\n"
    assert not page.parent.exists()


def test_an_export_where_no_file_can_be_made_is_one_line(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    result = CliRunner().invoke(
        app, ["export", "r1", "--results", str(tmp_path), "--prometheus", "/proc/x.prom"]
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("sweeper: error: cannot write /proc/x.prom: ")
