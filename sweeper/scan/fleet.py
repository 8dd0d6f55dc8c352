"""The scan's plain records: the fleet's nodes, the groups a wave runs, and what each group
measured. The policy makes groups and waves; the executor turns a group into a `GroupOutcome`;
the judge reads outcomes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sweeper.wire import Name


class Stage(Name):
    """Where a group belongs in the scan (the rows' `stage`). The fixed strategies' pairings
    run as `screen` waves after the same gate."""

    GATE = "gate"  # every node's own GPUs and NVML health, all nodes at once
    ISOLATE = "isolate"  # inside a suspect node: each GPU alone, then disjoint GPU pairs
    SCREEN = "screen"  # all_to_all over the lines of an affine plane: every node pair once
    CROSS_DOMAIN = "cross-domain"  # older scans' rows: one representative of each group
    BISECT = "bisect"  # parts of a failing group, down to the node or the pair
    CONFIRM = "confirm"  # each suspect beside known-good partners, each pad it failed beside
    PAIRS = "pairs"  # every pair of nodes alone, disjoint pairs a wave: a path's own rate


class Result(Name):
    """How a group's judged points ended, as a whole."""

    OK = "ok"  # every point ran and checked
    FAILED = "failed"  # an error, a hang or wrong data
    MISSING = "missing"  # no row came back (a node left, its actors never started)


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetNode:
    id: str  # the Ray node id, or a name a simulation gives
    host: str
    gpus: int
    domain: str | None = None  # the value of --domain-label (a rack, an NVLink domain)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fleet:
    nodes: tuple[FleetNode, ...]
    gpu_model: str | None = None  # "H100", "H200": picks the reference figures
    ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _by_id: dict[str, FleetNode] = field(init=False, repr=False, compare=False)
    _gpus: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(node.id for node in self.nodes))
        object.__setattr__(self, "_by_id", {node.id: node for node in self.nodes})
        object.__setattr__(self, "_gpus", {node.id: node.gpus for node in self.nodes})

    def node(self, node_id: str) -> FleetNode:
        return self._by_id[node_id]

    def gpus(self, nodes: Iterable[str]) -> int:
        """The GPUs (ranks) of these nodes together."""
        return sum(map(self._gpus.__getitem__, nodes))


# What each stage's test runs, and so which traffic it carries: a ring all_reduce crosses ring
# neighbours only (a slow pair that are not neighbours slows nothing), an all_to_all every
# pair of its members (each sends to each directly), a pair's send_recv its one path. The
# gate's all_reduce is inside one node (NVLink); every test across nodes is an all_to_all.
OPS = {
    "gate": "all_reduce",
    "isolate": "send_recv",  # a GPU pair; a GPU alone: its own copies (h2d, d2h, d2d)
    "screen": "all_to_all",
    "cross-domain": "all_reduce",
    "bisect": "all_to_all",
    "confirm": "all_to_all",
    "pairs": "all_to_all",  # of two nodes: each sends the other all it sends, its path's rate
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanGroup:
    """Nodes measured together, every GPU of each taking part, or some of them: `gpus`, some
    of one node's GPUs (its isolation); `subsets`, beside `nodes` one entry each, the GPUs of
    each node taking part in a group across nodes (a GPU of a node of two beside a proven GPU
    of another, a node with its slow GPU left out). `partners` are the members put in as
    known-good (padding or confirmation partners); the others are under test."""

    wave: int
    stage: Stage
    nodes: tuple[str, ...]
    partners: tuple[str, ...] = ()
    gpus: tuple[int, ...] = ()  # the node's GPUs taking part; empty: all of them
    subsets: tuple[tuple[int, ...], ...] = ()  # each node's GPUs taking part; empty: all

    def __post_init__(self) -> None:
        if self.subsets and (len(self.subsets) != len(self.nodes) or self.gpus):
            raise ValueError(f"wave {self.wave}: a group's subsets are one a node, not gpus")

    @property
    def tested(self) -> tuple[str, ...]:
        return tuple(n for n in self.nodes if n not in self.partners)

    @property
    def op(self) -> str:
        return OPS[str(self.stage)]

    def members(self, fleet: Fleet) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """Each node and its GPUs taking part."""
        if self.gpus:
            return ((self.nodes[0], self.gpus),)
        if self.subsets:
            return tuple(zip(self.nodes, self.subsets, strict=True))
        return tuple((n, tuple(range(fleet.node(n).gpus))) for n in self.nodes)

    def ranks(self, fleet: Fleet) -> int:
        if self.gpus:
            return len(self.gpus)
        if self.subsets:
            return sum(map(len, self.subsets))
        return fleet.gpus(self.nodes)

    def fewest(self, fleet: Fleet) -> int:
        """The fewest GPUs a node of it has taking part (`Collective.nic_rate`)."""
        return min(len(g) for _, g in self.members(fleet))

    def holds(self, fleet: Fleet) -> set[tuple[str, int]]:
        """The GPUs it occupies."""
        return {(n, g) for n, gpus in self.members(fleet) for g in gpus}


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanWave:
    """Groups that share no node (groups of some of one node's GPUs: no GPU), run at once."""

    index: int
    stage: Stage
    groups: tuple[ScanGroup, ...]

    def __post_init__(self) -> None:
        whole: set[str] = set()
        parts: set[tuple[str, int]] = set()
        for group in self.groups:
            mine = {(group.nodes[0], g) for g in group.gpus}
            shared = whole & set(group.nodes) or parts & mine
            if shared or (not group.gpus and {n for n, _ in parts} & set(group.nodes)):
                raise ValueError(f"wave {self.index}: groups share {shared or group.nodes}")
            if group.gpus:
                parts |= mine
            else:
                whole.update(group.nodes)


@dataclass(frozen=True, kw_only=True, slots=True)
class MemberReading:
    """Per-node or per-GPU evidence a group's rows carry beside its figures."""

    node: str
    gpu: int | None = None
    copy_gb_per_s: float | None = None  # gate: the GPU's own copies (h2d), null elsewhere
    d2d_gb_per_s: float | None = None  # gate: its copy within its memory (busbw), null elsewhere
    flags: tuple[str, ...] = ()  # NVML or sysfs evidence against it: "xid 79", "nic at 200 of 400"
    notes: tuple[str, ...] = ()  # NVML evidence beside its verdict, not against it: CRC errors
    sm_clock_mhz: float | None = None  # compared with its node's other GPUs
    at_power_cap: bool = False  # drawing its enforced limit, or held by the power cap
    other_processes: int | None = None  # the most compute processes besides the scan's seen on it


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupOutcome:
    group: ScanGroup
    result: Result
    busbw_gb_per_s: float | None = None  # all_reduce at the bandwidth size
    latency_us: float | None = None  # all_reduce at the smallest size
    size_bytes: int = 1 << 30  # the bandwidth size it ran
    readings: tuple[MemberReading, ...] = field(default=())
    reason: str = ""  # the error, for `failed` and `missing`
    op: str = "all_reduce"  # the operation its figures are of (`ScanGroup.op`, or the scan's --op)
    unanswered: tuple[str, ...] = ()  # nodes whose ranks did not answer (a hang, timed out)
    # where its transport broke its tier's contract (the rows' transport_flag, sweeper/fabric):
    # what NCCL did and what to check; empty where it kept it
    misconfigured: str = ""
    # how long its communicators took to start (the rows' comm_start_s: the slowest rank's,
    # engine's); None where the rows do not say
    start_s: float | None = None

    def flags(self, node: str) -> tuple[str, ...]:
        return tuple(f for r in self.readings if r.node == node for f in r.flags)
