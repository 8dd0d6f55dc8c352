"""What a sweep is asked to do, declared once. Its sections (where it runs, what it measures, how
each point is timed, NCCL, where its output goes, experiments) are frozen models whose fields
are options, with their rules and what is read from them. `SweepSpec` is their union, flat as
users write it: its fields are `sweeper run`'s options, a profile's keys, `sweeper.run`'s
keywords and a run record's options. A bad value is refused once, before anything starts, with
the option's (or the profile key's) name. Pure: no Ray, no torch."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from sweeper.planning import knobs
from sweeper.planning.dtypes import canonical_dtype, gloo_refuses
from sweeper.planning.fields import (
    SIZE_SCHEMA,
    Cli,
    CommaList,
    MemLimitField,
    NcclVariables,
    Size,
    key_values,
    or_key_values,
)
from sweeper.planning.inputs import quoted
from sweeper.planning.moe import MoeSpec
from sweeper.planning.placement import WORLD
from sweeper.planning.sizes import (
    INT32_MAX,
    INT64_MAX,
    ITERS_LIMIT,
    SIZE_LIMIT_BYTES,
    grid,
    parse_size,
)
from sweeper.wire import REQUESTABLE_TIERS, Backend, Engine, Launch

# `auto` or a Backend: a literal, so a profile's JSON Schema lists the three as today
BackendAsked = Literal["auto", "nccl", "gloo"]
NCCL_ALGOS = ("ring", "tree")  # NCCL_ALGO values a variant actor set can pin
# A rank is a Ray actor with a process of its own (torch alone takes ~0.3 GB): no node holds
# more than MAX_RANKS_PER_NODE, and a world of MAX_RANKS is 8x the fleet a scan plans (1024
# nodes x 8 GPUs). Larger counts are refused before anything is built: an embedded Ray asked
# for a million CPUs grows by gigabytes, a plan for a million nodes for ever.
MAX_RANKS_PER_NODE = 1024
MAX_RANKS = 65_536
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


def _one_of(value: tuple[str, ...], known: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The names lower-cased and each once, in order; the first unknown one is named."""
    unknown = [name for name in value if name.lower() not in known]
    if unknown:
        raise ValueError(f"unknown {what} {quoted(unknown[0])}; known: {', '.join(known)}")
    return tuple(dict.fromkeys(name.lower() for name in value))


def check_ranks(nodes: int, per_node: int, option: str) -> None:
    """ValueError where `nodes` x `per_node` ranks are more than a node or a world holds."""
    if per_node > MAX_RANKS_PER_NODE:
        raise ValueError(
            f"{option}: {per_node} ranks on a node; a node holds at most {MAX_RANKS_PER_NODE} "
            "(a rank is a process of its own)"
        )
    if nodes * per_node > MAX_RANKS:
        raise ValueError(
            f"{option}: {nodes} nodes x {per_node} ranks; sweeper plans at most {MAX_RANKS} ranks"
        )


def _bounded(per_node: int | None, nodes: int, option: str) -> int | None:
    if per_node is not None:
        check_ranks(nodes, per_node, option)
    return per_node


class OptionSection(BaseModel):
    """A part of a sweep's options: each field an option (its description the help, its
    `Cli` metadata how the command line shows it), `title` the help panel that lists them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: ClassVar[str]


class ClusterSection(OptionSection):
    """Where a sweep runs, and on how many ranks."""

    title: ClassVar[str] = "Where"

    address: Annotated[str | None, Cli("ADDRESS", scan=True)] = Field(
        None, description="Ray address; default $RAY_ADDRESS, else an embedded local Ray."
    )
    connect_timeout: Annotated[float, Cli("SECONDS", scan=True)] = Field(
        60.0,
        gt=0,
        le=86_400,
        allow_inf_nan=False,
        description="Seconds to reach the Ray cluster at --address before giving up.",
        strict=True,
    )
    backend: Annotated[BackendAsked, Cli("BACKEND", scan=True)] = Field(
        "auto", description="auto: NCCL when the cluster has GPUs, else gloo on CPU ranks."
    )
    world: Annotated[int | None, Cli("N")] = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Total ranks (nodes x ranks per node); default all GPUs, or 2.",
        strict=True,
    )
    nodes: Annotated[int, Cli("N")] = Field(
        1,
        ge=1,
        le=INT32_MAX,
        description="Nodes to run on (nodes with GPUs, for NCCL).",
        strict=True,
    )
    gpus_per_node: Annotated[int | None, Cli("N", scan=True)] = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Ranks per node: GPUs (default all) or gloo CPU ranks (2).",
        strict=True,
    )
    gpu_visibility: Annotated[Literal["node", "own"], Cli("node|own")] = Field(
        "node",
        description="node: each actor sees its node's GPUs (symmetric memory needs it); "
        "own: only its GPU.",
    )

    @model_validator(mode="after")
    def _ranks(self) -> ClusterSection:
        _ = self.ranks_per_node  # a --world that does not split is rejected while parsing
        return self

    @property
    def ranks_per_node(self) -> int | None:
        """Ranks on each node, from --gpus-per-node or --world; None: the backend's default
        (every GPU; DEFAULT_CPU_RANKS CPU ranks)."""
        if self.nodes > MAX_RANKS:
            raise ValueError(
                f"--nodes {self.nodes}: more nodes than sweeper plans ranks for ({MAX_RANKS})"
            )
        if self.world is None:
            return _bounded(self.gpus_per_node, self.nodes, "--gpus-per-node")
        if self.world > MAX_RANKS:
            raise ValueError(f"--world {self.world}: more ranks than sweeper plans ({MAX_RANKS})")
        if self.world % self.nodes:
            raise ValueError(f"--world {self.world} is not a multiple of --nodes {self.nodes}")
        per_node = self.world // self.nodes
        if self.gpus_per_node not in (None, per_node):
            raise ValueError(
                f"--world {self.world} is not --nodes {self.nodes} x --gpus-per-node "
                f"{self.gpus_per_node}"
            )
        return _bounded(per_node, self.nodes, "--world")

    @property
    def cpu_ranks(self) -> int:
        """The CPU ranks of a node an embedded Ray must fit."""
        return self.ranks_per_node or DEFAULT_CPU_RANKS

    @property
    def requested_backend(self) -> Backend | None:
        """The backend asked for; None: auto, NCCL where the cluster has GPUs, else gloo."""
        return None if self.backend == "auto" else Backend(self.backend)


class MeasureSection(OptionSection):
    """What a sweep measures: the groups its tiers ask for, operations, dtypes and sizes."""

    title: ClassVar[str] = "What to measure"

    tiers: Annotated[CommaList, Cli("TIERS")] = Field(
        (WORLD,),
        min_length=1,
        description="world (every rank, one group), or nvlink,pcie,internode,cpu; all: every tier.",
    )
    pairs: Annotated[Literal["all", "none"], Cli("PAIRS")] = Field(
        "all", description="With --tiers: also every pair of GPUs / of nodes (can be many)."
    )
    force_network: bool = Field(
        False, description="internode again with NCCL P2P and SHM off: the network transport."
    )
    ops: Annotated[CommaList, Cli("OPS")] = Field(
        ("all",), min_length=1, description="Operations to run, or 'all'."
    )
    dtypes: Annotated[CommaList, Cli("DTYPES")] = Field(
        ("float32",), min_length=1, description="Element types (torch spelling or nccl-tests')."
    )
    min_size: Annotated[Size, Cli("SIZE")] = Field(
        8, description="Smallest size S in bytes (K, M, G suffixes)."
    )
    max_size: Annotated[int | Literal["auto"], WithJsonSchema(SIZE_SCHEMA), Cli("SIZE")] = Field(
        "auto", description="Largest size S, or auto: the largest that fits in memory (probed)."
    )
    mem_limit: Annotated[MemLimitField | None, Cli("SIZE|PCT%")] = Field(
        None,
        description="Cap on each rank's memory, bytes (8G) or percent (50%); CPU ranks: 64M.",
    )
    step_factor: Annotated[float, Cli("FACTOR")] = Field(
        2.0,
        gt=1,
        allow_inf_nan=False,
        description="Multiply the size by this at each step.",
        strict=True,
    )
    dense_sizes: Annotated[bool, Cli(flags=("--dense-sizes/--sparse-sizes",))] = Field(
        False,
        description="Run every size of the grid; by default, above the size from which a "
        "series' busbw rises less than 2% over three steps, only every 8x size and the largest.",
    )
    plugins: Annotated[CommaList, Cli("MODULE", repeated=True, scan=True)] = Field(
        (), description="Python modules that register more operations (driver and every rank)."
    )

    @field_validator("max_size", mode="before")
    @classmethod
    def _max_size(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        return parse_size(value)

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(canonical_dtype(name) for name in value))

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        requestable = tuple(tier.value for tier in REQUESTABLE_TIERS)
        known = (WORLD, *requestable)
        if "all" in value:
            return requestable
        unknown = [tier for tier in value if tier not in known]
        if unknown:
            raise ValueError(f"unknown tier {quoted(unknown[0])}; known: {', '.join(known)}, all")
        return tuple(dict.fromkeys(value))

    @field_validator("ops")
    @classmethod
    def _ops(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name.strip() for name in value))

    @property
    def largest(self) -> int | None:
        """--max-size in bytes; None: auto, the largest that fits in memory (probed)."""
        return None if self.max_size == "auto" else self.max_size

    def sizes(self, max_size: int) -> list[int]:
        """The requested grid from min_size up to max_size, like nccl-tests' -b/-e/-f."""
        return grid(self.min_size, max_size, self.step_factor)

    def grid(self) -> tuple[int, ...]:
        """The grid asked for; with auto, to the largest size sweeper accepts."""
        return tuple(self.sizes(self.largest or SIZE_LIMIT_BYTES))


class TimingSection(OptionSection):
    """How every point is measured, as asked (`request.timing` resolves it for a backend)."""

    title: ClassVar[str] = "Timing"

    iters: Annotated[int | None, Cli("N", scan=True)] = Field(
        None,
        ge=1,
        le=ITERS_LIMIT,
        description="Timed iterations; default adaptive (a block of a few ms).",
        strict=True,
    )
    warmup: Annotated[int | None, Cli("N", scan=True)] = Field(
        None,
        ge=0,
        le=ITERS_LIMIT,
        description="Warm-up iterations; default adaptive (as long as the block).",
        strict=True,
    )
    launch: Annotated[CommaList, Cli("LAUNCH", plan=False)] = Field(
        (),
        description="graph (the timed iterations captured once as a CUDA graph and replayed, "
        "like nccl-tests -G), eager (issued from Python), or both; default graph on GPUs, "
        "eager on CPU ranks.",
    )
    engine: Annotated[CommaList, Cli("ENGINE", plan=False)] = Field(
        ("torch",),
        min_length=1,
        description="torch (torch.distributed, what a PyTorch program pays), nccl (NCCL "
        "called directly, as nccl-tests does; needs sweeper-bench[nccl]), or both.",
    )
    blocks: Annotated[int, Cli("N", scan=True)] = Field(
        3,
        ge=1,
        le=1000,
        description="Timed blocks per point; the row's time is the median block's.",
        strict=True,
    )
    check: Annotated[bool, Cli(plan=False)] = Field(
        True, description="Check every point's result on a separate iteration."
    )
    samples: Annotated[bool, Cli(plan=False)] = Field(
        False, description="Keep per-iteration times (p50/p99 and the samples_us column)."
    )
    timeout: Annotated[float, Cli("SECONDS", plan=False, scan=True)] = Field(
        300.0,
        gt=0,
        le=86_400,  # a point that runs for a day has hung
        allow_inf_nan=False,
        description="Seconds one point may take before it fails.",
        strict=True,
    )
    seed: Annotated[int, Cli("N", plan=False)] = Field(
        0, ge=0, le=INT64_MAX, description="Seed of the deterministic input data.", strict=True
    )

    @field_validator("launch")
    @classmethod
    def _launch(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _one_of(value, Launch.values(), "launch mode")

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _one_of(value, Engine.values(), "engine")


class NcclSection(OptionSection):
    """What NCCL is asked beyond its defaults: registered buffers, swept variables."""

    title: ClassVar[str] = "NCCL"

    register_buffers: Annotated[bool, Cli(plan=False)] = Field(
        False,
        description="Give the points' buffers from NCCL's allocator (ncclMemAlloc) and "
        "register them with the group's communicators, as nccl-tests -R 1 and torch's "
        "register_mem_pool do: NCCL then reads and writes peers' buffers directly.",
    )
    nccl_algos: Annotated[CommaList, Cli("ALGOS")] = Field(
        (), description="Also run every group with NCCL_ALGO set to each: ring, tree."
    )
    nccl_env: Annotated[NcclVariables, Cli("KEY=V1,V2", repeated=True)] = Field(
        {},
        description="NCCL variables to sweep, KEY=V1,V2 (repeatable): each combination of "
        "the values runs every group again on an actor set of its own, beside NCCL's defaults; "
        "KEY1+KEY2=V1,V2 sets both to each value (NCCL_MIN_NCHANNELS+NCCL_MAX_NCHANNELS=4: "
        "exactly 4 channels).",
    )
    allow_multicast_knobs: Annotated[bool, Cli(flags=("--allow-multicast-knobs",))] = Field(
        False,
        description="Let --nccl-env sweep NVLink multicast variables (NCCL_NVLS_ENABLE, "
        "NCCL_NVLS_*, NCCL_MNNVL_*). Never on a machine whose environment keeps multicast off.",
    )

    @field_validator("nccl_algos")
    @classmethod
    def _nccl_algos(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _one_of(value, NCCL_ALGOS, "NCCL algorithm")

    @field_validator("nccl_env")
    @classmethod
    def _nccl_env(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        seen: set[str] = set()
        for name, values in value.items():
            knobs.check_name(name)
            if not values:
                raise ValueError(f"{name}: no value given")
            # NCCL reads its variables as one line each
            if unprintable := next((v for v in values if not v.isprintable()), None):
                raise ValueError(f"{name}: {quoted(unprintable)} holds a control character")
            if twice := seen & set(knobs.names(name)):
                raise ValueError(f"{', '.join(sorted(twice))} given twice: tie or list it once")
            seen.update(knobs.names(name))
        return {name: tuple(dict.fromkeys(values)) for name, values in value.items()}

    @model_validator(mode="after")
    def _nccl_grid(self) -> NcclSection:
        knobs.check_size(self.nccl_variables())  # before any combination is made
        knobs.check_multicast(self.nccl_env, self.allow_multicast_knobs)
        return self

    def nccl_variables(self) -> dict[str, tuple[str, ...]]:
        """The swept NCCL variables: --nccl-env, and --nccl-algos as NCCL_ALGO values."""
        swept = dict(self.nccl_env)
        algos = tuple(algo.capitalize() for algo in self.nccl_algos)
        if algos:
            swept["NCCL_ALGO"] = tuple(dict.fromkeys((*swept.get("NCCL_ALGO", ()), *algos)))
        return swept


class OutputSection(OptionSection):
    """Where a run's rows and its report go, and the name its rows carry."""

    title: ClassVar[str] = "Output"

    results: Annotated[Path, Cli("DIR", plan=False, scan=True)] = Field(
        Path("results"), description="Results directory (a Parquet dataset)."
    )
    report: Annotated[bool, Cli(plan=False)] = Field(
        True,
        description="Write an HTML report of the run at the end (needs sweeper-bench[report]).",
    )
    reports_dir: Annotated[Path | None, Cli("DIR", plan=False)] = Field(
        None, description="Where reports go; default reports/ beside the results directory."
    )
    cluster_name: Annotated[str | None, Cli("NAME", plan=False, scan=True)] = Field(
        None, description="Name recorded on every row; default the head node's host name."
    )

    @field_validator("results", "reports_dir", mode="before")
    @classmethod
    def _directory(cls, value: object) -> object:
        # Path("") is the current directory: an empty name is a mistake, not a choice of it
        if isinstance(value, str) and not value.strip():
            raise ValueError("an empty path; name a directory")
        return value

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: str | None) -> str | None:
        # recorded on every row, shown in reports and in Prometheus labels: one printable line
        if value is not None and not value.isprintable():
            raise ValueError(f"{quoted(value)} holds a control character; a name is one line")
        return value


class ExperimentSection(OptionSection):
    """Beyond the collectives' grid: pairs that share links, curves on a few groups, the
    copy-engine matrix, the MoE layer."""

    title: ClassVar[str] = "Experiments"

    concurrent: Annotated[bool, Cli(flags=("--concurrent/--isolated",))] = Field(
        False,
        description="A node's pairs share its links on purpose: disjoint pairs in one wave "
        "(circle-method rounds), to show what they cost each other.",
    )
    curves: Annotated[int | None, Cli("N")] = Field(
        None,
        ge=1,
        le=1000,
        description="Every operation's curve on this many groups of each tier and shape, "
        "spread over them; every other group measures its bandwidth alone (the first of --ops "
        "it runs, at the largest size up to 1G), and swept NCCL variables run on the curves' "
        "groups only. Default: every group runs every curve.",
        strict=True,
    )
    copy_engine: Annotated[bool, Cli(plan=False)] = Field(
        False, description="Time peer copies between every GPU pair of a node, and fan-out."
    )
    moe: Annotated[MoeSpec, BeforeValidator(key_values), Cli("KEY=VALUE,...")] = Field(
        MoeSpec(),
        description="The MoE layer of moe:dispatch/moe:combine: key=value pairs.",
        json_schema_extra=or_key_values,
    )


# The sections in the order help, the schema and the API list them
SECTIONS: tuple[type[OptionSection], ...] = (
    ClusterSection,
    MeasureSection,
    TimingSection,
    NcclSection,
    OutputSection,
    ExperimentSection,
)


# pydantic orders an inheriting model's fields from its last base to its first: the bases are
# SECTIONS reversed, so the fields come in the sections' order
class SweepSpec(
    ExperimentSection,
    OutputSection,
    NcclSection,
    TimingSection,
    MeasureSection,
    ClusterSection,
):
    """Everything a sweep needs to know: the union of its sections, whose fields are
    `sweeper run`'s options, a profile's keys and `sweeper.run`'s keywords."""

    @model_validator(mode="after")
    def _gloo_refuses(self) -> SweepSpec:
        if self.backend == Backend.GLOO.value:  # asked for: refused before Ray starts
            refused = needs_cuda(self.launch, self.engine, self.register_buffers)
            refused = refused or gloo_refuses(self.dtypes)
            if refused is not None:
                raise ValueError(refused)
        return self
