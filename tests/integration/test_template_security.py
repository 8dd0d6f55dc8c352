"""Who an actor trusts with its environment (rank/rendezvous.py): only its own user's rank
template, in a directory only that user can enter. Another user's process listening where the
template would (run as `nobody` where this box lets root drop to it), a same-user process that
is not a template, or a directory another user planted costs the actor one line on its stderr
and a fresh interpreter, and the listener receives nothing. Without Ray, as
test_rank_template.py: a sleeper plays the raylet."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sweeper.rank import rendezvous
from tests.processes import gone, parent

NOBODY = 65534
# The squatter: listens where the user's template would be, on the abstract name the template
# once used (public: /proc/net/unix lists it) and, with a directory given, in the directory
# the user's templates would use, made before the user made it. It answers whatever it
# receives with a pickle that, unpickled, makes the directory `marker`, and on its stdin's end
# prints how many bytes it received.
_SQUATTER = r"""
import os, pickle, select, socket, struct, sys
name, directory, marker, uid = sys.argv[1:5]
listeners = [socket.socket(socket.AF_UNIX)]
listeners[0].bind(f"\0sweeper-rank-template-{uid}-{name}")
if directory:
    os.mkdir(directory, 0o700)
    listeners.append(socket.socket(socket.AF_UNIX))
    listeners[1].bind(os.path.join(directory, name))
for listener in listeners:
    listener.listen()

class Payload:
    def __reduce__(self):
        return os.mkdir, (marker,)

print("listening", flush=True)
received = 0
while True:
    ready, _, _ = select.select([*listeners, sys.stdin], [], [])
    if sys.stdin in ready:
        break
    for listener in ready:
        conn, _ = listener.accept()
        conn.settimeout(5)
        try:
            data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 4)
            for fd in fds:
                os.close(fd)
            while len(data) < 5 or len(data) < 5 + struct.unpack("!i", data[1:5])[0]:
                more = conn.recv(1 << 16)
                if not more:
                    break
                data += more
            received += len(data)
            if data:
                answer = pickle.dumps(Payload(), protocol=2)
                conn.sendall(struct.pack("!i", len(answer)) + answer)
        except OSError:
            pass
        conn.close()
print(received, flush=True)
"""
# An actor, as test_rank_template.py's: it starts its rank's process as RankActor does and
# prints its pid and the rank process's (a forked rank's, as the rank answers INFO; a fresh
# interpreter's, which has answered with its pid and is left without torch, for speed), then
# waits for its stdin to end. The template's name is pinned to what the squatter was told,
# as one reading /proc/net/unix would learn it.
_ACTOR = """
import os, pickle, sys
from sweeper.driver import actor
from sweeper.wire import Backend, RankCall, RayFacts
actor.digest = lambda setting, raylet: os.environ["SWEEPER_TEST_DIGEST"]
conn, fresh = actor.rank_process()
if fresh is None:
    conn.send(((Backend.GLOO,), RayFacts(gpu_ids=(), node_id="node", ip="127.0.0.1")))
    assert conn.recv()[0]
    conn.send((RankCall.INFO, ()))
print(os.getpid(), fresh.pid if fresh else pickle.loads(conn.recv()[1]).pid, flush=True)
sys.stdin.read()
"""


@dataclass
class Actor:
    process: subprocess.Popen[str]
    pid: int
    rank: int


def _command(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


@pytest.fixture
def raylet() -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) as sleeper:
        yield sleeper
        sleeper.kill()


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary directory every user may write in, as /tmp is (sticky, 1777)."""
    path = Path("/tmp") / f"sweeper-test-shared-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir()
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path)


def _nobody() -> list[str]:
    """How to run the squatter as `nobody`, or the reason this box cannot."""
    if os.getuid() != 0:
        pytest.skip("only root can drop to nobody (setpriv) to run the other user's squatter")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    python = "/usr/bin/python3"  # the test's interpreter may live where nobody cannot read
    if not os.access(python, os.X_OK):
        pytest.skip("no /usr/bin/python3 for nobody to run")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python]


def _actor(raylet: int, tmp: Path, name: str) -> Actor:
    env = {**os.environ, "RAY_RAYLET_PID": str(raylet), "TMPDIR": str(tmp)}
    env["SWEEPER_TEST_DIGEST"] = name
    env.pop("XDG_RUNTIME_DIR", None)
    process = subprocess.Popen(
        [sys.executable, "-c", _ACTOR],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    said = process.stdout.readline().split()
    return Actor(process, *(map(int, said) if len(said) == 2 else (process.pid, 0)))


def _ended(actor: Actor) -> str:
    """Its stderr, once it and its rank have gone."""
    actor.process.kill()
    return actor.process.communicate()[1]


@pytest.mark.parametrize("squatter_user", ["nobody", "same"])
def test_an_actor_sends_nothing_to_a_listener_that_is_not_its_users_template(
    raylet: subprocess.Popen[bytes], shared_tmp: Path, tmp_path: Path, squatter_user: str
) -> None:
    """Another user (nobody) who made the user's socket directory first and listens in it,
    and on the abstract name the template once had; or a process of the same user that is no
    template, listening at the template's socket: the actor sends it neither descriptors nor
    environment, unpickles nothing from it, says so in one line, and its rank runs in a fresh
    interpreter."""
    argv = _nobody() if squatter_user == "nobody" else [sys.executable]
    name = f"test-squat-{os.getpid()}-{squatter_user}"
    directory = shared_tmp / f"sweeper-{os.getuid()}"
    marker = tmp_path / "unpickled"
    command = [*argv, "-c", _SQUATTER, name, str(directory), str(marker), str(os.getuid())]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/"
    ) as squatter:
        assert squatter.stdout is not None
        assert squatter.stdout.readline() == "listening\n"
        actor = _actor(raylet.pid, shared_tmp, name)
        forker = parent(actor.rank) if actor.rank else None
        stderr = _ended(actor)
        received, _ = squatter.communicate()  # ends its stdin: it says what it received
    assert int(received) == 0
    assert not marker.exists()
    assert forker == actor.pid, stderr  # its rank runs, in a fresh interpreter
    warnings = [line for line in stderr.splitlines() if line.startswith("sweeper: ")]
    assert len(warnings) == 1, stderr
    assert "fresh interpreter" in warnings[0]


def _other_users(path: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can give a directory to another user")
    path.mkdir(mode=0o700)
    os.chown(path, NOBODY, NOBODY)


def _open_to_all(path: Path) -> None:
    path.mkdir()
    path.chmod(0o777)


def _a_link(path: Path) -> None:
    target = path.with_name("elsewhere")
    target.mkdir(mode=0o700)
    path.symlink_to(target)


def _a_file(path: Path) -> None:
    path.write_text("")


@pytest.mark.parametrize("plant", [_other_users, _open_to_all, _a_link, _a_file])
def test_a_socket_directory_planted_before_the_user_made_it_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plant: Callable[[Path], None]
) -> None:
    """Whatever stands at the user's socket directory's name and is not a directory of the
    user's that no one else may enter (another user's, mode 0777, a link to a directory of
    the user's, a file) is refused with its reason, and nothing is made in it."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    planted = tmp_path / f"sweeper-{os.getuid()}"
    plant(planted)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(rendezvous.Unusable, match=str(planted)):
        rendezvous.directory()
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_the_socket_directory_is_the_users_runtime_directory_where_that_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`$XDG_RUNTIME_DIR/sweeper` where the runtime directory is the user's alone (made 0700
    here, whatever the umask), else the temporary directory's `sweeper-UID`."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    fd = rendezvous.directory()
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == str(runtime / "sweeper")
        assert (runtime / "sweeper").stat().st_mode & 0o777 == 0o700
    finally:
        os.close(fd)
    runtime.chmod(0o755)
    fd = rendezvous.directory()
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == str(tmp_path / f"sweeper-{os.getuid()}")
    finally:
        os.close(fd)


def test_a_temporary_directory_longer_than_a_socket_path_still_gets_a_template(
    raylet: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """A socket's path holds 107 bytes; the template's is reached through its directory's
    descriptor, so a longer TMPDIR costs nothing: no traceback, a forked rank."""
    long = tmp_path / ("d" * 100) / ("e" * 100)
    long.mkdir(parents=True)
    name = f"test-long-{os.getpid()}"
    actor = _actor(raylet.pid, long, name)
    try:
        assert actor.rank
        template = parent(actor.rank)
        safe_path = ["-P"] if sys.version_info >= (3, 11) else []  # no cwd on its import path
        expected = [*safe_path, "-m", "sweeper.rank.template", name]
        assert _command(template)[1 : 1 + len(expected)] == expected
        assert (long / f"sweeper-{os.getuid()}" / name).is_socket()
    finally:
        stderr = _ended(actor)
        raylet.kill()
    assert "Traceback" not in stderr


def test_a_killed_templates_socket_file_is_replaced_and_a_template_that_ends_removes_its_own(
    raylet: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """A template killed (-9) leaves its socket file, where nothing listens, and its lock
    file: the next actor starts a template that takes their place. A template that ends with
    its raylet removes its files."""
    name = f"test-stale-{os.getpid()}"
    directory = tmp_path / f"sweeper-{os.getuid()}"
    directory.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as killed:  # bound, never to listen again
        killed.bind(str(directory / name))
    (directory / f"{name}.lock").touch(mode=0o600)
    actor = _actor(raylet.pid, tmp_path, name)
    try:
        assert actor.rank
        template = parent(actor.rank)
        safe_path = ["-P"] if sys.version_info >= (3, 11) else []  # no cwd on its import path
        expected = [*safe_path, "-m", "sweeper.rank.template", name]
        assert _command(template)[1 : 1 + len(expected)] == expected
        raylet.kill()
        assert gone(template)
        assert sorted(directory.iterdir()) == []
    finally:
        _ended(actor)
