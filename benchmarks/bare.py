"""The bare torch.distributed anchor the GPU benchmarks measure sweeper against: one process
per GPU, plain calls, no Ray and no sweeper code, written as a user would by hand.

The if-chain over operation names is deliberate: the anchor must not share the registry it
checks."""

from __future__ import annotations

import socket
import warnings
from collections.abc import Callable

import torch
import torch.distributed as dist

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


def bare_step(name: str, count: int, dtype: torch.dtype, rank: int, n: int) -> Callable[[], None]:
    """One iteration of `name` on `count` elements of S, written as a user would by hand."""
    dev = torch.device("cuda", rank)
    chunk = count // n

    def buf(elements: int) -> torch.Tensor:
        return torch.ones(elements, dtype=dtype, device=dev)

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
        x = buf(chunk)
        outs = list(buf(count).view(n, -1).unbind(0)) if rank == 0 else None
        return lambda: dist.gather(x, outs, dst=0)
    if name == "reduce_scatter":
        x, y = buf(count), buf(chunk)
        return lambda: dist.reduce_scatter_tensor(y, x)
    if name == "scatter":
        y = buf(chunk)
        ins = list(buf(count).view(n, -1).unbind(0)) if rank == 0 else None
        return lambda: dist.scatter(y, ins, src=0)
    if name == "all_to_all":
        x, y = buf(count), buf(count)
        return lambda: dist.all_to_all_single(y, x)
    if name == "send_recv":
        x, y = buf(count), buf(count)

        def ring() -> None:
            ops = [
                dist.P2POp(dist.isend, x, (rank + 1) % n),
                dist.P2POp(dist.irecv, y, (rank - 1) % n),
            ]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        return ring
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_bare(rank: int, n: int, port: int) -> None:
    """This process drives GPU `rank` in an NCCL world group of `n` (rank 0 holds the store)."""
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch 2.13 renames; same calls
    torch.cuda.set_device(rank)
    store = dist.TCPStore("127.0.0.1", port, n, rank == 0)
    dist.init_process_group(
        "nccl", store=store, rank=rank, world_size=n, device_id=torch.device("cuda", rank)
    )
