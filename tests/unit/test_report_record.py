"""The run record kept beside the rows: what the report knows beyond them."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper.planning.spec import SweepSpec
from sweeper.results import records
from sweeper.results.load import load
from tests import report_data


def test_a_record_reads_back_as_it_was_written(tmp_path: Path) -> None:
    node = report_data.h200_node()
    written = records.RunRecord.of("r1", SweepSpec(max_size="4G").model_dump(mode="json"), (node,))
    records.save(tmp_path, written)
    back = records.load(tmp_path, "r1")
    assert back == written
    assert back is not None
    assert back.nodes[0].links[0][1] == "NV18"
    assert back.options["max_size"] == 4 * 2**30
    assert back.command  # this process's command line


def test_a_run_without_a_record_has_none(tmp_path: Path) -> None:
    assert records.load(tmp_path, "nothing") is None


def test_parquet_readers_do_not_see_records(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1")
    assert (tmp_path / "_runs" / "r1.json").is_file()
    assert (
        len(load(tmp_path))
        == len(pd.read_parquet(tmp_path))
        == len(list(report_data.gpu_rows("r1")))
    )


def test_python_dash_m_is_recorded_as_the_sweeper_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/x/sweeper/__main__.py", "run", "--ops", "a b"])
    assert (
        records.RunRecord.of("r", SweepSpec().model_dump(mode="json"), ()).command
        == "sweeper run --ops 'a b'"
    )
    monkeypatch.setattr(sys, "argv", ["/usr/bin/sweeper", "nightly"])
    assert (
        records.RunRecord.of("r", SweepSpec().model_dump(mode="json"), ()).command
        == "sweeper nightly"
    )
