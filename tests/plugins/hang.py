"""A test plugin: an all_reduce that hangs at 1 KiB (and only there, so the sizes after it
show a series going on), the way a real hang looks.

Rank 0 enters the collective; the other ranks never do, so rank 0 waits in gloo for a
peer that will not come. Only killing the actors ends it.
"""

from __future__ import annotations

import dataclasses
import time

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

HANG_AT_BYTES = 1024
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    if buf.send.numel() * buf.send.element_size() == HANG_AT_BYTES and comm.rank != 0:
        time.sleep(3600)
    _all_reduce.bind(buf, comm)()


HANG = register(
    dataclasses.replace(_all_reduce, name="hang", algorithm="hang", bind=per_call(_run))
)
