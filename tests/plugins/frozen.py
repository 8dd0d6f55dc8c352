"""A test plugin: an all_reduce on a fleet where two nodes freeze, by their places in the
scan's node order. The rank on node FROZEN stops at every call of every group across nodes
(a node frozen for good); the rank on node FROZEN_ONCE stops at its first such call and at
none after (a node frozen once). Which call is its first is a marker file's: the test makes
it, and the first rank of that node to take it (unlink it) freezes. A frozen rank sleeps,
outside any collective, until its actor is killed: the group's other ranks wait for it
inside the collective until their communicator gives up, and answer with that error."""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

FROZEN = 1
FROZEN_ONCE = 3
_all_reduce = REGISTRY["all_reduce"]


def once() -> Path:
    """The marker FROZEN_ONCE's rank takes as it freezes (the test makes it)."""
    return Path(tempfile.gettempdir()) / f"sweeper-frozen-once-{os.getuid()}"


def _taken() -> bool:
    try:
        once().unlink()
    except FileNotFoundError:
        return False
    return True


def _run(buf: Buffers, comm: Comm) -> None:
    node = comm.nodes[comm.rank]
    if len(set(comm.nodes)) > 1 and (node == FROZEN or (node == FROZEN_ONCE and _taken())):
        time.sleep(3600)
    _all_reduce.bind(buf, comm)()


FREEZE = register(
    dataclasses.replace(_all_reduce, name="freeze", algorithm="freeze", bind=per_call(_run))
)
