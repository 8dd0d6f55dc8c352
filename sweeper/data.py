"""Deterministic input data and the exact correctness check, for every operation at once.

Rank r's value at global index i is `(h(i) + r) mod L`, h a cheap hash of (i, seed) and L
a number of levels chosen so that every value, and every partial sum a reduction can form
in any order, is an integer the dtype holds exactly. Results can therefore be compared
with `==`, in every dtype, whatever order NCCL or gloo adds in; and the sum over ranks of
any position has a closed form, so checking costs O(size), not O(size x ranks).

When a group has more ranks than the dtype has exact integers (bf16 past 256 ranks), one
rank per position contributes 1 and the others 0 (`levels == 0` below).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

from sweeper.collectives import SUM, Span

_PRIME = 65521  # h(i) = (i * 40503 + seed) mod 65521: spread, and no int64 overflow below 2^47
_MULT = 40503
_CHUNK = 1 << 22  # elements handled per step, so scratch memory stays small at any size


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


def scratch_bytes() -> int:
    """Device memory fill and check need beyond the buffers (a few int64/float64 chunks)."""
    return 4 * _CHUNK * 8


def _hash(start: int, stop: int, seed: int, device: torch.device) -> torch.Tensor:
    index = torch.arange(start, stop, dtype=torch.int64, device=device)
    return (index * _MULT + seed % _PRIME) % _PRIME


def _values(
    source: int, start: int, stop: int, n: int, lv: int, seed: int, device: torch.device
) -> torch.Tensor:
    h = _hash(start, stop, seed, device)
    if source == SUM:
        if lv == 0:
            return torch.ones_like(h)
        return _sum_over_ranks(h % lv, n, lv)
    if lv == 0:
        return (h % n == source).to(torch.int64)
    return (h + source) % lv


def _sum_over_ranks(k: torch.Tensor, n: int, lv: int) -> torch.Tensor:
    """sum over r < n of (k + r) mod lv, in closed form: whole cycles, then the partial one."""
    cycles, rest = divmod(n, lv)
    partial = rest * k + rest * (rest - 1) // 2 - lv * torch.clamp(k + rest - lv, min=0)
    return cycles * lv * (lv - 1) // 2 + partial


def _pieces(span: Span) -> Iterator[tuple[int, int]]:
    for start in range(0, span.length, _CHUNK):
        yield start, min(start + _CHUNK, span.length)


def fill(buf: torch.Tensor, spans: Iterable[Span], n: int, lv: int, seed: int) -> None:
    """Poison the whole buffer, then write each span's pattern."""
    poison(buf)
    for span in spans:
        for start, stop in _pieces(span):
            values = _values(
                span.source, span.index + start, span.index + stop, n, lv, seed, buf.device
            )
            buf[span.offset + start : span.offset + stop].copy_(values)


def poison(buf: torch.Tensor) -> None:
    """A value no span ever holds, so an element nobody wrote is counted wrong."""
    buf.fill_(255 if buf.dtype == torch.uint8 else -1)


def count_wrong(buf: torch.Tensor, spans: Iterable[Span], n: int, lv: int, seed: int) -> int:
    wrong = 0
    for span in spans:
        for start, stop in _pieces(span):
            expected = _values(
                span.source, span.index + start, span.index + stop, n, lv, seed, buf.device
            )
            actual = buf[span.offset + start : span.offset + stop].to(torch.float64)
            wrong += int((actual != expected.to(torch.float64)).sum())
    return wrong
