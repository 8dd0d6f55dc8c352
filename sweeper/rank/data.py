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

from sweeper.ops.descriptor import SUM, Span
from sweeper.planning.sizing import CHUNK_ELEMENTS

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


# The pattern is computed in place: each chunk needs its int64 tensor and one more, so the
# scratch that `--max-size auto` sets aside is what fill and check really allocate.
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


def _pieces(span: Span, device: torch.device) -> Iterator[tuple[int, int]]:
    chunk = CHUNK_ELEMENTS.get(device.type, CHUNK_ELEMENTS["cpu"])
    for start in range(0, span.length, chunk):
        yield start, min(start + chunk, span.length)


def fill(buf: torch.Tensor, spans: Iterable[Span], n: int, lv: int, seed: int) -> None:
    """Poison the whole buffer, then write each span's pattern."""
    poison(buf)
    for span in spans:
        for start, stop in _pieces(span, buf.device):
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
        for start, stop in _pieces(span, buf.device):
            expected = _values(
                span.source, span.index + start, span.index + stop, n, lv, seed, buf.device
            )
            actual = buf[span.offset + start : span.offset + stop].to(torch.float64)
            wrong += int((actual != expected.to(torch.float64)).sum())
    return wrong
