"""Files sweeper writes are regular files inside the directory they belong to: run ids,
from the command line or from the rows, never become paths elsewhere; a device, a FIFO or
a folder is never replaced by a file; an empty directory option is not the current one."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.errors import BadInput
from sweeper.report import build
from sweeper.results.files import atomic_write, run_name
from tests import report_data


def _everything(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_a_run_id_from_the_rows_never_puts_the_report_outside_its_directory(
    tmp_path: Path,
) -> None:
    results = tmp_path / "shared" / "results"
    report_data.write_run(results, "r1")
    (batch,) = results.glob("date=*/r1-00000.parquet")
    rows = pq.read_table(batch)
    evil = pc.if_else(pc.is_valid(rows["run_id"]), "../../../x/pwned", rows["run_id"])
    pq.write_table(rows.set_column(rows.schema.get_field_index("run_id"), "run_id", evil), batch)
    before = _everything(tmp_path)
    result = CliRunner().invoke(app, ["report", "latest", "--results", str(results)])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "sweeper: error: '../../../x/pwned' is not a run id: a file name of letters, digits, "
        "_ . + -"
    ]
    assert _everything(tmp_path) == before


@pytest.mark.parametrize("run_id", ["../../evil", "a/b", ".hidden", "", "x" * 200])
def test_a_run_id_that_would_be_a_path_is_bad_input(run_id: str) -> None:
    with pytest.raises(BadInput, match="is not a run id"):
        run_name(run_id)


def test_resume_and_report_take_run_ids_not_paths(tmp_path: Path) -> None:
    results = tmp_path / "a" / "results"
    report_data.write_run(results, "r1")
    (tmp_path / "a" / "evil.json").write_text("{}")  # where _runs/../../evil.json points
    cli = CliRunner()
    resumed = cli.invoke(app, ["run", "--resume", "../../evil", "--results", str(results)])
    assert resumed.exit_code == 2
    assert resumed.stderr == (
        "sweeper: error: --resume '../../evil': not a run id (such as 20261122T013412Z-33627a)\n"
    )
    shown = cli.invoke(app, ["report", "../../evil", "--results", str(results)])
    assert shown.exit_code == 2
    assert shown.stderr.startswith("sweeper: error: '../../evil' is not a run id")


def test_a_report_never_replaces_what_is_not_a_regular_file(tmp_path: Path) -> None:
    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    device = tmp_path / "null"
    device.symlink_to(os.devnull)
    js = tmp_path / "js"
    js.mkdir()
    shared = js / build.plotly_js_name()
    os.mkfifo(shared)
    before = _everything(tmp_path)
    cli = CliRunner()
    for args, named in [
        (["-o", str(fifo)], f"-o {fifo}: {fifo}"),
        (["-o", str(device)], f"-o {device}: {device}"),
        (["--js", str(js), "-o", str(tmp_path / "r.html")], f"--js {js}: {shared}"),
    ]:
        result = cli.invoke(app, ["report", "r1", "--results", str(results), *args])
        assert result.exit_code == 2, result.output
        assert result.stderr == f"sweeper: error: {named} is not a regular file\n"
    assert _everything(tmp_path) == before
    assert fifo.is_fifo()
    assert device.resolve() == Path(os.devnull)


def test_an_atomic_write_over_a_fifo_or_a_folder_writes_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder").mkdir()
    written: list[Path] = []
    for target in (fifo, tmp_path / "folder"):
        with pytest.raises(BadInput, match="is not a regular file"):
            atomic_write(target, written.append)
    assert written == []
    assert fifo.is_fifo()


@pytest.mark.parametrize("option", ["--results", "--reports-dir"])
def test_an_empty_directory_option_is_bad_input_not_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", option, "", "--ops", "no_such_op"])
    assert result.exit_code == 2
    assert result.stderr == f"sweeper: error: {option}: an empty path; name a directory\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.filterwarnings("default::sweeper.errors.CorruptResults")
def test_a_journal_whose_partition_is_a_path_is_never_recovered_outside(tmp_path: Path) -> None:
    import pyarrow as pa

    from sweeper.errors import CorruptResults
    from sweeper.results.journal import journal_path
    from sweeper.results.load import load
    from sweeper.results.schema import SCHEMA
    from sweeper.results.upgrade import canonical

    results = tmp_path / "results"
    journal = journal_path(results, "r1")
    journal.parent.mkdir(parents=True)
    schema = SCHEMA.with_metadata({**SCHEMA.metadata, b"batch": b"0", b"date": b"x/../../../up"})
    with pa.ipc.new_stream(str(journal), schema) as stream:
        stream.write_table(canonical([{"run_id": "r1", "status": "ok"}]).cast(schema))
    before = _everything(tmp_path)
    with pytest.warns(CorruptResults, match="not sweeper's journal"):
        assert load(results).empty
    assert _everything(tmp_path) == before
