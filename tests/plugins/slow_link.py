"""A test plugin: an all_reduce that is slow only in groups holding both node 4 and node 5
(in the scan's node order), the way a bad cable between two nodes looks: each node is fine
beside any other."""

from __future__ import annotations

import dataclasses
import time

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

LINK = (4, 5)
DELAY_S = 0.05
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    if comm.rank == 0 and set(LINK) <= set(comm.nodes):
        time.sleep(DELAY_S)
    _all_reduce.bind(buf, comm)()


SLOW_LINK_ALL_REDUCE = register(
    dataclasses.replace(_all_reduce, name="slow_link", algorithm="slow_link", bind=per_call(_run))
)
