"""A test plugin: `tests.plugins.wire`'s link, 10% slower from 1 MiB: each call of that size
or more takes SLOWDOWN longer than the link took (the call is timed, then the rank sleeps
the difference), as a link that lost a tenth of its bandwidth would. It replaces `wire` in
the registry of the process that loads it, so a run with it measures the same points as a
run with `tests.plugins.wire`: a planted regression for `sweeper compare`."""

from __future__ import annotations

import dataclasses
import time

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY
from tests.plugins import wire

SLOWDOWN = 0.10
SLOWER_FROM_BYTES = 2**20


def _run(buf: Buffers, comm: Comm) -> None:
    started = time.perf_counter()
    wire.WIRE.bind(buf, comm)()
    if wire.size_bytes(buf) >= SLOWER_FROM_BYTES:
        time.sleep(SLOWDOWN * (time.perf_counter() - started))


# the same operation over a slower link: its points are wire's, so it takes wire's name
REGISTRY["wire"] = dataclasses.replace(wire.WIRE, bind=per_call(_run))
