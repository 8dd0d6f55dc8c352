"""Files in a results directory that are sweeper's by name and not by content (another tool's
rows under sweeper's columns, a damaged or newer file): every reader names each in one
warning line, once, and goes on with the rest."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.errors import CorruptResults
from sweeper.results.journal import journal_path
from sweeper.results.schema import SCHEMA_VERSION, VERSION_KEY
from sweeper.results.writer import ResultWriter
from tests.synthetic import History, every_series


def _planted(results: Path) -> tuple[list[str], dict[Path, str]]:
    """Two real runs, and beside them copies of a batch under another run id: its times as
    words, a launch mode no sweeper has, and a newer sweeper's schema version. The runs, and
    each planted file with the reason its warning gives."""
    history = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    run_ids = history.nights(2)
    batch = next(results.glob(f"date=*/{run_ids[0]}-00000.parquet"))
    rows = pq.read_table(batch)

    def column(table: pa.Table, name: str, value: str) -> pa.Table:
        values = pa.array([value] * len(table))
        return table.set_column(table.schema.get_field_index(name), name, values)

    rows = column(rows, "run_id", "planted")
    words = batch.with_name("planted-00000.parquet")
    pq.write_table(column(rows, "time_us", "fast"), words)
    warp = batch.with_name("planted-00001.parquet")
    pq.write_table(column(rows, "launch", "warp"), warp)
    newer = batch.with_name("planted-00002.parquet")
    future = {VERSION_KEY: str(SCHEMA_VERSION + 1).encode()}
    pq.write_table(rows.replace_schema_metadata(future), newer)
    return run_ids, {
        words: "not sweeper's rows (column 'time_us' is string, not double)",
        warp: "not sweeper's rows (launch 'warp' is none of graph, eager)",
        newer: (
            f"written by a newer sweeper (results schema version {SCHEMA_VERSION + 1}; "
            f"this one reads up to {SCHEMA_VERSION})"
        ),
    }


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")  # shown, as users see it
@pytest.mark.parametrize("reader", ["history", "report", "compare", "export"])
def test_every_reader_skips_a_planted_or_newer_batch_with_one_line_each_and_goes_on(
    tmp_path: Path, reader: str
) -> None:
    """A planted file of time_us strings, an unknown launch mode and a newer schema ended
    each of these readers in a traceback (ArrowInvalid, tuple.index, BadInput)."""
    results = tmp_path / "results"
    run_ids, planted = _planted(results)
    args = {
        "history": ["history", "--format", "json"],
        "report": ["report", run_ids[1], "-o", str(tmp_path / "page.html")],
        "compare": ["compare", *run_ids, "--format", "json"],
        "export": ["export", run_ids[1], "--prometheus", str(tmp_path / "sweeper.prom")],
    }[reader]
    result = CliRunner().invoke(app, [*args, "--results", str(results)])
    assert result.exit_code == 0, result.output
    assert sorted(result.stderr.splitlines()) == sorted(
        f"sweeper: warning: skipped {path}: {reason}" for path, reason in planted.items()
    )
    if reader == "history":
        assert [run["run_id"] for run in json.loads(result.stdout)] == run_ids


def test_load_skips_a_planted_or_newer_batch_with_a_warning_naming_each(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run_ids, planted = _planted(results)
    with pytest.warns(CorruptResults) as caught:
        rows = sweeper.load(results)
    assert sorted(str(w.message) for w in caught) == sorted(
        f"skipped {path}: {reason}" for path, reason in planted.items()
    )
    assert sorted(set(rows["run_id"])) == run_ids


def _journaled(results: Path, rows: int, damaged: int) -> tuple[int, int]:
    """A run's `rows` points journaled one by one (fsync'd each) by a driver that stopped
    before its batch: the byte range of its write number `damaged` (from 0)."""
    started = datetime(2026, 11, 21, 23, 0, tzinfo=timezone.utc)
    writer = ResultWriter(results, "r1", "2026-11-21", batch_rows=10**6)
    journal = journal_path(results, "r1")
    for i in range(rows):
        if i == damaged:
            start = journal.stat().st_size
        writer.append({"run_id": "r1", "run_started_at": started, "size_bytes": i, "status": "ok"})
        if i == damaged:
            end = journal.stat().st_size
    writer.close()  # its lock released, its rows left in the journal
    return start, end


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")  # shown, as users see it
def test_a_journal_damaged_in_its_middle_keeps_the_rows_after_it_and_is_set_aside(
    tmp_path: Path,
) -> None:
    """64 bytes overwritten inside the tenth of 20 writes: history recovered the 9 before
    it, said nothing, and deleted the journal with the evidence."""
    results = tmp_path / "results"
    start, end = _journaled(results, 20, damaged=9)
    journal = journal_path(results, "r1")
    damaged = bytearray(journal.read_bytes())
    damaged[start + 64 : start + 128] = b"\xab" * 64
    assert start + 128 < end
    journal.write_bytes(bytes(damaged))

    result = CliRunner().invoke(app, ["history", "--results", str(results), "--format", "json"])

    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.stdout)
    assert run["points"] == 19
    assert sorted(sweeper.load(results)["size_bytes"]) == [i for i in range(20) if i != 9]
    (aside,) = journal.parent.glob("r1.arrows.damaged-*")
    assert aside.read_bytes() == bytes(damaged)
    assert not journal.exists()
    assert result.stderr.splitlines() == [
        f"sweeper: warning: {journal} is damaged at byte {start}: 19 whole rows before "
        f"and after the damage are recovered, the write there is lost; the journal is kept "
        f"as {aside.name}"
    ]
