"""One group of a wave, between calls: its series one after another (`SeriesRunner`), each
action of a series a call to every member, each reply read into the series' next step.

Each point is the two-phase protocol (every member prepares; only when all hold their
buffers do they execute), and its result is handed on the moment it is measured. A timeout
or a failed collective breaks the group (its actors are killed, and replaced by the executor
once the wave's others are done); a group that did not open gets an error row for each point
it had left, saying why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from sweeper.driver import cluster, connection
from sweeper.driver.measurement import busbw_gb_per_s
from sweeper.driver.outcome import Outcome, PointResult, executed, refused, skipped
from sweeper.driver.replay import Replay
from sweeper.ops.descriptor import Collective
from sweeper.planning.dtypes import DTYPES
from sweeper.planning.placement import Group
from sweeper.planning.schedule import Series
from sweeper.planning.series import Action, Budgets, MeasurePoint, SeriesRunner
from sweeper.wire import Point, Status, Timing


class Phase(Enum):
    """What a group waits for: nothing (its next call goes out), its members' replies to a
    call, its actors' replacement (broken), or nothing more (done)."""

    IDLE = "idle"
    BUDGET = "budget"
    ALLOCATE = "allocate"
    PREPARE = "prepare"
    EXECUTE = "execute"
    BROKEN = "broken"
    DONE = "done"


@dataclass(frozen=True, kw_only=True)
class Shared:
    """What every group of an executor runs with."""

    ranks: cluster.RankSet
    collectives: Mapping[str, Collective]
    timing: Timing
    timeout_s: float
    max_size_bytes: int | None  # a grid's limit; None with --max-size auto
    device_type: str
    replay: Replay
    emit: Callable[[PointResult], None]
    # a scan's groups: a point that times out ends its group, its other points not run (one
    # deadline a group that holds a hung rank, not one for each point left)
    timeout_ends_group: bool = False
    # a scan's: how long a point of a group is waited for (its stall deadline, at most
    # timeout_s); None: timeout_s
    deadline_s: Callable[[Group, Point], float] | None = None


@dataclass
class GroupRun:
    """A group of wave `wave` on its nodes, with the series it has left."""

    shared: Shared
    group: Group
    group_id: str
    nodes: tuple[int, ...]
    series: list[Series]
    shares_node: bool  # another group of the wave is on one of its nodes
    wave: int
    phase: Phase = Phase.IDLE
    refs: list[Any] = field(default_factory=list)  # the calls in flight
    deadline: float = 0.0
    _runner: SeriesRunner | None = None
    _action: Action | None = None
    _results: dict[Any, Any] = field(default_factory=dict)
    _issued: float = 0.0  # monotonic, when the phase's calls went out
    _allowed: float = 0.0  # how long the phase's calls are waited for
    _started_at: datetime | None = None
    _probe_s: float = 0.0
    _unopened: str | None = None  # why its group did not open: every point left fails so

    def waiting(self) -> list[Any]:
        """The calls in flight whose replies are not in."""
        return [ref for ref in self.refs if ref not in self._results]

    def not_opened(self, why: str) -> None:
        """Its group did not open: its rows, at once (no member is asked anything)."""
        self._unopened = f"the group did not open: {why}"
        self.advance()

    def reopen(self) -> bool:
        """After its actors' replacement: whether it has points left (to open again)."""
        self.phase = Phase.IDLE if self.series or self._runner is not None else Phase.DONE
        return self.phase is Phase.IDLE

    def advance(self) -> None:
        """The group's next call, or its end: skipped series get their rows here."""
        while True:
            if self._runner is None:
                if not self.series:
                    if self._unopened is None:
                        self.shared.ranks.close_group(self.group_id)
                        self.phase = Phase.DONE
                    else:
                        self._break()
                    return
                series = self.series.pop(0)
                collective = self.shared.collectives[series.op]
                if series.skipped is not None:
                    self._skipped(series, collective)
                    continue
                self._runner = SeriesRunner(
                    series,
                    collective,
                    self.group.world_size,
                    self.shared.device_type,
                    self.shared.max_size_bytes,
                )
            runner = self._runner
            action = self._action = runner.next()
            if action is None:
                self._runner = None
                continue
            if self._replayed(runner, action):
                continue
            if self._unopened is not None:
                self._not_run(runner, action)
                continue
            ranks = self.shared.ranks
            if isinstance(action, Budgets):
                self._issue(Phase.BUDGET, ranks.budget(self.group_id))
            else:
                phase = Phase.PREPARE if isinstance(action, MeasurePoint) else Phase.ALLOCATE
                self._issue(phase, ranks.prepare(self.group_id, self._point(action.count)))
            return

    def collect(self, ready: set[Any]) -> None:
        """The replies among `ready` that are its own; once all are in, the next step, and
        past the deadline, a timeout."""
        for ref in self.refs:
            if ref in ready and ref not in self._results:
                self._results[ref] = value = connection.result(ref)
                if isinstance(value, BaseException):  # the others: a grace, not the timeout
                    self.deadline = min(self.deadline, time.monotonic() + cluster.GRACE_S)
        if len(self._results) == len(self.refs):
            values = [self._results[ref] for ref in self.refs]
            self.refs, self._results = [], {}
            self._complete(values)
        elif time.monotonic() >= self.deadline:
            self._timed_out()

    def _issue(self, phase: Phase, refs: list[Any]) -> None:
        self.phase = phase
        self.refs = refs
        self._issued = time.monotonic()
        self._allowed = self.shared.timeout_s
        action, limit = self._action, self.shared.deadline_s
        if limit is not None and isinstance(action, MeasurePoint):
            self._allowed = min(self._allowed, limit(self.group, self._point(action.count)))
        self.deadline = self._issued + self._allowed

    def _point(self, count: int) -> Point:
        assert self._runner is not None
        series = self._runner.series
        size = count * DTYPES[series.dtype].itemsize
        return Point(
            group_id=self.group_id,
            op=series.op,
            dtype=series.dtype,
            size_bytes=size,
            count=count,
            timing=self.shared.timing,
        )

    def _replayed(self, runner: SeriesRunner, action: Action) -> bool:
        """Resuming: a point the run already has goes to its series as it went then, and a
        probe's budget query is answered by the bound its rows recorded."""
        series = runner.series
        if isinstance(action, MeasurePoint):
            done = self.shared.replay.point(self.group_id, series, action.count)
            if done is None:
                return False
            runner.measured(done.status, done.launched, done.busbw_gb_per_s)
            if runner.done:
                self._runner = None
            return True
        if isinstance(action, Budgets):
            bound = self.shared.replay.bound_bytes(self.group_id, series)
            if bound is not None:
                runner.bound(bound // DTYPES[series.dtype].itemsize)
                return True
        return False

    def _not_run(self, runner: SeriesRunner, action: Action) -> None:
        """The action's end on a group that did not open: a point is an error row that says
        why (not launched); a probe's budget query ends it, as a broken query does."""
        if isinstance(action, MeasurePoint):
            outcome = Outcome(Status.ERROR, error=self._unopened, launched=False)
            self._record(action.count, outcome, None)
        else:
            runner.stop()
            self._runner = None

    def _skipped(self, series: Series, collective: Collective) -> None:
        shared = self.shared
        for done in skipped(
            self.group, self.group_id, series, collective, self.wave, shared.timing
        ):
            shared.emit(done)

    def _complete(self, values: Sequence[Any]) -> None:
        runner, action = self._runner, self._action
        assert runner is not None
        assert action is not None
        broken = any(isinstance(v, BaseException) for v in values)
        if self.phase is Phase.BUDGET:
            self._probe_s += time.monotonic() - self._issued
            if broken:
                runner.stop()
            else:
                runner.budgets(values)
        elif self.phase is Phase.ALLOCATE:
            self._probe_s += time.monotonic() - self._issued
            allocated = refused(values) is None
            self._release()
            runner.allocated(allocated)
        elif self.phase is Phase.PREPARE:
            assert isinstance(action, MeasurePoint)
            refusal = refused(values)
            if refusal is None:
                self._started_at = datetime.now(timezone.utc)
                self._issue(Phase.EXECUTE, self.shared.ranks.execute(self.group_id))
                return
            self._probe_s += time.monotonic() - self._issued  # a refusal is probing, not measuring
            self._release()
            self._record(action.count, refusal, datetime.now(timezone.utc))
        else:  # execute
            assert isinstance(action, MeasurePoint)
            outcome = executed(values)
            self._record(action.count, outcome, self._started_at)
            broken = broken or outcome.status != Status.OK  # a failed collective: unusable
        self.phase = Phase.IDLE
        if broken:
            self._break()

    def _timed_out(self) -> None:
        runner, action = self._runner, self._action
        assert runner is not None
        if isinstance(action, MeasurePoint):
            launched = self.phase is Phase.EXECUTE
            silent = tuple(
                r
                for r, ref in zip(self.group.ranks, self.refs, strict=True)
                if ref not in self._results
            )
            error = f"point took over {self._allowed:g} s" if launched else "prepare timed out"
            if len(silent) < len(self.refs):
                error += f"; rank {', '.join(map(str, silent))} did not answer"
            outcome = Outcome(Status.TIMEOUT, error=error, launched=launched, unanswered=silent)
            self._record(action.count, outcome, self._started_at if launched else None)
        else:  # a budget query or an allocation that hangs: the series ends here
            runner.stop()
        self.refs, self._results = [], {}
        if self.shared.timeout_ends_group:
            self._unopened = "not run: a point of its group timed out before it"
            self.advance()  # its other points' rows, asked of no rank; then it breaks
        else:
            self._break()

    def _record(self, count: int, outcome: Outcome, started_at: datetime | None) -> None:
        runner = self._runner
        assert runner is not None
        point = self._point(count)
        factor = self.shared.collectives[point.op].busbw_factor(self.group.world_size)
        busbw = busbw_gb_per_s(outcome, point.size_bytes, factor)
        runner.measured(outcome.status, outcome.launched, busbw)
        ended = datetime.now(timezone.utc)
        self.shared.emit(
            PointResult(
                group=self.group,
                point=point,
                collective=self.shared.collectives[runner.series.op],
                outcome=outcome,
                wave=self.wave,
                started_at=started_at or ended,
                ended_at=ended,
                max_size_bytes=runner.limit_bytes,
                probe_s=self._probe_s if self.shared.max_size_bytes is None else None,
                shares_node=self.shares_node,
            )
        )
        if runner.done:
            self._runner = None

    def _release(self) -> None:
        self.shared.ranks.release(self.group_id)  # in order before the group's next call

    def _break(self) -> None:
        """The group's actors end now; the executor replaces them once the wave's others are
        done."""
        self.shared.ranks.kill_members(self.group_id)
        self.phase = Phase.BROKEN
