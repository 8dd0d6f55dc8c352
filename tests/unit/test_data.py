from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch

from sweeper.ops.descriptor import SUM, Span
from sweeper.planning import sizing
from sweeper.rank import data

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 3, 8, 64, 1024])
def test_every_partial_sum_is_exact_in_the_dtype(dtype: torch.dtype, n: int) -> None:
    levels = data.levels(dtype, n, reduces=True)
    largest_sum = n * (levels - 1) if levels else 1  # one-hot: every position sums to 1
    assert largest_sum <= data.exact_limit(dtype)
    values = torch.arange(largest_sum + 1, dtype=torch.float64)
    assert torch.equal(values.to(dtype).to(torch.float64), values)


@pytest.mark.parametrize(("n", "levels"), [(1, 7), (3, 7), (7, 7), (10, 7), (23, 5), (4, 2)])
def test_sum_over_ranks_matches_brute_force(n: int, levels: int) -> None:
    k = torch.arange(levels)
    brute = sum((k + r) % levels for r in range(n))
    assert torch.equal(data._sum_over_ranks(k, n, levels), brute)


@pytest.mark.parametrize(
    ("dtype", "n"),
    [(torch.bfloat16, 4), (torch.bfloat16, 300), (torch.float16, 3), (torch.int8, 2)],
)
def test_filled_inputs_summed_by_hand_pass_the_check(dtype: torch.dtype, n: int) -> None:
    count, seed = 5000, 11
    levels = data.levels(dtype, n, reduces=True)
    inputs = []
    for rank in range(n):
        buf = torch.empty(count, dtype=dtype)
        data.fill(buf, [Span(0, count, rank, 100)], n, levels, seed)
        inputs.append(buf)
    total = torch.stack([b.to(torch.float64) for b in inputs]).sum(0).to(dtype)
    expected = [Span(0, count, SUM, 100)]
    assert data.count_wrong(total, expected, n, levels, seed) == 0
    total[17] += 1
    total[4000] = 0 if total[4000] != 0 else 1
    assert data.count_wrong(total, expected, n, levels, seed) == 2


def test_ranks_patterns_differ_and_poison_is_never_a_value() -> None:
    count, n = 4096, 4
    for dtype in DTYPES:
        levels = data.levels(dtype, n, reduces=False)
        bufs = []
        for rank in range(n):
            buf = torch.empty(count, dtype=dtype)
            data.fill(buf, [Span(0, count, rank, 0)], n, levels, seed=0)
            bufs.append(buf.to(torch.float64))
        for a, b in itertools.combinations(bufs, 2):
            assert (a != b).float().mean() > 0.9
        poison = torch.empty(1, dtype=dtype)
        data.poison(poison)
        assert all(not (b == poison.to(torch.float64)).any() for b in bufs)


def test_an_unwritten_output_is_all_wrong() -> None:
    out = torch.empty(100, dtype=torch.float32)
    data.poison(out)
    assert data.count_wrong(out, [Span(0, 100, 2, 0)], 4, 1000, 0) == 100


_PEAK = """
import sys
import torch
from sweeper.ops.descriptor import SUM, Span
from sweeper.planning import sizing
from sweeper.rank import data

chunk = 1 << 24
sizing.CHUNK_ELEMENTS["cpu"] = chunk
buf = torch.zeros(chunk, dtype=torch.float32)
spans = [Span(0, chunk, SUM if sys.argv[1] == "sum" else 1, 0)]
lv = data.levels(torch.float32, 8, True)


def high_water_kib():  # this process's own peak (ru_maxrss would carry the parent's over exec)
    status = open("/proc/self/status").read()
    return int(status.split("VmHWM:")[1].split()[0])


base = high_water_kib()
data.fill(buf, spans, 8, lv, 0)
wrong = chunk // 2 if sys.argv[1] == "wrong" else 0
buf[:wrong] = -1.0  # in place: the count of wrong elements is measured too
assert data.count_wrong(buf, spans, 8, lv, 0) == wrong
print((high_water_kib() - base) * 1024 / chunk)
"""


SOURCES = ("sum", "rank", "wrong")  # "wrong": half the elements, counted


@pytest.fixture(scope="module")
def peaks() -> dict[str, float]:
    """_PEAK of each source, the processes run at once: each is mostly its import of torch."""
    procs = {
        source: subprocess.Popen(
            [sys.executable, "-c", _PEAK, source],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for source in SOURCES
    }
    measured = {}
    for source, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        measured[source] = float(out)
    return measured


@pytest.mark.parametrize("source", SOURCES)
def test_fill_and_check_stay_within_the_scratch_sizing_counts(
    peaks: dict[str, float], source: str
) -> None:
    """Scratch memory for --max-size auto: the peak resident growth of filling and checking
    one whole chunk (in a fresh process, where the high-water mark starts at the buffer),
    also where half of it is wrong and counted (on CUDA a count widens its input to int64:
    a chunk's at once asked 8 bytes an element at the --mem-limit bound on 4 H100)."""
    per_element = peaks[source]
    # two thirds: room for the GPU caching allocator, which rounds blocks up
    assert 0.5 < per_element <= sizing.scratch_bytes("cpu", 1) * 2 / 3, per_element
