"""The executor: a wave's groups at the same time, on one actor set.

It opens every group of a wave together (on their members only), then drives each group's
series (`SeriesRunner`) as an event loop: a group whose last call is in gets its next one at
once, so one group's probing and bisection never wait for another's points. Each point is
the two-phase protocol (every member prepares; only when all hold their buffers do they
execute), and its row is handed on the moment it is measured.

Failure stays where it happened: a timeout or a dead actor gives that point its row, and the
group's actors are killed; the wave's other groups go on. When they are done, the failed
groups' actors are replaced (the others keep their processes and join the new world), the
failed groups open again, and their series go on with their next sizes. A group that does
not open (a member's actor died while idle, a communicator refused) gets an error row for
each point it had left, saying why, and its actors are replaced the same way.

A group whose ranks an earlier group of the world had (a node's NVLink island, then its
GPUs' copies at once) opens in a new world: torch names a locally synchronised group by its
ranks and finds its rendezvous under that name in the world's store, where the first one's
keys still are.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sweeper.descriptor import Collective
from sweeper.driver import cluster
from sweeper.plan import Group, Placement, Point, Timing
from sweeper.schedule import Series, Wave
from sweeper.series import Allocate, Budgets, Measure, SeriesRunner
from sweeper.spec import DTYPES

POLL_S = 1.0  # the longest the loop sleeps without looking at deadlines

PointKey = tuple[str, str, str, int]  # group id, operation, dtype, count


@dataclass(frozen=True)
class Recorded:
    """A point an earlier part of the run measured (resuming): how it went, and the bound its
    series had then, so the series replays it instead of measuring it again."""

    status: str
    launched: bool
    max_size_bytes: int | None


@dataclass(frozen=True)
class Measured:
    """A point's outcome on its group, and everything its rows say beyond the descriptor."""

    group: Group
    point: Point
    collective: Collective
    outcome: cluster.Outcome
    wave: int
    started_at: datetime
    ended_at: datetime
    max_size_bytes: int | None
    probe_s: float | None  # --max-size auto: the series' probing so far
    shares_node: bool  # another group of the wave was on one of its nodes


@dataclass
class _Run:
    """One group of a wave, between calls."""

    group: Group
    group_id: str
    nodes: tuple[int, ...]
    series: list[Series]
    shares_node: bool
    runner: SeriesRunner | None = None
    action: Measure | Budgets | Allocate | None = None
    phase: str = "idle"  # idle, prepare, execute, budget, allocate, broken, done
    refs: list[Any] = field(default_factory=list)
    results: dict[Any, Any] = field(default_factory=dict)
    deadline: float = 0.0
    issued: float = 0.0  # monotonic, when the phase's calls went out
    started_at: datetime | None = None
    probe_s: float = 0.0
    unopened: str | None = None  # why its group did not open: every point left fails so


def skipped(
    group: Group,
    group_id: str,
    series: Series,
    collective: Collective,
    wave: int,
    timing: Timing,
    failure: str | None = None,
) -> Iterator[Measured]:
    """A series' points that no rank is asked to run, each saying why: skipped (the series'
    reason, if it has one), else an error where its actor set did not start (`failure`)."""
    now = datetime.now(timezone.utc)
    itemsize = DTYPES[series.dtype].itemsize
    outcome = (
        cluster.Outcome("skipped", error=series.skipped, launched=False)
        if failure is None or series.skipped is not None
        else cluster.Outcome("error", error=failure, launched=False)
    )
    for count in series.counts:
        point = Point(group_id, series.op, series.dtype, count * itemsize, count, timing)
        yield Measured(group, point, collective, outcome, wave, now, now, None, None, False)


class Executor:
    def __init__(
        self,
        ranks: cluster.RankSet,
        placement: Placement,
        series_of: Callable[[Group], Sequence[Series]],
        collectives: Mapping[str, Collective],
        timing: Timing,
        timeout_s: float,
        max_size_bytes: int | None,  # a grid's limit; None with --max-size auto
        emit: Callable[[Measured], None],
        recorded: Mapping[PointKey, Recorded] | None = None,
    ) -> None:
        self.ranks = ranks
        self.placement = placement
        self.series_of = series_of
        self.collectives = collectives
        self.timing = timing
        self.timeout_s = timeout_s
        self.max_size_bytes = max_size_bytes
        self.emit = emit
        self.recorded = recorded or {}
        # each resumed series' bound (bytes), once: its rows after the budget query carry it
        self.bounds: dict[tuple[str, str, str], int] = {}
        for (group_id, op, dtype, _), done in self.recorded.items():
            if done.max_size_bytes is not None:
                key = (group_id, op, dtype)
                self.bounds[key] = max(self.bounds.get(key, 0), done.max_size_bytes)
        self.device_type = "cuda" if placement.backend == "nccl" else "cpu"
        self.wave = -1
        self.opened: set[tuple[int, ...]] = set()  # rank sets with a group in this world

    def run(self, waves: Sequence[Wave]) -> None:
        """An actor set's waves, in order."""
        for wave in waves:
            self.run_wave(wave)

    def run_wave(self, wave: Wave) -> None:
        self.wave = wave.number
        node_of = [m.node for m in self.placement.members]
        per_node = Counter(n for g in wave.groups for n in {node_of[r] for r in g.ranks})
        runs = []
        for group in wave.groups:
            nodes = tuple(node_of[r] for r in group.ranks)
            shared = any(per_node[n] > 1 for n in set(nodes))
            group_id = self.placement.group_id(group)
            runs.append(_Run(group, group_id, nodes, list(self.series_of(group)), shared))
        subsets = self._subsets(wave.groups)
        if subsets & self.opened:
            self.ranks.replace_ranks(())
            self.opened.clear()
        self.opened |= subsets
        self._open(runs)
        while True:
            for run in runs:
                if run.phase == "idle":
                    self._advance(run)
            live = [run for run in runs if run.refs]
            if not live:
                broken = [run for run in runs if run.phase == "broken"]
                if not broken:
                    return
                self._rebuild(broken)
                continue
            waiting = [ref for run in live for ref in run.refs if ref not in run.results]
            soonest = min(run.deadline for run in live) - time.monotonic()
            ready = set(cluster.wait(waiting, min(POLL_S, soonest)))
            for run in live:
                self._collect(run, ready)

    def _subsets(self, groups: Iterable[Group]) -> set[tuple[int, ...]]:
        """The rank sets of `groups` that torch opens as groups of their own (not the world)."""
        return {g.ranks for g in groups if len(g.ranks) < self.ranks.world_size}

    def _open(self, runs: Sequence[_Run]) -> None:
        failed = self.ranks.open_groups([(r.group_id, r.group.ranks, r.nodes) for r in runs])
        for run in runs:
            if run.group_id in failed:
                run.unopened = f"the group did not open: {failed[run.group_id]}"
                self._advance(run)  # its rows, at once: no member is asked anything

    def _collect(self, run: _Run, ready: set[Any]) -> None:
        for ref in run.refs:
            if ref in ready and ref not in run.results:
                run.results[ref] = value = cluster.result(ref)
                if isinstance(value, BaseException):  # the others: a grace, not the timeout
                    run.deadline = min(run.deadline, time.monotonic() + cluster.GRACE_S)
        if len(run.results) == len(run.refs):
            values = [run.results[ref] for ref in run.refs]
            run.refs, run.results = [], {}
            self._complete(run, values)
        elif time.monotonic() >= run.deadline:
            self._timed_out(run)

    def _issue(self, run: _Run, phase: str, method: str, *args: Any) -> None:
        run.phase = phase
        run.refs = self.ranks.call(run.group_id, method, *args)
        run.issued = time.monotonic()
        run.deadline = run.issued + self.timeout_s

    def _point(self, run: _Run, count: int) -> Point:
        assert run.runner is not None
        series = run.runner.series
        size = count * DTYPES[series.dtype].itemsize
        return Point(run.group_id, series.op, series.dtype, size, count, self.timing)

    def _advance(self, run: _Run) -> None:
        """The group's next call, or its end: skipped series get their rows here."""
        while True:
            if run.runner is None:
                if not run.series:
                    if run.unopened is None:
                        self.ranks.close_group(run.group_id)
                        run.phase = "done"
                    else:
                        self._break(run)
                    return
                series = run.series.pop(0)
                collective = self.collectives[series.op]
                if series.skipped is not None:
                    self._skipped(run, series, collective)
                    continue
                run.runner = SeriesRunner(
                    series, collective, run.group.world_size, self.device_type, self.max_size_bytes
                )
            action = run.runner.next()
            run.action = action
            if action is None:
                run.runner = None
                continue
            if self._replayed(run, run.runner, action):
                continue
            if run.unopened is not None:
                self._unopened(run, run.runner, action)
                continue
            if isinstance(action, Budgets):
                self._issue(run, "budget", "budget")
            else:
                phase = "prepare" if isinstance(action, Measure) else "allocate"
                self._issue(run, phase, "prepare", self._point(run, action.count))
            return

    def _replayed(
        self, run: _Run, runner: SeriesRunner, action: Measure | Budgets | Allocate
    ) -> bool:
        """Resuming: a point the run already has goes to its series as it went then, and a
        probe's budget query is answered by the bound its rows recorded."""
        series = runner.series
        if isinstance(action, Measure):
            done = self.recorded.get((run.group_id, series.op, series.dtype, action.count))
            if done is None:
                return False
            runner.measured(done.status, done.launched)
            if runner.done:
                run.runner = None
            return True
        if isinstance(action, Budgets):
            bound = self.bounds.get((run.group_id, series.op, series.dtype))
            if bound is not None:
                runner.bound(bound // DTYPES[series.dtype].itemsize)
                return True
        return False

    def _unopened(
        self, run: _Run, runner: SeriesRunner, action: Measure | Budgets | Allocate
    ) -> None:
        """The action's end on a group that did not open: a point is an error row that says
        why (not launched); a probe's budget query ends it, as a broken query does."""
        if isinstance(action, Measure):
            outcome = cluster.Outcome("error", error=run.unopened, launched=False)
            self._record(run, action.count, outcome, None)
        else:
            runner.state = "done"
            run.runner = None

    def _skipped(self, run: _Run, series: Series, collective: Collective) -> None:
        for done in skipped(run.group, run.group_id, series, collective, self.wave, self.timing):
            self.emit(done)

    def _complete(self, run: _Run, values: list[Any]) -> None:
        runner, action = run.runner, run.action
        assert runner is not None
        assert action is not None
        broken = any(isinstance(v, BaseException) for v in values)
        if run.phase == "budget":
            run.probe_s += time.monotonic() - run.issued
            if broken:
                runner.state = "done"
            else:
                runner.budgets(values)
        elif run.phase == "allocate":
            run.probe_s += time.monotonic() - run.issued
            allocated = cluster.refused(values) is None
            self._release(run)
            runner.allocated(allocated)
        elif run.phase == "prepare":
            assert isinstance(action, Measure)
            refused = cluster.refused(values)
            if refused is None:
                run.started_at = datetime.now(timezone.utc)
                self._issue(run, "execute", "execute")
                return
            run.probe_s += time.monotonic() - run.issued  # a refusal is probing, not measuring
            self._release(run)
            self._record(run, action.count, refused, datetime.now(timezone.utc))
        else:  # execute
            assert isinstance(action, Measure)
            outcome = cluster.outcome(values)
            self._record(run, action.count, outcome, run.started_at)
            broken = broken or outcome.status != "ok"  # a failed collective: an unusable group
        run.phase = "idle"
        if broken:
            self._break(run)

    def _timed_out(self, run: _Run) -> None:
        runner, action = run.runner, run.action
        assert runner is not None
        if isinstance(action, Measure):
            launched = run.phase == "execute"
            error = f"point took over {self.timeout_s:g} s" if launched else "prepare timed out"
            outcome = cluster.Outcome("timeout", error=error, launched=launched)
            self._record(run, action.count, outcome, run.started_at if launched else None)
        else:  # a budget query or an allocation that hangs: the series ends here
            runner.state = "done"
        run.refs, run.results = [], {}
        self._break(run)

    def _record(
        self, run: _Run, count: int, outcome: cluster.Outcome, started_at: datetime | None
    ) -> None:
        assert run.runner is not None
        runner = run.runner
        runner.measured(outcome.status, outcome.launched)
        ended = datetime.now(timezone.utc)
        self.emit(
            Measured(
                run.group,
                self._point(run, count),
                runner.collective,
                outcome,
                self.wave,
                started_at or ended,
                ended,
                runner.limit_bytes,
                run.probe_s if self.max_size_bytes is None else None,
                run.shares_node,
            )
        )
        if runner.done:
            run.runner = None

    def _release(self, run: _Run) -> None:
        self.ranks.call(run.group_id, "release")  # in order before the group's next call

    def _break(self, run: _Run) -> None:
        """The group's actors end now; they are replaced once the wave's others are done."""
        self.ranks.kill_members(run.group_id)
        run.phase = "broken"

    def _rebuild(self, broken: Sequence[_Run]) -> None:
        """New actors for the broken groups, a new world; the groups with points left open
        again in it."""
        self.ranks.replace_ranks(sorted(r for run in broken for r in run.group.ranks))
        again = []
        for run in broken:
            if run.series or run.runner is not None:
                run.phase = "idle"
                again.append(run)
            else:
                run.phase = "done"
        self.opened = self._subsets(run.group for run in again)
        self._open(again)
