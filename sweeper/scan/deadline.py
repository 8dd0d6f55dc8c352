"""A scan point's stall deadline: a multiple of the time the point is expected to take, not the
flat `--timeout` alone, as NVIDIA's Cluster Readiness Engine sets its stall deadlines. A point
that stops answering holds its whole wave until then, so a hung node at 1024 nodes cost a
wave 300 s where its point takes 1-2 s. The floor keeps a loaded driver, a slow first call
(communicator set-up, allocation) and a model that is wrong by several times from calling a
healthy point hung; `--timeout` stays the most any point is given.
"""

from __future__ import annotations

STALL_FACTOR = 10.0  # a point is hung at ten times its expected time ...
STALL_FLOOR_S = 30.0  # ... and never before this


def stall_s(expected_s: float, timeout_s: float) -> float:
    """How long a point expected to take `expected_s` is waited for before it is hung."""
    return min(timeout_s, max(STALL_FLOOR_S, STALL_FACTOR * expected_s))
