"""What crosses a process boundary (driver, Ray actor, rank process) and the names rows carry:
small frozen records and string enums, defined once. Imports neither torch nor Ray (nor
pandas), so every process can load it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


class Kind(Name):
    """What a row measured (the `kind` column), from its descriptor (`Collective.kind`) or the
    copy-engine matrix: an operation on a group (any algorithm), one performed with others, a
    pair (one way or both), a peer copy inside a node or between host and device, an
    operation with parameters of its own (MoE). The report and analyses select rows by it."""

    COLLECTIVE = "collective"
    COMPOSITE = "composite"
    P2P = "p2p"
    COPY = "copy"
    EXPERIMENT = "experiment"


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
# The variant (the `variant` column) of a group run in its actor set's own NCCL environment,
# no variable of a grid or of a tier's variants set: every other variant is compared with it.
DEFAULT_VARIANT = "default"


# What the driver hands a rank with every point, and once when it starts: sweeper/plan
# resolves them from the spec.


@dataclass(frozen=True, kw_only=True, slots=True)
class MemLimit:
    """`--mem-limit`: bytes, or a fraction of the device's (or the rank's share of the node's)
    memory, and its spelling (8G, 12.5%): sweeper/planning/sizes.py parses and spells it."""

    size_bytes: int | None = None
    fraction: float | None = None
    spelled: str

    def __str__(self) -> str:
        return self.spelled

    def of(self, total_bytes: int) -> int:
        if self.size_bytes is not None:
            return self.size_bytes
        return int(total_bytes * (self.fraction or 1.0))


@dataclass(frozen=True, kw_only=True, slots=True)
class MoeLayer:
    """The mixture-of-experts layer whose token dispatch and combine `moe:*` measure, as every
    rank routes its tokens (sweeper/ops/algorithms/moe.py); `--moe`'s keys, validated by
    sweeper/planning/moe.py. A record, not the spec's model: no rank loads pydantic."""

    tokens: int = 4096
    hidden: int = 4096
    top_k: int = 2
    experts: int = 64
    zipf: float = 1.0
    seed: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """How much memory a rank may use: `--mem-limit`, and for CPU ranks their share of the
    node's memory (Ray's `memory` resource of the node over the ranks placed on it)."""

    mem_limit: MemLimit | None = None
    host_share_bytes: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Timing:
    """How every point of a sweep is measured."""

    iters: int | None = None  # None: adaptive
    warmup: int | None = None  # None: adaptive
    check: bool = True
    samples: bool = False
    seed: int = 0
    launches: tuple[Launch, ...] = (Launch.EAGER,)  # each gives the point a row
    blocks: int = 3  # timed blocks per launch; the row's time is the median block's
    engines: tuple[Engine, ...] = (Engine.TORCH,)  # each gives the point rows
    register: bool = False  # buffers from NCCL's allocator, registered with the group's comms
    # A GPU's NVLink error counters are read at most this often: 65 ms a reading (telemetry.py)
    nvlink_every_s: float = 2.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    """One measurement: everything a rank needs to run it, and nothing it must work out."""

    group_id: str
    op: str  # descriptor name
    dtype: str
    size_bytes: int  # S, after rounding to whole elements for every rank
    count: int  # elements of S
    timing: Timing


# What a rank answers its actor, and the actor relays to the driver unopened.


@dataclass(frozen=True, kw_only=True, slots=True)
class Prepared:
    """Whether a rank holds a point's buffers, allocated and filled."""

    status: Status  # ok, or oom (and nothing held)
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Block:
    """One timed block of back-to-back iterations on one rank."""

    seconds: float  # the whole block
    iters: int
    samples: tuple[float, ...] | None  # per-iteration seconds (graph: per replay), when asked

    @property
    def per_iter(self) -> float:
        return self.seconds / self.iters


# The `transport` of a row that went through NCCL where NCCL's output told nothing
UNKNOWN_TRANSPORT = "unknown"


@dataclass(frozen=True, kw_only=True, slots=True)
class Link:
    """A connection NCCL set up from a rank of a communicator to a peer, in NCCL's own words
    (sweeper/fabric/nccl_log.py reads them from its INFO lines)."""

    src: int | None  # NCCL's ranks of the communicator; None for NVLS (the group as one)
    dst: int | None  # None for NVLS and CollNet (a network that reduces)
    via: str  # what follows NCCL's "via": P2P/CUMEM, SHM/direct/direct, NET/IB/0/GDRDMA, NVLS
    device: str | None = None  # a NET connection's device, as the net plugin named it: mlx5_0


@dataclass(frozen=True, kw_only=True, slots=True)
class Fabric:
    """What NCCL set up for one group's communicator in one engine, as one rank's NCCL said,
    and what that rank's node offers its network (the tier contract, sweeper/fabric)."""

    links: tuple[Link, ...] = ()  # every connection of this rank's so far
    channels: int | None = None  # the communicator's collective channels
    calls: tuple[tuple[str, str], ...] = ()  # the point's first call: (algorithm, protocol)
    # NCCL's own split of the communicator's start in seconds (its `Init timings` line):
    # ("total", 0.57), ("kernels", 0.41), ...; empty where it printed none
    init_s: tuple[tuple[str, float], ...] = ()
    unknown: str | None = None  # why NCCL's output could not be read (then nothing else is)
    rdma_devices: tuple[str, ...] = ()  # the node's active RDMA ports: mlx5_0/1
    peer_memory: bool = False  # the kernel's peer-memory module (GPUDirect RDMA) is loaded


@dataclass(frozen=True, kw_only=True, slots=True)
class Predicted:
    """NCCL's cost table for one collective call, as a tuner plugin that only observes is handed
    it (sweeper/fabric/observer.py): NCCL's predicted time of each algorithm and protocol it
    considered; it runs the one of least time."""

    function: str  # NCCL's name of the call: AllReduce, AllGather, ...
    size_bytes: int  # the bytes NCCL tunes the call for (its largest buffer)
    costs_us: tuple[tuple[str, float], ...]  # ("RING/LL", 10.2), ...: pairs NCCL ignores left out


@dataclass(frozen=True, kw_only=True, slots=True)
class NcclView:
    """What NCCL predicted for a point's first step in one engine, on one rank: its calls'
    cost tables, or why they are not known (`partial`: another tuner plugin is NCCL's)."""

    calls: tuple[Predicted, ...] = ()
    partial: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Timed:
    """A point's blocks in one engine and launch mode on one rank."""

    engine: Engine  # torch (torch.distributed) or nccl (NCCL called directly)
    launch: Launch  # graph or eager: how the timed iterations were issued
    blocks: tuple[Block, ...]
    warmup_iters: int
    n_wrong: int | None = None  # None: not checked here (no output on this rank, --no-check)
    note: str | None = None  # why it ran eagerly where a graph was asked for
    skipped: str | None = None  # why there is nothing to time (then there are no blocks)
    registered: bool = False  # its buffers registered with this engine's communicator
    fabric: Fabric | None = None  # None: not through NCCL (gloo ranks)
    start_s: float | None = None  # how long this engine's communicator of the group took to open
    energy_mj: int | None = None  # what the GPU's NVML energy counter gained over the blocks
    nccl_view: NcclView | None = None  # None: not through NCCL's collectives (gloo ranks)


# The Arrow type of one rank's value of a Reading field: the rows' telemetry columns hold a
# list of them, one per rank (named as pyarrow's aliases: the rank's process loads no pyarrow)
_I32, _I64, _F64 = {"arrow": "int32"}, {"arrow": "int64"}, {"arrow": "float64"}


@dataclass(frozen=True)
class Reading:
    """One rank's GPU over one point (`telemetry.Watch`): its state after the last timed block,
    and what its counters gained from before the first to after the last (None: not readable).
    Each field is a column of the rows, the one definition of the telemetry columns."""

    sm_clock_mhz: int | None = field(metadata=_I32)
    mem_clock_mhz: int | None = field(metadata=_I32)
    power_w: float | None = field(metadata=_F64)
    power_limit_w: float | None = field(metadata=_F64)
    temperature_c: int | None = field(metadata=_I32)
    throttle_reasons: tuple[str, ...] | None = field(metadata={"arrow": "list<string>"})
    ecc_corrected_delta: int | None = field(metadata=_I64)
    ecc_uncorrected_delta: int | None = field(metadata=_I64)
    nvlink_replay_delta: int | None = field(metadata=_I64)
    nvlink_crc_delta: int | None = field(metadata=_I64)
    nvlink_recovery_delta: int | None = field(metadata=_I64)
    xid_codes: tuple[int, ...] | None = field(metadata={"arrow": "list<int32>"})
    pcie_gen: int | None = field(metadata=_I32)
    pcie_width: int | None = field(metadata=_I32)
    pcie_max_gen: int | None = field(metadata=_I32)
    pcie_max_width: int | None = field(metadata=_I32)
    # compute processes NVML lists on the GPU besides the rank's own (a job beside the scan)
    other_processes: int | None = field(metadata=_I32)


@dataclass(frozen=True, kw_only=True, slots=True)
class RankTimings:
    """What one rank timed for a point: per engine, per launch mode, in the order the point
    asks, and its GPU around them."""

    timed: tuple[Timed, ...]
    telemetry: Reading | None = None  # None: a CPU rank, no NVML


@dataclass(frozen=True, kw_only=True, slots=True)
class Copied:
    """Peer copies timed together: `seconds[i]` is the copy from `src` to `dsts[i]`, per
    iteration (for `bi`, the two directions timed as one)."""

    kind: str  # uni, bi, fanout
    src: str  # GPU UUIDs
    dsts: tuple[str, ...]
    size_bytes: int
    seconds: tuple[float, ...]


# What a rank's actor and the rank's process tell each other and the driver.


class RankCall(Name):
    """The calls a rank's actor relays to the rank's process: each a method of the rank."""

    INFO = "info"
    VERSIONS = "versions"
    LISTEN = "listen"
    JOIN = "join"  # a world, with its size: the next may have fewer ranks (a node dropped)
    OPEN_GROUP = "open_group"
    CLOSE_GROUP = "close_group"
    LEAVE = "leave"
    BUDGET = "budget"
    PREPARE = "prepare"
    EXECUTE = "execute"
    COPY_MATRIX = "copy_matrix"
    RELEASE = "release"


# The variables an actor set carries of its own, the driver's and its variant's settings of the
# ranks' libraries: each library reads them as a communicator or group starts, never as it is
# imported, so ranks of sets that differ in them can be forked by one template (rank/template.py).
SET_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "NVSHMEM_", "TORCH_SYMM_MEM_")


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
