"""A test plugin: an all_reduce on a fleet with two planted faults, by the nodes' places in
the scan's node order. The rank on node 2 enters every call late, the way a node with a slow
NIC holds back every group it is in; a group holding both node 4 and node 5 is slow, the way
a bad cable between two nodes looks (each of them is fine beside any other). The delay, at
the scan's bandwidth size only (its latency point stays quick), dwarfs a 64 KiB all_reduce
on CPU ranks, so each slowdown is many times the noise."""

from __future__ import annotations

import dataclasses
import time

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

SLOW_NODE = 2
SLOW_LINK = (4, 5)
DELAY_S = 0.2
SLOW_FROM_BYTES = 64 << 10
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    slow_node = comm.nodes[comm.rank] == SLOW_NODE
    slow_link = comm.rank == 0 and set(SLOW_LINK) <= set(comm.nodes)
    large = buf.send.numel() * buf.send.element_size() >= SLOW_FROM_BYTES
    if large and (slow_node or slow_link):
        time.sleep(DELAY_S)
    _all_reduce.bind(buf, comm)()


FAULTY = register(
    dataclasses.replace(_all_reduce, name="faulty", algorithm="faulty", bind=per_call(_run))
)
