"""The executor: a wave's groups at the same time, on one actor set.

It opens a wave's groups together, on their members only, and drives each one
(`group.GroupRun`) as an event loop, so no group waits on another's points. A failure stays in
its group: that point gets its row, the group's actors are replaced once the wave is done, and
its series go on. docs/ARCHITECTURE.md, "Inside the rooms", says why some groups open in a new
world."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from sweeper.driver import cluster, connection
from sweeper.driver.group import GroupRun, Phase, Shared
from sweeper.driver.outcome import PointResult
from sweeper.driver.replay import PointKey, Recorded, Replay
from sweeper.ops.descriptor import Collective
from sweeper.planning.placement import Group, Placement
from sweeper.planning.schedule import Series, Wave
from sweeper.wire import Backend, Point, Timing

POLL_S = 1.0  # the longest the loop sleeps without looking at deadlines


class Executor:
    """Runs an actor set's waves: each point's result goes to `emit` (the run's bound method
    that makes it rows) as soon as it is in; `recorded` points (a resumed run's) are replayed,
    not measured again. A scan's groups end at their first point that times out
    (`timeout_ends_group`) and wait for each point its stall deadline (`deadline_s`)."""

    def __init__(
        self,
        *,
        ranks: cluster.RankSet,
        placement: Placement,
        series_of: Callable[[Group], Sequence[Series]],
        collectives: Mapping[str, Collective],
        timing: Timing,
        timeout_s: float,
        max_size_bytes: int | None,  # a grid's limit; None with --max-size auto
        emit: Callable[[PointResult], None],
        recorded: Mapping[PointKey, Recorded] | None = None,
        timeout_ends_group: bool = False,
        deadline_s: Callable[[Group, Point], float] | None = None,
    ) -> None:
        self.ranks = ranks
        self.placement = placement
        self.series_of = series_of
        self.shared = Shared(
            ranks=ranks,
            collectives=collectives,
            timing=timing,
            timeout_s=timeout_s,
            max_size_bytes=max_size_bytes,
            device_type="cuda" if placement.backend == Backend.NCCL else "cpu",
            replay=Replay(recorded),
            emit=emit,
            timeout_ends_group=timeout_ends_group,
            deadline_s=deadline_s,
        )
        self.opened: set[tuple[int, ...]] = set()  # rank sets with a group in this world

    def run(self, waves: Sequence[Wave]) -> None:
        """An actor set's waves, in order."""
        for wave in waves:
            self.run_wave(wave)

    def run_wave(self, wave: Wave) -> None:
        """Every group of the wave at once."""
        node_of = [m.node for m in self.placement.members]
        per_node = Counter(n for g in wave.groups for n in {node_of[r] for r in g.ranks})
        runs = []
        for group in wave.groups:
            nodes = tuple(node_of[r] for r in group.ranks)
            runs.append(
                GroupRun(
                    shared=self.shared,
                    group=group,
                    group_id=self.placement.group_id(group),
                    nodes=nodes,
                    series=list(self.series_of(group)),
                    shares_node=any(per_node[n] > 1 for n in set(nodes)),
                    wave=wave.number,
                )
            )
        subsets = self._subsets(wave.groups)
        if subsets & self.opened:
            self.ranks.replace_ranks(())
            self.opened.clear()
        self.opened |= subsets
        self._open(runs)
        while True:
            for run in runs:
                if run.phase is Phase.IDLE:
                    run.advance()
            live = [run for run in runs if run.refs]
            if not live:
                broken = [run for run in runs if run.phase is Phase.BROKEN]
                if not broken:
                    return
                self._rebuild(broken)
                continue
            waiting = [ref for run in live for ref in run.waiting()]
            soonest = min(run.deadline for run in live) - time.monotonic()
            ready = set(connection.wait(waiting, min(POLL_S, soonest)))
            for run in live:
                run.collect(ready)

    def _subsets(self, groups: Iterable[Group]) -> set[tuple[int, ...]]:
        """The rank sets of `groups` that torch opens as groups of their own (not the world)."""
        return {g.ranks for g in groups if len(g.ranks) < self.ranks.world_size}

    def _open(self, runs: Sequence[GroupRun]) -> None:
        failed = self.ranks.open_groups([(r.group_id, r.group.ranks, r.nodes) for r in runs])
        for run in runs:
            if run.group_id in failed:
                run.not_opened(failed[run.group_id])

    def _rebuild(self, broken: Sequence[GroupRun]) -> None:
        """New actors for the broken groups, a new world; the groups with points left open
        again in it."""
        self.ranks.replace_ranks(sorted(r for run in broken for r in run.group.ranks))
        again = [run for run in broken if run.reopen()]
        self.opened = self._subsets(run.group for run in again)
        self._open(again)
