"""The bare torch.distributed anchor the GPU benchmarks measure sweeper against: one process
per GPU, plain calls, no Ray and no sweeper code, written as a user would by hand.

The if-chain over operation names is deliberate: the anchor must not share the registry it
checks. Operations are written as nccl-tests writes them (gather and scatter as one batch of
sends and receives, the root's own chunk included), and work on one rank too. Both of
sweeper's launch modes are here, written again rather than imported: eager (each iteration
issued from Python) and graph (iterations captured once into a CUDA graph and replayed).
"""

from __future__ import annotations

import socket
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist

Step = Callable[[], None]

# The anchor's own table of bus-bandwidth factors (nccl-tests' PERFORMANCE.md), written out
# here rather than taken from sweeper, so a wrong factor in sweeper shows as a wrong ratio.
FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce": lambda n: 1.0,
    "broadcast": lambda n: 1.0,
    "all_gather": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
    "reduce_scatter+all_gather": lambda n: 2 * (n - 1) / n,
    "reduce+broadcast": lambda n: 2 * (n - 1) / n,
}
GRAPH_ITERS = 100  # iterations in one captured graph at most; a block replays it as needed


def _batch(ops: list[dist.P2POp]) -> Step:
    """Sends and receives issued as one batch (one NCCL group, as nccl-tests issues them)."""

    def step() -> None:
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return step


def bare_step(name: str, count: int, dtype: torch.dtype, rank: int, n: int) -> Step:
    """One iteration of `name` on `count` elements of S, written as a user would by hand."""
    dev = torch.device("cuda", rank)
    chunk = count // n

    def buf(elements: int) -> torch.Tensor:
        return torch.ones(elements, dtype=dtype, device=dev)

    def chunks(elements: int) -> list[torch.Tensor]:
        return list(buf(elements).view(n, -1).unbind(0))

    if name == "all_reduce":
        x = buf(count)
        return lambda: dist.all_reduce(x)
    if name == "reduce":
        x = buf(count)
        return lambda: dist.reduce(x, dst=0)
    if name == "broadcast":
        x = buf(count)
        return lambda: dist.broadcast(x, src=0)
    if name == "all_gather":
        x, y = buf(chunk), buf(count)
        return lambda: dist.all_gather_into_tensor(y, x)
    if name == "gather":
        # Every rank sends its chunk to the root, the root included (NCCL copies that one).
        send = dist.P2POp(dist.isend, buf(chunk), 0)
        if rank != 0:
            return _batch([send])
        receives = [dist.P2POp(dist.irecv, c, r) for r, c in enumerate(chunks(count))]
        return _batch([send, *receives])
    if name == "reduce_scatter":
        x, y = buf(count), buf(chunk)
        return lambda: dist.reduce_scatter_tensor(y, x)
    if name == "scatter":
        # The root sends every rank its chunk, its own included.
        receive = dist.P2POp(dist.irecv, buf(chunk), 0)
        if rank != 0:
            return _batch([receive])
        sends = [dist.P2POp(dist.isend, c, r) for r, c in enumerate(chunks(count))]
        return _batch([*sends, receive])
    if name == "all_to_all":
        x, y = buf(count), buf(count)
        return lambda: dist.all_to_all_single(y, x)
    if name == "send_recv":  # a ring; on one rank, to itself
        return _batch(
            [
                dist.P2POp(dist.isend, buf(count), (rank + 1) % n),
                dist.P2POp(dist.irecv, buf(count), (rank - 1) % n),
            ]
        )
    if name == "reduce_scatter+all_gather":
        x = buf(count)
        mine = x.view(n, -1)[rank]

        def composite() -> None:
            dist.reduce_scatter_tensor(mine, x)
            dist.all_gather_into_tensor(x, mine)

        return composite
    if name == "reduce+broadcast":
        x = buf(count)

        def reduce_broadcast() -> None:
            dist.reduce(x, dst=0)
            dist.broadcast(x, src=0)

        return reduce_broadcast
    raise ValueError(name)


def graph_unit(iters: int) -> int:
    """Iterations per captured graph for a block of `iters`: all of them up to GRAPH_ITERS,
    else the fewest replays of equal graphs that cover them (so a sweeper row's iterations
    split into the graphs sweeper replayed when it was given --iters)."""
    replays = -(-iters // GRAPH_ITERS)
    return -(-iters // replays)


def capture(step: Step, unit: int, device: torch.device) -> torch.cuda.CUDAGraph:
    """`unit` iterations of `step` as one CUDA graph, to replay on the current stream (as
    nccl-tests -G does). The step must have run eagerly once: NCCL sets up connections and
    buffers on first use, which a capture cannot hold. Captured on a side stream that starts
    after the work queued so far; the current stream then waits for the side stream, so
    replays come after everything the capture touched."""
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.graph(graph, stream=side):
        for _ in range(unit):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    return graph


def time_blocks(
    step: Step, launch: str, iters: int, warmup: int, blocks: int, device: torch.device
) -> list[float]:
    """This rank's seconds per iteration in each of `blocks` timed blocks of `iters`
    iterations, after `warmup` ones, issued eagerly or replayed from graphs of
    graph_unit(iters) iterations ("graph"). Each block starts after a barrier and is timed
    with CUDA events on the current stream: torch.distributed makes it wait for NCCL's work,
    and graphs replay on it."""
    step()  # first call: connections, NCCL's lazy buffers, kernel loads
    unit = graph_unit(iters) if launch == "graph" else 1
    run = capture(step, unit, device).replay if launch == "graph" else step
    for _ in range(-(-warmup // unit)):
        run()
    calls = -(-iters // unit)
    seconds = []
    for _ in range(blocks):
        dist.barrier(device_ids=[device.index])
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            run()
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3 / (calls * unit))
    return seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_bare(rank: int, n: int, port: int) -> None:
    """This process drives GPU `rank` in an NCCL world group of `n` (rank 0 holds the store)."""
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch 2.13 renames; same calls
    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, n, rank == 0)  # type: ignore[attr-defined]
    dist.init_process_group(
        "nccl", store=store, rank=rank, world_size=n, device_id=torch.device("cuda", rank)
    )
