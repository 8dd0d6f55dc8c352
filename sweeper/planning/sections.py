"""The typed sections a sweep is read by: where it runs (cluster), what it measures
(planning), how each point is timed, where its rows and report go, and what it runs beyond the
collectives' grid. `SweepSpec.sections` builds them once from the flat fields users write, as
one `Sections`; `request.resolve` makes that, for the backend a cluster gave, the run plan the
driver is handed. Pure: no Ray, no torch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sweeper.errors import BadInput
from sweeper.wire import Backend, Engine, Launch, MemLimit, MoeLayer, Timing

DEFAULT_CPU_RANKS = 2  # CPU ranks per node, unless --gpus-per-node or --world
GRAPH_NEEDS_CUDA = "--launch graph: CUDA graphs need GPU ranks (NCCL); CPU ranks launch eagerly"
NCCL_NEEDS_CUDA = "--engine nccl: direct NCCL calls need GPU ranks; CPU ranks use torch (gloo)"
REGISTER_NEEDS_CUDA = "--register-buffers: NCCL registers GPU buffers; CPU ranks have none (gloo)"


def needs_cuda(launches: Collection[str], engines: Collection[str], register: bool) -> str | None:
    """Why CPU ranks (gloo) cannot run what was asked, if they cannot."""
    if Launch.GRAPH in launches:
        return GRAPH_NEEDS_CUDA
    if Engine.NCCL in engines:
        return NCCL_NEEDS_CUDA
    return REGISTER_NEEDS_CUDA if register else None


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterOptions:
    """Where a sweep runs, and on how many ranks."""

    address: str | None  # None: $RAY_ADDRESS, else an embedded Ray
    connect_timeout_s: float
    backend: Backend | None  # None: auto, NCCL where the cluster has GPUs, else gloo
    nodes: int
    ranks_per_node: int | None  # None: the backend's default (every GPU; 2 CPU ranks)
    gpu_visibility: Literal["node", "own"]
    name: str | None  # recorded on every row; None: the head node's host name

    @property
    def cpu_ranks(self) -> int:
        """The CPU ranks of a node an embedded Ray must fit."""
        return self.ranks_per_node or DEFAULT_CPU_RANKS


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanOptions:
    """What a sweep measures: the groups its tiers ask for, operations, dtypes and sizes."""

    tiers: tuple[str, ...]  # Tier values, or WORLD
    pairs: bool  # with the tiers' groups, every pair of GPUs / of nodes
    force_network: bool  # internode again with NCCL P2P and SHM off
    concurrent_pairs: bool  # a node's pairs share its links on purpose
    curves: int | None  # groups of each tier and shape that run every curve; None: all
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    min_size: int
    max_size: int | None  # None: auto, the largest that fits in memory (probed)
    step_factor: float
    sizes: tuple[int, ...]  # the grid; with auto, to the largest size accepted
    dense_sizes: bool  # every size, above a series' busbw plateau too (sizes.thinned)
    mem_limit: MemLimit | None  # as asked (`request.mem_limit`: CPU ranks' default cap)
    nccl_env: Mapping[str, tuple[str, ...]]  # swept NCCL variables (--nccl-env, --nccl-algos)

    @property
    def auto(self) -> bool:
        return self.max_size is None


@dataclass(frozen=True, kw_only=True, slots=True)
class TimingOptions:
    """How every point is measured, as asked; `timing` resolves it for a backend."""

    iters: int | None  # None: adaptive
    warmup: int | None  # None: adaptive
    check: bool
    samples: bool
    seed: int
    launches: tuple[Launch, ...]  # none: graph on GPUs, eager on CPU ranks
    blocks: int
    engines: tuple[Engine, ...]
    register: bool
    timeout_s: float  # what one point may take

    def timing(self, backend: Backend) -> Timing:
        """What every point of a run on `backend` is handed: the launch modes as asked, else
        graph on GPUs and eager on CPU ranks; BadInput where the backend cannot do what was
        asked (CUDA graphs, the nccl engine, registered buffers on gloo)."""
        gpus = backend == Backend.NCCL
        refused = None if gpus else needs_cuda(self.launches, self.engines, self.register)
        if refused is not None:
            raise BadInput(refused)
        return Timing(
            iters=self.iters,
            warmup=self.warmup,
            check=self.check,
            samples=self.samples,
            seed=self.seed,
            launches=self.launches or (Launch.GRAPH if gpus else Launch.EAGER,),
            blocks=self.blocks,
            engines=self.engines,
            register=self.register,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputOptions:
    """Where a run's rows and its report go."""

    results: Path
    report: bool
    reports_dir: Path | None  # None: reports/ beside the results


@dataclass(frozen=True, kw_only=True, slots=True)
class ExperimentOptions:
    """Beyond the collectives' grid: the MoE layer, the copy-engine matrix, plugins."""

    moe: MoeLayer
    copy_engine: bool
    plugins: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Sections:
    """A spec read once (`SweepSpec.sections`): its options as the run record keeps them, and
    the sections the commands and the driver read, for whatever backend the cluster gives."""

    options: Mapping[str, Any]  # every SweepSpec field, as JSON (the record's; a resume's)
    cluster: ClusterOptions
    planning: PlanOptions
    timing: TimingOptions
    outputs: OutputOptions
    experiments: ExperimentOptions
