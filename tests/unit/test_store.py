from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweeper.results.load import load
from sweeper.results.schema import COLUMNS, SCHEMA
from sweeper.results.writer import ResultWriter
from tests.tmpfs import tmpfs


def _row(i: int, **extra: object) -> dict[str, object]:
    return {
        "run_id": "r1",
        "run_started_at": datetime(2026, 11, 21, 23, 0, tzinfo=timezone.utc),
        "op": "all_reduce",
        "size_bytes": 8 << i,
        "status": "ok",
        "hosts": ["a", "b"],
        "nccl_env": [("NCCL_ALGO", "Ring")],
        "n_wrong": 0,
        **extra,
    }


def test_batches_land_atomically_in_the_date_partition(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path, "r1", "2026-11-21", batch_rows=3)
    for i in range(7):
        writer.append(_row(i))
    assert len(list((tmp_path / "date=2026-11-21").glob("*.parquet"))) == 2  # 6 rows flushed
    writer.flush()
    files = sorted(p.name for p in (tmp_path / "date=2026-11-21").iterdir())
    assert files == ["r1-00000.parquet", "r1-00001.parquet", "r1-00002.parquet"]
    assert writer.written == 7


def test_pandas_reads_the_dataset_with_no_glue(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    for i in range(4):
        writer.append(_row(i))
    writer.flush()
    df = pd.read_parquet(tmp_path)
    assert len(df) == 4
    assert set(COLUMNS) <= set(df.columns)
    assert list(df["date"].astype(str).unique()) == ["2026-11-21"]


def test_load_gives_canonical_nullable_dtypes(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    writer.append(_row(0))
    writer.append(_row(1, status="oom", n_wrong=None))
    writer.flush()
    df = load(tmp_path)
    assert str(df["n_wrong"].dtype) == "Int64"
    assert str(df["world_size"].dtype) == "Int32"
    assert str(df["in_place"].dtype) == "boolean"
    assert str(df["status"].dtype) == "string"
    assert str(df["run_started_at"].dtype) == "datetime64[us, UTC]"
    assert df["n_wrong"].isna().tolist() == [False, True]
    assert df["hosts"].iloc[0].tolist() == ["a", "b"]


def test_files_from_an_older_schema_read_with_nulls_for_new_columns(tmp_path: Path) -> None:
    old = pa.schema([SCHEMA.field("run_id"), SCHEMA.field("op"), SCHEMA.field("size_bytes")])
    part = tmp_path / "date=2026-01-01"
    part.mkdir()
    pq.write_table(
        pa.Table.from_pylist([{"run_id": "old", "op": "gather", "size_bytes": 8}], schema=old),
        part / "old-00000.parquet",
    )
    writer = ResultWriter(tmp_path, "new", "2026-11-21")
    writer.append(_row(0, run_id="new"))
    writer.flush()
    df = load(tmp_path).set_index("run_id")
    assert df.loc["old", "op"] == "gather"
    assert pd.isna(df.loc["old", "busbw_gb_per_s"])
    assert df.loc["new", "status"] == "ok"
    assert len(load(tmp_path, run_id="old")) == 1


def test_rows_from_before_kind_get_the_kind_their_columns_imply(tmp_path: Path) -> None:
    """Files written before the `kind` column: load infers it from that time's conventions
    (op p2p or copy, params set, a `+` in a composite's algorithm); rows that have it keep it."""
    old = pa.schema([f for f in SCHEMA if f.name != "kind"])
    legacy = [
        ("native", "all_reduce", None, "collective"),
        ("pairwise", "all_to_all", None, "collective"),
        ("reduce_scatter+all_gather", "all_reduce", None, "composite"),
        ("uni", "p2p", None, "p2p"),
        ("fanout", "copy", None, "copy"),
        ("moe_dispatch", "all_to_all_v", [("top_k", "8")], "experiment"),
    ]
    part = tmp_path / "date=2026-01-01"
    part.mkdir()
    rows = [
        {"run_id": "old", "algorithm": a, "op": op, "params": params, "size_bytes": i}
        for i, (a, op, params, _) in enumerate(legacy)
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=old), part / "old-00000.parquet")
    writer = ResultWriter(tmp_path, "new", "2026-11-21")
    writer.append(_row(0, run_id="new", op="p2p", algorithm="native", kind="collective"))
    writer.flush()
    df = load(tmp_path).sort_values(["run_id", "size_bytes"])
    assert df["kind"].tolist() == ["collective", *(kind for *_, kind in legacy)]
    assert str(df["kind"].dtype) == "string"
    only = load(tmp_path, run_id="old", columns=["kind", "size_bytes"])
    assert list(only.columns) == ["kind", "size_bytes"]
    assert only.sort_values("size_bytes")["kind"].tolist() == [kind for *_, kind in legacy]


def test_an_inflight_file_is_invisible_to_readers(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    writer.append(_row(0))
    writer.flush()
    (tmp_path / "date=2026-11-21" / "_inflight-r1-00001.parquet").write_bytes(b"half a file")
    assert len(load(tmp_path)) == 1
    assert len(pd.read_parquet(tmp_path)) == 1


def test_unknown_columns_are_refused(tmp_path: Path) -> None:
    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    with pytest.raises(KeyError, match="busbw_gbps"):
        writer.append(_row(0, busbw_gbps=1.0))


def test_load_of_a_missing_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no results directory"):
        load(tmp_path / "nothing")


def _strangers(root: Path) -> None:
    """What people and other tools leave in a results directory."""
    (root / "README.md").write_text("# nightly results\n")
    (root / "junk").mkdir()
    pq.write_table(pa.table({"x": [1]}), root / "junk" / "r9-00000.parquet")
    part = root / "date=2026-11-21"
    pq.write_table(pa.table({"x": [1]}), part / "other-tool.parquet")
    (part / "notes.txt").write_text("not data")
    (part / "r2-00000.parquet").write_bytes(b"PAR1 cut short")


def test_readers_take_only_sweepers_files_and_skip_a_corrupt_one_by_name(tmp_path: Path) -> None:
    from sweeper.errors import CorruptResults
    from sweeper.results.load import runs

    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    for i in range(3):
        writer.append(_row(i))
    writer.flush()
    _strangers(tmp_path)
    with pytest.warns(CorruptResults, match=r"skipped .*r2-00000\.parquet"):
        df = load(tmp_path)
    assert list(df["run_id"]) == ["r1"] * 3
    assert set(df["date"]) == {"2026-11-21"}  # the partition still reads
    with pytest.warns(CorruptResults):
        assert list(runs(tmp_path)["points"]) == [3]


def test_pyarrow_alone_reads_the_dataset_past_files_that_are_not_parquet(tmp_path: Path) -> None:
    """The README's recipe for plain pyarrow/pandas when other files are present (another
    tool's Parquet files would still be read: only sweeper.load leaves those out)."""
    import pyarrow.dataset as ds

    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    writer.append(_row(0))
    writer.flush()
    _strangers(tmp_path)
    (tmp_path / "junk" / "r9-00000.parquet").unlink()
    (tmp_path / "date=2026-11-21" / "other-tool.parquet").unlink()
    table = ds.dataset(
        tmp_path, format="parquet", partitioning="hive", exclude_invalid_files=True
    ).to_table(columns=["run_id", "date"])
    assert table.to_pylist() == [{"run_id": "r1", "date": "2026-11-21"}]


# A driver that journals rows one by one, says which row is safe after each append, and
# is killed with SIGKILL after `stop` rows (or by the test, if it never gets there).
_WRITER = """
import os, signal, sys
from datetime import datetime, timezone
from sweeper.results.writer import ResultWriter
from tests.tmpfs import tmpfs

root, batch_rows, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
writer = ResultWriter(root, "r1", "2026-11-21", batch_rows=batch_rows)
started = datetime(2026, 11, 21, 23, 0, tzinfo=timezone.utc)
for i in range(stop):
    writer.append({"run_id": "r1", "run_started_at": started, "size_bytes": i, "status": "ok"})
    print(i, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _driver(root: Path, batch_rows: int, stop: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root), str(batch_rows), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_driver_killed_mid_run_loses_at_most_the_row_in_flight(tmp_path: Path) -> None:
    from sweeper.results.journal import leftover_journals, recover
    from sweeper.results.load import files

    with _driver(tmp_path, batch_rows=5, stop=10**6) as proc:
        assert proc.stdout is not None
        acknowledged = [int(proc.stdout.readline()) for _ in range(23)]
        proc.send_signal(signal.SIGKILL)
        acknowledged += [int(line) for line in proc.stdout]  # appended before the kill landed
    safe = len(acknowledged)

    in_batches = sum(pq.read_metadata(path).num_rows for path in files(tmp_path))
    assert in_batches % 5 == 0  # whole batches only: the rest is in the journal
    assert leftover_journals(tmp_path) == ["r1"]
    recovered = recover(tmp_path, "r1")
    sizes = sorted(load(tmp_path)["size_bytes"])
    assert in_batches + recovered == len(sizes)
    assert sizes == list(range(len(sizes)))  # no gap, no duplicate
    assert safe <= len(sizes) <= safe + 1  # the row in flight may have reached the disk
    assert leftover_journals(tmp_path) == []
    assert recover(tmp_path, "r1") == 0


def _killed_after(root: Path, rows: int, batch_rows: int = 256) -> None:
    with _driver(root, batch_rows, rows) as proc:
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def test_a_torn_last_write_costs_only_that_write(tmp_path: Path) -> None:
    from sweeper.results.journal import journal_path, recover

    _killed_after(tmp_path, 3)
    journal = journal_path(tmp_path, "r1")
    journal.write_bytes(journal.read_bytes()[:-7])
    assert recover(tmp_path, "r1") == 2
    assert list(load(tmp_path)["size_bytes"]) == [0, 1]


def test_a_journal_left_after_its_batch_was_written_adds_no_duplicates(tmp_path: Path) -> None:
    from sweeper.results.journal import journal_path, recover

    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    writer.append(_row(0))
    journal = journal_path(tmp_path, "r1")
    left = journal.read_bytes()
    writer.flush()  # the batch is written and the journal removed ...
    journal.write_bytes(left)  # ... but here the driver died before it removed it
    assert recover(tmp_path, "r1") == 0
    assert len(load(tmp_path)) == 1
    assert not journal.exists()


def test_a_live_drivers_journal_is_left_to_it(tmp_path: Path) -> None:
    from sweeper.results.journal import journal_path, leftover_journals, live_runs, recover

    writer = ResultWriter(tmp_path, "r1", "2026-11-21")
    writer.append(_row(0))
    writer.flush()
    writer.append(_row(1))
    assert len(pd.read_parquet(tmp_path)) == 1  # plain pandas passes the journal by, too
    assert live_runs(tmp_path) == {"r1"}
    assert leftover_journals(tmp_path) == []
    assert recover(tmp_path, "r1") == 0
    assert journal_path(tmp_path, "r1").exists()
    writer.flush()
    assert live_runs(tmp_path) == {"r1"}  # between batches, still its driver's
    writer.close()
    assert live_runs(tmp_path) == set()
    assert len(load(tmp_path)) == 2


def test_a_writer_for_a_run_that_has_rows_recovers_its_journal_and_continues(
    tmp_path: Path,
) -> None:
    """What --resume builds on: the killed run's rows stay, the new ones follow them."""
    _killed_after(tmp_path, 3, batch_rows=2)  # one batch written, one row journaled
    again = ResultWriter(tmp_path, "r1", "2026-11-21", batch_rows=2)
    again.append(_row(3, size_bytes=3))
    again.flush()
    assert sorted(load(tmp_path)["size_bytes"]) == [0, 1, 2, 3]
    assert again.written == 1


def test_a_disk_that_refuses_writes_is_results_unwritable_and_keeps_the_rows(
    tmp_path: Path,
) -> None:
    """A disk filled after the first batch (a tmpfs of 1 MiB, where root can mount one)
    refuses the next journal with ENOSPC."""
    from sweeper.errors import ResultsUnwritable

    with tmpfs(tmp_path / "disk", "size=1m") as disk:
        writer = ResultWriter(disk, "r1", "2026-11-21")
        writer.append(_row(0))
        writer.flush()
        with open(disk / "ballast", "wb", buffering=0) as ballast:
            with contextlib.suppress(OSError):  # ENOSPC: the disk is full
                while True:
                    ballast.write(bytes(4096))
            with pytest.raises(ResultsUnwritable, match="No space left on device"):
                writer.append(_row(1))
        assert len(load(disk)) == 1


# A live driver: journals one row (and, between batches, has written it as Parquet), says so,
# and holds its run until its stdin closes.
_LIVE = """
import sys
from datetime import datetime, timezone
from sweeper.results.writer import ResultWriter
from tests.tmpfs import tmpfs

writer = ResultWriter(sys.argv[1], sys.argv[2], "2026-11-21")
started = datetime(2026, 11, 21, 23, 0, tzinfo=timezone.utc)
writer.append({"run_id": sys.argv[2], "run_started_at": started, "size_bytes": 1, "status": "ok"})
if sys.argv[3] == "between-batches":
    writer.flush()
print("live", flush=True)
sys.stdin.read()
"""


_LIVE_RUN = "20261121T230000Z-abcdef"


@contextlib.contextmanager
def _live_driver(root: Path, run_id: str, moment: str) -> Iterator[subprocess.Popen[str]]:
    """A driver of `run_id` (its record written) that has journaled one row (`in-batch`) or
    written it as a batch (`between-batches`), alive until its stdin is closed."""
    from sweeper.results import records

    records.save(root, records.RunRecord(run_id, "sweeper run", {}, ()))
    with subprocess.Popen(
        [sys.executable, "-c", _LIVE, str(root), run_id, moment],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as live:
        assert live.stdout is not None
        assert live.stdout.readline() == "live\n"
        yield live


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("moment", ["in-batch", "between-batches"])
def test_a_run_whose_journal_a_live_driver_holds_is_refused_and_left_whole(
    tmp_path: Path, moment: str
) -> None:
    from typer.testing import CliRunner

    from sweeper.cli import app
    from sweeper.errors import BadInput

    run_id = _LIVE_RUN
    with _live_driver(tmp_path, run_id, moment) as live:
        before = _snapshot(tmp_path)
        resumed = CliRunner().invoke(app, ["run", "--resume", run_id, "--results", str(tmp_path)])
        assert resumed.exit_code == 2
        assert resumed.stderr == (
            f"sweeper: error: run {run_id} is being written by a live driver "
            "(wait for it to end, or stop it first)\n"
        )
        with pytest.raises(BadInput, match="being written by a live driver"):
            ResultWriter(tmp_path, run_id, "2026-11-21")
        assert _snapshot(tmp_path) == before
        live.communicate("")
    assert live.returncode == 0


# A driver killed with every row of its run still in the journal (its record has no end).
_KILLED_RUN = """
import os, signal, sys
from pathlib import Path
from tests import report_data
from sweeper.planning.spec import SweepSpec
from sweeper.results import records
from sweeper.results.writer import ResultWriter
from tests.tmpfs import tmpfs

results, run_id = Path(sys.argv[1]), sys.argv[2]
writer = ResultWriter(results, run_id, report_data.STARTED.strftime("%Y-%m-%d"), batch_rows=10**6)
rows = list(report_data.gpu_rows(run_id, "gpu-node-1", 1.0, "WARN", report_data.GRAPH_ONLY, False))
records.save(results, records.RunRecord.of(run_id, SweepSpec().model_dump(mode="json"), ()))
writer.extend(rows)
print(len(rows), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_run(results: Path, run_id: str) -> int:
    """The rows the killed driver journaled, none of them in Parquet."""
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(results), run_id], stdout=subprocess.PIPE, text=True
    ) as proc:
        journaled = int(proc.communicate()[0])
    assert proc.returncode == -signal.SIGKILL
    assert not list(results.glob("date=*/*.parquet"))
    return journaled


@pytest.mark.parametrize("reader", ["sweeper.load", "report", "compare"])
def test_every_reader_recovers_a_killed_runs_journal_first(tmp_path: Path, reader: str) -> None:
    from typer.testing import CliRunner

    import sweeper
    from sweeper.cli import app

    results = tmp_path / "results"
    journaled = _killed_run(results, "r1")
    if reader == "sweeper.load":
        assert len(sweeper.load(results)) == journaled
        return
    args = ["report", "r1"] if reader == "report" else ["compare", "r1", "r1", "--format", "json"]
    result = CliRunner().invoke(app, [*args, "--results", str(results)])
    assert result.exit_code == 0, result.output
    assert len(load(results)) == journaled


@pytest.mark.parametrize("moment", ["in-batch", "between-batches"])
def test_a_live_run_is_running_in_history_from_its_first_point(tmp_path: Path, moment: str) -> None:
    import json

    from typer.testing import CliRunner

    from sweeper.cli import app

    run_id = _LIVE_RUN
    with _live_driver(tmp_path, run_id, moment) as live:
        shown = CliRunner().invoke(app, ["history", "--results", str(tmp_path), "--format", "json"])
        live.communicate("")
    assert shown.exit_code == 0, shown.output
    (run,) = json.loads(shown.stdout)
    assert (run["run_id"], run["points"], run["ended"], run["status"]) == (
        run_id,
        1,
        "running",
        "running",
    )
