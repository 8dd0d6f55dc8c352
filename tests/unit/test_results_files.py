"""The results package's own promises: every file carries its schema version, `upgrade` is
keyed on it, a write that fails leaves nothing, and statuses go to disk as plain strings."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweeper.results.files import atomic_write
from sweeper.results.journal import journal_path, recover
from sweeper.results.load import frame, load
from sweeper.results.schema import SCHEMA, SCHEMA_VERSION, VERSION_KEY
from sweeper.results.upgrade import STEPS
from sweeper.results.writer import ResultWriter
from sweeper.wire import Status

_ROW = {"run_id": "r", "op": "all_reduce", "algorithm": "native", "size_bytes": 8}


def test_the_last_upgrade_step_reaches_the_schema_version() -> None:
    assert STEPS[-1][0] == SCHEMA_VERSION


def test_a_batch_carries_the_schema_version_and_statuses_as_strings(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path, "r", "2026-11-25")
    writer.append({**_ROW, "status": Status.OK, "launch": "graph", "engine": "nccl"})
    writer.flush()
    (batch,) = (tmp_path / "date=2026-11-25").iterdir()
    written = pq.read_schema(batch)
    assert written.metadata[VERSION_KEY] == str(SCHEMA_VERSION).encode()
    assert written.field("status").type == pa.string()
    assert load(tmp_path)["status"].tolist() == ["ok"]


def test_rows_are_upgraded_by_the_version_their_file_says(tmp_path: Path) -> None:
    """A file without a version is from before launch modes: its rows without one were
    eager. A file of the current version is read as written."""
    part = tmp_path / "date=2026-11-25"
    part.mkdir()
    for run_id, metadata in (("old", None), ("new", SCHEMA.metadata)):
        rows = pa.Table.from_pylist([{**_ROW, "run_id": run_id}], schema=SCHEMA)
        pq.write_table(rows.replace_schema_metadata(metadata), part / f"{run_id}-00000.parquet")
    launches = load(tmp_path).set_index("run_id")["launch"]
    assert launches["old"] == "eager"
    assert launches.isna().to_dict() == {"new": True, "old": False}


def test_rows_made_in_memory_read_as_loaded_ones() -> None:
    rows = frame([_ROW])
    assert rows[["kind", "launch", "engine", "variant"]].iloc[0].tolist() == [
        "collective",
        "eager",
        "torch",
        "default",
    ]
    assert str(rows["size_bytes"].dtype) == "Int64"


def test_a_write_that_fails_leaves_nothing_and_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    target.write_text("before")

    def half(file: BinaryIO) -> None:
        file.write(b"half a")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, half)
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]
    assert target.read_text() == "before"


def test_a_journal_an_older_sweeper_left_is_recovered_as_todays_rows(tmp_path: Path) -> None:
    """A driver of an earlier version killed mid-run: its journal (no version, no launch
    column) becomes a batch of the current version, its rows upgraded on the way."""
    older = pa.schema([f for f in SCHEMA if f.name != "launch"])
    path = journal_path(tmp_path, "r")
    path.parent.mkdir()
    with open(path, "wb") as file:
        stream = pa.ipc.new_stream(file, older.with_metadata({"batch": "0", "date": "2026-11-25"}))
        stream.write_table(pa.Table.from_pylist([_ROW], schema=older))
    assert recover(tmp_path, "r") == 1
    (batch,) = (tmp_path / "date=2026-11-25").iterdir()
    assert pq.read_schema(batch).metadata[VERSION_KEY] == str(SCHEMA_VERSION).encode()
    assert load(tmp_path)["launch"].tolist() == ["eager"]
