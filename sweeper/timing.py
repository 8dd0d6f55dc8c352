"""Timers for a block of back-to-back iterations, iteration-count calibration, and the maths
that turns per-rank times into a row (max over ranks, percentiles, algbw and busbw).

GPU: CUDA events on the current stream, which every torch.distributed call on the NCCL
backend makes wait for its work, so an event recorded after the last call completes
after it. CPU: the host clock, since gloo calls return when their work is done.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import torch

TARGET_BLOCK_S = 0.02  # adaptive: a timed block of about 20 ms ...
MIN_ITERS = 5  # ... with at least this many iterations ...
MAX_ITERS = 10_000  # ... and at most this many


@dataclass(frozen=True)
class Block:
    seconds: float  # the whole block
    iters: int
    samples: tuple[float, ...] | None  # per-iteration seconds, when asked for

    @property
    def per_iter(self) -> float:
        return self.seconds / self.iters


class HostTimer:
    def time(self, step: Callable[[], None], iters: int, samples: bool) -> Block:
        marks = [time.perf_counter()]
        for _ in range(iters):
            step()
            if samples:
                marks.append(time.perf_counter())
        end = time.perf_counter()
        per_iter = tuple(b - a for a, b in pairwise(marks)) if samples else None
        return Block(end - marks[0], iters, per_iter)


class CudaTimer:
    def __init__(self, device: torch.device) -> None:
        self.device = device

    def time(self, step: Callable[[], None], iters: int, samples: bool) -> Block:
        stream = torch.cuda.current_stream(self.device)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1 if samples else 2)]
        events[0].record(stream)
        for i in range(iters):
            step()
            if samples:
                events[i + 1].record(stream)
        if not samples:
            events[-1].record(stream)
        events[-1].synchronize()
        ms = events[0].elapsed_time(events[-1])
        per_iter = tuple(a.elapsed_time(b) / 1e3 for a, b in pairwise(events)) if samples else None
        return Block(ms / 1e3, iters, per_iter)


Timer = HostTimer | CudaTimer


def calibrate(
    timer: Timer, step: Callable[[], None], agree: Callable[[float], float], target_s: float
) -> tuple[int, int]:
    """(warm-up iterations done, timed iterations to run) so the timed block lasts ~target_s.

    Times growing batches (1, then x4) until one lasts a quarter of the target, like
    timeit.autorange. Every rank must run the same number of collectives, so each batch's
    time is agreed (max over ranks) before anyone decides to stop.
    """
    step()  # first call: connections, lazy buffers, kernel loads
    warm, batch = 1, 1
    while True:
        seconds = agree(timer.time(step, batch, samples=False).seconds)
        warm += batch
        if seconds >= target_s / 4 or batch >= MAX_ITERS:
            break
        batch *= 4
    per_iter = max(seconds / batch, 1e-9)
    return warm, min(MAX_ITERS, max(MIN_ITERS, math.ceil(target_s / per_iter)))


# Driver side: from the ranks' measurements to the row.


def algbw_gb_per_s(size_bytes: int, seconds: float) -> float:
    """nccl-tests' algorithm bandwidth: S / t, in GB/s (1e9 bytes)."""
    return size_bytes / seconds / 1e9


def across_ranks(blocks: Sequence[Block]) -> tuple[float, float, tuple[float, ...] | None]:
    """(max, min) over ranks of the per-iteration time, and, with samples, each iteration's
    slowest rank: the time the group as a whole took for that iteration."""
    per_iter = [block.per_iter for block in blocks]
    samples = None
    if all(block.samples for block in blocks):
        samples = tuple(
            max(column) for column in zip(*(block.samples or () for block in blocks), strict=True)
        )
    return max(per_iter), min(per_iter), samples
