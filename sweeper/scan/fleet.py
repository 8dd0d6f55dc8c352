"""The scan's plain records: the fleet's nodes, the groups a wave runs, and what each group
measured. The policy makes groups and waves; the executor turns a group into an `Outcome`;
the judge reads outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sweeper.wire import Name


class Stage(Name):
    """Where a group belongs in the scan (the rows' `stage`). The fixed strategies' pairings
    run as `screen` waves after the same gate."""

    GATE = "gate"  # every node's own GPUs and NVML health, all nodes at once
    SCREEN = "screen"  # disjoint internode groups (~sqrt(N) nodes, or a domain each)
    CROSS_DOMAIN = "cross-domain"  # one representative of each passing group, together
    BISECT = "bisect"  # halves of a failing group, padded back to its shape
    CONFIRM = "confirm"  # each suspect beside known-good partners


class Result(Name):
    """How a group's judged points ended, as a whole."""

    OK = "ok"  # every point ran and checked
    FAILED = "failed"  # an error, a hang or wrong data
    MISSING = "missing"  # no row came back (a node left, its actors never started)


@dataclass(frozen=True, kw_only=True, slots=True)
class Node:
    id: str  # the Ray node id, or a name a simulation gives
    host: str
    gpus: int
    domain: str | None = None  # the value of --domain-label (a rack, an NVLink domain)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fleet:
    nodes: tuple[Node, ...]
    gpu_model: str | None = None  # "H100", "H200": picks the reference figures
    ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _by_id: dict[str, Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(node.id for node in self.nodes))
        object.__setattr__(self, "_by_id", {node.id: node for node in self.nodes})

    def node(self, node_id: str) -> Node:
        return self._by_id[node_id]


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """Nodes measured together, every GPU of each taking part. `partners` are the members
    put in as known-good (padding or confirmation partners); the others are under test."""

    wave: int
    stage: Stage
    nodes: tuple[str, ...]
    partners: tuple[str, ...] = ()

    @property
    def tested(self) -> tuple[str, ...]:
        return tuple(n for n in self.nodes if n not in self.partners)

    def ranks(self, fleet: Fleet) -> int:
        return sum(fleet.node(n).gpus for n in self.nodes)


@dataclass(frozen=True, kw_only=True, slots=True)
class Wave:
    """Groups that share no node, run at once."""

    index: int
    stage: Stage
    groups: tuple[Group, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for group in self.groups:
            if seen.intersection(group.nodes):
                raise ValueError(f"wave {self.index}: groups share {seen & set(group.nodes)}")
            seen.update(group.nodes)


@dataclass(frozen=True, kw_only=True, slots=True)
class Reading:
    """Per-node or per-GPU evidence a group's rows carry beside its figures."""

    node: str
    gpu: int | None = None
    copy_gb_per_s: float | None = None  # gate: the GPU's own copies (h2d), null elsewhere
    flags: tuple[str, ...] = ()  # NVML or sysfs evidence against it: "xid 79", "nic at 200 of 400"


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    group: Group
    result: Result
    busbw_gb_per_s: float | None = None  # all_reduce at the bandwidth size
    latency_us: float | None = None  # all_reduce at the smallest size
    size_bytes: int = 1 << 30  # the bandwidth size it ran
    readings: tuple[Reading, ...] = field(default=())
    reason: str = ""  # the error, for `failed` and `missing`

    def flags(self, node: str) -> tuple[str, ...]:
        return tuple(f for r in self.readings if r.node == node for f in r.flags)
