"""A test plugin: an all_reduce whose every call above its smallest size naps for a while,
so a point lasts long enough that a signal lands while the driver waits on it. Where
$SWEEPER_TEST_NAPPING names a file, a napping rank touches it first: the driver is waiting.
Where $SWEEPER_TEST_STARTING names one, each rank's process touches it as it loads this
plugin and naps before it reports: the driver is waiting on its actors' start."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

from sweeper.ops.descriptor import Buffers, Comm, per_call
from sweeper.ops.registry import REGISTRY, register

NAP_S = 0.5
START_NAP_S = 3.0  # more than Ray's 1 s between looks for a signal while it waits
NAP_ABOVE_BYTES = 1024
_all_reduce = REGISTRY["all_reduce"]


def _touch(variable: str) -> bool:
    marker = os.environ.get(variable)
    if marker:
        Path(marker).touch()
    return bool(marker)


def _run(buf: Buffers, comm: Comm) -> None:
    if buf.send.numel() * buf.send.element_size() > NAP_ABOVE_BYTES:
        _touch("SWEEPER_TEST_NAPPING")
        time.sleep(NAP_S)
    _all_reduce.bind(buf, comm)()


NAP = register(dataclasses.replace(_all_reduce, name="nap", algorithm="nap", bind=per_call(_run)))

if "ray" not in sys.modules and _touch("SWEEPER_TEST_STARTING"):  # a rank's process: no Ray
    time.sleep(START_NAP_S)
