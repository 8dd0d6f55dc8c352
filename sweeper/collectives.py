"""One descriptor per operation, in a registry: the only place that knows what an operation is.

Modelled on nccl-tests' per-operation files. A descriptor states, for a size of `count`
elements (S = count x itemsize, with nccl-tests' conventions) on `n` ranks:

- the element counts of each rank's send and receive buffers,
- the bus-bandwidth factor,
- which deterministic data each rank puts in its send buffer and what every rank must
  hold afterwards, both as `Span`s over one global pattern (so filling and checking are
  written once, in `data.py`, for every operation),
- how to run it once on a group.

Adding an operation is one new entry in `REGISTRY`; nothing else branches on names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from sweeper.errors import BadInput

SUM = -1  # Span.source: the sum over every rank of the group


@dataclass(frozen=True)
class Span:
    """`length` elements at `offset` of a buffer hold pattern(source, index + j), j < length."""

    offset: int
    length: int
    source: int  # a group rank, or SUM
    index: int


@dataclass(frozen=True)
class Layout:
    """Buffers and data of one rank for one point. `recv` 0: the operation works in place."""

    send: int
    recv: int
    inputs: tuple[Span, ...]
    expected: tuple[Span, ...]  # in the receive buffer, or the send buffer when in place

    @property
    def elements(self) -> int:
        return self.send + self.recv


@dataclass
class Buffers:
    send: torch.Tensor
    recv: torch.Tensor | None  # None when in place

    @property
    def out(self) -> torch.Tensor:
        return self.send if self.recv is None else self.recv


@dataclass(frozen=True)
class Comm:
    """The group an operation runs on, as the rank sees it."""

    group: dist.ProcessGroup
    rank: int
    size: int


def _chunks(buf: torch.Tensor, n: int) -> list[torch.Tensor]:
    return list(buf.view(n, -1).unbind(0))


@dataclass(frozen=True)
class Collective:
    name: str  # what --ops takes
    op: str  # the operation it performs, written to the `op` column
    algorithm: str  # how: "native" is torch.distributed's own call
    factor: Callable[[int], float]  # busbw = algbw x factor(n)
    per_rank_chunks: bool  # S is n equal per-rank chunks (count divisible by n)
    layout: Callable[[int, int, int], Layout]  # (count, n, rank) -> Layout
    run: Callable[[Buffers, Comm], None]
    reduces: bool = False  # some expected span is a SUM: inputs must stay exact when summed

    def count(self, size_bytes: int, itemsize: int, n: int) -> int:
        """Elements of S for a requested size, rounded down like nccl-tests, at least 1 per rank.

        Per-rank chunks are aligned down to 16 bytes as nccl-tests does, when they are larger.
        """
        elements = max(1, size_bytes // itemsize)
        if not self.per_rank_chunks:
            return elements
        chunk = max(1, elements // n)
        align = max(1, 16 // itemsize)
        if chunk >= align:
            chunk -= chunk % align
        return chunk * n

    def busbw_factor(self, n: int) -> float:
        return self.factor(n)

    @property
    def in_place(self) -> bool:
        """Whether the result overwrites the input (the root's view, for rooted operations)."""
        return self.layout(2, 2, 0).recv == 0


def _all_ranks(n: int) -> float:
    return 2 * (n - 1) / n


def _gathering(n: int) -> float:
    return (n - 1) / n


def _one(n: int) -> float:
    return 1.0


# Layouts. Global pattern index i of the S buffer; b = count // n is one rank's chunk.


def _reduce_all(count: int, n: int, rank: int) -> Layout:
    return Layout(count, 0, (Span(0, count, rank, 0),), (Span(0, count, SUM, 0),))


def _reduce_root(count: int, n: int, rank: int) -> Layout:
    expected = (Span(0, count, SUM, 0),) if rank == 0 else ()
    return Layout(count, 0, (Span(0, count, rank, 0),), expected)


def _broadcast(count: int, n: int, rank: int) -> Layout:
    inputs = (Span(0, count, 0, 0),) if rank == 0 else ()
    return Layout(count, 0, inputs, (Span(0, count, 0, 0),))


def _all_gather(count: int, n: int, rank: int) -> Layout:
    b = count // n
    gathered = tuple(Span(k * b, b, k, k * b) for k in range(n))
    return Layout(b, count, (Span(0, b, rank, rank * b),), gathered)


def _gather(count: int, n: int, rank: int) -> Layout:
    b = count // n
    if rank != 0:
        return Layout(b, 0, (Span(0, b, rank, rank * b),), ())
    return _all_gather(count, n, rank)


def _reduce_scatter(count: int, n: int, rank: int) -> Layout:
    b = count // n
    return Layout(count, b, (Span(0, count, rank, 0),), (Span(0, b, SUM, rank * b),))


def _scatter(count: int, n: int, rank: int) -> Layout:
    b = count // n
    inputs = (Span(0, count, 0, 0),) if rank == 0 else ()
    return Layout(count if rank == 0 else 0, b, inputs, (Span(0, b, 0, rank * b),))


def _all_to_all(count: int, n: int, rank: int) -> Layout:
    # Chunk k of rank r's send buffer goes to rank k; rank d receives chunk d of every rank.
    b = count // n
    received = tuple(Span(k * b, b, k, rank * b) for k in range(n))
    return Layout(count, count, (Span(0, count, rank, 0),), received)


def _ring(count: int, n: int, rank: int) -> Layout:
    return Layout(count, count, (Span(0, count, rank, 0),), (Span(0, count, (rank - 1) % n, 0),))


# Runs. Roots are group rank 0; group_* arguments keep ranks group-local.


def _run_all_reduce(buf: Buffers, comm: Comm) -> None:
    dist.all_reduce(buf.send, group=comm.group)


def _run_reduce(buf: Buffers, comm: Comm) -> None:
    dist.reduce(buf.send, group=comm.group, group_dst=0)


def _run_broadcast(buf: Buffers, comm: Comm) -> None:
    dist.broadcast(buf.send, group=comm.group, group_src=0)


def _all_gather_into(out: torch.Tensor, inp: torch.Tensor, group: dist.ProcessGroup) -> None:
    # torch 2.13 renamed all_gather_into_tensor (and deprecated the old name).
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, inp, group=group)


def _reduce_scatter_into(out: torch.Tensor, inp: torch.Tensor, group: dist.ProcessGroup) -> None:
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    scatter(out, inp, group=group)


def _run_all_gather(buf: Buffers, comm: Comm) -> None:
    _all_gather_into(buf.out, buf.send, comm.group)


def _run_gather(buf: Buffers, comm: Comm) -> None:
    outputs = _chunks(buf.out, comm.size) if comm.rank == 0 else None
    dist.gather(buf.send, outputs, group=comm.group, group_dst=0)


def _run_reduce_scatter(buf: Buffers, comm: Comm) -> None:
    _reduce_scatter_into(buf.out, buf.send, comm.group)


def _run_scatter(buf: Buffers, comm: Comm) -> None:
    inputs = _chunks(buf.send, comm.size) if comm.rank == 0 else None
    dist.scatter(buf.out, inputs, group=comm.group, group_src=0)


def _run_all_to_all(buf: Buffers, comm: Comm) -> None:
    dist.all_to_all_single(buf.out, buf.send, group=comm.group)


def _run_send_recv(buf: Buffers, comm: Comm) -> None:
    ops = [
        dist.P2POp(dist.isend, buf.send, group=comm.group, group_peer=(comm.rank + 1) % comm.size),
        dist.P2POp(dist.irecv, buf.out, group=comm.group, group_peer=(comm.rank - 1) % comm.size),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def _run_reduce_scatter_all_gather(buf: Buffers, comm: Comm) -> None:
    # In place, as NCCL allows: each rank's chunk of the buffer is the reduce-scatter output
    # and then the all-gather input, so the composite needs no memory beyond all_reduce's.
    mine = _chunks(buf.send, comm.size)[comm.rank]
    _reduce_scatter_into(mine, buf.send, comm.group)
    _all_gather_into(buf.send, mine, comm.group)


def _run_reduce_broadcast(buf: Buffers, comm: Comm) -> None:
    _run_reduce(buf, comm)
    _run_broadcast(buf, comm)


def _registry(*collectives: Collective) -> dict[str, Collective]:
    return {c.name: c for c in collectives}


REGISTRY: dict[str, Collective] = _registry(
    Collective(
        "all_reduce",
        "all_reduce",
        "native",
        _all_ranks,
        False,
        _reduce_all,
        _run_all_reduce,
        reduces=True,
    ),
    Collective("reduce", "reduce", "native", _one, False, _reduce_root, _run_reduce, reduces=True),
    Collective("broadcast", "broadcast", "native", _one, False, _broadcast, _run_broadcast),
    Collective(
        "all_gather", "all_gather", "native", _gathering, True, _all_gather, _run_all_gather
    ),
    Collective("gather", "gather", "native", _gathering, True, _gather, _run_gather),
    Collective(
        "reduce_scatter",
        "reduce_scatter",
        "native",
        _gathering,
        True,
        _reduce_scatter,
        _run_reduce_scatter,
        reduces=True,
    ),
    Collective("scatter", "scatter", "native", _gathering, True, _scatter, _run_scatter),
    Collective(
        "all_to_all", "all_to_all", "native", _gathering, True, _all_to_all, _run_all_to_all
    ),
    Collective("send_recv", "send_recv", "ring", _one, False, _ring, _run_send_recv),
    # Composites perform all_reduce, so they carry its factor and its row's op.
    Collective(
        "reduce_scatter+all_gather",
        "all_reduce",
        "reduce_scatter+all_gather",
        _all_ranks,
        True,
        _reduce_all,
        _run_reduce_scatter_all_gather,
        reduces=True,
    ),
    Collective(
        "reduce+broadcast",
        "all_reduce",
        "reduce+broadcast",
        _all_ranks,
        False,
        _reduce_all,
        _run_reduce_broadcast,
        reduces=True,
    ),
)


def register(collective: Collective) -> Collective:
    """Add an operation (from a plugin module); names are unique."""
    if collective.name in REGISTRY and REGISTRY[collective.name] != collective:
        raise ValueError(f"an operation named {collective.name!r} is already registered")
    REGISTRY[collective.name] = collective
    return collective


def load_plugins(modules: Iterable[str]) -> None:
    """Import modules that register operations; the driver and every rank import the same."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise BadInput(f"--plugin {module}: cannot import it ({exc})") from None


def resolve(
    names: Iterable[str], registry: Mapping[str, Collective] = REGISTRY
) -> list[Collective]:
    """Descriptors for --ops names ('all' is every one); BadInput for an unknown name."""
    wanted = list(dict.fromkeys(names))
    if "all" in wanted:
        return list(registry.values())
    unknown = [name for name in wanted if name not in registry]
    if unknown:
        raise BadInput(f"--ops: unknown operation {unknown[0]!r}; known: {', '.join(registry)}")
    return [registry[name] for name in wanted]
