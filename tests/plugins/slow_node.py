"""A test plugin: an all_reduce that the rank on node 2 (the third of the scan's nodes, in
their order) enters late every call, the way a node with a slow NIC holds back every group
it is in. The delay dwarfs a small all_reduce's time on CPU ranks, so the slowdown is many
times the noise."""

from __future__ import annotations

import dataclasses
import time

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

SLOW_NODE = 2
DELAY_S = 0.05
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    if comm.nodes[comm.rank] == SLOW_NODE:
        time.sleep(DELAY_S)
    _all_reduce.bind(buf, comm)()


SLOW_NODE_ALL_REDUCE = register(
    dataclasses.replace(_all_reduce, name="slow_node", algorithm="slow_node", bind=per_call(_run))
)
