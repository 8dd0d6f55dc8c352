"""A real small file system for the tests that fill one: a tmpfs mounted where root can mount
one (the test is skipped where it cannot), unmounted whatever the test did."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """`where`, made and mounted as a tmpfs with mount's `options` (size=1m, nr_inodes=64)."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
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
