"""How a point is timed: launchers (eager, or replays of a captured CUDA graph), timers for a
block of back-to-back iterations, and iteration-count calibration. The driver turns the
ranks' blocks into a row (`ops/conventions.py`).

GPU: CUDA events on the current stream, which every torch.distributed call on the NCCL
backend makes wait for its work, and on which graphs are replayed, so an event recorded
after the last call completes after it. CPU: the host clock, since gloo calls return when
their work is done.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from itertools import pairwise

import torch

from sweeper.ops.descriptor import Step

# The adaptive rule's figures are planning's, where the cost model predicts what it runs.
from sweeper.planning.iterations import (
    BLOCK_BUDGET_S,
    GRAPH_ITERS,
    MAX_ITERS,
    TARGET_POINT_S,
    block_iters,
)
from sweeper.wire import Block, Launch


class Eager:
    """Each iteration issued from Python: what a PyTorch program pays per call."""

    launch = Launch.EAGER
    unit = 1  # iterations per call of `run`

    def __init__(self, step: Step) -> None:
        self.run = step

    def close(self) -> None:
        return None


class Graph:
    """`unit` iterations captured once into a CUDA graph, then replayed on the current
    stream (as nccl-tests -G and vLLM's benchmarks do): the time of the work itself, without
    the host's launch cost. Capture happens on the rank's work stream (the one the nccl
    engine's bound calls name), after the step ran eagerly once (NCCL communicators must
    exist before they are captured)."""

    launch = Launch.GRAPH

    def __init__(self, step: Step, unit: int, stream: torch.cuda.Stream) -> None:
        self.unit = unit
        self.graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.cuda.graph(self.graph, stream=stream):
                for _ in range(unit):
                    step()
        # torch warns when a capture holds no node: the step launched no GPU work at all (an
        # in-place collective on one rank, where NCCL has nothing to move).
        self.empty = any("CUDA Graph is empty" in str(w.message) for w in caught)
        self.run = self.graph.replay

    def close(self) -> None:
        self.graph.reset()


Launcher = Eager | Graph


class HostTimer:
    def time(self, launcher: Launcher, calls: int, samples: bool) -> Block:
        run = launcher.run
        marks = [time.perf_counter()]
        for _ in range(calls):
            run()
            if samples:
                marks.append(time.perf_counter())
        end = time.perf_counter()
        unit = launcher.unit
        per_iter = tuple((b - a) / unit for a, b in pairwise(marks)) if samples else None
        return Block(seconds=end - marks[0], iters=calls * unit, samples=per_iter)


class CudaTimer:
    def __init__(self, device: torch.device) -> None:
        self.device = device

    def time(self, launcher: Launcher, calls: int, samples: bool) -> Block:
        run = launcher.run
        stream = torch.cuda.current_stream(self.device)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(calls + 1 if samples else 2)]
        events[0].record(stream)
        if samples:
            for event in events[1:]:
                run()
                event.record(stream)
        else:
            for _ in range(calls):
                run()
            events[-1].record(stream)
        events[-1].synchronize()
        ms = events[0].elapsed_time(events[-1])
        unit = launcher.unit
        per_iter = (
            tuple(a.elapsed_time(b) / 1e3 / unit for a, b in pairwise(events)) if samples else None
        )
        return Block(seconds=ms / 1e3, iters=calls * unit, samples=per_iter)


Timer = HostTimer | CudaTimer


def graph_unit(iters: int) -> int:
    """Iterations per captured graph for a block of `iters`: all of them up to GRAPH_ITERS,
    else the fewest replays of equal graphs that cover them."""
    replays = math.ceil(iters / GRAPH_ITERS)
    return math.ceil(iters / replays)


def block_target_s(blocks: int) -> float:
    """How long each of a point's blocks should last, adaptively."""
    return TARGET_POINT_S / blocks


def calibrate(
    timer: Timer, launcher: Launcher, agree: Callable[[float], float], target_s: float
) -> tuple[int, int]:
    """(warm-up iterations done, timed iterations to run) so the timed block lasts ~target_s,
    and has at least MIN_ITERS iterations where they last at most BLOCK_BUDGET_S.

    Times growing batches of the launcher's calls (1, then x4) until one lasts a quarter of
    the target, like timeit.autorange. Every rank must run the same number of collectives,
    so each batch's time is agreed (max over ranks) before anyone decides to stop. The timed
    iterations are a whole number of the launcher's calls.

    The first call (a graph's upload, lazy buffers, kernel loads; the step itself has run
    before, `Execution._first`) is timed too: when it alone lasts BLOCK_BUDGET_S, a block
    has one call whatever its steady time above half of that budget, so calibration ends
    there, one call sooner (on 4 H200, 0.2-0.6 s saved at each of the largest sizes).
    """
    first = agree(timer.time(launcher, 1, samples=False).seconds)
    if first >= BLOCK_BUDGET_S and target_s <= BLOCK_BUDGET_S:
        return launcher.unit, 1
    warm, batch = 1, 1
    while True:
        seconds = agree(timer.time(launcher, batch, samples=False).seconds)
        warm += batch
        if seconds >= target_s / 4 or batch * launcher.unit >= MAX_ITERS:
            break
        batch *= 4
    per_iter = max(seconds / (batch * launcher.unit), 1e-9)
    iters = block_iters(per_iter, target_s)
    return warm * launcher.unit, max(1, round(iters / launcher.unit))
