"""Deterministic input data and the exact correctness check, for every operation at once.

Rank r's value at global index i is `(h(i) + r) mod L`: h a cheap hash of (i, seed), L chosen
so that every partial sum a reduction can form, in any order, is exact in the dtype. Results
compare with `==`, and a position's sum over ranks has a closed form, so a check costs
O(size). Past the dtype's exact integers (bf16 past 256 ranks), one rank per position gives 1
and the others 0 (`levels == 0` below)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from sweeper.ops.descriptor import SUM, Span
from sweeper.planning.sizing import CHUNK_ELEMENTS

COUNT_ELEMENTS = 1 << 20  # counted at once where a chunk has wrong elements (`_count`)
_PRIME = 65521  # h(i) = (i * 40503 + seed) mod 65521: spread, and no int64 overflow below 2^47
_MULT = 40503


def exact_limit(dtype: torch.dtype) -> int:
    """The largest integer such that it and every smaller one are exact in `dtype`."""
    if dtype.is_floating_point:
        return int(2 / torch.finfo(dtype).eps)
    if dtype == torch.uint8:
        return 254  # 255 is the poison
    return int(torch.iinfo(dtype).max)


def levels(dtype: torch.dtype, n: int, reduces: bool) -> int:
    """How many distinct values the pattern uses (0: one-hot, for very wide reductions)."""
    limit = exact_limit(dtype)
    if not reduces:
        return min(limit + 1, _PRIME)
    if n > limit:
        return 0
    return min(limit // n + 1, _PRIME)


def _hash(start: int, stop: int, seed: int, device: torch.device) -> torch.Tensor:
    index = torch.arange(start, stop, dtype=torch.int64, device=device)
    return index.mul_(_MULT).add_(seed % _PRIME).remainder_(_PRIME)


def _values(
    source: int, start: int, stop: int, n: int, lv: int, seed: int, device: torch.device
) -> torch.Tensor:
    h = _hash(start, stop, seed, device)
    if source == SUM:
        if lv == 0:
            return h.fill_(1)
        return _sum_over_ranks(h.remainder_(lv), n, lv)
    if lv == 0:
        return h.remainder_(n).eq(source).to(torch.int64)
    return h.add_(source).remainder_(lv)


def _sum_over_ranks(k: torch.Tensor, n: int, lv: int) -> torch.Tensor:
    """sum over r < n of (k + r) mod lv, in closed form: whole cycles, then the partial one,
    rest*k + rest(rest-1)/2 - lv*max(0, k + rest - lv)."""
    cycles, rest = divmod(n, lv)
    out = torch.clamp_(k + (rest - lv), min=0).mul_(-lv).add_(k, alpha=rest)
    return out.add_(cycles * lv * (lv - 1) // 2 + rest * (rest - 1) // 2)


def _period(
    span: Span, n: int, lv: int, seed: int, dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """The span's values over one period, from its first element on: h(i) depends on i only
    modulo _PRIME, so every value of the pattern repeats with that period, and a span of any
    length is this table repeated (computed on _PRIME elements, not on the span's)."""
    table = _values(span.source, 0, _PRIME, n, lv, seed, device).to(dtype)
    return table.roll(-(span.index % _PRIME))


def _rows(length: int, device: torch.device) -> Iterator[tuple[int, int]]:
    """[start, stop) pieces of a span in whole periods, a chunk's worth at a time (the last
    piece holds the part period), so the check's scratch stays bounded at any size."""
    chunk = CHUNK_ELEMENTS.get(device.type, CHUNK_ELEMENTS["cpu"])
    step = max(1, chunk // _PRIME) * _PRIME
    whole = length - length % _PRIME
    for start in range(0, whole, step):
        yield start, min(start + step, whole)
    if whole < length:
        yield whole, length


def _tiled(values: torch.Tensor, period: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`values` (starting at a period's start) as rows of one period, and the period as
    they compare with it: whole rows against the table, a part row against its head."""
    if len(values) % _PRIME:
        return values, period[: len(values)]
    return values.view(-1, _PRIME), period


def fill(buf: torch.Tensor, spans: Iterable[Span], n: int, lv: int, seed: int) -> None:
    """Poison the whole buffer, then write each span's pattern: its period, broadcast."""
    poison(buf)
    for span in spans:
        period = _period(span, n, lv, seed, buf.dtype, buf.device)
        target = buf[span.offset : span.offset + span.length]
        for start, stop in _rows(span.length, buf.device):
            rows, table = _tiled(target[start:stop], period)
            rows.copy_(table.expand_as(rows))


def poison(buf: torch.Tensor) -> None:
    """A value no span ever holds, so an element nobody wrote is counted wrong."""
    buf.fill_(255 if buf.dtype == torch.uint8 else -1)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's elements as integers of their width. Results compare bit for bit: every
    comparison is then defined for every dtype (float8 has no `!=`), and bit equality is
    value equality here, since every expected value is a non-negative integer exact in the
    dtype and a sum of them is never -0."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.itemsize])


def count_wrong(buf: torch.Tensor, spans: Iterable[Span], n: int, lv: int, seed: int) -> int:
    wrong = 0
    for span in spans:
        period = _bits(_period(span, n, lv, seed, buf.dtype, buf.device))
        actual = _bits(buf[span.offset : span.offset + span.length])
        for start, stop in _rows(span.length, buf.device):
            rows, table = _tiled(actual[start:stop], period)
            differ = rows != table  # a byte an element of the chunk: the scratch sizing counts
            if differ.any():  # a bool reduction: no wider copy
                wrong += _count(differ.view(-1))
    return wrong


def _count(differ: torch.Tensor) -> int:
    """The elements set, COUNT_ELEMENTS at a time: on CUDA a count (count_nonzero, a sum)
    first copies its input to int64, 8 bytes an element, which a point at the --mem-limit
    bound has not got (docs/measurements/h100-x4-2026-11-28.md, `tests/gpu`)."""
    return sum(
        int(torch.count_nonzero(differ[i : i + COUNT_ELEMENTS]))
        for i in range(0, len(differ), COUNT_ELEMENTS)
    )
