"""What crosses a process boundary (driver, Ray actor, rank process) and the names rows carry:
small frozen records and string enums, defined once. Imports neither torch nor Ray (nor
pandas), so every process can load it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Name(str, Enum):
    """A closed set of names written to rows and read from the command line. A member is its
    string (`Backend.NCCL == "nccl"`, `f"{Backend.NCCL}"` is `nccl`), so it goes into Arrow
    columns, JSON and messages as the value users see."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)


class Backend(Name):
    """The torch.distributed backend of a run's ranks: NCCL on GPUs, gloo on CPU ranks."""

    NCCL = "nccl"
    GLOO = "gloo"


class Status(Name):
    """How a point ended (the `status` column)."""

    OK = "ok"
    OOM = "oom"
    TIMEOUT = "timeout"
    ERROR = "error"
    SKIPPED = "skipped"


class Launch(Name):
    """How timed iterations are issued: replays of a captured CUDA graph, or eager calls."""

    GRAPH = "graph"
    EAGER = "eager"


class Engine(Name):
    """What a point calls: torch.distributed, or NCCL directly (nccl4py)."""

    TORCH = "torch"
    NCCL = "nccl"


class Tier(Name):
    """The slowest link a group crosses (the `tier` column). The first four are what --tiers
    asks for; `gpu` (each GPU's own copies) and `local` (one GPU alone, NCCL's single-rank
    path) come with the operations and the machine."""

    NVLINK = "nvlink"
    PCIE = "pcie"
    INTERNODE = "internode"
    CPU = "cpu"
    GPU = "gpu"
    LOCAL = "local"


# The tiers --tiers names (`all` is every one of them; `world` is every rank as one group).
REQUESTABLE_TIERS: tuple[Tier, ...] = (Tier.NVLINK, Tier.PCIE, Tier.INTERNODE, Tier.CPU)


# What a rank's actor and the rank's process tell each other and the driver.


class RankCall(Name):
    """The calls a rank's actor relays to the rank's process: each a method of the rank."""

    INFO = "info"
    VERSIONS = "versions"
    LISTEN = "listen"
    JOIN = "join"
    OPEN_GROUP = "open_group"
    CLOSE_GROUP = "close_group"
    LEAVE = "leave"
    BUDGET = "budget"
    PREPARE = "prepare"
    EXECUTE = "execute"
    COPY_MATRIX = "copy_matrix"
    RELEASE = "release"


@dataclass(frozen=True, kw_only=True, slots=True)
class RayFacts:
    """What Ray told the rank's actor, for the rank's own process (which has no Ray)."""

    gpu_ids: tuple[str, ...]  # Ray's ids of the actor's GPUs, as the node's CUDA numbers them
    node_id: str
    ip: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RankInfo:
    """Where one rank actor landed, as it reports it."""

    rank: int
    host: str
    ip: str
    node_id: str
    pid: int
    device: str  # "cpu" or "cuda:<index>"
    ray_gpu_ids: tuple[str, ...]  # the GPUs Ray gave the actor (CUDA numbering of its node)
    gpu_uuid: str | None
    gpu_pci_bus_id: str | None  # as NVML spells it: 00000000:18:00.0
    nccl_env: tuple[tuple[str, str], ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Versions:
    """The libraries and driver a rank runs with (the rows' *_version columns)."""

    torch: str
    nccl: str | None
    cuda: str | None
    driver: str | None
    gpu_model: str | None
