"""The fault catalogue of issue 16: real drivers, real signals, real file systems.

The drivers run as subprocesses that join the session's Ray (so each pays for its imports,
not for a cluster) and sweep one CPU rank, long enough that a fault lands mid-run.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.report import MIN_FREE_BYTES
from sweeper.store import JOURNAL_DIR

# one rank, 18 sizes x 4 dtypes: seconds of points after the first, each one row
SWEEP = (
    *("--world", "1", "--ops", "all_reduce", "--max-size", "128K", "--iters", "20"),
    *("--warmup", "1", "--dtypes", "float32,float64,int32,int64", "--no-report"),
)


@pytest.fixture
def address(ray_session: None) -> str:
    import ray

    return str(ray.get_runtime_context().gcs_address)


def _driver(address: str, output: Path, *extra: str, **popen: object) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "sweeper", "run", "--address", address, *SWEEP]
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [*command, "--output", str(output), *extra], text=True, **popen
    )


def _points(lines: list[str]) -> set[tuple[str, int]]:
    events = [json.loads(line) for line in lines if line.startswith("{")]
    return {(e["dtype"], e["size_bytes"]) for e in events if e["event"] == "point"}


def _on_disk(output: Path) -> set[tuple[str, int]]:
    df = sweeper.load(output)
    keys = set(zip(df["dtype"], df["size_bytes"], strict=True))
    assert len(keys) == len(df)  # no duplicates
    return keys


def _history(output: Path) -> dict[str, str]:
    result = CliRunner().invoke(app, ["history", "--results", str(output), "--format", "json"])
    assert result.exit_code == 0, result.output
    return {run["run_id"]: run["ended"] for run in json.loads(result.stdout)}


def _journaled(output: Path) -> None:
    """Until the driver's first row is on disk."""
    deadline = time.monotonic() + 120
    while not list((output / JOURNAL_DIR).glob("*.arrows")):
        assert time.monotonic() < deadline, "no row came"
        time.sleep(0.05)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_a_stopped_or_killed_driver_loses_no_row_it_reported(
    address: str, tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    out = tmp_path / "results"
    with _driver(
        address, out, "--format", "json", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]  # started, and three points
        proc.send_signal(signum)
        rest, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    reported = _points([*lines, *rest.splitlines()])
    run_id = json.loads(lines[0])["run_id"]
    if signum == signal.SIGTERM:
        assert err.splitlines()[-1] == (
            f"sweeper: stopped by SIGTERM: run {run_id} interrupted, its rows kept in {out}; "
            f"resume with: sweeper run --resume {run_id} --output {out}"
        )
        assert "Traceback" not in err
        assert "SIGABRT" not in err
    assert _history(out) == {run_id: "interrupted" if code > 0 else "incomplete"}
    kept = _on_disk(out)  # after history, which recovered a killed driver's journal
    assert reported <= kept
    assert len(kept - reported) <= 1  # the point in flight, written before it was shown


def test_ctrl_c_on_a_terminal_restores_the_cursor_and_says_how_to_resume(
    address: str, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    with _driver(address, out, stdout=follower, stderr=subprocess.PIPE, env=env) as proc:
        os.close(follower)
        _journaled(out)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    screen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    assert proc.returncode == 130, err
    assert b"\x1b[?25l" in screen  # the progress bar hid the cursor ...
    assert screen.rindex(b"\x1b[?25h") > screen.rindex(b"\x1b[?25l")  # ... and it is back
    (run_id,) = _history(out)
    assert err.splitlines()[-1].startswith(f"sweeper: stopped by SIGINT: run {run_id} interrupted")
    assert _history(out) == {run_id: "interrupted"}
    assert _on_disk(out)


@contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
        except OSError:
            pass
        try:  # the last few bytes of a page
            while True:
                filler.write(b"\0")
        except OSError:
            pass


@pytest.mark.usefixtures("ray_session")
def test_a_disk_that_fills_mid_run_stops_the_sweep_with_exit_3_and_keeps_the_rows(
    tmp_path: Path,
) -> None:
    with _tmpfs(tmp_path / "disk", f"{MIN_FREE_BYTES // 2**20 + 1}m") as disk:
        out = disk / "results"
        filler = threading.Thread(target=lambda: (_journaled(out), _fill(disk)))
        filler.start()
        result = CliRunner().invoke(app, ["run", *SWEEP, "--output", str(out)])
        filler.join()
        assert result.exit_code == 3, result.output
        line = result.stderr.strip()
        assert line == f"sweeper: error: cannot write results to {out}: No space left on device"
        (disk / "filler").unlink()
        (run_id,) = _history(out)  # its journal recovered, now that there is room
        assert _history(out) == {run_id: "incomplete"}  # the end record did not fit either
        assert _on_disk(out)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("read-only", "--output {out}: {disk} is not writable"),
        ("full", "--output {out}: only 0 KiB free on {disk}'s file system"),
        ("long name", "--output {out}: a name over 255 bytes (xxxxxxxxxxxxxxxx...)"),
    ],
)
def test_a_results_location_that_cannot_take_a_run_is_refused_before_ray_starts(
    tmp_path: Path, case: str, message: str
) -> None:
    """Read-only by a mount: root, as tests here run, writes through chmod'd directories."""
    size = "64k" if case == "full" else "32m"
    with _tmpfs(tmp_path / "disk", size) as disk:
        if case == "full":
            _fill(disk)
        if case == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        out = disk / ("x" * 300 if case == "long name" else "results")
        result = CliRunner().invoke(app, ["run", *SWEEP, "--output", str(out)])
        assert result.exit_code == 2
        assert result.stderr.strip() == f"sweeper: error: {message.format(out=out, disk=disk)}"
        assert not os.path.exists(out)  # Path.exists raises on a name too long


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_that_accepts_and_never_answers_exits_3_within_the_timeout(
    tmp_path: Path, scheme: str
) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"{scheme}127.0.0.1:{server.getsockname()[1]}"
        start = time.monotonic()
        command = ["run", "--address", address, "--connect-timeout", "1"]
        proc = subprocess.run(
            [sys.executable, "-m", "sweeper", *command, "--output", str(tmp_path / "results")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.startswith(
        f"sweeper: error: cannot reach Ray at {address}: no answer within 1 s"
    )
    assert len(proc.stderr.strip().splitlines()) == 1
    assert time.monotonic() - start < 30
    assert not (tmp_path / "results").exists()
