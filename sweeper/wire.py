"""What crosses a process boundary (driver, Ray actor, rank process) and the names rows carry:
small frozen records and string enums, defined once. Imports neither torch nor Ray (nor
pandas), so every process can load it.
"""

from __future__ import annotations

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
