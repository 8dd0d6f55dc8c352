"""Spec x placement -> groups -> points. Pure: no Ray, no torch.

The descriptors come in as an argument (`OpShape` is the part of one that planning
needs), so this module is tested as plain functions on plain data.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sweeper.spec import DTYPES


class OpShape(Protocol):
    @property
    def name(self) -> str: ...

    def count(self, size_bytes: int, itemsize: int, n: int) -> int: ...


@dataclass(frozen=True)
class Group:
    """Ranks of one actor set that run points together, and what their rows will say."""

    group_id: str
    tier: str
    ranks: tuple[int, ...]  # ranks of the actor set (its world group)
    hosts: tuple[str, ...]  # one per rank
    gpu_uuids: tuple[str, ...]  # one per rank; empty for CPU ranks
    variant: str = "default"
    env: tuple[tuple[str, str], ...] = field(default=())  # NCCL variables of its actor set

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def n_nodes(self) -> int:
        return len(set(self.hosts))


@dataclass(frozen=True)
class Timing:
    """How every point of a sweep is measured."""

    iters: int | None = None  # None: adaptive
    warmup: int | None = None  # None: adaptive
    check: bool = True
    samples: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Point:
    """One measurement: everything a rank needs to run it, and nothing it must work out."""

    group_id: str
    op: str  # descriptor name
    dtype: str
    size_bytes: int  # S, after rounding to whole elements for every rank
    count: int  # elements of S
    timing: Timing


def points(
    group: Group,
    ops: Iterable[OpShape],
    dtypes: Iterable[str],
    sizes: Sequence[int],
    timing: Timing,
) -> list[Point]:
    """Every op x dtype x size for one group, sizes rounded per op and deduplicated, ascending."""
    out: list[Point] = []
    for op in ops:
        for dtype in dtypes:
            itemsize = DTYPES[dtype].itemsize
            counts = sorted({op.count(size, itemsize, group.world_size) for size in sizes})
            out.extend(
                Point(group.group_id, op.name, dtype, count * itemsize, count, timing)
                for count in counts
            )
    return out
