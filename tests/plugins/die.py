"""A test plugin: an all_reduce whose actor of world rank 3 dies (its process exits) at
2 KiB, the way a crashed rank looks. Only that size: the rebuilt actor goes on."""

from __future__ import annotations

import dataclasses
import os

import torch.distributed as dist

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

DYING_RANK = 3
DIE_AT_BYTES = 2048
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    size = buf.send.numel() * buf.send.element_size()
    if size == DIE_AT_BYTES and dist.get_rank() == DYING_RANK:
        os._exit(1)
    _all_reduce.bind(buf, comm)()


DIE = register(dataclasses.replace(_all_reduce, name="die", algorithm="die", bind=per_call(_run)))
