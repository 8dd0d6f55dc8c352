"""The registry: one descriptor per operation, the only place that names operations.

A descriptor (`descriptor.Collective`) is one entry here, as nccl-tests has one file per
operation; adding an operation is one new entry (or a plugin's `register`), and nothing
else branches on names. The core entries are the nccl-tests set, two composites and the
copies each GPU makes on its own (host<->device, device-local); the variants (all-to-all and
all-reduce algorithms), point-to-point and the MoE experiment are asked for by name or
pattern (`--ops 'all_to_all*'`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from sweeper.errors import BadInput
from sweeper.ops.algorithms import all_reduce, all_to_all, copies, moe
from sweeper.ops.descriptor import (
    SUM,
    Buffers,
    Collective,
    Comm,
    Layout,
    Span,
    Step,
    blocks,
    exchanger,
    per_call,
)
from sweeper.plan import PerGpu, Shape

if TYPE_CHECKING:
    from sweeper.rank.nccl import NcclComm
from sweeper.spec import MoeSpec

__all__ = [
    "REGISTRY",
    "SUM",
    "Buffers",
    "Collective",
    "Comm",
    "Layout",
    "Shape",
    "Span",
    "Step",
    "configure_moe",
    "load_plugins",
    "names",
    "per_call",
    "register",
    "resolve",
]


def _chunks(buf: torch.Tensor, n: int) -> list[torch.Tensor]:
    return list(blocks(buf, n).unbind(0))


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


def _broadcast_layout(count: int, n: int, rank: int) -> Layout:
    inputs = (Span(0, count, 0, 0),) if rank == 0 else ()
    return Layout(count, 0, inputs, (Span(0, count, 0, 0),))


def _all_gather_layout(count: int, n: int, rank: int) -> Layout:
    b = count // n
    gathered = tuple(Span(k * b, b, k, k * b) for k in range(n))
    return Layout(b, count, (Span(0, b, rank, rank * b),), gathered)


def _gather_layout(count: int, n: int, rank: int) -> Layout:
    b = count // n
    if rank != 0:
        return Layout(b, 0, (Span(0, b, rank, rank * b),), ())
    return _all_gather_layout(count, n, rank)


def _reduce_scatter_layout(count: int, n: int, rank: int) -> Layout:
    b = count // n
    return Layout(count, b, (Span(0, count, rank, 0),), (Span(0, b, SUM, rank * b),))


def _scatter_layout(count: int, n: int, rank: int) -> Layout:
    b = count // n
    inputs = (Span(0, count, 0, 0),) if rank == 0 else ()
    return Layout(count if rank == 0 else 0, b, inputs, (Span(0, b, 0, rank * b),))


def _ring(count: int, n: int, rank: int) -> Layout:
    return Layout(count, count, (Span(0, count, rank, 0),), (Span(0, count, (rank - 1) % n, 0),))


def _p2p_layout(source: int, count: int, n: int, rank: int) -> Layout:
    """One way: `source` sends S, the other rank receives it."""
    if rank == source:
        return Layout(count, 0, (Span(0, count, rank, 0),), ())
    return Layout(0, count, (), (Span(0, count, source, 0),))


def _p2p_both_layout(count: int, n: int, rank: int) -> Layout:
    """Both ways at once: S counts the two directions, half each."""
    b, other = count // 2, 1 - rank
    return Layout(b, b, (Span(0, b, rank, rank * b),), (Span(0, b, other, other * b),))


# Steps. Roots are group rank 0; group_* arguments keep ranks group-local. Each bind works out
# once per point what the loop then repeats.


def _all_reduce(buf: Buffers, comm: Comm) -> Step:
    return partial(dist.all_reduce, buf.send, group=comm.group)


def _reduce(buf: Buffers, comm: Comm) -> Step:
    return partial(dist.reduce, buf.send, group=comm.group, group_dst=0)


def _broadcast(buf: Buffers, comm: Comm) -> Step:
    return partial(dist.broadcast, buf.send, group=comm.group, group_src=0)


def _all_gather_into(out: torch.Tensor, inp: torch.Tensor, group: dist.ProcessGroup) -> Step:
    # torch 2.13 renamed all_gather_into_tensor (and deprecated the old name).
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return partial(gather, out, inp, group=group)


def _reduce_scatter_into(out: torch.Tensor, inp: torch.Tensor, group: dist.ProcessGroup) -> Step:
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return partial(scatter, out, inp, group=group)


def _all_gather(buf: Buffers, comm: Comm) -> Step:
    return _all_gather_into(buf.out, buf.send, comm.group)


def _gather(buf: Buffers, comm: Comm) -> Step:
    """nccl-tests' gather: one batch of sends and receives, the root's own chunk included
    (NCCL copies it alongside the transfers; dist.gather copies it after them)."""
    recvs = list(enumerate(_chunks(buf.out, comm.size))) if comm.rank == 0 else []
    return exchanger(comm, [(buf.send, 0)], [(chunk, peer) for peer, chunk in recvs])


def _reduce_scatter(buf: Buffers, comm: Comm) -> Step:
    return _reduce_scatter_into(buf.out, buf.send, comm.group)


def _scatter(buf: Buffers, comm: Comm) -> Step:
    """nccl-tests' scatter: the root sends every chunk, its own included, in one batch."""
    sends = list(enumerate(_chunks(buf.send, comm.size))) if comm.rank == 0 else []
    return exchanger(comm, [(chunk, peer) for peer, chunk in sends], [(buf.out, 0)])


def _all_to_all(buf: Buffers, comm: Comm) -> Step:
    return partial(dist.all_to_all_single, buf.out, buf.send, group=comm.group)


def _send_recv(buf: Buffers, comm: Comm) -> Step:
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    return exchanger(comm, [(buf.send, right)], [(buf.out, left)])


def _p2p(source: int, buf: Buffers, comm: Comm) -> Step:
    if comm.rank == source:
        return exchanger(comm, [(buf.send, 1 - source)], [])
    return exchanger(comm, [], [(buf.out, source)])


def _p2p_both(buf: Buffers, comm: Comm) -> Step:
    other = 1 - comm.rank
    return exchanger(comm, [(buf.send, other)], [(buf.out, other)])


def _steps(*steps: Step) -> Step:
    def step() -> None:
        for one in steps:
            one()

    return step


def _reduce_scatter_all_gather(buf: Buffers, comm: Comm) -> Step:
    # In place, as NCCL allows: each rank's chunk of the buffer is the reduce-scatter output
    # and then the all-gather input, so the composite needs no memory beyond all_reduce's.
    mine = _chunks(buf.send, comm.size)[comm.rank]
    return _steps(
        _reduce_scatter_into(mine, buf.send, comm.group),
        _all_gather_into(buf.send, mine, comm.group),
    )


def _reduce_broadcast(buf: Buffers, comm: Comm) -> Step:
    return _steps(_reduce(buf, comm), _broadcast(buf, comm))


# The nccl engine's steps: NCCL called directly on the same buffers, with nccl-tests' calls
# (NCCL's own collective where it has one, else sends and receives in one NCCL group).


def _nccl_all_reduce(buf: Buffers, comm: NcclComm) -> Step:
    return comm.all_reduce(buf.send)


def _nccl_reduce(buf: Buffers, comm: NcclComm) -> Step:
    return comm.reduce(buf.send, 0)


def _nccl_broadcast(buf: Buffers, comm: NcclComm) -> Step:
    return comm.broadcast(buf.send, 0)


def _nccl_all_gather(buf: Buffers, comm: NcclComm) -> Step:
    return comm.all_gather(buf.out, buf.send)


def _nccl_reduce_scatter(buf: Buffers, comm: NcclComm) -> Step:
    return comm.reduce_scatter(buf.out, buf.send)


def _nccl_gather(buf: Buffers, comm: NcclComm) -> Step:
    return comm.gather(buf.out, buf.send, 0)


def _nccl_scatter(buf: Buffers, comm: NcclComm) -> Step:
    return comm.scatter(buf.out, buf.send, 0)


def _nccl_all_to_all(buf: Buffers, comm: NcclComm) -> Step:
    return comm.all_to_all(buf.out, buf.send)


def _nccl_send_recv(buf: Buffers, comm: NcclComm) -> Step:
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    return comm.grouped([(buf.send, right)], [(buf.out, left)])


def _nccl_p2p(source: int, buf: Buffers, comm: NcclComm) -> Step:
    if comm.rank == source:
        return comm.grouped([(buf.send, 1 - source)], [])
    return comm.grouped([], [(buf.out, source)])


def _nccl_p2p_both(buf: Buffers, comm: NcclComm) -> Step:
    other = 1 - comm.rank
    return comm.grouped([(buf.send, other)], [(buf.out, other)])


def _nccl_reduce_scatter_all_gather(buf: Buffers, comm: NcclComm) -> Step:
    mine = _chunks(buf.send, comm.size)[comm.rank]
    return _steps(comm.reduce_scatter(mine, buf.send), comm.all_gather(buf.send, mine))


def _nccl_reduce_broadcast(buf: Buffers, comm: NcclComm) -> Step:
    return _steps(comm.reduce(buf.send, 0), comm.broadcast(buf.send, 0))


def _registry(*collectives: Collective) -> dict[str, Collective]:
    return {c.name: c for c in collectives}


LayoutFn = Callable[[int, int, int], Layout]
BindFn = Callable[[Buffers, Comm], Step]


def _with_work(work: Callable[[int, int], int]) -> LayoutFn:
    """The all-to-all layout plus an algorithm's work buffer, sized from (count, n)."""

    def layout(count: int, n: int, rank: int) -> Layout:
        return all_to_all.layout(count, n, rank, work(count, n))

    return layout


def _moe(spec: MoeSpec, combine: bool) -> Collective:
    step = "combine" if combine else "dispatch"
    return Collective(
        f"moe:{step}",
        "all_to_all_v",
        f"moe_{step}",
        _one,
        False,
        lambda count, n, rank: moe.layout(spec, combine, n, rank),
        partial(moe.bind, spec, combine),
        core=False,
        fixed_count=lambda n: moe.busiest(spec, n, combine),
        params=tuple((k, str(v)) for k, v in spec.model_dump().items()),
        kind="experiment",
    )


def _variant(
    name: str,
    op: str,
    algorithm: str,
    factor: Callable[[int], float],
    chunks: bool,
    layout: LayoutFn,
    bind: BindFn,
    **more: Any,
) -> Collective:
    """An entry asked for by name or pattern, not part of `--ops all`."""
    return Collective(name, op, algorithm, factor, chunks, layout, bind, core=False, **more)


def _symmetric(algorithm: str, chunks: bool, layout: LayoutFn, bind: BindFn) -> Collective:
    """An all-reduce on torch symmetric memory: its input is exchanged once per point."""
    return _variant(
        f"all_reduce:{algorithm}",
        "all_reduce",
        algorithm,
        _all_ranks,
        chunks,
        layout,
        bind,
        reduces=True,
        symmetric=True,
        setup=all_reduce.rendezvous,
        why_not=all_reduce.why_not,
    )


# the large size of copies (in `all`, or under --max-size auto): PCIe and HBM at their peak
HOST_COPY_BYTES = 256 * 2**20


def _host_copy(op: str, pinned: bool, layout: LayoutFn, bind: Callable[..., Step]) -> Collective:
    """A host<->device copy of each GPU, from pinned or pageable host memory: in `all` at the
    sweep's smallest size and a large one, asked for by name over the sweep's sizes."""
    memory = "pinned" if pinned else "pageable"
    return Collective(
        op if pinned else f"{op}:{memory}",
        op,
        memory,
        _one,
        False,
        layout,
        partial(bind, pinned),
        why_not=copies.why_not,
        ends_bytes=HOST_COPY_BYTES,
        per_gpu=PerGpu(),
        kind="copy",
    )


def _twice(n: int) -> float:
    return 2.0


# Device to device within one GPU, the memory roof: S read and S written, so its busbw
# (factor 2) is the traffic its memory carried. Each GPU alone: nothing of it is shared.
_DEVICE_COPY = Collective(
    "d2d",
    "d2d",
    "device",
    _twice,
    False,
    copies.layout,
    copies.within,
    why_not=copies.why_not_on_device,
    ends_bytes=HOST_COPY_BYTES,
    per_gpu=PerGpu(together=False, host_link=False),
    kind="copy",
)


def _one_way(name: str, source: int) -> Collective:
    """Point to point from the pair's rank `source` to the other."""
    return _variant(
        name,
        "p2p",
        "uni",
        _one,
        False,
        partial(_p2p_layout, source),
        partial(_p2p, source),
        nccl=partial(_nccl_p2p, source),
        ranks=2,
        direction=(source, 1 - source),
        kind="p2p",
    )


REGISTRY: dict[str, Collective] = _registry(
    Collective(
        "all_reduce",
        "all_reduce",
        "native",
        _all_ranks,
        False,
        _reduce_all,
        _all_reduce,
        reduces=True,
        nccl_kernels=frozenset({"AllReduce"}),
        nccl=_nccl_all_reduce,
    ),
    Collective(
        "reduce",
        "reduce",
        "native",
        _one,
        False,
        _reduce_root,
        _reduce,
        reduces=True,
        nccl_kernels=frozenset({"Reduce"}),
        nccl=_nccl_reduce,
    ),
    Collective(
        "broadcast",
        "broadcast",
        "native",
        _one,
        False,
        _broadcast_layout,
        _broadcast,
        nccl_kernels=frozenset({"Broadcast"}),
        nccl=_nccl_broadcast,
    ),
    Collective(
        "all_gather",
        "all_gather",
        "native",
        _gathering,
        True,
        _all_gather_layout,
        _all_gather,
        nccl_kernels=frozenset({"AllGather"}),
        nccl=_nccl_all_gather,
    ),
    Collective(
        "gather",
        "gather",
        "native",
        _gathering,
        True,
        _gather_layout,
        _gather,
        nccl=_nccl_gather,
    ),
    Collective(
        "reduce_scatter",
        "reduce_scatter",
        "native",
        _gathering,
        True,
        _reduce_scatter_layout,
        _reduce_scatter,
        reduces=True,
        nccl_kernels=frozenset({"ReduceScatter"}),
        nccl=_nccl_reduce_scatter,
    ),
    Collective(
        "scatter",
        "scatter",
        "native",
        _gathering,
        True,
        _scatter_layout,
        _scatter,
        nccl=_nccl_scatter,
    ),
    Collective(
        "all_to_all",
        "all_to_all",
        "native",
        _gathering,
        True,
        all_to_all.layout,
        _all_to_all,
        nccl=_nccl_all_to_all,
    ),
    Collective(
        "send_recv", "send_recv", "ring", _one, False, _ring, _send_recv, nccl=_nccl_send_recv
    ),
    # Composites perform all_reduce, so they carry its factor and its row's op; their kind
    # sets them against the native call in the report.
    Collective(
        "reduce_scatter+all_gather",
        "all_reduce",
        "reduce_scatter+all_gather",
        _all_ranks,
        True,
        _reduce_all,
        _reduce_scatter_all_gather,
        reduces=True,
        nccl_kernels=frozenset({"ReduceScatter", "AllGather"}),
        nccl=_nccl_reduce_scatter_all_gather,
        kind="composite",
    ),
    Collective(
        "reduce+broadcast",
        "all_reduce",
        "reduce+broadcast",
        _all_ranks,
        False,
        _reduce_all,
        _reduce_broadcast,
        reduces=True,
        nccl_kernels=frozenset({"Reduce", "Broadcast"}),
        nccl=_nccl_reduce_broadcast,
        kind="composite",
    ),
    # All-to-all algorithms from batched send/recv: same data, same check (the transpose).
    _variant(
        "all_to_all:pairwise",
        "all_to_all",
        "pairwise",
        _gathering,
        True,
        all_to_all.layout,
        per_call(all_to_all.pairwise),
    ),
    _variant(
        "all_to_all:ring",
        "all_to_all",
        "ring",
        _gathering,
        True,
        _with_work(all_to_all.ring_work),
        per_call(all_to_all.ring),
    ),
    _variant(
        "all_to_all:mesh2d",
        "all_to_all",
        "mesh2d",
        _gathering,
        True,
        _with_work(all_to_all.grid_work),
        per_call(all_to_all.mesh2d),
        why_not=all_to_all.mesh2d_why_not,
    ),
    _variant(
        "all_to_all:hierarchical",
        "all_to_all",
        "hierarchical",
        _gathering,
        True,
        _with_work(all_to_all.grid_work),
        per_call(all_to_all.hierarchical),
        why_not=all_to_all.hierarchical_why_not,
    ),
    # All-reduce on torch symmetric memory (NCCL_ALGO variants are actor sets: --nccl-algos).
    _symmetric("symm_one_shot", False, all_reduce.one_shot_layout, all_reduce.one_shot),
    _symmetric("symm_two_shot", True, all_reduce.two_shot_layout, all_reduce.two_shot),
    # Point to point between the two ranks of a pair: one way (each way), and both at once.
    _one_way("p2p", 0),
    _one_way("p2p:reverse", 1),
    _variant(
        "p2p:bi",
        "p2p",
        "bi",
        _one,
        True,
        _p2p_both_layout,
        _p2p_both,
        ranks=2,
        direction=(0, 1),
        nccl=_nccl_p2p_both,
        kind="p2p",
    ),
    _moe(MoeSpec(), combine=False),
    _moe(MoeSpec(), combine=True),
    # Host<->device copies of each GPU: its PCIe link (or C2C), one way and both at once;
    # and within its memory, the roof.
    _DEVICE_COPY,
    *(
        entry
        for pinned in (True, False)
        for entry in (
            _host_copy("h2d", pinned, copies.layout, copies.to_device),
            _host_copy("d2h", pinned, copies.from_device_layout, copies.from_device),
            _host_copy("h2d+d2h", pinned, copies.layout, copies.both_ways),
        )
    ),
)


def configure_moe(spec: MoeSpec) -> None:
    """The MoE entries for this sweep's layer (the driver and every rank do the same)."""
    for combine in (False, True):
        entry = _moe(spec, combine)
        REGISTRY[entry.name] = entry


def register(collective: Collective) -> Collective:
    """Add an operation (from a plugin module); names are unique."""
    if collective.name in REGISTRY and REGISTRY[collective.name] != collective:
        raise ValueError(f"an operation named {collective.name!r} is already registered")
    REGISTRY[collective.name] = collective
    return collective


def load_plugins(modules: Iterable[str]) -> None:
    """Import modules that register operations; the driver and every rank import the same.
    A module that is missing, or fails as it runs (a syntax error, an exception, a name
    already registered), is BadInput naming it."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # the plugin's own code: whatever it raises
            why = " ".join(str(exc).split())  # one line, whatever the plugin's message spans
            raise BadInput(
                f"--plugin {module}: cannot import it ({type(exc).__name__}: {why})"
            ) from None


def names() -> dict[tuple[str, str], str]:
    """Each registered operation's name by what its rows say of it: (op, algorithm)."""
    return {(c.op, c.algorithm): c.name for c in REGISTRY.values()}


def resolve(
    names: Iterable[str], registry: Mapping[str, Collective] = REGISTRY
) -> list[Collective]:
    """Descriptors for --ops: names, shell patterns ('all_to_all*', 'p2p*', '*') and 'all'
    (the core operations), in the order asked; BadInput for a name that matches nothing.

    An operation with a set of sizes of its own (`ends_bytes`: copies) asked for by name or
    pattern, not only by 'all', takes every size of the sweep (`all_sizes`)."""
    chosen: dict[str, Collective] = {}
    by_name: set[str] = set()
    for name in dict.fromkeys(names):
        if name == "all":
            matches = [c for c in registry.values() if c.core]
        else:
            matches = [c for key, c in registry.items() if fnmatchcase(key, name)]
            by_name.update(c.name for c in matches)
        if not matches:
            raise BadInput(f"--ops: unknown operation {name!r}; known: {', '.join(registry)}")
        chosen.update((c.name, c) for c in matches)
    return [
        dataclasses.replace(c, all_sizes=True)
        if c.name in by_name and c.ends_bytes is not None
        else c
        for c in chosen.values()
    ]
