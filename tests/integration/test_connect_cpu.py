"""Connecting to a Ray cluster, and what a run's ranks open to the network: --connect-timeout
bounds the whole connection, handshake included, for every command that connects; the
ranks' own listeners are reachable only where their peers are."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.driver import cluster

# Its drivers join other clusters, so they shut the session's Ray down: the module runs after
# every other test of it, this module's own (test_the_ranks_of_one_node_...) first
pytestmark = pytest.mark.ends_session_ray

# An empty HTTP/2 SETTINGS frame: what a gRPC server answers first
_SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _listening(pid: int) -> list[str]:
    """The local addresses at which process `pid` listens on TCP, as /proc shows them (hex;
    all interfaces: 00000000, or 32 zeros for IPv6)."""
    sockets = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            sockets.add(target[len("socket:[") : -1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in sockets:  # 0A: LISTEN
                found.append(fields[1].split(":")[0])
    return found


@pytest.mark.usefixtures("ray_session")
def test_the_ranks_of_one_node_listen_on_loopback_alone() -> None:
    """Rank 0's rendezvous store and gloo's sockets, which no token protects: before, the
    store listened on every interface."""
    slots = cluster.choose_nodes("gloo", 1, 2)
    ranks = cluster.RankSet("gloo", slots, {"CPU": 1.0})
    try:
        infos = ranks.start()
        listening = {info.rank: _listening(info.pid) for info in infos}
    finally:
        ranks.close()
    assert listening[0], "rank 0 serves the store"
    loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1
    assert {rank: set(at) - loopback for rank, at in listening.items()} == {0: set(), 1: set()}


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port whose server answers the HTTP/2 preface as gRPC does, then never says more
    (another gRPC server on the wrong port, one that hangs)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            conn.recv(65536)
            conn.sendall(_SETTINGS)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize(
    ("command", "scheme"), [("run", ""), ("run", "ray://"), ("nightly", "ray://"), ("plan", "")]
)
def test_a_server_that_answers_the_preface_and_stays_silent_fails_within_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silent_server: int, command: str, scheme: str
) -> None:
    """As host:port and as ray://, for run, nightly and plan (topo connects as plan does):
    exit 3 in one line within --connect-timeout, nothing written. Before, the handshake
    hung for minutes, nightly ignored --connect-timeout and plan took none."""
    ray.shutdown()  # the session's Ray, which a driver would join: the next test starts it
    monkeypatch.chdir(tmp_path)
    address = f"{scheme}127.0.0.1:{silent_server}"
    start = time.monotonic()
    result = CliRunner().invoke(app, [command, "--address", address, "--connect-timeout", "1"])
    assert time.monotonic() - start < 1 + 8  # and the first call's imports
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(
        f"sweeper: error: cannot reach Ray at {address}: no answer within 1 s"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def _recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, address: str | None) -> Path:
    """RAY_ADDRESS=auto with what `ray start` would have recorded under this TMPDIR (none
    where `address` is None); returns an empty working directory."""
    ray.shutdown()  # the session's Ray, which a driver would join: the next test starts it
    if address is not None:
        (tmp_path / "ray").mkdir()
        (tmp_path / "ray" / "ray_current_cluster").write_text(address)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_ray_address_auto_is_bounded_by_the_connect_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silent_server: int
) -> None:
    """`auto` (docs/USAGE.md, every systemd unit) is the address `ray start` recorded, joined
    as any address is: one line within --connect-timeout. Before, ray.init resolved it and
    retried past 150 s with Ray's own lines on the console."""
    work = _recorded(tmp_path, monkeypatch, f"127.0.0.1:{silent_server}")
    start = time.monotonic()
    result = CliRunner().invoke(app, ["run", "--connect-timeout", "1"])
    assert time.monotonic() - start < 1 + 8
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(
        f"sweeper: error: cannot reach Ray at 127.0.0.1:{silent_server}: no answer within 1 s"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(work.iterdir()) == []


def test_ray_address_auto_with_no_cluster_recorded_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _recorded(tmp_path, monkeypatch, None)
    result = CliRunner().invoke(app, ["topo"])
    assert result.exit_code == 3, result.output
    assert "$RAY_ADDRESS 'auto': no Ray cluster was started on this machine" in result.stderr
    assert list(work.iterdir()) == []


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_ray_address_auto_recorded_by_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silent_server: int
) -> None:
    """The record is in the shared temporary directory: another user's would have this user
    join their cluster, hand it the token and unpickle what it sends."""
    work = _recorded(tmp_path, monkeypatch, f"127.0.0.1:{silent_server}")
    os.chown(tmp_path / "ray" / "ray_current_cluster", 65534, 65534)
    result = CliRunner().invoke(app, ["topo"])
    assert result.exit_code == 2, result.output
    assert "was written by uid 65534, not this user" in result.stderr
    assert list(work.iterdir()) == []


# sweeper's embedded Ray, started as `sweeper run` starts it; it waits for a line on stdin
_EMBEDDED = """
import sys
from sweeper.driver.connection import connect

connection = connect(None, 1)
print("up", flush=True)
sys.stdin.readline()
connection.close()
"""
_LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def _family(pid: int) -> set[int]:
    """`pid` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _listeners(pid: int) -> dict[str, set[str]]:
    """Where each process of `pid`'s family listens on TCP, by its name (hex, as /proc has it)."""
    found: dict[str, set[str]] = {}
    for member in _family(pid):
        with contextlib.suppress(OSError):  # gone meanwhile
            name = Path(f"/proc/{member}/cmdline").read_bytes().split(b"\0")[:3]
            label = " ".join(part.decode(errors="replace")[-40:] for part in name)
            at = _listening(member)
            if at:
                found[f"{member} {label}"] = set(at)
    return found


def test_the_embedded_ray_listens_on_loopback_alone() -> None:
    """Its GCS, raylet, workers and agents: before, all but the agents listened on every
    interface (and the autoscaler's metrics on 0.0.0.0:44217, with no token), and a host's
    other users could reach them. Looked at as it starts, for 5 s: none listens elsewhere.
    Nor does it run Ray's log monitor (no driver reads what it tails) or autoscaler monitor
    (no node to add), which took CPU beside the ranks."""
    command = [sys.executable, "-c", _EMBEDDED]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
    with subprocess.Popen(command, text=True, **pipes) as proc:  # type: ignore[call-overload]
        try:
            assert proc.stdout.readline() == "up\n", proc.communicate()
            deadline = time.monotonic() + 5
            while True:
                listeners = _listeners(proc.pid)
                elsewhere = {who: at - _LOOPBACK for who, at in listeners.items() if at - _LOOPBACK}
                assert not elsewhere, listeners
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert any("gcs_server" in who for who in listeners), listeners
            assert any("raylet" in who for who in listeners), listeners
            started = [_cmdline(member) for member in _family(proc.pid)]
            assert not [c for c in started if "monitor.py" in c], started  # log_ or autoscaler
        finally:
            proc.communicate("\n", timeout=60)


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:  # gone meanwhile
        return ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# How long a Ray process may take to start, or a driver to join and survey, before the test
# fails naming it: a few seconds on an idle 2-core box, ten times that on a loaded one
WAIT_S = 120


def _log_tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def _wait_listening(port: int, what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until something listens at `port`, for at most WAIT_S; a process that exits first, or
    the time running out, fails the test naming what it waited on and the process's log."""
    deadline = time.monotonic() + WAIT_S
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        time.sleep(0.2)
    state = f"exited {process.returncode}" if process.poll() is not None else f"{WAIT_S} s passed"
    pytest.fail(f"{what} at port {port} never listened ({state}); its log:\n{_log_tail(log)}")


# Ray Client's server, connected to the cluster at argv[2] before it listens at argv[1]; it
# serves while its handle lives
_SERVE = """
import sys, threading
from ray.util.client.server.server import init_and_serve
serving = init_and_serve("127.0.0.1", int(sys.argv[1]), address=sys.argv[2], log_to_driver=False)
threading.Event().wait()
"""


@pytest.fixture(scope="module")
def token_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """A Ray head of its own with token authentication on, as a default Ray 2.60 cluster
    has it, and a Ray Client server in front of it: its ray:// address, its token, and the
    server's log. Each process and its children are one process group, ended with it.

    The Ray Client server is a driver itself, connected before it listens (Ray's
    init_and_serve). The head's own server starts a server process for each driver as it
    calls, through Ray's runtime-env shim: two interpreters that import Ray, 3-8 s on the
    2-core box, more when it is loaded. It takes the shim for that server (the shim's command
    line names the server's module) and polls it at once with gRPC's reconnect backoff (1 s,
    growing 1.6x a try): a server up at 70 s is seen at 113 s, and one run in three waited
    over 120 s. What the driver does, the token included, is the same."""
    root = tmp_path_factory.mktemp("token-head")
    sessions = Path(tempfile.mkdtemp(prefix="ray-"))  # short: a socket's path fits 107 bytes
    token = os.urandom(32).hex()
    gcs_port, client_port = _free_port(), _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "HOME": str(root)}
    ray_cli = Path(sys.executable).with_name("ray")
    head_log, server_log = root / "head.log", root / "client-server.log"
    started: list[subprocess.Popen[bytes]] = []

    def start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            started.append(
                subprocess.Popen(command, env=env, stdout=out, stderr=out, start_new_session=True)
            )
        return started[-1]

    try:
        head = start(
            [
                *(str(ray_cli), "start", "--head", "--block", "--num-cpus", "2"),
                *("--port", str(gcs_port), "--ray-client-server-port", str(_free_port())),
                *("--include-dashboard", "false", "--disable-usage-stats"),
                *("--temp-dir", str(sessions)),
            ],
            head_log,
        )
        _wait_listening(gcs_port, "the head's GCS", head, head_log)
        serve = [sys.executable, "-c", _SERVE, str(client_port), f"127.0.0.1:{gcs_port}"]
        server = start(serve, server_log)
        # it listens once its ray.init returned: the head's raylet has registered
        _wait_listening(client_port, "Ray Client's server", server, server_log)
        yield f"ray://127.0.0.1:{client_port}", token, server_log
    finally:
        for process in reversed(started):
            with contextlib.suppress(ProcessLookupError):  # all gone already
                os.killpg(process.pid, signal.SIGKILL)  # the head's drain on SIGTERM waits 30 s
            process.wait()
        shutil.rmtree(sessions, ignore_errors=True)


def test_ray_client_joins_a_cluster_with_token_auth_where_ray_finds_the_token(
    tmp_path: Path, token_head: tuple[str, str, Path]
) -> None:
    """The token in ~/.ray/auth_token, RAY_AUTH_MODE unset: Ray sends it only to a cluster it
    finds itself, so ray:// failed after 30 s with a line about ports."""
    address, token, server_log = token_head
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(token)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH_")}
    command = [sys.executable, "-m", "sweeper", "topo", "--address", address, "--format", "json"]
    try:
        topo = subprocess.run(
            command,
            env={**env, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        said = exc.stderr if isinstance(exc.stderr, str) else (exc.stderr or b"").decode()
        pytest.fail(
            f"sweeper topo through {address} still running after {WAIT_S} s; its stderr:\n{said}\n"
            f"Ray Client's server:\n{_log_tail(server_log)}"
        )
    assert topo.returncode == 0, f"{topo.stderr}\nRay Client's server:\n{_log_tail(server_log)}"
    assert json.loads(topo.stdout)["backend"] == "gloo"


def test_a_cluster_that_wants_a_token_none_was_found_for_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token_head: tuple[str, str, Path]
) -> None:
    ray.shutdown()  # the session's Ray, which a driver would join: the next test starts it
    address, _, _ = token_head
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["topo", "--address", address])
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(
        f"sweeper: error: Ray at {address} wants an authentication token, and none was found "
        "(`ray get-auth-token` on the head prints the cluster's token: give it as RAY_AUTH_TOKEN"
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_ray_tmpdir_too_long_for_a_socket_path_is_one_line_and_nothing_written(
    tmp_path: Path,
) -> None:
    """Ray puts an embedded session's sockets under $RAY_TMPDIR: one whose paths would pass a
    Unix socket's 107 bytes was a traceback from inside ray.init."""
    long_dir = tmp_path / ("t" * 110)
    long_dir.mkdir()
    results = tmp_path / "results"
    command = [sys.executable, "-m", "sweeper", "run", "--world", "2", "--ops", "all_reduce"]
    command += ["--max-size", "64", "--no-report", "--results", str(results)]
    done = subprocess.run(
        command,
        env={**os.environ, "RAY_TMPDIR": str(long_dir)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("sweeper:")]
    assert len(lines) == 1
    assert "RAY_TMPDIR" in lines[0]
    assert not results.exists()
