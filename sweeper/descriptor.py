"""What an operation is, as data: the `Collective` descriptor and the types it speaks in.

Modelled on nccl-tests' per-operation struct. A descriptor states, for a size of `count`
elements (S = count x itemsize, with nccl-tests' conventions) on `n` ranks:

- the element counts of each rank's send, receive and work buffers (`Layout`),
- the bus-bandwidth factor,
- which deterministic data each rank puts in its send buffer and what every rank must
  hold afterwards, both as `Span`s over one global pattern (so filling and checking are
  written once, in `data.py`, for every operation),
- how to run it on a group: `bind` takes the point's buffers and the group once and returns
  the step that performs one iteration, so everything that can be worked out once per
  point (views, peer lists, split sizes) stays out of the timed loop,
- and where it cannot run (`why_not`, with the reason).

The entries live in `collectives.py` (the registry) and `algorithms/` (variants).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from sweeper import knobs
from sweeper.plan import PerGpu, Shape

if TYPE_CHECKING:
    from sweeper.nccl import NcclComm
    from sweeper.results.schema import Kind  # a Literal: the rank actors need no pandas or pyarrow

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
    work: int = 0  # scratch elements the algorithm itself needs (staging, forwarding)

    @property
    def elements(self) -> int:
        return self.send + self.recv + self.work


@dataclass
class Buffers:
    send: torch.Tensor
    recv: torch.Tensor | None  # None when in place
    work: torch.Tensor | None = None

    @property
    def out(self) -> torch.Tensor:
        return self.send if self.recv is None else self.recv


Step = Callable[[], None]  # one iteration of an operation on its bound buffers and group


@dataclass(frozen=True)
class Comm:
    """The group an operation runs on, as one of its ranks sees it."""

    group: dist.ProcessGroup
    rank: int
    size: int
    nodes: tuple[int, ...] = ()  # node of each group rank (positions in the sweep's node list)


def _anywhere(shape: Shape) -> str | None:
    return None


@dataclass(frozen=True)
class Collective:
    name: str  # what --ops takes
    op: str  # the operation it performs, written to the `op` column
    algorithm: str  # how: "native" is torch.distributed's own call
    factor: Callable[[int], float]  # busbw = algbw x factor(n)
    per_rank_chunks: bool  # S is n equal per-rank chunks (count divisible by n)
    layout: Callable[[int, int, int], Layout]  # (count, n, rank) -> Layout
    bind: Callable[[Buffers, Comm], Step]  # once per point: the step the loop repeats
    reduces: bool = False  # some expected span is a SUM: inputs must stay exact when summed
    core: bool = True  # part of `--ops all`; variants and experiments are asked for by name
    ranks: int | None = None  # runs only on groups of exactly this size (a pair: 2)
    why_not: Callable[[Shape], str | None] = _anywhere  # why it cannot run on a group, if not
    symmetric: bool = False  # the send buffer comes from torch symmetric memory
    setup: Callable[[Buffers, Comm], None] | None = None  # collective setup before timing
    direction: tuple[int, int] | None = None  # point-to-point: (source, destination) group ranks
    fixed_count: Callable[[int], int] | None = None  # one size, set by the operation (MoE)
    params: tuple[tuple[str, str], ...] = ()  # the experiment's knobs, written to `params`
    nccl_kernels: frozenset[str] = frozenset()  # NCCL collective kernels it launches
    nccl: Callable[[Buffers, NcclComm], Step] | None = None  # bind on the nccl engine, if any
    kind: Kind = "collective"  # the rows' `kind`: collective, composite, p2p, copy, experiment
    # set: only the sweep's smallest size and this one (its largest, if smaller), never
    # probed: an operation whose figure is its peak (copies)
    ends_bytes: int | None = None
    # asked for by name (not by `all`): with ends_bytes, every size of the grid (`resolve`)
    all_sizes: bool = False
    # each GPU performs it on its own: it runs on groups of tier `gpu`, alone and at once
    per_gpu: PerGpu | None = None

    def __post_init__(self) -> None:
        # the report reads a pair's rows by source and destination
        if (self.kind == "p2p") != (self.direction is not None):
            raise ValueError(f"{self.name}: kind {self.kind!r} with direction {self.direction}")

    def why_not_on(self, shape: Shape) -> str | None:
        """Why the operation cannot run on a group, if not: its own reason, or the NCCL_ALGO /
        NCCL_PROTO its variant pins, which does not implement its kernels (NCCL would fail
        with `invalid usage`). That a variant changes nothing for it is the schedule's to
        say (`knobs.same_as`): it takes the other variants."""
        if shape.backend == "nccl":
            why = knobs.gap(self.nccl_kernels, dict(shape.nccl_env))
            if why is not None:
                return why
        return self.why_not(shape)

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
        """Whether the result overwrites the input on every rank."""
        return all(self.layout(2, 2, rank).recv == 0 for rank in (0, 1))


def per_call(run: Callable[[Buffers, Comm], None]) -> Callable[[Buffers, Comm], Step]:
    """`bind` for an operation with nothing to work out ahead: each step calls `run`."""

    def bind(buf: Buffers, comm: Comm) -> Step:
        return partial(run, buf, comm)

    return bind


def blocks(buf: torch.Tensor, n: int) -> torch.Tensor:
    """A buffer as n equal blocks (rows): block k is what goes to, or came from, rank k."""
    return buf.view(n, -1)


def exchanger(
    comm: Comm,
    sends: list[tuple[torch.Tensor, int]],
    recvs: list[tuple[torch.Tensor, int]],
) -> Step:
    """The step that sends and receives tensors to and from group ranks as one batch (one
    NCCL group, as nccl-tests issues its point-to-point operations) and waits for all.

    A rank's transfers to itself are part of the batch on CUDA, where NCCL moves them
    alongside the others; gloo cannot send to itself, so on CPU they are local copies."""
    tensors = [t for t, _ in (*sends, *recvs)]
    local = bool(tensors) and tensors[0].device.type != "cuda"

    def remote(pairs: list[tuple[torch.Tensor, int]]) -> list[tuple[torch.Tensor, int]]:
        return [(t, p) for t, p in pairs if not (local and p == comm.rank)]

    selves = list(
        zip(
            [t for t, p in sends if local and p == comm.rank],
            [t for t, p in recvs if local and p == comm.rank],
            strict=True,
        )
    )
    ops = [dist.P2POp(dist.isend, t, group=comm.group, group_peer=p) for t, p in remote(sends)]
    ops += [dist.P2POp(dist.irecv, t, group=comm.group, group_peer=p) for t, p in remote(recvs)]

    def step() -> None:
        for source, target in selves:
            target.copy_(source)
        if ops:
            for work in dist.batch_isend_irecv(ops):
                work.wait()

    return step


def exchange(
    comm: Comm,
    sends: list[tuple[torch.Tensor, int]],
    recvs: list[tuple[torch.Tensor, int]],
) -> None:
    """Send and receive tensors as one batch now (an algorithm step with changing peers)."""
    exchanger(comm, sends, recvs)()
