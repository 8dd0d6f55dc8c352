"""Peer copies among the GPUs one rank sees (`copy_` between devices: the copy engines), each
timed with events on its own stream."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, permutations

import torch

from sweeper.wire import Copied


def copy_matrix(sizes: Sequence[int], iters: int, warmup: int) -> list[Copied]:
    """Each ordered pair one way, each pair both ways at once, and each source fanning out to
    all the others at once on separate streams. Needs every GPU of the node visible
    (--gpu-visibility node)."""
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    uuids = [f"GPU-{torch.cuda.get_device_properties(d).uuid}" for d in devices]
    out: list[Copied] = []
    for size in sizes:
        src = [torch.ones(size, dtype=torch.uint8, device=d) for d in devices]
        dst = [[torch.empty(size, dtype=torch.uint8, device=d) for d in devices] for _ in devices]
        streams = [[torch.cuda.Stream(d) for _ in devices] for d in devices]

        for a, b in permutations(range(len(devices)), 2):
            copies = [(a, b)]
            seconds = _time_copies(copies, src, dst, streams, iters, warmup)
            out.append(
                Copied(kind="uni", src=uuids[a], dsts=(uuids[b],), size_bytes=size, seconds=seconds)
            )
        for a, b in combinations(range(len(devices)), 2):
            seconds = _time_copies([(a, b), (b, a)], src, dst, streams, iters, warmup)
            both = Copied(
                kind="bi", src=uuids[a], dsts=(uuids[b],), size_bytes=2 * size, seconds=seconds
            )
            out.append(both)
        for a in range(len(devices)):
            fan = [(a, b) for b in range(len(devices)) if b != a]
            seconds = _time_copies(fan, src, dst, streams, iters, warmup)
            dsts = tuple(uuids[b] for _, b in fan)
            out.append(
                Copied(kind="fanout", src=uuids[a], dsts=dsts, size_bytes=size, seconds=seconds)
            )
        del src, dst
        torch.cuda.empty_cache()
    return out


def _time_copies(
    copies: Sequence[tuple[int, int]],
    src: Sequence[torch.Tensor],
    dst: Sequence[Sequence[torch.Tensor]],
    streams: Sequence[Sequence[torch.cuda.Stream]],
    iters: int,
    warmup: int,
) -> tuple[float, ...]:
    """Each copy a->b on its own stream of device a (so concurrent copies truly overlap),
    timed with events on that stream; `bi` takes the span of both as one time."""
    for _ in range(warmup):
        for a, b in copies:
            with torch.cuda.stream(streams[a][b]):
                dst[a][b].copy_(src[a], non_blocking=True)
    for device in {a for a, _ in copies} | {b for _, b in copies}:
        torch.cuda.synchronize(device)
    marks = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in copies
    ]
    for (a, b), (start, _) in zip(copies, marks, strict=True):
        start.record(streams[a][b])
    for _ in range(iters):
        for a, b in copies:
            with torch.cuda.stream(streams[a][b]):
                dst[a][b].copy_(src[a], non_blocking=True)
    for (a, b), (_, end) in zip(copies, marks, strict=True):
        end.record(streams[a][b])
    for _, end in marks:
        end.synchronize()
    seconds = tuple(start.elapsed_time(end) / 1e3 / iters for start, end in marks)
    if len(copies) == 2 and copies[0] == copies[1][::-1]:  # both ways: one link, one time
        return (max(seconds),)
    return seconds
