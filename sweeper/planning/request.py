"""The one place a spec becomes what a run does: resolved once for the backend its cluster
gave (`resolve` -> `RunPlan`, handed to the driver whole), and what a schedule is asked for
(its groups, size grid, memory cap and series), for `sweeper run`, `sweeper topo` and
`sweeper plan` alike, so all three plan the same groups, waves and series. Pure: no Ray, no
torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sweeper.errors import BadInput
from sweeper.planning.dtypes import gloo_refuses
from sweeper.planning.placement import Group, Placement
from sweeper.planning.schedule import Planned, Request
from sweeper.planning.sections import ClusterOptions, ExperimentOptions, OutputOptions, PlanOptions
from sweeper.planning.sizes import mem_limit_bytes
from sweeper.planning.spec import SweepSpec
from sweeper.topology import Node
from sweeper.wire import Backend, MemLimit, Tier, Timing

DEFAULT_CPU_MEM_LIMIT = 64 * 2**20  # per CPU rank, unless --mem-limit: keeps `sweeper run` quick
# A plan holds every group it asks for (~0.3 KB each) and takes ~30 us to place one: every
# tier and pair of 1024 nodes x 8 GPUs is 0.6 million groups, 0.3 GB and 20 s. Four million
# is a couple of GB and minutes; a request for more is refused before a group is built.
GROUPS_LIMIT = 4_000_000
_ON_NODE = frozenset({Tier.NVLINK, Tier.PCIE, Tier.CPU})


def mem_limit(spec: SweepSpec, backend: Backend) -> MemLimit | None:
    """--mem-limit, or for CPU ranks the default cap."""
    if spec.mem_limit is None and backend == Backend.GLOO:
        return mem_limit_bytes(DEFAULT_CPU_MEM_LIMIT)
    return spec.mem_limit


def ceiling_bytes(spec: SweepSpec, backend: Backend, nodes: Sequence[Node]) -> int | None:
    """Where --max-size auto series likely end: about one rank's memory; None: not auto."""
    if not spec.planning.auto:
        return None
    memory = [gpu.memory_total_bytes for node in nodes for gpu in node.gpus]
    ceiling = min(memory) if memory and backend == Backend.NCCL else DEFAULT_CPU_MEM_LIMIT
    limit = mem_limit(spec, backend)
    return ceiling if limit is None else min(ceiling, limit.of(ceiling))


def schedule_request(spec: SweepSpec, backend: Backend, ops: Sequence[Planned] = ()) -> Request:
    asked = spec.planning
    return Request(
        tiers=asked.tiers,
        pairs=asked.pairs,
        force_network=asked.force_network,
        nccl_env=asked.nccl_env,
        ops=ops,
        dtypes=asked.dtypes,
        sizes=asked.sizes(),
        auto=asked.auto,
        sees_node_gpus=backend == Backend.NCCL and spec.cluster.gpu_visibility == "node",
        concurrent_pairs=asked.concurrent_pairs,
        dense_sizes=asked.dense_sizes,
        curves=asked.curves,
    )


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


def tier_groups(spec: SweepSpec, placement: Placement) -> list[Group]:
    """The groups the spec's tiers ask for on a placement (what `sweeper topo` lists; the
    schedule runs them, and the groups of per-GPU operations beside them)."""
    return schedule_request(spec, placement.backend).groups(placement)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunPlan:
    """A spec resolved once for the backend its cluster gave: what the driver runs, handed
    down whole instead of asking the spec piece by piece."""

    spec: SweepSpec  # the options as given: the run record keeps them
    backend: Backend
    cluster: ClusterOptions
    planning: PlanOptions  # its mem_limit with CPU ranks' default cap
    timing: Timing  # what every point is handed
    timeout_s: float  # what one point may take
    sizes: tuple[int, ...]  # the grid; with auto, to the largest size accepted
    outputs: OutputOptions
    experiments: ExperimentOptions

    def request(self, ops: Sequence[Planned]) -> Request:
        return schedule_request(self.spec, self.backend, ops)

    def ceiling_bytes(self, nodes: Sequence[Node]) -> int | None:
        return ceiling_bytes(self.spec, self.backend, nodes)


def resolve(spec: SweepSpec, backend: Backend) -> RunPlan:
    """The spec for a run on `backend`; BadInput where the backend cannot do what it asks
    (CUDA graphs, the nccl engine, registered buffers or a float8 dtype on gloo)."""
    timing = spec.timing
    resolved = timing.timing(backend)
    refused = gloo_refuses(spec.dtypes) if backend == Backend.GLOO else None
    if refused is not None:
        raise BadInput(refused)
    planning = spec.planning
    return RunPlan(
        spec=spec,
        backend=backend,
        cluster=spec.cluster,
        planning=replace(planning, mem_limit=mem_limit(spec, backend)),
        timing=resolved,
        timeout_s=timing.timeout_s,
        sizes=tuple(planning.sizes()),
        outputs=spec.outputs,
        experiments=spec.experiments,
    )
