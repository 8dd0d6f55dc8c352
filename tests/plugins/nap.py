"""A test plugin: an all_reduce whose every call above its smallest size naps for a while,
so a point lasts long enough that a signal lands while the driver waits on it. Where
$SWEEPER_TEST_NAPPING names a file, a napping rank touches it first: the driver is waiting."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

NAP_S = 0.5
NAP_ABOVE_BYTES = 1024
_all_reduce = REGISTRY["all_reduce"]


def _run(buf: Buffers, comm: Comm) -> None:
    if buf.send.numel() * buf.send.element_size() > NAP_ABOVE_BYTES:
        marker = os.environ.get("SWEEPER_TEST_NAPPING")
        if marker:
            Path(marker).touch()
        time.sleep(NAP_S)
    _all_reduce.bind(buf, comm)()


NAP = register(dataclasses.replace(_all_reduce, name="nap", algorithm="nap", bind=per_call(_run)))
