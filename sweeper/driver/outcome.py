"""How a point went: its members' replies read as one `Outcome` (each failure one line, with
NCCL's reason where it gave one), and the `PointResult` its rows are made from."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sweeper.ops.descriptor import Collective
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group
from sweeper.planning.schedule import Series
from sweeper.wire import Point, Prepared, RankTimings, Status, Timing


@dataclass(frozen=True)
class Outcome:
    """How a point went on its group: ok with each rank's timings, or why not."""

    status: Status
    measured: tuple[RankTimings, ...] = ()
    error: str | None = None
    launched: bool = True  # False: refused at allocation, before any rank ran a collective
    # a timeout's: the ranks whose reply was not in at the deadline (a rank blocked in a
    # collective with one that hung answers with its communicator's timeout first, where
    # that is shorter than the point's deadline, as the scan's is)
    unanswered: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class PointResult:
    """A point's outcome on its group, and everything its rows say beyond the descriptor."""

    group: Group
    point: Point
    collective: Collective
    outcome: Outcome
    wave: int
    started_at: datetime
    ended_at: datetime
    max_size_bytes: int | None
    probe_s: float | None  # --max-size auto: the series' probing so far
    shares_node: bool  # another group of the wave was on one of its nodes


def skipped(
    group: Group,
    group_id: str,
    series: Series,
    collective: Collective,
    wave: int,
    timing: Timing,
    failure: str | None = None,
) -> Iterator[PointResult]:
    """A series' points that no rank is asked to run, each saying why: skipped (the series'
    reason, if it has one), else an error where its actor set did not start (`failure`)."""
    now = datetime.now(timezone.utc)
    itemsize = DTYPES[series.dtype].itemsize
    outcome = (
        Outcome(Status.SKIPPED, error=series.skipped, launched=False)
        if failure is None or series.skipped is not None
        else Outcome(Status.ERROR, error=failure, launched=False)
    )
    for count in series.counts:
        point = Point(
            group_id=group_id,
            op=series.op,
            dtype=series.dtype,
            size_bytes=count * itemsize,
            count=count,
            timing=timing,
        )
        yield PointResult(
            group=group,
            point=point,
            collective=collective,
            outcome=outcome,
            wave=wave,
            started_at=now,
            ended_at=now,
            max_size_bytes=None,
            probe_s=None,
            shares_node=False,
        )


def refused(prepared: Sequence[Any]) -> Outcome | None:
    """None when every member holds its buffers; else why not (not launched)."""
    failed = next((p for p in prepared if isinstance(p, BaseException)), None)
    if failed is not None:
        return Outcome(Status.ERROR, error=message(failed), launched=False)
    ooms = [p.error or "" for p in prepared if isinstance(p, Prepared) and p.status == Status.OOM]
    if ooms:
        more = f"; and {len(ooms) - 3} more ranks" if len(ooms) > 3 else ""
        return Outcome(Status.OOM, error="; ".join(ooms[:3]) + more, launched=False)
    return None


def executed(measured: Sequence[Any]) -> Outcome:
    """A point's outcome from its members' execute results (exceptions for failures)."""
    failed = next((m for m in measured if isinstance(m, BaseException)), None)
    if failed is not None:
        status = Status.OOM if _out_of_memory(failed) else Status.ERROR
        return Outcome(status, error=message(failed))
    return Outcome(Status.OK, measured=tuple(measured))


def _out_of_memory(exc: BaseException) -> bool:
    """torch's OutOfMemoryError, or NCCL's report of a CUDA allocation that failed inside it."""
    cause = getattr(exc, "cause", None) or exc
    return type(cause).__name__ == "OutOfMemoryError" or "out of memory" in str(cause).lower()


def message(exc: BaseException) -> str:
    """One line: the error's type and first line, and NCCL's reason where it gave one (the
    line after its "Last error:", below a first line that only names the error's class)."""
    cause = getattr(exc, "cause", None) or exc
    lines = [line.strip() for line in str(cause).strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if "Last error:" in lines[:-1]:
        text += f" (NCCL: {lines[lines.index('Last error:') + 1]})"
    return f"{type(cause).__name__}: {text}"
