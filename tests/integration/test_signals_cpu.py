"""Issue 30's signals at every moment of a run, not only between points: while Ray starts,
while the actors start, while the driver waits on a point, a second signal during the first
one's cleanup, and after the last point (during Ray's shutdown); and issue 40's and 45's:
while Python imports the command line, as the process exits after the run, and a SIGTERM to
the whole process group (an embedded Ray's processes get it too).

Each driver is a `sweeper run` subprocess with an embedded Ray of its own, signalled when a
marker shows it is at its moment (never after a guessed sleep): its Ray's GCS among its
children; its rank's process loading tests/plugins/nap.py, which then naps before it reports
($SWEEPER_TEST_STARTING); its rank napping in a point ($SWEEPER_TEST_NAPPING); its run record
saying the run is complete; its exit, held by tests/plugins/slow_exit.py
($SWEEPER_TEST_EXITING). They run two at a time, so imports and Rays overlap; the tests
only look.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

import sweeper
from tests.integration.test_faults import _history

# One rank: the nap operation at 1, 2 and 4 KiB, each size above the first a point of about
# 1.5 s (three calls of NAP_S), so a signal after a rank starts napping lands mid-wait.
SWEEP = (
    *("--world", "1", "--ops", "nap", "--plugins", "tests.plugins.nap", "--dtypes", "float32"),
    *("--min-size", "1K", "--max-size", "4K", "--iters", "1", "--warmup", "0", "--blocks", "1"),
    *("--no-report", "--format", "json"),
)
MARKER_S = 300.0  # a loaded two-core box starts an embedded Ray in tens of seconds
# How often a driver's processes are listed before its signal (each time, every process's
# /proc entry is read): its Ray's processes live for seconds. Every 20 ms, as the moment is
# looked for, the two drivers' watchers took a third of a core from the drivers they timed.
LOOK_S = 0.2
_OWN_RAYS = threading.Semaphore(2)


@dataclass(frozen=True)
class Stopped:
    """A driver after its signal(s): how it ended, what it printed, where its rows went,
    which of the processes it started outlived it, and the seconds from the (first) signal
    to its exit."""

    output: Path
    returncode: int
    stdout: list[str]
    stderr: str
    left: dict[int, str]
    took_s: float


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return children


def _descendants(pid: int) -> set[int]:
    children, found, todo = _children(), set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _drive(
    out: Path,
    at: Callable[[subprocess.Popen[str], Path], bool],
    signals: tuple[signal.Signals, ...],
    *extra: str,
    group: bool = False,
) -> Stopped:
    """A driver of SWEEP into `out`, sent `signals` once `at(driver, out)` holds, the second
    one 0.5 s after the first (to its whole process group, where `group`: it leads a session
    of its own, as under `timeout`, systemd or Kubernetes); every process it starts is
    watched until it exits. Two run at a time, each with a Ray of its own: more at once can
    take a loaded two-core box past Ray's own start-up timeout."""
    with _OWN_RAYS:
        return _driven(out, at, signals, *extra, group=group)


def _driven(
    out: Path,
    at: Callable[[subprocess.Popen[str], Path], bool],
    signals: tuple[signal.Signals, ...],
    *extra: str,
    group: bool,
) -> Stopped:
    markers = {"SWEEPER_TEST_NAPPING": out.with_suffix(".napping")}
    if at is _actors_starting:
        markers["SWEEPER_TEST_STARTING"] = out.with_suffix(".starting")
    if at is _exiting:
        markers["SWEEPER_TEST_EXITING"] = out.with_suffix(".exiting")
        extra = (*extra, "--plugins", "tests.plugins.slow_exit")
    env = {**os.environ, **{variable: str(path) for variable, path in markers.items()}}
    command = [sys.executable, "-m", "sweeper", "run", *SWEEP, "--results", str(out), *extra]
    seen: set[int] = set()
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(  # type: ignore[call-overload]
        command, text=True, env=env, start_new_session=group, **pipes
    ) as proc:
        try:
            deadline = time.monotonic() + MARKER_S
            looked = 0.0
            while not at(proc, out):
                assert proc.poll() is None, proc.communicate()
                now = time.monotonic()
                assert now < deadline, "the moment never came"
                if now - looked >= LOOK_S:
                    seen |= _descendants(proc.pid)
                    looked = now
                time.sleep(0.02)
            signalled = time.monotonic()
            for i, signum in enumerate(signals):
                if i:
                    time.sleep(0.5)
                seen |= _descendants(proc.pid)
                if group:
                    os.killpg(proc.pid, signum)
                else:
                    proc.send_signal(signum)
            while proc.poll() is None:
                seen |= _descendants(proc.pid)
                time.sleep(0.02)
            took_s = time.monotonic() - signalled
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()  # no-op once it has exited; a hung driver fails, not hangs
    deadline = time.monotonic() + 15  # an orderly shutdown does not wait for Ray's exits
    while any(_alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: _name(pid) or "?" for pid in seen if _alive(pid)}
    for pid in left:  # fail, and leave nothing behind for the next tests
        os.kill(pid, signal.SIGKILL)
    return Stopped(out, proc.returncode, stdout.splitlines(), stderr, left, took_s)


def _ray_starting(proc: subprocess.Popen[str], out: Path) -> bool:
    return any(_name(pid) in ("gcs_server", "raylet") for pid in _descendants(proc.pid))


def _actors_starting(proc: subprocess.Popen[str], out: Path) -> bool:
    return out.with_suffix(".starting").exists()


def _waiting(proc: subprocess.Popen[str], out: Path) -> bool:
    return out.with_suffix(".napping").exists()


def _complete(proc: subprocess.Popen[str], out: Path) -> bool:
    return any('"complete"' in record.read_text() for record in (out / "_runs").glob("*.json"))


def _exiting(proc: subprocess.Popen[str], out: Path) -> bool:
    return out.with_suffix(".exiting").exists()


@pytest.fixture(scope="module")
def drivers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future[Stopped]]:
    """Every moment's driver, started together; each test waits for its own, and fails for
    its own only (an embedded Ray can time out as it starts on a loaded box)."""
    root = tmp_path_factory.mktemp("signals")
    term, sigint = (signal.SIGTERM,), (signal.SIGINT,)
    moments: dict[str, Callable[[Path], Stopped]] = {
        "ray starting": lambda out: _drive(out, _ray_starting, term),
        "actors starting": lambda out: _drive(out, _actors_starting, sigint),
        "waiting": lambda out: _drive(out, _waiting, sigint),
        "second signal": lambda out: _drive(out, _waiting, term * 2),
        "complete": lambda out: _drive(out, _complete, term, "--max-size", "1K"),
        "group": lambda out: _drive(out, _waiting, term, group=True),
        "exiting": lambda out: _drive(out, _exiting, term, "--max-size", "1K"),
    }
    with ThreadPoolExecutor(len(moments)) as pool:
        return {
            name: pool.submit(drive, root / name.replace(" ", "-"))
            for name, drive in moments.items()
        }


def _run_id(driver: Stopped) -> str:
    started = json.loads(driver.stdout[0])
    assert started["event"] == "started"
    return str(started["run_id"])


def _reported(driver: Stopped) -> set[tuple[str, int]]:
    events = [json.loads(line) for line in driver.stdout if line.startswith("{")]
    return {(e["dtype"], e["size_bytes"]) for e in events if e["event"] == "point"}


def _kept(driver: Stopped) -> set[tuple[str, int]]:
    df = sweeper.load(str(driver.output))
    keys = set(zip(df["dtype"], df["size_bytes"], strict=True))
    assert len(keys) == len(df)  # no row twice
    return keys


def _resume_line(name: str, run_id: str, out: Path) -> str:
    return (
        f"sweeper: stopped by {name}: run {run_id} interrupted, its rows kept in {out}; "
        f"resume with: sweeper run --resume {run_id} --results {out}\n"
    )


def test_a_sigterm_while_ray_starts_exits_143_in_one_line_and_leaves_no_ray_process(
    drivers: dict[str, Future[Stopped]],
) -> None:
    driver = drivers["ray starting"].result()
    assert driver.returncode == 143, driver.stderr
    assert (
        driver.stderr == "sweeper: stopped by SIGTERM before a run started; nothing was written\n"
    )
    assert not driver.left
    assert not (driver.output / "_runs").exists()


def test_a_sigint_while_the_actors_start_marks_the_run_interrupted_and_says_how_to_resume(
    drivers: dict[str, Future[Stopped]],
) -> None:
    driver = drivers["actors starting"].result()
    run_id = _run_id(driver)
    assert driver.returncode == 130, driver.stderr
    assert driver.stderr == _resume_line("SIGINT", run_id, driver.output)
    assert not driver.left
    record = json.loads((driver.output / "_runs" / f"{run_id}.json").read_text())
    assert record["ended"] == "interrupted"  # written before the actors started, and again
    assert _history(driver.output) == {run_id: "interrupted"}  # with no row: it was missing


def test_a_sigint_while_the_driver_waits_on_a_point_stops_it_and_keeps_every_row(
    drivers: dict[str, Future[Stopped]],
) -> None:
    """Ray's wait runs the driver's signal handler; one that raised there was a SystemError
    and exit 1."""
    driver = drivers["waiting"].result()
    run_id = _run_id(driver)
    assert driver.returncode == 130, driver.stderr
    assert driver.stderr == _resume_line("SIGINT", run_id, driver.output)
    assert _history(driver.output) == {run_id: "interrupted"}
    assert _reported(driver) == _kept(driver) == {("float32", 1024)}
    assert not driver.left


def test_a_second_sigterm_during_the_cleanup_exits_at_once_and_leaves_no_ray_process(
    drivers: dict[str, Future[Stopped]],
) -> None:
    """The first SIGTERM's cleanup shuts the embedded Ray down, which took SIGTERM's handler
    with it: the second killed the driver silently, and Ray's agents lived on."""
    driver = drivers["second signal"].result()
    assert driver.returncode == 143, driver.stderr
    assert len(driver.stderr.splitlines()) == 1
    assert driver.stderr.startswith("sweeper: stopped ")
    assert "Traceback" not in driver.stderr
    assert _reported(driver) <= _kept(driver)  # the journal recovered by load, if need be
    assert not driver.left


def test_a_sigterm_after_the_last_point_says_the_run_is_complete(
    drivers: dict[str, Future[Stopped]],
) -> None:
    """It lands as the embedded Ray shuts down: it said nothing was written, or the driver
    died of it silently."""
    driver = drivers["complete"].result()
    run_id = _run_id(driver)
    out = driver.output
    assert driver.returncode == 143, driver.stderr
    assert driver.stderr == (
        f"sweeper: stopped by SIGTERM after run {run_id} completed: its rows are in {out}\n"
    )
    assert _history(out) == {run_id: "complete"}
    assert _reported(driver) == _kept(driver) == {("float32", 1024)}
    assert not driver.left


def test_a_sigterm_to_the_process_group_mid_run_exits_143_at_once_and_keeps_every_row(
    drivers: dict[str, Future[Stopped]],
) -> None:
    """What `timeout`, systemd and Kubernetes send: the embedded Ray's GCS dies of it with the
    driver. Before, the driver waited on the gone GCS and said it had lost the head, exit 3,
    40 s later."""
    driver = drivers["group"].result()
    run_id = _run_id(driver)
    assert driver.returncode == 143, driver.stderr
    assert driver.stderr == _resume_line("SIGTERM", run_id, driver.output)
    assert driver.took_s < 15  # the time a stuck call is given (5 s), and a loaded box's
    assert _history(driver.output) == {run_id: "interrupted"}
    assert _reported(driver) == _kept(driver) == {("float32", 1024)}
    assert not driver.left


def test_a_sigterm_as_the_driver_exits_after_the_run_says_the_run_is_complete(
    drivers: dict[str, Future[Stopped]],
) -> None:
    """After the `finished` event, in the driver's last Python (its atexit callbacks): the
    default handler was back there, and the driver died of the signal without a line."""
    driver = drivers["exiting"].result()
    run_id = _run_id(driver)
    assert json.loads(driver.stdout[-1])["event"] == "finished"
    assert driver.returncode == 143, driver.stderr
    assert driver.stderr == (
        f"sweeper: stopped by SIGTERM after run {run_id} completed: "
        f"its rows are in {driver.output}\n"
    )
    assert _history(driver.output) == {run_id: "complete"}
    assert not driver.left


# `python -m sweeper`, its first import of typer (the command line's first heavy one) held
# until a signal: it touches argv[1] and naps, so the signal lands while Python imports
_IMPORTING = """
import importlib.abc, pathlib, runpy, sys, time

class Held(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "typer":
            pathlib.Path(marker).touch()
            time.sleep(60)

marker = sys.argv.pop(1)
sys.meta_path.insert(0, Held())
runpy.run_module("sweeper", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_python_imports_the_command_line_is_one_line_and_its_code(
    tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    """The first second or two of every command: SIGTERM killed it silently and SIGINT gave a
    traceback, before the handlers came with the sweep."""
    marker, out = tmp_path / "importing", tmp_path / "results"
    command = [sys.executable, "-c", _IMPORTING, str(marker), "run", "--results", str(out)]
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as proc:
        try:
            deadline = time.monotonic() + 60
            while not marker.exists():
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the import never came"
                time.sleep(0.02)
            proc.send_signal(signum)
            _, stderr = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == code, stderr
    assert (
        stderr == f"sweeper: stopped by {signum.name} before a run started; nothing was written\n"
    )
    assert not out.exists()


def test_the_console_script_starts_where_python_m_sweeper_does() -> None:
    """The installed `sweeper` runs the entry that installs the handlers before it imports
    the command line, as `python -m sweeper` does; `sweeper.cli:app` was the Typer app."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert project["project"]["scripts"] == {"sweeper": "sweeper.entry:main"}


# The console script's lines (pip's): `sweeper` as installed, whatever the venv's bin layout
_CONSOLE_SCRIPT = "import re, sys\nfrom sweeper.entry import main\nsys.exit(main())\n"


def _handled(pid: int) -> bool:
    """Whether the process catches SIGTERM (/proc's SigCgt): sweeper's handlers are on, since
    Python's own start catches SIGINT only and entry.py sets SIGINT's before SIGTERM's."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    raise AssertionError("no SigCgt")


def _signalled(
    args: list[str], signum: signal.Signals, moment: Callable[[subprocess.Popen[str]], None]
) -> tuple[bool, int, str, str]:
    """`sweeper ARGS` sent `signum` once `moment(proc)` returns: whether its handlers were on
    as it was sent, its exit code, its stdout and its stderr."""
    command = [sys.executable, "-c", _CONSOLE_SCRIPT, *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        try:
            moment(p)
            handled = _handled(p.pid)
            p.send_signal(signum)
            stdout, stderr = p.communicate(timeout=120)
        finally:
            p.kill()
    return handled, p.returncode, stdout, stderr


def _after_ms(delay_ms: int) -> Callable[[subprocess.Popen[str]], None]:
    def wait(proc: subprocess.Popen[str]) -> None:
        until = time.monotonic() + delay_ms / 1000
        while time.monotonic() < until:  # spun: a sleep's wake-up is coarser than a step
            pass

    return wait


def _once_handled(proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not _handled(proc.pid):
        assert proc.poll() is None, "it ended before its handlers came"
        assert time.monotonic() < deadline, "the handlers never came"


def _pythons_own_start(signum: signal.Signals, code: int, stderr: str) -> bool:
    """What a signal does before sweeper's handlers (docs/RELIABILITY.md): the signal's
    default ending, no line; SIGINT in Python's site or the script's first imports, Python's
    KeyboardInterrupt: its traceback, site's fatal error and exit 1, or, raised in a weakref
    callback of importlib's, "Exception ignored" and the command's own end."""
    if code == -signum and not stderr:
        return True
    interrupted = stderr.rstrip().endswith(("KeyboardInterrupt", "KeyboardInterrupt:"))
    return signum == signal.SIGINT and code in (-signum, 1, 0) and interrupted


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_in_a_commands_first_300_ms_is_its_line_or_pythons_own_start(
    signum: signal.Signals,
) -> None:
    """Every 10 ms of `sweeper --help`'s start, and once its handlers are on: where they are,
    its one line and its code; before, only Python's own start (the handlers are its first
    statement, after this package's import: test_sweeper_imports_nothing_before_...). A fast
    box can finish `--help` inside 300 ms: a signal after its exit is discarded, its output
    whole (test_a_signal_as_a_command_exits_...), so only the handled moment must see the line."""
    line = f"sweeper: stopped by {signum.name} before a run started; nothing was written\n"
    whole = _run_cli(["--help"])
    ended = {  # once `--help` has printed: its exit's line while Python runs, then the kernel's
        (128 + signum, whole, f"sweeper: stopped by {signum.name} as sweeper exited\n"),
        (0, whole, ""),
    }
    for moment in [_after_ms(delay) for delay in range(0, 300, 10)]:
        handled, code, stdout, stderr = _signalled(["--help"], signum, moment)
        if (code, stdout, stderr) in ended:
            continue
        if handled or not _pythons_own_start(signum, code, stderr):
            assert (code, stderr) == (128 + signum, line), (moment, handled, code, stderr)
    handled, code, _, stderr = _signalled(["--help"], signum, _once_handled)
    assert (handled, code, stderr) == (True, 128 + signum, line)


def _run_cli(args: list[str]) -> str:
    """`sweeper ARGS`'s stdout, run to its end undisturbed."""
    ran = subprocess.run(
        [sys.executable, "-c", _CONSOLE_SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return ran.stdout


# The console script under an audit hook: the modules imported before sweeper's SIGTERM handler
_IMPORTS = """
import signal, sys
early = []
def hook(event, args):
    if event == "import" and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        early.append(args[0])
sys.addaudithook(hook)
sys.argv[1:] = ["--version"]
try:
    exec(compile(sys.stdin.read(), "sweeper", "exec"))
finally:
    first = next(i for i, name in enumerate(early) if name.startswith("sweeper"))
    print(" ".join(early[first:]), file=sys.stderr)
"""


def test_sweeper_imports_nothing_before_its_signal_handlers() -> None:
    """Before its handlers, the console script ran this package's import, the command line's
    stops.py (pathlib, dataclasses, inspect, typing: 25 ms of a 2-core box's time) and the
    package's own imports, where a signal killed it silently or with a traceback."""
    command = [sys.executable, "-c", _IMPORTS]
    ran = subprocess.run(
        command, input=_CONSOLE_SCRIPT, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    early = ran.stderr.splitlines()[-1].split()
    assert set(early) == {"sweeper", "__future__", "sweeper._version", "sweeper.entry"}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_as_a_command_exits_is_its_line_or_its_own_exit(signum: signal.Signals) -> None:
    """0-80 ms after `sweeper --version` printed: its handlers' line and code while its Python
    runs, or its own exit 0 (after exit_group, where the kernel discards the signal)."""
    for delay in (0, 5, 10, 20, 40, 80):

        def printed(proc: subprocess.Popen[str], delay: int = delay) -> None:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith("sweeper")
            _after_ms(delay)(proc)

        _, code, _, stderr = _signalled(["--version"], signum, printed)
        stopped = stderr.startswith(f"sweeper: stopped by {signum.name}")
        assert (code, stopped) in {(0, False), (128 + signum, True)}, (delay, stderr)
        assert len(stderr.splitlines()) == stopped, (delay, stderr)
