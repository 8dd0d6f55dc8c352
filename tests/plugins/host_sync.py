"""A test plugin: an all_reduce that reads a value back to the host every iteration, as an
algorithm that decides on the host would. CUDA graphs cannot capture that, so the sweep must
time it eagerly and say why."""

from __future__ import annotations

import dataclasses

from sweeper.ops.descriptor import Buffers, Comm, Step
from sweeper.ops.registry import REGISTRY, register

_all_reduce = REGISTRY["all_reduce"]


def _bind(buf: Buffers, comm: Comm) -> Step:
    step = _all_reduce.bind(buf, comm)

    def synchronizing() -> None:
        step()
        buf.send[:1].item()  # a device-to-host copy: the host waits for the stream

    return synchronizing


HOST_SYNC = register(
    dataclasses.replace(_all_reduce, name="host_sync", algorithm="host_sync", bind=_bind)
)
