"""A test plugin: an all_reduce in which one rank of the world, one GPU of a node of two
(world rank 2 x node + GPU, as a gloo placement numbers them), enters every call late at the
scan's bandwidth size, the way a GPU held back slows every collective its rank is in and no
other. The delay dwarfs a 64 KiB all_reduce of CPU ranks (`tests.plugins.faulty_fleet`)."""

from __future__ import annotations

import dataclasses
import time

import torch.distributed as dist

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

SLOW_NODE = 2  # the node's place in the scan's order
SLOW_GPU = 1
DELAY_S = 0.2
SLOW_FROM_BYTES = 64 << 10
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    large = buf.send.numel() * buf.send.element_size() >= SLOW_FROM_BYTES
    if large and dist.get_rank() == 2 * SLOW_NODE + SLOW_GPU:
        time.sleep(DELAY_S)
    _all_reduce.bind(buf, comm)()


SLOW = register(
    dataclasses.replace(_all_reduce, name="slow_gpu", algorithm="slow_gpu", bind=per_call(_run))
)
