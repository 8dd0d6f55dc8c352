"""A test plugin: an all_reduce whose every call sleeps first, so a point lasts long enough
that the groups of a wave are seen running at the same time."""

from __future__ import annotations

import dataclasses
import time

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

CALL_S = 0.05
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    time.sleep(CALL_S)
    _all_reduce.bind(buf, comm)()


SLOW = register(
    dataclasses.replace(_all_reduce, name="slow", algorithm="slow", bind=per_call(_run))
)
