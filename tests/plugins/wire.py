"""A test plugin: `wire`, a modelled link: each call of each rank takes the link's transfer
time of the buffer, size / WIRE_BYTES_PER_S (a sleep), and nothing else, so a point's time
is the link's, as on a GPU at large sizes it is NVLink's. On the 2-core CPU box, shared with
other work, gloo's own time moves by 36-146% at 1-4 MiB between identical runs, and a gloo
synchronisation in each call still moved a run's times by 5%: more than two runs can tell
a 10% change from. A sleeping link does not contend for the cores. It moves no data: run it
with --no-check. `tests.plugins.slower_wire` is the same link, slower."""

from __future__ import annotations

import dataclasses
import time

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

WIRE_BYTES_PER_S = 10e6
_all_reduce = REGISTRY["all_reduce"]


def size_bytes(buf: Buffers) -> int:
    return int(buf.send.numel() * buf.send.element_size())


def _run(buf: Buffers, comm: Comm) -> None:
    del comm  # a link of its own: no rank waits for another
    time.sleep(size_bytes(buf) / WIRE_BYTES_PER_S)


WIRE = register(
    dataclasses.replace(_all_reduce, name="wire", algorithm="native", bind=per_call(_run))
)
