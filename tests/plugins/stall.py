"""A test plugin: an all_reduce whose rank 0 stalls once, in the middle timed block.

With `--iters 5 --warmup 2 --blocks 3` a point's calls are: the first call, 2 warm-up, three
blocks of 5, and the check. Call 11 falls in the second block, so that block alone holds
the stall (the peer waits for rank 0 inside the collective, so both ranks see it).
"""

from __future__ import annotations

import dataclasses
import time
from itertools import count

from sweeper.ops.descriptor import Buffers, Comm, Step
from sweeper.ops.registry import REGISTRY, register

STALL_S = 0.25
STALLED_CALL = 11
_all_reduce = REGISTRY["all_reduce"]


def _bind(buf: Buffers, comm: Comm) -> Step:
    step = _all_reduce.bind(buf, comm)
    calls = count(1)

    def stalling() -> None:
        if next(calls) == STALLED_CALL and comm.rank == 0:
            time.sleep(STALL_S)
        step()

    return stalling


STALL = register(dataclasses.replace(_all_reduce, name="stall", algorithm="stall", bind=_bind))
