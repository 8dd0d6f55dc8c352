"""A disk that fills while sweeper writes what a run's rows do not hold (its report, its
nightly summary, its record, a textfile): one line and exit 3, nothing half-written, and the
rows readable. The full disk is a real one: a tmpfs out of inodes (where root can mount
one), which refuses every new file with ENOSPC while `df` still shows room, as a disk that
filled after the command's checks does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.errors import ResultsUnwritable
from sweeper.results import records, summaries
from sweeper.results.records import RunRecord
from tests.synthetic import History, every_series
from tests.tmpfs import tmpfs


@contextlib.contextmanager
def _full_disk(where: Path) -> Iterator[Path]:
    """A directory on a file system with 64 MiB free and no inode left."""
    with tmpfs(where, "size=64m,nr_inodes=64"):
        (where / "pages").mkdir()
        with contextlib.suppress(OSError):  # ENOSPC: no inode left
            for i in range(64):
                (where / f"ballast-{i}").touch()
        yield where / "pages"


def test_a_report_the_disk_refuses_is_one_line_and_exit_3_with_no_page(tmp_path: Path) -> None:
    """It was an OSError traceback and exit 1."""
    results = tmp_path / "results"
    (run_id,) = History(results, every_series(groups=1, ops=1, dtypes=1), noise=0.0).nights(1)
    with _full_disk(tmp_path / "disk") as pages:
        page = pages / "page.html"
        result = CliRunner().invoke(
            app, ["report", run_id, "--results", str(results), "-o", str(page)]
        )
        assert result.exit_code == 3, result.output
        assert result.stderr.splitlines() == [
            f"sweeper: error: cannot write the report {page}: No space left on device (the "
            f"run's rows are kept in {results}; sweeper report {run_id} --results {results} "
            "writes it once there is room)"
        ]
        assert list(pages.iterdir()) == []


def test_a_summary_or_record_the_disk_refuses_is_results_unwritable(tmp_path: Path) -> None:
    """A nightly summary raised an OSError; a run record is ResultsUnwritable as before."""
    with _full_disk(tmp_path / "disk") as pages:
        with pytest.raises(ResultsUnwritable, match="No space left on device"):
            summaries.write(pages, "r1", {"regressions": 0})
        with pytest.raises(ResultsUnwritable, match="No space left on device"):
            records.save(pages, RunRecord("r1", "sweeper run", {}, ()))
        assert list(pages.iterdir()) == []
