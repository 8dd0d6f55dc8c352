"""nccl-tests' conventions, from the ranks' timed blocks to a point's figures: its time (each
block's slowest rank, the median block) and its algorithm bandwidth (S / t; busbw is that
times the descriptor's factor). The driver computes them; no torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweeper.wire import Block


def algbw_gb_per_s(size_bytes: int, seconds: float) -> float:
    """nccl-tests' algorithm bandwidth: S / t, in GB/s (1e9 bytes)."""
    return size_bytes / seconds / 1e9


@dataclass(frozen=True)
class Across:
    """One point's time from every rank's blocks: each block's slowest rank (nccl-tests -a 3),
    and the median of those over blocks, so one stalled block cannot set the point's time."""

    seconds: float  # the median block's per-iteration time, max over ranks
    fastest: float  # the fastest rank in that block
    blocks: tuple[float, ...]  # each block's per-iteration time, max over ranks
    samples: tuple[float, ...] | None  # with samples: each iteration's slowest rank, all blocks


def across_ranks(per_rank: Sequence[Sequence[Block]]) -> Across:
    """`per_rank[r][b]` is rank r's block b; every rank timed the same blocks."""
    by_block = list(zip(*per_rank, strict=True))
    slowest = [max(block.per_iter for block in ranks) for ranks in by_block]
    middle = sorted(range(len(slowest)), key=slowest.__getitem__)[(len(slowest) - 1) // 2]
    fastest = min(block.per_iter for block in by_block[middle])
    samples = None
    if all(block.samples for ranks in by_block for block in ranks):
        samples = tuple(
            max(column)
            for ranks in by_block
            for column in zip(*(block.samples or () for block in ranks), strict=True)
        )
    return Across(slowest[middle], fastest, tuple(slowest), samples)
