"""Resuming a run: the points an earlier part of it measured go to their series as they went
then, instead of being measured again, and a probe's budget query is answered by the bound
its rows recorded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sweeper.planning.schedule import Series
from sweeper.wire import Status

# A point of the plan: a probed series (results.schema.PROBED: group id, the operation by its
# name rather than op and algorithm, dtype) and its element count
PointKey = tuple[str, str, str, int]


@dataclass(frozen=True)
class Recorded:
    """A point an earlier part of the run measured: how it went, the bound its series had
    then, and its busbw (a sparse series' plateau is found from it again)."""

    status: Status
    launched: bool
    max_size_bytes: int | None
    busbw_gb_per_s: float | None = None


class Replay:
    """The points a run has rows for, and each resumed series' bound (bytes), once: its rows
    after the budget query carry it."""

    def __init__(self, recorded: Mapping[PointKey, Recorded] | None = None) -> None:
        self.recorded = recorded or {}
        self.bounds: dict[tuple[str, str, str], int] = {}
        for (group_id, op, dtype, _), done in self.recorded.items():
            if done.max_size_bytes is not None:
                key = (group_id, op, dtype)
                self.bounds[key] = max(self.bounds.get(key, 0), done.max_size_bytes)

    def point(self, group_id: str, series: Series, count: int) -> Recorded | None:
        return self.recorded.get((group_id, series.op, series.dtype, count))

    def bound_bytes(self, group_id: str, series: Series) -> int | None:
        return self.bounds.get((group_id, series.op, series.dtype))
