"""The registry: one descriptor per operation, the only place that names operations.

A descriptor (`descriptor.Collective`) is one entry here, as nccl-tests has one file per
operation; adding an operation is one new entry (or a plugin's `register`), and nothing
else branches on names. The core entries are the nccl-tests set, two composites and the
copies each GPU makes on its own (host<->device, device-local); the variants (all-to-all and
all-reduce algorithms), point-to-point and the MoE experiment are asked for by name or
pattern (`--ops 'all_to_all*'`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from fnmatch import fnmatchcase
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

from sweeper.errors import BadInput
from sweeper.ops.algorithms import all_reduce, all_to_all, copies, moe
from sweeper.ops.descriptor import (
    SUM,
    Bind,
    Buffers,
    Collective,
    Comm,
    Layout,
    Span,
    Step,
    blocks,
    per_call,
)
from sweeper.planning.inputs import QUOTE_CHARS, quoted
from sweeper.planning.placement import PerGpu, Traits
from sweeper.wire import Engine, Kind, MoeLayer

if TYPE_CHECKING:
    import torch


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


# Steps, one per operation on any engine's Comm. Roots are group rank 0. Each bind works out
# once per point what the loop then repeats.


def _all_reduce(buf: Buffers, comm: Comm) -> Step:
    return comm.all_reduce(buf.send)


def _reduce(buf: Buffers, comm: Comm) -> Step:
    return comm.reduce(buf.send, 0)


def _broadcast(buf: Buffers, comm: Comm) -> Step:
    return comm.broadcast(buf.send, 0)


def _all_gather(buf: Buffers, comm: Comm) -> Step:
    return comm.all_gather(buf.out, buf.send)


def _gather(buf: Buffers, comm: Comm) -> Step:
    return comm.gather(buf.out, buf.send, 0)


def _reduce_scatter(buf: Buffers, comm: Comm) -> Step:
    return comm.reduce_scatter(buf.out, buf.send)


def _scatter(buf: Buffers, comm: Comm) -> Step:
    return comm.scatter(buf.out, buf.send, 0)


def _all_to_all(buf: Buffers, comm: Comm) -> Step:
    return comm.all_to_all(buf.out, buf.send)


def _send_recv(buf: Buffers, comm: Comm) -> Step:
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    return comm.grouped([(buf.send, right)], [(buf.out, left)])


def _p2p(source: int, buf: Buffers, comm: Comm) -> Step:
    if comm.rank == source:
        return comm.grouped([(buf.send, 1 - source)], [])
    return comm.grouped([], [(buf.out, source)])


def _p2p_both(buf: Buffers, comm: Comm) -> Step:
    other = 1 - comm.rank
    return comm.grouped([(buf.send, other)], [(buf.out, other)])


def _steps(*steps: Step) -> Step:
    def step() -> None:
        for one in steps:
            one()

    return step


def _reduce_scatter_all_gather(buf: Buffers, comm: Comm) -> Step:
    # In place, as NCCL allows: each rank's chunk of the buffer is the reduce-scatter output
    # and then the all-gather input, so the composite needs no memory beyond all_reduce's.
    mine = _chunks(buf.send, comm.size)[comm.rank]
    return _steps(comm.reduce_scatter(mine, buf.send), comm.all_gather(buf.send, mine))


def _reduce_broadcast(buf: Buffers, comm: Comm) -> Step:
    return _steps(_reduce(buf, comm), _broadcast(buf, comm))


def _registry(*collectives: Collective) -> dict[str, Collective]:
    return {c.name: c for c in collectives}


LayoutFn = Callable[[int, int, int], Layout]


def _with_work(work: Callable[[int, int], int]) -> LayoutFn:
    """The all-to-all layout plus an algorithm's work buffer, sized from (count, n)."""

    def layout(count: int, n: int, rank: int) -> Layout:
        return all_to_all.layout(count, n, rank, work(count, n))

    return layout


_TORCH = (Engine.TORCH,)  # what an operation whose bind reaches torch itself runs on


def _torch_variant(name: str, op: str, algorithm: str, **more: Any) -> Collective:
    """A variant only the torch engine runs (an algorithm of torch.distributed calls, torch
    symmetric memory, an experiment): asked for by name or pattern, not part of `--ops all`;
    the other engines' rows say it runs on torch only."""
    return Collective(name=name, op=op, algorithm=algorithm, engines=_TORCH, core=False, **more)


def _moe(spec: MoeLayer, combine: bool) -> Collective:
    step = "combine" if combine else "dispatch"
    return _torch_variant(
        f"moe:{step}",
        "all_to_all_v",
        f"moe_{step}",
        factor=_one,
        layout=lambda count, n, rank: moe.layout(spec, combine, n, rank),
        bind=partial(moe.bind, spec, combine),
        params=tuple((f.name, str(getattr(spec, f.name))) for f in dataclasses.fields(spec)),
        kind=Kind.EXPERIMENT,
        traits=Traits(fixed_count=lambda n: moe.busiest(spec, n, combine)),
    )


def _all_to_all_algorithm(name: str, layout: LayoutFn, **more: Any) -> Collective:
    """An all-to-all built from batched sends and receives: same data, same check (the
    transpose)."""
    return _torch_variant(
        f"all_to_all:{name}",
        "all_to_all",
        name,
        factor=_gathering,
        per_rank_chunks=True,
        layout=layout,
        **more,
    )


def _symmetric(algorithm: str, chunks: bool, layout: LayoutFn, bind: Bind) -> Collective:
    """An all-reduce on torch symmetric memory: its input is exchanged once per point."""
    return _torch_variant(
        f"all_reduce:{algorithm}",
        "all_reduce",
        algorithm,
        factor=_all_ranks,
        per_rank_chunks=chunks,
        layout=layout,
        bind=bind,
        reduces=True,
        why_not=all_reduce.why_not,
        symmetric=True,
        setup=all_reduce.rendezvous,
    )


# the large size of copies (in `all`, or under --max-size auto): PCIe and HBM at their peak
HOST_COPY_BYTES = 256 * 2**20


def _host_copy(op: str, pinned: bool, layout: LayoutFn, bind: Callable[..., Step]) -> Collective:
    """A host<->device copy of each GPU, from pinned or pageable host memory: in `all` at the
    sweep's smallest size and a large one, asked for by name over the sweep's sizes."""
    memory = "pinned" if pinned else "pageable"
    return Collective(
        name=op if pinned else f"{op}:{memory}",
        op=op,
        algorithm=memory,
        factor=_one,
        layout=layout,
        bind=partial(bind, pinned),
        why_not=copies.why_not,
        kind=Kind.COPY,
        engines=_TORCH,
        traits=Traits(ends_bytes=HOST_COPY_BYTES, per_gpu=PerGpu()),
    )


def _twice(n: int) -> float:
    return 2.0


# Device to device within one GPU, the memory roof: S read and S written, so its busbw
# (factor 2) is the traffic its memory carried. Each GPU alone: nothing of it is shared.
_DEVICE_COPY = Collective(
    name="d2d",
    op="d2d",
    algorithm="device",
    factor=_twice,
    layout=copies.layout,
    bind=copies.within,
    why_not=copies.why_not_on_device,
    kind=Kind.COPY,
    engines=_TORCH,
    traits=Traits(ends_bytes=HOST_COPY_BYTES, per_gpu=PerGpu(together=False, host_link=False)),
)


def _pair(name: str, algorithm: str, layout: LayoutFn, bind: Bind, **more: Any) -> Collective:
    """Point to point between the two ranks of a pair, asked for by name or pattern."""
    return Collective(
        name=name,
        op="p2p",
        algorithm=algorithm,
        factor=_one,
        layout=layout,
        bind=bind,
        kind=Kind.P2P,
        core=False,
        traits=Traits(ranks=2),
        **more,
    )


def _one_way(name: str, source: int) -> Collective:
    """From the pair's rank `source` to the other."""
    return _pair(
        name,
        "uni",
        partial(_p2p_layout, source),
        partial(_p2p, source),
        direction=(source, 1 - source),
    )


def _native(name: str, factor: Callable[[int], float], **more: Any) -> Collective:
    """An engine's own call, as nccl-tests runs it."""
    return Collective(name=name, op=name, algorithm="native", factor=factor, **more)


def _composite(algorithm: str, **more: Any) -> Collective:
    """An all-reduce made of other collectives: it carries all_reduce's factor and its row's
    op; its kind sets it against the native call in the report."""
    return Collective(
        name=algorithm,
        op="all_reduce",
        algorithm=algorithm,
        factor=_all_ranks,
        layout=_reduce_all,
        reduces=True,
        kind=Kind.COMPOSITE,
        **more,
    )


REGISTRY: dict[str, Collective] = _registry(
    _native(
        "all_reduce",
        _all_ranks,
        layout=_reduce_all,
        bind=_all_reduce,
        reduces=True,
        nccl_kernels=frozenset({"AllReduce"}),
    ),
    _native(
        "reduce",
        _one,
        layout=_reduce_root,
        bind=_reduce,
        reduces=True,
        nccl_kernels=frozenset({"Reduce"}),
    ),
    _native(
        "broadcast",
        _one,
        layout=_broadcast_layout,
        bind=_broadcast,
        nccl_kernels=frozenset({"Broadcast"}),
    ),
    _native(
        "all_gather",
        _gathering,
        per_rank_chunks=True,
        layout=_all_gather_layout,
        bind=_all_gather,
        nccl_kernels=frozenset({"AllGather"}),
    ),
    _native("gather", _gathering, per_rank_chunks=True, layout=_gather_layout, bind=_gather),
    _native(
        "reduce_scatter",
        _gathering,
        per_rank_chunks=True,
        layout=_reduce_scatter_layout,
        bind=_reduce_scatter,
        reduces=True,
        nccl_kernels=frozenset({"ReduceScatter"}),
    ),
    _native("scatter", _gathering, per_rank_chunks=True, layout=_scatter_layout, bind=_scatter),
    _native(
        "all_to_all",
        _gathering,
        per_rank_chunks=True,
        every_pair=True,
        layout=all_to_all.layout,
        bind=_all_to_all,
    ),
    Collective(
        name="send_recv",
        op="send_recv",
        algorithm="ring",
        factor=_one,
        layout=_ring,
        bind=_send_recv,
    ),
    # Composites: all_reduce from two collectives.
    _composite(
        "reduce_scatter+all_gather",
        bind=_reduce_scatter_all_gather,
        nccl_kernels=frozenset({"ReduceScatter", "AllGather"}),
        per_rank_chunks=True,
    ),
    _composite(
        "reduce+broadcast",
        bind=_reduce_broadcast,
        nccl_kernels=frozenset({"Reduce", "Broadcast"}),
    ),
    # pairwise sends to each rank straight; ring, mesh2d and hierarchical forward through others
    _all_to_all_algorithm(
        "pairwise", all_to_all.layout, bind=per_call(all_to_all.pairwise), every_pair=True
    ),
    _all_to_all_algorithm("ring", _with_work(all_to_all.ring_work), bind=per_call(all_to_all.ring)),
    _all_to_all_algorithm(
        "mesh2d",
        _with_work(all_to_all.grid_work),
        bind=per_call(all_to_all.mesh2d),
        why_not=all_to_all.mesh2d_why_not,
    ),
    _all_to_all_algorithm(
        "hierarchical",
        _with_work(all_to_all.grid_work),
        bind=per_call(all_to_all.hierarchical),
        why_not=all_to_all.hierarchical_why_not,
    ),
    # All-reduce on torch symmetric memory (NCCL_ALGO variants are actor sets: --nccl-algos).
    _symmetric("symm_one_shot", False, all_reduce.one_shot_layout, all_reduce.one_shot),
    _symmetric("symm_two_shot", True, all_reduce.two_shot_layout, all_reduce.two_shot),
    # Point to point between the two ranks of a pair: one way (each way), and both at once.
    _one_way("p2p", 0),
    _one_way("p2p:reverse", 1),
    _pair("p2p:bi", "bi", _p2p_both_layout, _p2p_both, per_rank_chunks=True, direction=(0, 1)),
    _moe(MoeLayer(), combine=False),
    _moe(MoeLayer(), combine=True),
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


def configure_moe(spec: MoeLayer) -> None:
    """The MoE entries for this sweep's layer (the driver and every rank do the same)."""
    for combine in (False, True):
        entry = _moe(spec, combine)
        REGISTRY[entry.name] = entry


def performing(op: str) -> Collective | None:
    """The operation of rows whose `op` column is `op`: the entry of that name, else the first
    that performs it (a plugin's own name); None where none does."""
    if op in REGISTRY:
        return REGISTRY[op]
    return next((c for c in REGISTRY.values() if c.op == op), None)


def register(collective: Collective) -> Collective:
    """Add an operation (from a plugin module); names are unique."""
    if collective.name in REGISTRY and REGISTRY[collective.name] != collective:
        raise ValueError(f"an operation named {collective.name!r} is already registered")
    REGISTRY[collective.name] = collective
    return collective


def load_plugins(modules: Iterable[str]) -> None:
    """Import modules that register operations; the driver and every rank import the same.
    A module that is missing, or fails as it runs (a syntax error, an exception, a name
    already registered), is BadInput naming it. What a plugin prints goes to stderr: stdout
    is sweeper's own (`--format json` owns it whole)."""
    for module in modules:
        try:
            with contextlib.redirect_stdout(sys.stderr), _exits_raised():
                importlib.import_module(module)
        except SystemExit as exc:  # sys.exit(0) in a plugin would end sweeper having done nothing
            raise BadInput(
                f"--plugins {module}: it calls sys.exit({quoted(exc.code)}) as it is imported"
            ) from None
        except _Exited as exc:
            raise BadInput(
                f"--plugins {module}: it calls os._exit({exc.code}) as it is imported"
            ) from None
        except KeyboardInterrupt:
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                raise  # Python's own handler: a Ctrl-C (the API's), not the plugin's
            # sweeper's handlers raise no KeyboardInterrupt: the plugin's own (130, no line)
            raise BadInput(
                f"--plugins {module}: it raises KeyboardInterrupt as it is imported"
            ) from None
        except Exception as exc:  # the plugin's own code: whatever it raises
            raise BadInput(
                f"--plugins {module}: cannot import it ({type(exc).__name__}: {_said(exc)})"
            ) from None


class _Exited(BaseException):
    """os._exit, called by a plugin as it is imported: it would end sweeper at once, exit 0
    having done nothing, with no line."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _exits_raised() -> Iterator[None]:
    """While a plugin is imported, its os._exit raises `_Exited` instead of ending sweeper."""

    def exited(status: int) -> NoReturn:
        raise _Exited(status)

    ending = os._exit
    os._exit = exited
    try:
        yield
    finally:
        os._exit = ending


def _said(exc: Exception) -> str:
    """An exception's message in one bounded line; one whose `__str__` fails says so."""
    try:
        said = " ".join(str(exc).split())  # one line, whatever the plugin's message spans
    except Exception as failed:  # the plugin's own __str__: whatever it raises
        return f"its message cannot be shown: {type(failed).__name__}"
    return said if len(said) <= QUOTE_CHARS else f"{said[: QUOTE_CHARS - 3]}..."


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
        dataclasses.replace(c, traits=dataclasses.replace(c.traits, all_sizes=True))
        if c.name in by_name and c.traits.ends_bytes is not None
        else c
        for c in chosen.values()
    ]
