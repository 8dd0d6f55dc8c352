"""The one place a spec becomes what a schedule is asked for (its groups, size grid, memory cap
and series), for `sweeper run`, `sweeper topo` and `sweeper plan` alike, so all three plan
the same groups, waves and series. Pure: no Ray, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweeper.plan.placement import Group, Placement
from sweeper.plan.schedule import Planned, Request
from sweeper.plan.sizes import SIZE_LIMIT_BYTES, mem_limit_bytes
from sweeper.plan.spec import SweepSpec
from sweeper.topology import Node
from sweeper.wire import MemLimit

DEFAULT_CPU_RANKS = 2
DEFAULT_CPU_MEM_LIMIT = 64 * 2**20  # per CPU rank, unless --mem-limit: keeps `sweeper run` quick


def mem_limit(spec: SweepSpec, backend: str) -> MemLimit | None:
    """--mem-limit, or for CPU ranks the default cap."""
    if spec.mem_limit is None and backend == "gloo":
        return mem_limit_bytes(DEFAULT_CPU_MEM_LIMIT)
    return spec.mem_limit


def sizes(spec: SweepSpec) -> list[int]:
    """The grid; with auto, up to the largest size accepted (each series stops at its bound)."""
    return spec.sizes(SIZE_LIMIT_BYTES if spec.max_size == "auto" else int(spec.max_size))


def ceiling_bytes(spec: SweepSpec, backend: str, nodes: Sequence[Node]) -> int | None:
    """Where --max-size auto series likely end: about one rank's memory; None: not auto."""
    if spec.max_size != "auto":
        return None
    memory = [gpu.memory_total_bytes for node in nodes for gpu in node.gpus]
    ceiling = min(memory) if memory and backend == "nccl" else DEFAULT_CPU_MEM_LIMIT
    limit = mem_limit(spec, backend)
    return ceiling if limit is None else min(ceiling, limit.of(ceiling))


def schedule_request(spec: SweepSpec, backend: str, ops: Sequence[Planned] = ()) -> Request:
    return Request(
        tiers=spec.tiers,
        pairs=spec.pairs == "all",
        force_network=spec.force_network,
        nccl_env=spec.nccl_variables(),
        ops=ops,
        dtypes=spec.dtypes,
        sizes=sizes(spec),
        auto=spec.max_size == "auto",
        sees_node_gpus=backend == "nccl" and spec.gpu_visibility == "node",
        concurrent_pairs=spec.concurrent,
    )


def tier_groups(spec: SweepSpec, placement: Placement) -> list[Group]:
    """The groups the spec's tiers ask for on a placement (what `sweeper topo` lists; the
    schedule runs them, and the groups of per-GPU operations beside them)."""
    return schedule_request(spec, placement.backend).groups(placement)
