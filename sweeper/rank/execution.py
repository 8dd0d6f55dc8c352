"""A prepared point timed on one rank: with each engine and in each launch mode it asks for,
on the same buffers, each engine's result checked on one more iteration issued eagerly
outside the timed blocks.

Every rank of the group must issue the same calls, so each decision that depends on a time
(iterations, a graph's length, falling back to eager) is taken on the slowest rank's
figure, agreed over the group's torch process group.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from sweeper.ops.descriptor import Step
from sweeper.planning.iterations import GRAPH_ITERS
from sweeper.rank.buffers import Ready
from sweeper.rank.engines import ENGINES
from sweeper.rank.groups import Groups
from sweeper.rank.timing import (
    Eager,
    Graph,
    Launcher,
    Timer,
    block_target_s,
    calibrate,
    graph_unit,
)
from sweeper.wire import Block, Engine, Fabric, Launch, NcclView, Timed, Timing

EMPTY_GRAPH = (
    "nothing to time: the CUDA graph holds no GPU work (NCCL moves nothing for an in-place "
    "operation on one rank; the eager row shows what the call costs)"
)


@dataclass
class Execution:
    """The prepared point's step, bound to each engine's communicator of its group in turn,
    launched in each mode, timed in blocks and checked."""

    ready: Ready
    groups: Groups
    timer: Timer
    stream: torch.cuda.Stream | None  # the rank's work stream (CUDA ranks)
    device: torch.device
    # the GPU's total energy so far (NVML, mJ; None: unreadable); None: no GPU watched
    energy_mj: Callable[[], int | None] | None = None
    captured: NcclView | None = None  # NCCL's view of the last graph's capture

    def run(self) -> tuple[Timed, ...]:
        r = self.ready
        timing = r.point.timing
        timed: list[Timed] = []
        for name in timing.engines:
            engine = Engine(name)
            why = ENGINES[engine].why_not(r.collective)
            if why is not None:
                timed += [
                    Timed(
                        engine=engine,
                        launch=Launch(launch),
                        blocks=(),
                        warmup_iters=0,
                        skipped=why,
                    )
                    for launch in timing.launches
                ]
                continue
            step = r.collective.bind(r.buffers, self.groups.comm(engine, r.point.group_id))
            fabric, view = self._first(engine, step)
            mine = self._launches(engine, step, timing, view)
            n_wrong = r.check(step) if timing.check else None
            registered = r.registration is not None
            start_s = self.groups.started.get((r.point.group_id, engine))
            timed += [
                replace(
                    t,
                    n_wrong=n_wrong,
                    registered=registered,
                    fabric=fabric,
                    start_s=start_s,
                    nccl_view=t.nccl_view or view,
                )
                for t in mine
            ]
        return tuple(timed)

    def _first(self, engine: Engine, step: Step) -> tuple[Fabric | None, NcclView | None]:
        """The first call (connections, lazy buffers, kernel loads: a capture needs them), and
        what NCCL set up for the group's communicator in `engine` by then, and what it
        predicted for the call. What NCCL said before it came from the group's torch
        communicator (its agreements and barriers)."""
        debug, views = self.groups.nccl_debug, self.groups.nccl_view
        group_id = self.ready.point.group_id
        if debug is not None:
            debug.take((group_id, Engine.TORCH))
        marks = views.mark((group_id, engine)) if views is not None else ()
        step()
        view = views.view(marks) if views is not None else None
        if debug is None:
            return None, view
        return debug.fabric((group_id, engine), debug.take((group_id, engine))), view

    def _launches(
        self, engine: Engine, step: Step, timing: Timing, first: NcclView | None
    ) -> list[Timed]:
        timed: list[Timed] = []
        eager_note: str | None = None
        for name in timing.launches:
            launch = Launch(name)
            launcher, note = self._launcher(launch, step, timing, engine)
            if note is not None and Launch.EAGER in timing.launches:
                eager_note = note  # the eager rows say it; no second eager measurement
                continue
            try:
                if isinstance(launcher, Graph) and launcher.empty:
                    timed.append(
                        Timed(
                            engine=engine,
                            launch=launch,
                            blocks=(),
                            warmup_iters=0,
                            skipped=EMPTY_GRAPH,
                        )
                    )
                else:
                    timed.append(self._time(engine, launcher, timing, note))
                    if isinstance(launcher, Graph):
                        timed[-1] = replace(timed[-1], nccl_view=self._graphs_view(first))
            finally:
                launcher.close()
        if eager_note is not None:
            timed = [replace(t, note=eager_note) if t.launch == Launch.EAGER else t for t in timed]
        return timed

    def _graphs_view(self, first: NcclView | None) -> NcclView | None:
        """NCCL's view of a graph's calls: its capture's last step's (as many calls as the
        eager first step made), which NCCL tunes as registered buffers (regBuff)."""
        captured = self.captured
        if captured is None or first is None or captured.partial is not None:
            return captured or first
        steps = len(first.calls)
        return NcclView(calls=captured.calls[-steps:] if steps else ())

    def _launcher(
        self, launch: Launch, step: Step, timing: Timing, engine: Engine
    ) -> tuple[Launcher, str | None]:
        """The launcher for a mode, and why it is eager where a graph was asked for. Every rank
        must issue the same collectives, so a capture that failed on any rank makes every
        rank fall back. What NCCL predicted for the captured calls is kept (`captured`)."""
        self.captured = None
        if launch == Launch.EAGER:
            return Eager(step), None
        if timing.iters is not None:
            unit = graph_unit(timing.iters)
        else:  # a graph as long as a quarter of a block, so calibration replays it whole
            one = self.agree(self.timer.time(Eager(step), 1, samples=False).seconds)
            quarter = block_target_s(timing.blocks) / 4
            unit = max(1, min(GRAPH_ITERS, math.floor(quarter / max(one, 1e-9))))
        assert self.stream is not None  # graphs exist on CUDA ranks only (spec.launches)
        graph: Graph | None = None
        error = ""
        views, key = self.groups.nccl_view, (self.ready.point.group_id, engine)
        marks = views.mark(key) if views is not None else ()
        try:
            graph = Graph(step, unit, self.stream)
            self.captured = views.view(marks) if views is not None else None
        except Exception as exc:
            error = f"cannot capture a CUDA graph: {str(exc).strip().splitlines()[0]}"
        if self.agree(0.0 if graph else 1.0):
            if graph is not None:
                graph.close()
            return Eager(step), error or "another rank of the group cannot capture a CUDA graph"
        assert graph is not None
        return graph, None

    def _time(self, engine: Engine, launcher: Launcher, timing: Timing, note: str | None) -> Timed:
        """Warm up, then the point's blocks, each after a barrier (so no rank's block starts
        while a peer is still busy with the last one). The garbage collector waits, as in
        timeit: a collection in the middle of a block would be timed as the operation's."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._blocks(engine, launcher, timing, note)
        finally:
            if collecting:
                gc.enable()

    def _blocks(
        self, engine: Engine, launcher: Launcher, timing: Timing, note: str | None
    ) -> Timed:
        unit = launcher.unit
        warm, calls = 0, None
        if timing.warmup is not None:
            warm = math.ceil(timing.warmup / unit)
            for _ in range(warm):
                launcher.run()
            warm *= unit
        if timing.iters is not None:
            calls = math.ceil(timing.iters / unit)
        if calls is None or timing.warmup is None:
            target_s = block_target_s(timing.blocks)
            extra, calibrated = calibrate(self.timer, launcher, self.agree, target_s)
            warm += extra
            calls = calls or calibrated
        blocks: list[Block] = []
        before: int | None = None
        for _ in range(timing.blocks):
            self._barrier()  # the device idle on every rank: the energy read next is the blocks'
            if not blocks:
                before = self._energy_mj()
            blocks.append(self.timer.time(launcher, calls, timing.samples))
        after = self._energy_mj()
        return Timed(
            engine=engine,
            launch=launcher.launch,
            blocks=tuple(blocks),
            warmup_iters=warm,
            note=note,
            energy_mj=None if before is None or after is None else after - before,
        )

    def _energy_mj(self) -> int | None:
        return None if self.energy_mj is None else self.energy_mj()

    def agree(self, seconds: float) -> float:
        """The slowest rank's time, so that every rank takes the same decision from it."""
        value = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX, group=self.ready.comm.group)
        return float(value.item())

    def _barrier(self) -> None:
        group = self.ready.comm.group
        if self.device.type == "cuda":
            dist.barrier(group=group, device_ids=[self.device.index])
        else:
            dist.barrier(group=group)
