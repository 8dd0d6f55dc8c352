"""Sizes as users write them (8, 1K, 64M, 8G, 50%) and as rows hold them: parsing, the
shortest exact spelling, what a row's columns can hold, and the size grid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction

from sweeper.errors import BadInput
from sweeper.planning.inputs import quoted
from sweeper.wire import MemLimit

# ASCII digits only: without re.ASCII, \d (and float()) take any script's digits, full-width too
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE | re.ASCII)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$", re.ASCII)
_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}

# What a row can hold: ranks, nodes and iteration counts go to int32 columns of the results
# schema (sweeper/results/schema.py), sizes and element counts to int64 ones; seeds are int64 too.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Iterations as asked, below INT32_MAX with room: a CUDA graph rounds a block up to whole
# replays, and calibration adds its own warm-up.
ITERS_LIMIT = 10**9
# The largest size S (1 PiB, far beyond any rank's memory): where --max-size auto's grid
# ends, and small enough that a group's buffers (S times its ranks) count in int64.
SIZE_LIMIT_BYTES = 2**50
# Where a curve's plateau starts: busbw stays within 2% (its highest at most 1.02 times its
# lowest) over the 3 steps after a size. On 4 H200, all_reduce's busbw is flat within 1-2%
# from 4 GiB to 147 GB while those sizes took four fifths of the default run (issue 43).
PLATEAU_RISE = 0.02
PLATEAU_STEPS = 3
# Above the plateau the grid keeps a size only at 8 times the last one kept: the curve's
# flat tail is still drawn, and the largest size that fits is still reached.
SPARSE_FACTOR = 8
# The most steps a size grid may have: a step factor a hair above 1 would otherwise list
# sizes for ever before anything runs.
GRID_LIMIT = 10_000


def parse_size(value: object) -> int:
    """Bytes from an int or a string like nccl-tests takes: 8, 1K = 1024, 64M, 8G (binary units)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{quoted(value)} is not a size")  # a list's text is no size either
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"{quoted(value)} is not a size: sizes are at least 1 byte")
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(
                f"{quoted(value)} is not a size: use bytes with K, M, G suffixes, e.g. 64M"
            )
        number, unit, _ = match.groups()
        # exact: a float would take 1.0000000000000000001K for 1K
        exact = Fraction(number) * _SCALE[unit.lower()]
        if exact < 1 or exact.denominator != 1:
            raise ValueError(f"{quoted(value)} is not a whole number of bytes >= 1")
        size = int(exact)
    if size > SIZE_LIMIT_BYTES:
        raise ValueError(
            f"{quoted(value)} is larger than the largest size, {format_size(SIZE_LIMIT_BYTES)}"
        )
    return size


def format_size(size_bytes: int) -> str:
    """The shortest exact spelling of a size: 8B, 1K, 64M, 3G, 1536K."""
    for unit in ("T", "G", "M", "K"):
        scale = _SCALE[unit.lower()]
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale}{unit}"
    return f"{size_bytes}B"


def parse_mem_limit(value: object) -> MemLimit:
    """`--mem-limit` as given: a size (8G), or a percentage (50%)."""
    if isinstance(value, MemLimit):
        return value
    if not isinstance(value, str):
        return mem_limit_bytes(parse_size(value))
    text = value.strip()
    if text.endswith("%"):
        match = _PERCENT.match(text)
        percent = float(match[1]) if match else -1.0
        if not 0 < percent <= 100:
            raise ValueError(f"{quoted(value)} is not a percentage in (0, 100]")
        return MemLimit(fraction=percent / 100, spelled=f"{percent:g}%")
    return mem_limit_bytes(parse_size(value))


def mem_limit_bytes(size_bytes: int) -> MemLimit:
    return MemLimit(size_bytes=size_bytes, spelled=format_size(size_bytes))


def grid(min_size: int, max_size: int, step_factor: float) -> list[int]:
    """The sizes from min_size up to max_size, each step_factor times the last, like
    nccl-tests' -b/-e/-f; BadInput where min > max, or the grid is too fine to list."""
    if min_size > max_size:
        raise BadInput(
            f"--min-size {format_size(min_size)} is larger than --max-size {format_size(max_size)}"
        )
    steps = math.floor(math.log(max_size / min_size, step_factor) + 1e-9)
    if steps >= GRID_LIMIT:
        raise BadInput(
            f"--step-factor {step_factor}: {steps + 1} sizes from "
            f"{format_size(min_size)} to {format_size(max_size)}; at most {GRID_LIMIT}"
        )
    return sorted({round(min_size * step_factor**k) for k in range(steps + 1)})


def plateau_size(
    sizes: Sequence[int],
    busbw: Sequence[float],
    rise: float = PLATEAU_RISE,
    steps: int = PLATEAU_STEPS,
) -> int | None:
    """The first size from which busbw rises less than `rise` over the next `steps` steps,
    its highest at most 1 + rise times its lowest there; None if not yet seen.

    `busbw` is measured (the points of a series run so far, in increasing size) or predicted
    (the cost model), so a run and its plan find the same plateau. Taking the window's lowest,
    not its first point, means a noise spike the next points fall from is no plateau; a point
    with no busbw (failed, or zero) belongs to no window.
    """
    for start in range(len(busbw) - steps):
        window = busbw[start : start + steps + 1]
        if all(math.isfinite(value) and value > 0 for value in window) and max(window) < (
            1 + rise
        ) * min(window):
            return sizes[start]
    return None


def thinned(sizes: Sequence[int], plateau: int | None, factor: int = SPARSE_FACTOR) -> list[int]:
    """The sizes a series runs: every size up to and including the plateau's `PLATEAU_STEPS`-th
    step after it (the points that found it), then only sizes at least `factor` times the last
    one kept and at most the largest over `factor`, always keeping the largest (the memory
    bound); all of them with no plateau. The largest gets its factor of room: a grid size just
    below it repeats its figure at nearly its cost (on 4 H200 all_reduce at 128 GiB beside the
    bound's 137 GiB, 8 s each of a 270 s default run)."""
    ordered = sorted(sizes)
    if plateau is None or plateau not in ordered:
        return ordered
    dense_end = ordered.index(plateau) + PLATEAU_STEPS
    kept = ordered[: dense_end + 1]
    for size in ordered[dense_end + 1 :]:
        if factor * kept[-1] <= size and factor * size <= ordered[-1]:
            kept.append(size)
    if kept[-1] != ordered[-1]:
        kept.append(ordered[-1])
    return kept
