"""What an operation is, as data: the `Collective` descriptor, the engine protocol (`Comm`) its
bind is written against, and the types they speak in.

A descriptor is modelled on nccl-tests' per-operation struct. For `count` elements on `n`
ranks it states each rank's buffers (`Layout`), the bus factor, and the data each rank sends
and must hold (`Span`s of one pattern, filled and checked in rank/data.py). `bind` makes the
step of one iteration, once a point; `engines` and `why_not` say where it runs. Entries live
in registry.py and algorithms/; torch appears in annotations only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Protocol

from sweeper.planning import knobs
from sweeper.planning.placement import Shape, Traits
from sweeper.wire import Backend, Engine, Kind

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist

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
Pairs = Sequence[tuple["torch.Tensor", int]]  # tensors, and the group ranks they go to or from


class Comm(Protocol):
    """The engine protocol: a group's communicator as one of its ranks sees it, through one
    engine (torch.distributed, or NCCL called directly). Each primitive works out once what
    it can and returns the step that issues it on those tensors; roots and peers are group
    ranks; reductions sum."""

    @property
    def rank(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def nodes(self) -> tuple[int, ...]:
        """The node of each group rank (positions in the sweep's node list)."""
        ...

    @property
    def group(self) -> dist.ProcessGroup | None:
        """torch.distributed's group, for the operations only the torch engine runs."""
        ...

    def all_reduce(self, data: torch.Tensor) -> Step: ...

    def reduce(self, data: torch.Tensor, root: int) -> Step: ...

    def broadcast(self, data: torch.Tensor, root: int) -> Step: ...

    def all_gather(self, out: torch.Tensor, mine: torch.Tensor) -> Step: ...

    def reduce_scatter(self, out: torch.Tensor, whole: torch.Tensor) -> Step: ...

    def gather(self, out: torch.Tensor, mine: torch.Tensor, root: int) -> Step:
        """`mine` from every rank into the root's `out`, chunk r from rank r."""
        ...

    def scatter(self, out: torch.Tensor, whole: torch.Tensor, root: int) -> Step:
        """Chunk r of the root's `whole` into rank r's `out`."""
        ...

    def all_to_all(self, out: torch.Tensor, whole: torch.Tensor) -> Step:
        """Chunk p of every rank's `whole` into chunk r of rank p's `out`."""
        ...

    def grouped(self, sends: Pairs, recvs: Pairs) -> Step:
        """Sends and receives as one batch (one NCCL group, as nccl-tests issues its
        point-to-point operations), to the rank itself too, waited for together."""
        ...


def torch_group(comm: Comm) -> dist.ProcessGroup:
    """The torch.distributed group of an operation that only the torch engine runs."""
    assert comm.group is not None, "a torch-only operation bound to another engine"
    return comm.group


def rooted(comm: Comm, whole: torch.Tensor, mine: torch.Tensor, root: int, gather: bool) -> Step:
    """nccl-tests' gather (or scatter) as one group of sends and receives: each rank's `mine`
    to (or from) its chunk of the root's `whole`, the root's own chunk included (NCCL copies
    it alongside the transfers; dist.gather would copy it after them)."""
    chunks = list(enumerate(blocks(whole, comm.size).unbind(0))) if comm.rank == root else []
    theirs = [(chunk, peer) for peer, chunk in chunks]
    return comm.grouped([(mine, root)], theirs) if gather else comm.grouped(theirs, [(mine, root)])


Bind = Callable[[Buffers, Comm], Step]


def _anywhere(shape: Shape) -> str | None:
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Collective:
    name: str  # what --ops takes
    op: str  # the operation it performs, written to the `op` column
    algorithm: str  # how: "native" is the engine's own call
    factor: Callable[[int], float]  # busbw = algbw x factor(n)
    layout: Callable[[int, int, int], Layout]  # (count, n, rank) -> Layout
    bind: Bind  # once per point: the step the loop repeats, on any engine's Comm
    per_rank_chunks: bool = False  # S is n equal per-rank chunks (count divisible by n)
    # each rank sends an equal share of its data straight to every rank (all_to_all): across k
    # nodes each node pair carries 1/(k-1) of a node's traffic (`pair_share`), and a group's
    # figure is what each GPU moved through the NICs (`per_nic`). Else its traffic across
    # nodes is its algorithm's (the scan pins the ring: each node with the next)
    every_pair: bool = False
    reduces: bool = False  # some expected span is a SUM: inputs must stay exact when summed
    why_not: Callable[[Shape], str | None] = _anywhere  # why it cannot run on a group, if not
    nccl_kernels: frozenset[str] = frozenset()  # NCCL collective kernels it launches
    kind: Kind = Kind.COLLECTIVE  # the rows' `kind`
    # the engines it runs on, where its bind reaches one itself (torch: symmetric memory,
    # all-to-all-v, copies, algorithms of torch.distributed calls); other engines' rows say
    # so. None: every engine, its bind speaking only the engine protocol (`Comm`)
    engines: tuple[Engine, ...] | None = None
    core: bool = True  # part of `--ops all`; variants and experiments are asked for by name
    symmetric: bool = False  # the send buffer comes from torch symmetric memory
    setup: Callable[[Buffers, Comm], None] | None = None  # collective setup before timing
    direction: tuple[int, int] | None = None  # point-to-point: (source, destination) group ranks
    params: tuple[tuple[str, str], ...] = ()  # the experiment's knobs, written to `params`
    traits: Traits = field(default_factory=Traits)  # how planning schedules it

    def __post_init__(self) -> None:
        # the report reads a pair's rows by source and destination
        if (self.kind == Kind.P2P) != (self.direction is not None):
            raise ValueError(f"{self.name}: kind '{self.kind}' with direction {self.direction}")

    def runs_on(self, engine: Engine) -> bool:
        return self.engines is None or engine in self.engines

    def why_not_on(self, shape: Shape) -> str | None:
        """Why the operation cannot run on a group, if not: its own reason, or the NCCL_ALGO /
        NCCL_PROTO its variant pins, which does not implement its kernels (NCCL would fail
        with `invalid usage`). That a variant changes nothing for it is the schedule's to
        say (`knobs.same_as`): it takes the other variants."""
        if shape.backend == Backend.NCCL:
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

    def per_nic(self, nodes: int) -> bool:
        """Whether a group of `nodes` is judged by what each GPU moved through the NICs."""
        return self.every_pair and nodes > 1

    def pair_share(self, nodes: int) -> float:
        """The share of a node's traffic across nodes that a pair of a group's `nodes`
        carries, where the group's traffic crosses that pair at all: 1/(k-1) each pair for an
        operation that sends to every rank, all of it between a ring's neighbours."""
        return 1 / (nodes - 1) if self.per_nic(nodes) else 1.0

    def nic_rate(self, busbw: float, ranks: int, nodes: int, fewest: int | None = None) -> float:
        """A group's figure: its busbw, or (`per_nic`) each GPU's share for other nodes
        through its NIC, algbw x (nodes-1)/nodes, which the group's size leaves alone (busbw
        counts the share each GPU keeps inside its node: half the data in a group of two
        nodes, a 37th in one of 37, so groups of different sizes would not compare). With a
        node of `fewest` GPUs among fuller ones (a slow GPU left out), its GPUs send the most
        to other nodes, (ranks - fewest)/ranks of it: theirs sets the pace."""
        if not self.per_nic(nodes):
            return busbw
        return busbw / self.busbw_factor(ranks) * self._out(ranks, nodes, fewest)

    def busbw_at(self, rate: float, ranks: int, nodes: int, fewest: int | None = None) -> float:
        """The busbw of a group whose figure (`nic_rate`) is `rate`."""
        if not self.per_nic(nodes):
            return rate
        return rate * self.busbw_factor(ranks) / self._out(ranks, nodes, fewest)

    @staticmethod
    def _out(ranks: int, nodes: int, fewest: int | None) -> float:
        """The share of its data the busiest GPU sends to other nodes."""
        if fewest is None:
            return (nodes - 1) / nodes
        return (ranks - fewest) / ranks

    @property
    def in_place(self) -> bool:
        """Whether the result overwrites the input on every rank."""
        return all(self.layout(2, 2, rank).recv == 0 for rank in (0, 1))


def per_call(run: Callable[[Buffers, Comm], None]) -> Bind:
    """`bind` for an operation with nothing to work out ahead: each step calls `run`."""

    def bind(buf: Buffers, comm: Comm) -> Step:
        return partial(run, buf, comm)

    return bind


def blocks(buf: torch.Tensor, n: int) -> torch.Tensor:
    """A buffer as n equal blocks (rows): block k is what goes to, or came from, rank k."""
    return buf.view(n, -1)
