"""The fault catalogue of issues 16 and 30: real drivers, real signals, real file systems, a
head lost.

The drivers run as subprocesses that join the session's Ray (so each pays for its imports,
not for a cluster), all at once so that those imports and their actors' starts overlap, and
sweep one CPU rank far longer than it takes to deliver a fault after the first points.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.results.files import MIN_FREE_BYTES
from sweeper.results.journal import JOURNAL_DIR
from tests.conftest import start_ray_session
from tests.tmpfs import tmpfs

# One rank, 4 dtypes x 694 sizes from 2 to 32 KiB (8 bytes apart or more: each a whole number
# of elements, none twice): about 2,800 points of tens of ms, most of a minute in all, where a
# fault comes a few points in. A stopped sweep abandons the rest, so its length costs nothing.
SWEEP = (
    *("--world", "1", "--ops", "all_reduce", "--min-size", "2K", "--max-size", "32K"),
    *("--step-factor", "1.004", "--iters", "20", "--warmup", "1", "--no-report"),
    *("--dtypes", "float32,float64,int32,int64"),
)


def _driver(address: str, output: Path, *extra: str, **popen: object) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "sweeper", "run", "--address", address, *SWEEP]
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [*command, "--results", str(output), *extra], text=True, **popen
    )


def _points(lines: list[str]) -> set[tuple[str, int]]:
    events = [json.loads(line) for line in lines if line.startswith("{")]
    return {(e["dtype"], e["size_bytes"]) for e in events if e["event"] == "point"}


def _on_disk(output: Path) -> set[tuple[str, int]]:
    df = sweeper.load(str(output))
    keys = set(zip(df["dtype"], df["size_bytes"], strict=True))
    assert len(keys) == len(df)  # no duplicates
    return keys


def _history(output: Path) -> dict[str, str]:
    result = CliRunner().invoke(app, ["history", "--results", str(output), "--format", "json"])
    assert result.exit_code == 0, result.output
    return {run["run_id"]: run["ended"] for run in json.loads(result.stdout)}


def _journaled(output: Path) -> None:
    """Until the driver's first row is on disk: a journal holding a whole write, not only the
    schema it is born with (a signal between the two leaves a run without rows)."""
    deadline = time.monotonic() + 120
    while not any(_rows_in(journal) for journal in (output / JOURNAL_DIR).glob("*.arrows")):
        assert time.monotonic() < deadline, "no row came"
        time.sleep(0.05)


def _rows_in(journal: Path) -> int:
    try:
        return int(pa.ipc.open_stream(journal.read_bytes()).read_all().num_rows)
    except (OSError, pa.ArrowInvalid):  # gone (compacted), or a write still in flight
        return 0


@dataclass(frozen=True)
class Faulted:
    """A driver after its fault: what it printed, and where its rows went."""

    output: Path
    returncode: int
    stdout: list[str]  # --format json: its events, one a line
    stderr: str
    screen: bytes = b""  # on a terminal: what it drew there
    joined: str = ""  # the address it joined, where not the session's Ray's own


def _json_driver(address: str, out: Path, signum: signal.Signals) -> Faulted:
    """`signum` once the driver has reported three points."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with _driver(address, out, "--format", "json", **pipes) as proc:
        assert proc.stdout is not None
        try:
            lines = [proc.stdout.readline() for _ in range(4)]  # started, and three points
            proc.send_signal(signum)
            rest, err = proc.communicate(timeout=60)
        finally:
            proc.kill()  # no-op once it has exited; a hung driver fails, not hangs
    return Faulted(out, proc.returncode, [*lines, *rest.splitlines()], err)


class _Relay:
    """A TCP relay in front of the session's GCS, on the GCS's own host (Ray looks for a raylet
    on the host its GCS address names). A driver that joins through it loses its GCS, as when
    the head dies, once the relay is cut; the session's Ray, which other tests share, runs on."""

    def __init__(self, gcs: str) -> None:
        host, port = gcs.rsplit(":", 1)
        self.gcs = (host, int(port))
        self.server = socket.create_server((host, 0))
        self.address = f"{host}:{self.server.getsockname()[1]}"
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()  # a connection accepted as the relay is cut is closed too
        self.was_cut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:  # cut
                return
            try:
                upstream = socket.create_connection(self.gcs)
            except OSError:
                client.close()
                continue
            with self.lock:
                if self.was_cut:
                    client.close()
                    upstream.close()
                    return
                self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:  # cut
            pass

    def cut(self) -> None:
        """Nothing listens any more, and what was connected is reset."""
        with self.lock:
            self.was_cut = True
            self.server.close()
            for sock in self.sockets:
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()


def _headless_driver(gcs: str, out: Path) -> Faulted:
    """The driver's GCS gone once it has reported three points, its rank measuring on. Ray's
    core worker would end it (exit 1) after 6 s of retries here, where it waits 60 by default."""
    relay = _Relay(gcs)
    env = {**os.environ, "RAY_gcs_rpc_server_reconnect_timeout_s": "6"}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with _driver(relay.address, out, "--format", "json", env=env, **pipes) as proc:
        assert proc.stdout is not None
        try:
            lines = [proc.stdout.readline() for _ in range(4)]  # started, and three points
            relay.cut()
            rest, err = proc.communicate(timeout=60)
        finally:
            proc.kill()  # no-op once it has exited; a hung driver fails, not hangs
    return Faulted(out, proc.returncode, [*lines, *rest.splitlines()], err, joined=relay.address)


def _unread_driver(address: str, out: Path) -> Faulted:
    """A reader of its lines that went away before the first (`sweeper run | head -1`, once it
    has its line), four points to measure."""
    read, write = os.pipe()
    os.close(read)
    try:
        short = ("--min-size", "2K", "--max-size", "2K")
        with _driver(address, out, *short, stdout=write, stderr=subprocess.PIPE) as proc:
            try:
                _, err = proc.communicate(timeout=120)
            finally:
                proc.kill()  # no-op once it has exited; a hung driver fails, not hangs
    finally:
        os.close(write)
    return Faulted(out, proc.returncode, [], err)


def _terminal_driver(address: str, out: Path) -> Faulted:
    """Ctrl-C's SIGINT once the driver, drawing on a terminal, has its first row on disk. The
    terminal is read as the driver draws, as a real one is: a full one would block it."""
    leader, follower = pty.openpty()
    screen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end closed
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read)
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120"}
    try:
        with _driver(address, out, stdout=follower, stderr=subprocess.PIPE, env=env) as proc:
            os.close(follower)
            reader.start()
            try:
                _journaled(out)
                proc.send_signal(signal.SIGINT)
                _, err = proc.communicate(timeout=60)
            finally:
                proc.kill()  # no-op once it has exited; a hung driver fails, not hangs
        reader.join()
    finally:
        os.close(leader)
    return Faulted(out, proc.returncode, [], err, bytes(screen))


@pytest.fixture(scope="module")
def faulted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Faulted]:
    """SIGTERM, kill -9, Ctrl-C, a lost head and a closed stdout, each to a driver of its own,
    as many at once as the session's Ray has CPUs for their ranks (4), in that order: the
    last starts as the first ends. Everything happens here, while the session's Ray is sure
    to be up; the tests only look."""
    import ray

    start_ray_session()
    address = str(ray.get_runtime_context().gcs_address)
    root = tmp_path_factory.mktemp("faulted")
    faults: dict[str, Callable[[Path], Faulted]] = {
        "SIGTERM": lambda out: _json_driver(address, out, signal.SIGTERM),
        "SIGKILL": lambda out: _json_driver(address, out, signal.SIGKILL),
        "Ctrl-C": lambda out: _terminal_driver(address, out),
        "head lost": lambda out: _headless_driver(address, out),
        "unread": lambda out: _unread_driver(address, out),
    }
    cpus = threading.Semaphore(int(ray.cluster_resources()["CPU"]))

    def holding(fault: Callable[[Path], Faulted], out: Path) -> Faulted:
        try:
            return fault(out)
        finally:
            cpus.release()

    futures = {}
    with ThreadPoolExecutor(len(faults)) as pool:
        for name, fault in faults.items():
            cpus.acquire()  # a driver whose rank found no CPU would wait on another's end
            futures[name] = pool.submit(holding, fault, root / name)
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize(("fault", "code"), [("SIGTERM", 143), ("SIGKILL", -9)])
def test_a_stopped_or_killed_driver_loses_no_row_it_reported(
    faulted: dict[str, Faulted], fault: str, code: int
) -> None:
    driver = faulted[fault]
    out, err = driver.output, driver.stderr
    assert driver.returncode == code, err
    reported = _points(driver.stdout)
    run_id = json.loads(driver.stdout[0])["run_id"]
    if fault == "SIGTERM":
        assert err.splitlines()[-1] == (
            f"sweeper: stopped by SIGTERM: run {run_id} interrupted, its rows kept in {out}; "
            f"resume with: sweeper run --resume {run_id} --results {out}"
        )
        assert "Traceback" not in err
        assert "SIGABRT" not in err
    assert _history(out) == {run_id: "interrupted" if code > 0 else "incomplete"}
    kept = _on_disk(out)  # after history, which recovered a killed driver's journal
    assert reported <= kept
    assert len(kept - reported) <= 1  # the point in flight, written before it was shown


def test_ctrl_c_on_a_terminal_restores_the_cursor_and_says_how_to_resume(
    faulted: dict[str, Faulted],
) -> None:
    driver = faulted["Ctrl-C"]
    out, err, screen = driver.output, driver.stderr, driver.screen
    assert driver.returncode == 130, err
    assert b"\x1b[?25l" in screen  # the progress bar hid the cursor ...
    assert screen.rindex(b"\x1b[?25h") > screen.rindex(b"\x1b[?25l")  # ... and it is back
    (run_id,) = _history(out)
    assert err.splitlines()[-1].startswith(f"sweeper: stopped by SIGINT: run {run_id} interrupted")
    assert _history(out) == {run_id: "interrupted"}
    assert _on_disk(out)


def test_a_head_lost_mid_run_ends_it_with_one_line_and_exit_3_and_keeps_the_rows(
    faulted: dict[str, Faulted],
) -> None:
    """Before Ray's core worker would end the driver, sweeper ends it: the rows it showed on
    disk, the run interrupted, and how to resume."""
    driver = faulted["head lost"]
    out, err = driver.output, driver.stderr
    assert driver.returncode == 3, err
    run_id = json.loads(driver.stdout[0])["run_id"]
    reported = _points(driver.stdout)
    assert err.splitlines()[-1] == (
        f"sweeper: error: lost the Ray head at {driver.joined} mid-run: {len(reported)} rows "
        f"written, resume with: sweeper run --resume {run_id} --results {out}"
    )
    assert "Traceback" not in err
    assert "The program will terminate" not in err  # Ray's own line, as it ends a driver
    assert _history(out) == {run_id: "interrupted"}
    assert _on_disk(out) == reported


def test_a_closed_stdout_costs_the_lines_not_the_run(faulted: dict[str, Faulted]) -> None:
    """The terminal's lines are a copy of the rows: the run goes on to its end, every row
    written, with one warning line and the run's own exit code."""
    driver = faulted["unread"]
    out, err = driver.output, driver.stderr
    assert driver.returncode == 0, err
    warning = (
        "sweeper: warning: cannot write to stdout (Broken pipe); the run goes on, its rows "
        "kept in the results"
    )
    assert [line for line in err.splitlines() if line.startswith("sweeper")] == [warning]
    (run_id,) = _history(out)
    assert _history(out) == {run_id: "complete"}
    assert len(_on_disk(out)) == 4


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
    with tmpfs(tmp_path / "disk", f"size={MIN_FREE_BYTES // 2**20 + 1}m") as disk:
        out = disk / "results"

        def fill_after_the_first_row() -> None:
            _journaled(out)
            _fill(disk)

        filler = threading.Thread(target=fill_after_the_first_row)
        filler.start()
        result = CliRunner().invoke(app, ["run", *SWEEP, "--results", str(out)])
        filler.join()
        assert result.exit_code == 3, result.output
        line = result.stderr.strip()
        assert line == f"sweeper: error: cannot write results to {out}: No space left on device"
        (disk / "filler").unlink()
        (run_id,) = _history(out)  # its journal recovered, now that there is room
        assert _history(out) == {run_id: "incomplete"}  # the end record did not fit either
        assert _on_disk(out)


@pytest.mark.usefixtures("ray_session")
def test_results_that_turn_read_only_mid_run_stop_the_sweep_with_exit_3_and_keep_the_rows(
    tmp_path: Path,
) -> None:
    """Remounting a file system read-only is refused while the journal is open (EBUSY); a
    read-only bind mount over the results directory refuses what the run creates next, its
    next Parquet batch, as a file system the kernel turned read-only does."""
    with tmpfs(tmp_path / "disk", "size=64m") as disk:
        out = disk / "results"

        def read_only_after_the_first_row() -> None:
            _journaled(out)
            subprocess.run(["mount", "--bind", str(out), str(out)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(out)], check=True)

        turner = threading.Thread(target=read_only_after_the_first_row)
        turner.start()
        try:
            result = CliRunner().invoke(app, ["run", *SWEEP, "--results", str(out)])
        finally:
            turner.join()
            subprocess.run(["umount", "-l", str(out)], check=False)
        assert result.exit_code == 3, result.output
        line = result.stderr.strip()
        assert line == f"sweeper: error: cannot write results to {out}: Read-only file system"
        (run_id,) = _history(out)  # its journal recovered, now that it is writable again
        assert _history(out) == {run_id: "incomplete"}
        assert _on_disk(out)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("read-only", "--results {out}: {disk} is not writable"),
        ("full", "--results {out}: only 0 KiB free on {disk}'s file system"),
        ("long name", "--results {out}: a name over 255 bytes (xxxxxxxxxxxxxxxx...)"),
    ],
)
def test_a_results_location_that_cannot_take_a_run_is_refused_before_ray_starts(
    tmp_path: Path, case: str, message: str
) -> None:
    """Read-only by a mount: root, as tests here run, writes through chmod'd directories."""
    size = "size=64k" if case == "full" else "size=32m"
    with tmpfs(tmp_path / "disk", size) as disk:
        if case == "full":
            _fill(disk)
        if case == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        out = disk / ("x" * 300 if case == "long name" else "results")
        result = CliRunner().invoke(app, ["run", *SWEEP, "--results", str(out)])
        assert result.exit_code == 2
        assert result.stderr.strip() == f"sweeper: error: {message.format(out=out, disk=disk)}"
        assert not os.path.exists(out)  # Path.exists raises on a name too long


def test_an_address_that_accepts_and_never_answers_exits_3_within_the_timeout(
    tmp_path: Path,
) -> None:
    """Plain and ray:// at once: each run is mostly its imports, which overlap."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        addresses = {f"127.0.0.1:{port}": "plain", f"ray://127.0.0.1:{port}": "client"}
        start = time.monotonic()
        procs = {}
        for address, name in addresses.items():
            command = ["run", "--address", address, "--connect-timeout", "1"]
            procs[address] = subprocess.Popen(
                [sys.executable, "-m", "sweeper", *command, "--results", str(tmp_path / name)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        ended = {address: proc.communicate(timeout=60) for address, proc in procs.items()}
    for address, (_, err) in ended.items():
        assert procs[address].returncode == 3, err
        assert err.startswith(
            f"sweeper: error: cannot reach Ray at {address}: no answer within 1 s"
        )
        assert len(err.strip().splitlines()) == 1
        assert not (tmp_path / addresses[address]).exists()
    assert time.monotonic() - start < 30
