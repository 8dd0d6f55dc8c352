"""A test plugin whose driver-side code prints: an all_reduce that says so on stdout each time
the planner asks whether it can run on a group, as a plugin left with a debugging print
would. Under `--format json` none of it may reach stdout, which is the document's."""

from __future__ import annotations

import dataclasses

from sweeper.ops.registry import REGISTRY, register
from sweeper.planning.placement import Shape

SAID = "chatty: asked whether it runs on a group"
_all_reduce = REGISTRY["all_reduce"]


def _why_not(shape: Shape) -> str | None:
    print(SAID)
    return _all_reduce.why_not(shape)


CHATTY = register(
    dataclasses.replace(
        _all_reduce, name="chatty", algorithm="chatty", why_not=_why_not, core=False
    )
)
