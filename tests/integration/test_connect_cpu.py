"""Connecting to a Ray cluster, and what a run's ranks open to the network: --connect-timeout
bounds the whole connection, handshake included, for every command that connects; the
ranks' own listeners are reachable only where their peers are."""

from __future__ import annotations

import contextlib
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

# An empty HTTP/2 SETTINGS frame: what a gRPC server answers first
_SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


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
    result = CliRunner().invoke(app, [command, "--address", address, "--connect-timeout", "2"])
    assert time.monotonic() - start < 2 + 8  # and the first call's imports
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(
        f"sweeper: error: cannot reach Ray at {address}: no answer within 2 s"
    )
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def token_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A Ray head of its own with token authentication on, as a default Ray 2.60 cluster
    has it, and Ray Client's server: its ray:// address and its token. The head's processes
    are one process group, ended with it."""
    root = tmp_path_factory.mktemp("token-head")
    sessions = Path(tempfile.mkdtemp(prefix="ray-"))  # short: a socket's path fits 107 bytes
    token = os.urandom(32).hex()
    client_port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "HOME": str(root)}
    # the server Ray Client starts for each driver: on a loaded machine, more than 30 s
    env["RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S"] = "120"
    ray_cli = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [
            *(str(ray_cli), "start", "--head", "--block", "--num-cpus", "2"),
            *("--port", str(_free_port()), "--ray-client-server-port", str(client_port)),
            *("--include-dashboard", "false", "--disable-usage-stats"),
            *("--temp-dir", str(sessions)),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and head.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", client_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        yield f"ray://127.0.0.1:{client_port}", token
    finally:
        with contextlib.suppress(ProcessLookupError):  # all gone already
            os.killpg(head.pid, signal.SIGKILL)  # the head's drain on SIGTERM waits 30 s
        head.wait()
        shutil.rmtree(sessions, ignore_errors=True)


def test_a_cluster_that_wants_a_token_none_was_found_for_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token_head: tuple[str, str]
) -> None:
    ray.shutdown()  # the session's Ray, which a driver would join: the next test starts it
    address, _ = token_head
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["topo", "--address", address])
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(
        f"sweeper: error: Ray at {address} wants an authentication token, and none was found "
        "(`ray get-auth-token` on the head prints the cluster's token: give it as RAY_AUTH_TOKEN"
    )
    assert len(result.stderr.strip().splitlines()) == 1
