"""What the driver makes safe before Ray starts: where Ray's workers import from, and who can
read the token that lets a process into the cluster (docs/RELIABILITY.md, "Security")."""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ray._private.authentication.authentication_token_generator import (
    generate_new_authentication_token,
)
from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]  # not in its stub

from sweeper.errors import BadInput
from sweeper.rank.rendezvous import CODE_ROOT

TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
_NOT_OWNERS = stat.S_IRWXG | stat.S_IRWXO


@contextmanager
def from_code_root() -> Iterator[None]:
    """ray.init run from the directory sweeper is imported from: Ray puts the driver's current
    directory first on its workers' import path (and a Ray it starts runs them there), so a
    `sweeper/` or `torch/` planted where the run started would run in every actor."""
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.chdir(CODE_ROOT)
        yield
    finally:
        os.fchdir(here)
        os.close(here)


def warn_if_shared(directory: str = ".") -> None:
    """One line on stderr where other users may write into the directory the run started in:
    nothing is imported from it, but its results and reports are theirs to tamper with."""
    try:
        found = os.stat(directory)
    except OSError:
        return
    others = found.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or found.st_uid not in (
        os.getuid(),
        0,
    )
    if others:
        _warn_once(os.path.realpath(directory))


@functools.cache
def _warn_once(directory: str) -> None:
    print(
        f"warning: {directory[:200]!r} is writable by other users: sweeper imports nothing from "
        "it, but results and reports written there can be changed by them",
        file=sys.stderr,
    )


def narrow_token_file() -> None:
    """The token file Ray would read (RAY_AUTH_TOKEN_PATH's, else ~/.ray/auth_token) made
    readable by its owner alone, with one line, where others can read it (Ray writes it
    0644); BadInput where it is not this user's to narrow. With RAY_AUTH_TOKEN set, Ray
    reads no file."""
    if os.environ.get(TOKEN_ENV):
        return
    named = os.environ.get(TOKEN_PATH_ENV)
    path = Path(named).expanduser() if named else Path.home() / ".ray" / "auth_token"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return  # none: Ray says so itself where it needs one
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or not found.st_mode & _NOT_OWNERS:
            return
        try:
            if found.st_uid != os.getuid():
                raise PermissionError
            os.fchmod(fd, stat.S_IRUSR | stat.S_IWUSR)
        except OSError:
            raise BadInput(
                f"Ray's token file {str(path)[:200]!r} can be read by other users, and it is "
                "not this user's to narrow: make it readable by its owner alone (chmod 600; "
                "a Kubernetes secret's defaultMode 0400)"
            ) from None
    finally:
        os.close(fd)
    if not named:
        _narrow_directory(path.parent)
    print(
        f"warning: Ray's token file {str(path)[:200]!r} was readable by other users "
        f"({stat.S_IMODE(found.st_mode):04o}); it is now its owner's alone (0600)",
        file=sys.stderr,
    )


def _narrow_directory(directory: Path) -> None:
    """~/.ray as its owner's alone, where it is this user's and not yet."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        found = os.fstat(fd)
        if found.st_uid == os.getuid() and found.st_mode & _NOT_OWNERS:
            os.fchmod(fd, stat.S_IRWXU)
    finally:
        os.close(fd)


def mint_token() -> bool:
    """A fresh token for an embedded Ray, in this process's environment alone, which Ray's
    processes inherit and only this user can read: Ray would otherwise write one to
    ~/.ray/auth_token, readable by anyone (0644). False where the user gave one already."""
    if os.environ.get(TOKEN_ENV) or os.environ.get(TOKEN_PATH_ENV):
        return False
    os.environ[TOKEN_ENV] = generate_new_authentication_token()
    AuthenticationTokenLoader.instance().reset_cache()
    return True


def drop_token() -> None:
    """The minted token out of this process once its Ray is shut down, so a cluster joined
    later in the process is sent the token the user gave it."""
    os.environ.pop(TOKEN_ENV, None)
    AuthenticationTokenLoader.instance().reset_cache()
