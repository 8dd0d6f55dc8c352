"""The node's rank-process template (rank/template.py), without Ray: processes that play the
raylet (a sleeper) and the actors (an interpreter that starts its rank as RankActor does,
driver/actor.rank_process), and the real template between them."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweeper.rank import template
from sweeper.rank.template import Setting, digest, shared
from tests.processes import gone, parent

# An actor: its rank process, started as RankActor starts it (or, with FRESH, as it does where
# the kernel has no pidfds), answers INFO; the actor prints its pid, the rank's and the
# NCCL_DEBUG the rank sees, then waits to be killed.
_ACTOR = """
import os, pickle, time
from sweeper.driver.actor import _fresh, rank_process
from sweeper.wire import Backend, RankCall, RayFacts
conn, fresh = _fresh(dict(os.environ)) if os.environ.get("FRESH") else rank_process()
conn.send(((Backend.GLOO,), RayFacts(gpu_ids=(), node_id="node", ip="127.0.0.1")))
assert conn.recv()[0]
conn.send((RankCall.INFO, ()))
ok, info = conn.recv()
info = pickle.loads(info)
print(os.getpid(), info.pid, dict(info.nccl_env).get("NCCL_DEBUG", "-"), flush=True)
time.sleep(600)
"""


@dataclass
class Actor:
    process: subprocess.Popen[str]
    rank: int
    nccl_debug: str  # as the rank reads it (RankInfo.nccl_env)


def _command(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:  # gone meanwhile
        return ""


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().split("=", 1) for p in pairs if b"=" in p)


@pytest.fixture
def raylet() -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) as sleeper:
        yield sleeper
        sleeper.kill()


def _actor(raylet: int, cwd: Path, **env: str) -> Actor:
    # Its template's socket in the test's directory, so none a test kills is left in /tmp.
    environ = {**os.environ, "RAY_RAYLET_PID": str(raylet), "TMPDIR": str(cwd), **env}
    environ.pop("XDG_RUNTIME_DIR", None)
    process = subprocess.Popen(
        [sys.executable, "-c", _ACTOR], cwd=cwd, env=environ, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    said = process.stdout.readline().split()
    assert len(said) == 3, process.communicate()
    return Actor(process, int(said[1]), said[2])


def test_actors_of_one_setting_share_a_template_and_each_rank_is_its_actors(
    raylet: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """Two actors whose settings differ only in what a rank reads after its fork (NCCL's
    variables, the GPU Ray gave it) get their ranks from one template, each rank with its own
    actor's environment and working directory; a killed actor takes its rank along and leaves
    the other's; the raylet's end takes the template and the rest."""
    (tmp_path / "a").mkdir()
    first = _actor(raylet.pid, tmp_path / "a", NCCL_DEBUG="WARN", CUDA_VISIBLE_DEVICES="0")
    second = _actor(raylet.pid, tmp_path / "a", NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES="1")
    try:
        template = parent(first.rank)
        assert parent(second.rank) == template
        assert template not in (first.process.pid, second.process.pid)
        assert b"sweeper.rank.template" in Path(f"/proc/{template}/cmdline").read_bytes()
        assert (first.nccl_debug, second.nccl_debug) == ("WARN", "INFO")
        assert "CUDA_VISIBLE_DEVICES" not in _environ(template)  # nor any actor's own
        assert Path(f"/proc/{second.rank}/cwd").resolve() == tmp_path / "a"
        assert Path(f"/proc/{first.rank}/comm").read_text() == "sweeper-rank\n"

        first.process.kill()
        assert gone(first.rank)
        assert not gone(second.rank, within_s=0.5)

        raylet.kill()
        assert gone(template)
        assert gone(second.rank)
    finally:
        for actor in (first, second):
            actor.process.kill()
            actor.process.communicate()  # closes its pipe


def test_a_setting_that_differs_before_the_fork_gets_a_template_of_its_own(
    raylet: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """A rank takes what its process loads at import from the template, so an actor whose
    environment differs in anything else (here a torch variable) is not served by another's."""
    first = _actor(raylet.pid, tmp_path, TORCH_SHOW_CPP_STACKTRACES="0")
    second = _actor(raylet.pid, tmp_path, TORCH_SHOW_CPP_STACKTRACES="1")
    try:
        assert parent(first.rank) != parent(second.rank)
    finally:
        for actor in (first, second):
            actor.process.kill()
            actor.process.communicate()  # closes its pipe
        raylet.kill()


def test_a_template_whose_ranks_are_gone_leaves_after_its_idle_time(
    raylet: subprocess.Popen[bytes],
) -> None:
    """Started as an actor starts it, with a second's idle time: it forks no rank, so it goes."""
    name = f"test-idle-{os.getpid()}"
    argv = ["-m", "sweeper.rank.template", name, str(raylet.pid), "1"]
    subprocess.run([sys.executable, *argv], check=True)  # returns once it holds its name
    templates = [int(p.name) for p in Path("/proc").glob("[0-9]*") if name in _command(p)]
    assert len(templates) == 1
    assert gone(templates[0])


def test_digest_counts_what_a_template_loads_and_not_what_a_rank_reads_later(
    tmp_path: Path,
) -> None:
    env = {"PATH": "/bin", "NCCL_ALGO": "Ring", "CUDA_VISIBLE_DEVICES": "0", "RAY_JOB_ID": "01"}
    setting = Setting(env=env, path=list(sys.path), cwd=str(tmp_path))
    later = {**env, "NCCL_ALGO": "Tree", "CUDA_VISIBLE_DEVICES": "3", "RAY_JOB_ID": "02"}
    later |= {"GLOO_SOCKET_IFNAME": "lo", "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert digest(Setting(env=later, path=setting.path, cwd=setting.cwd), 1) == digest(setting, 1)
    # a machine's multicast switch is the template's own too, kept in its environment
    kept = Setting(env={**env, "NCCL_NVLS_ENABLE": "0"}, path=setting.path, cwd=setting.cwd)
    assert shared(kept.env)["NCCL_NVLS_ENABLE"] == "0"
    assert digest(kept, 1) != digest(setting, 1)
    assert digest(setting, 2) != digest(setting, 1)
    other = Setting(env={**env, "OMP_NUM_THREADS": "1"}, path=setting.path, cwd=setting.cwd)
    assert digest(other, 1) != digest(setting, 1)
    source = Path(__file__).parents[2] / "sweeper" / "wire.py"
    stat = source.stat()
    before = digest(setting, 1)
    try:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        assert digest(setting, 1) != before  # edited code is never served from an old template
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_rank_outlives_no_template_it_was_forked_by(
    raylet: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """Killing the template (an operator's kill, the OOM killer's) ends its ranks, as a
    killed rank process would be: the actor's next call then finds its rank gone."""
    actor = _actor(raylet.pid, tmp_path, SWEEPER_TEST_TEMPLATE="killed")
    try:
        os.kill(parent(actor.rank), signal.SIGKILL)
        assert gone(actor.rank)
    finally:
        actor.process.kill()
        actor.process.communicate()  # closes its pipe
        raylet.kill()


def test_a_fresh_rank_process_is_its_actors_child_and_dies_with_it(
    raylet: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """Where there can be no template, the actor starts its rank from a fresh interpreter."""
    actor = _actor(raylet.pid, tmp_path, FRESH="1", NCCL_DEBUG="WARN")
    try:
        assert parent(actor.rank) == actor.process.pid
        assert actor.nccl_debug == "WARN"
        assert Path(f"/proc/{actor.rank}/comm").read_text() == "sweeper-rank\n"
        actor.process.kill()
        assert gone(actor.rank)
    finally:
        actor.process.kill()
        actor.process.communicate()
        raylet.kill()


def test_a_fork_that_fails_closes_that_actors_connection_and_the_template_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel refusing a fork (no memory, no pids) costs that actor its template, which it
    then goes without (actor.rank_process reads the closed connection as no template), and
    costs the template nothing: no rank, no descriptor left open."""
    name = f"\0sweeper-test-fork-{os.getpid()}"
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as actor,
    ):
        listener.bind(name)
        listener.listen()
        forks = template._Forks(listener, os.pidfd_open(os.getpid()), idle_s=1.0, claim=())
        actor.connect(name)
        descriptors = len(os.listdir("/proc/self/fd"))

        def refused() -> int:
            raise BlockingIOError(errno.EAGAIN, os.strerror(errno.EAGAIN))

        monkeypatch.setattr(os, "fork", refused)
        forks._accept()
        assert actor.recv(1) == b""
        assert (forks.ranks, forks.actors) == ({}, {})
        assert len(os.listdir("/proc/self/fd")) == descriptors
        os.close(forks.raylet_fd)
