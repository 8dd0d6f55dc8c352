"""A test plugin: the ranks of one node do not start (their process fails as it imports this
module), the way a node looks whose runtime env or driver fails while its raylet lives. The
node is the one whose raylet's pid names a marker file the test writes (`marker`): on a fake
cluster every node is this machine, and a rank process knows its raylet (RAY_RAYLET_PID, a
Ray worker's) and nothing else of its node. The driver, no Ray worker, imports it quietly."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

REFUSED = "this node's ranks refuse to start"


def marker(raylet_pid: int) -> Path:
    return Path(tempfile.gettempdir()) / f"sweeper-refuse-start-{raylet_pid}"


if marker(int(os.environ.get("RAY_RAYLET_PID", "0"))).exists():
    raise RuntimeError(REFUSED)
