"""The one place a spec becomes what a run does: the spec resolved for the backend its cluster
gave (`resolve` -> `RunPlan`, handed to the driver whole), and what a schedule is asked for
(its groups, size grid, memory cap and series). `sweeper run`, `sweeper topo` and `sweeper
plan` all ask here, so all three plan the same groups, waves and series. Pure: no Ray, no torch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.errors import BadInput
from sweeper.planning.dtypes import gloo_refuses
from sweeper.planning.placement import Group, Placement
from sweeper.planning.schedule import Planned, Request
from sweeper.planning.sizes import mem_limit_bytes
from sweeper.planning.spec import MeasureSection, SweepSpec, needs_cuda
from sweeper.topology import Node
from sweeper.wire import Backend, Engine, Launch, MemLimit, Tier, Timing

DEFAULT_CPU_MEM_LIMIT = 64 * 2**20  # per CPU rank, unless --mem-limit: keeps `sweeper run` quick
# A plan holds every group it asks for (~0.3 KB each) and takes ~30 us to place one: every
# tier and pair of 1024 nodes x 8 GPUs is 0.6 million groups, 0.3 GB and 20 s. Four million
# is a couple of GB and minutes; a request for more is refused before a group is built.
GROUPS_LIMIT = 4_000_000
_ON_NODE = frozenset({Tier.NVLINK, Tier.PCIE, Tier.CPU})


def mem_limit(asked: MeasureSection, backend: Backend) -> MemLimit | None:
    """--mem-limit, or for CPU ranks the default cap."""
    if asked.mem_limit is None and backend == Backend.GLOO:
        return mem_limit_bytes(DEFAULT_CPU_MEM_LIMIT)
    return asked.mem_limit


def groups_bound(request: Request, nodes: int, per_node: int) -> int:
    """At most how many groups `request` asks for on `nodes` nodes of `per_node` ranks,
    counted from the shape (what `placement.groups` and `gpu_groups` would build), not built."""

    def pairs(n: int) -> int:
        return n * (n - 1) // 2 if request.pairs else 0

    on_node = len(_ON_NODE.intersection(request.tiers)) * nodes * (per_node + pairs(per_node))
    internode = 0
    if Tier.INTERNODE in request.tiers and nodes > 1:
        internode = (2 if request.force_network else 1) * (2 + pairs(nodes))
    swept = request.nccl_env.values()
    grid = math.prod(len(values) for values in swept) if swept else 0
    fixed = 1 + on_node + internode
    # with curves, the swept variables run on the curves' groups only: a few of each tier's
    # shapes (its groups, its pairs, one across nodes)
    repeated = fixed if request.curves is None else request.curves * (3 * len(request.tiers) + 1)
    return fixed + grid * min(fixed, repeated) + nodes * (per_node + 1)


def check_groups(request: Request, nodes: int, per_node: int) -> None:
    """BadInput where the request asks for more groups than a plan holds (GROUPS_LIMIT)."""
    bound = groups_bound(request, nodes, per_node)
    if bound > GROUPS_LIMIT:
        raise BadInput(
            f"--tiers {','.join(request.tiers)} on {nodes} nodes x {per_node} ranks: up to "
            f"{bound} groups; a plan holds at most {GROUPS_LIMIT}",
            hint="fewer --nodes, --pairs none, fewer tiers or --nccl-env values",
        )


def timing(spec: SweepSpec, backend: Backend) -> Timing:
    """What every point of a run on `backend` is handed: the launch modes as asked, else
    graph on GPUs and eager on CPU ranks; BadInput where the backend cannot do what was
    asked (CUDA graphs, the nccl engine, registered buffers on gloo)."""
    gpus = backend == Backend.NCCL
    refused = None if gpus else needs_cuda(spec.launch, spec.engine, spec.register_buffers)
    if refused is not None:
        raise BadInput(refused)
    return Timing(
        iters=spec.iters,
        warmup=spec.warmup,
        check=spec.check,
        samples=spec.samples,
        seed=spec.seed,
        launches=tuple(map(Launch, spec.launch)) or (Launch.GRAPH if gpus else Launch.EAGER,),
        blocks=spec.blocks,
        engines=tuple(map(Engine, spec.engine)),
        register=spec.register_buffers,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class RunPlan:
    """A spec resolved once for the backend its cluster gave: what the driver runs, the
    options as asked (`spec`) beside what the backend made of them."""

    spec: SweepSpec
    backend: Backend
    timing: Timing  # what every point is handed
    mem_limit: MemLimit | None  # --mem-limit, or CPU ranks' default cap
    sizes: tuple[int, ...]  # the grid; with auto, to the largest size accepted

    @property
    def options(self) -> dict[str, Any]:
        """The spec's options, as the run record keeps them (a resume's)."""
        return self.spec.model_dump(mode="json")

    def request(self, ops: Sequence[Planned] = ()) -> Request:
        """What the schedule is asked for, running `ops`."""
        spec = self.spec
        return Request(
            tiers=spec.tiers,
            pairs=spec.pairs == "all",
            force_network=spec.force_network,
            nccl_env=spec.nccl_variables(),
            ops=ops,
            dtypes=spec.dtypes,
            sizes=self.sizes,
            auto=spec.largest is None,
            sees_node_gpus=self.backend == Backend.NCCL and spec.gpu_visibility == "node",
            concurrent=spec.concurrent,
            dense_sizes=spec.dense_sizes,
            curves=spec.curves,
        )

    def tier_groups(self, placement: Placement) -> list[Group]:
        """The groups the tiers ask for on a placement (what `sweeper topo` lists; the
        schedule runs them, and the groups of per-GPU operations beside them)."""
        return self.request().groups(placement)

    def ceiling_bytes(self, nodes: Sequence[Node]) -> int | None:
        """Where --max-size auto series likely end: about one rank's memory; None: not auto."""
        if self.spec.largest is not None:
            return None
        memory = [gpu.memory_total_bytes for node in nodes for gpu in node.gpus]
        ceiling = min(memory) if memory and self.backend == Backend.NCCL else DEFAULT_CPU_MEM_LIMIT
        limit = self.mem_limit
        return ceiling if limit is None else min(ceiling, limit.of(ceiling))


def planned(spec: SweepSpec, backend: Backend) -> RunPlan:
    """The spec for a run on `backend` (what `sweeper plan` estimates); BadInput where the
    backend cannot time its points as asked (CUDA graphs, the nccl engine, registered
    buffers on gloo)."""
    return RunPlan(
        spec=spec,
        backend=backend,
        timing=timing(spec, backend),
        mem_limit=mem_limit(spec, backend),
        sizes=spec.grid(),
    )


def resolve(spec: SweepSpec, backend: Backend) -> RunPlan:
    """The spec for a run on `backend`; BadInput where the backend cannot do what it asks
    (`planned`'s refusals, and a float8 dtype on gloo)."""
    plan = planned(spec, backend)
    refused = gloo_refuses(spec.dtypes) if backend == Backend.GLOO else None
    if refused is not None:
        raise BadInput(refused)
    return plan
