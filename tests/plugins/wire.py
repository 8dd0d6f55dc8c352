"""A test plugin: `wire`, an all_reduce over a modelled link. Each call synchronises the
ranks (gloo's all_reduce of the buffer's first element) and then takes the link's transfer
of the whole buffer, size / WIRE_BYTES_PER_S (a sleep), so a point's time is the link's, as
on a GPU at large sizes it is NVLink's. On the 2-core CPU box, shared with other work, gloo's
own time moves by 26-59% at 1-4 MiB between identical runs, more than any two runs can tell
a 10% change from; a sleeping link does not contend for the cores. Its result is not an
all_reduce's: run it with --no-check. `tests.plugins.slower_wire` is the same link, slower."""

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
    first = Buffers(buf.send[:1], None if buf.recv is None else buf.recv[:1])
    _all_reduce.bind(first, comm)()
    time.sleep(size_bytes(buf) / WIRE_BYTES_PER_S)


WIRE = register(
    dataclasses.replace(_all_reduce, name="wire", algorithm="native", bind=per_call(_run))
)
