"""What a writer killed with SIGKILL leaves (a page's in-flight file, its run's lock file) is
removed by the next writer there; what a live writer holds is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sweeper.results.files import write_text
from sweeper.results.journal import JOURNAL_DIR
from sweeper.results.writer import ResultWriter

# Writes half a file through atomic_write, says so, and waits to be killed.
_HALF_WRITE = """
import sys, time
from pathlib import Path
from sweeper.results.files import atomic_write

def half(file):
    file.write(b"<html>half a page")
    file.flush()
    print("writing", flush=True)
    time.sleep(600)

atomic_write(Path(sys.argv[1]), half)
"""
# Journals a row of its run, says so, and waits to be killed.
_LOCKED = """
import sys, time
from sweeper.results.writer import ResultWriter

writer = ResultWriter(sys.argv[1], sys.argv[2], "2026-11-21", batch_rows=10**6)
writer.append({"run_id": sys.argv[2], "status": "ok"})
print("writing", flush=True)
time.sleep(600)
"""


@contextmanager
def _writer(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A writer in a child, once it is writing; killed with SIGKILL on the way out."""
    with subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "writing\n"
            yield proc
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


def _aged(path: Path) -> None:
    """As a file left an hour ago looks."""
    an_hour_ago = time.time() - 3600
    os.utime(path, (an_hour_ago, an_hour_ago))


def test_a_page_write_killed_midway_leaves_an_inflight_file_the_next_write_removes(
    tmp_path: Path,
) -> None:
    """It stayed for ever (_inflight-page.html.RANDOM, readers skip it)."""
    with _writer(_HALF_WRITE, str(tmp_path / "page.html")):
        pass  # killed mid-write
    (killed,) = tmp_path.glob("_inflight-*")
    _aged(killed)
    with _writer(_HALF_WRITE, str(tmp_path / "other.html")):
        (live,) = set(tmp_path.glob("_inflight-*")) - {killed}
        _aged(live)

        write_text(tmp_path / "page.html", "<html>whole</html>")

        assert not killed.exists()
        assert live.exists()  # its writer holds it
    assert (tmp_path / "page.html").read_text() == "<html>whole</html>"


def test_a_run_killed_midway_leaves_its_lock_the_next_writer_removes(tmp_path: Path) -> None:
    """_journal/RUN.lock stayed for ever; its journal stays for the readers to recover."""
    journal = tmp_path / JOURNAL_DIR
    with _writer(_LOCKED, str(tmp_path), "r1"):
        pass  # killed mid-run
    assert (journal / "r1.lock").exists()
    with _writer(_LOCKED, str(tmp_path), "r2"):
        writer = ResultWriter(tmp_path, "r3", "2026-11-21")

        assert not (journal / "r1.lock").exists()
        assert (journal / "r1.arrows").exists()
        assert (journal / "r2.lock").exists()  # its writer is alive
    writer.close()
