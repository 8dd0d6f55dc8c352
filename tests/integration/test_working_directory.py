"""A run started in a directory another user can write into (issue 55 items 1 and 2): a real
`sweeper run` on an embedded Ray, started in a 1777 directory where `nobody` (where root can
drop to it; else this user) planted `sweeper/`, `torch/`, `pyarrow/` and `numpy/` packages,
with token authentication on and a home of its own. Nothing planted runs, the run says once
that the directory is shared, and Ray's token is written to no file."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SWEEPER = Path(sys.executable).with_name("sweeper")
PLANTED = ("sweeper", "torch", "pyarrow", "numpy")


def _planter() -> int | None:
    """The uid that plants: `nobody` where this process may become it, else None (this user)."""
    if os.getuid() != 0:
        return None
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return None


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A directory in /tmp anyone may write into (its parents traversable), planted."""
    directory = Path(tempfile.mkdtemp(prefix="sweeper-shared-", dir="/tmp"))
    directory.chmod(0o1777)
    code = f"open({str(directory / 'PWNED')!r}, 'a').write(__name__)\n"
    for name in PLANTED:  # by a shell: nobody may not reach this interpreter
        script = f'mkdir "$0/{name}" && printf "%s" "$1" > "$0/{name}/__init__.py"'
        subprocess.run(["/bin/sh", "-c", script, directory, code], check=True, user=_planter())
    yield directory
    subprocess.run(["rm", "-rf", str(directory)], check=True)


@dataclass(frozen=True)
class Ran:
    home: Path
    result: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def ran(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> Ran:
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env |= {"HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}
    results = tmp_path_factory.mktemp("results")
    run = ("run", "--ops", "all_reduce", "--max-size", "64", "--no-report")
    result = subprocess.run(
        [str(SWEEPER), *run, "--results", str(results)],
        cwd=shared,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return Ran(home, result)


def test_nothing_planted_in_the_working_directory_runs(shared: Path, ran: Ran) -> None:
    assert ran.result.returncode == 0, ran.result.stderr[-2000:]
    assert not (shared / "PWNED").exists(), "a planted package ran"
    assert "all_reduce" in ran.result.stdout


def test_a_shared_working_directory_is_warned_of_once(shared: Path, ran: Ran) -> None:
    lines = [line for line in ran.result.stderr.splitlines() if "writable by other" in line]
    assert len(lines) == 1, ran.result.stderr[-2000:]
    assert str(shared) in lines[0]


def test_an_embedded_rays_token_is_in_no_file(ran: Ran) -> None:
    """Token authentication on (RAY_AUTH_MODE unset), and Ray wrote no ~/.ray/auth_token."""
    assert ran.result.returncode == 0
    assert not (ran.home / ".ray").exists()
