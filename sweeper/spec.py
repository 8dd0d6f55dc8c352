"""What a sweep is asked to do: the SweepSpec model, size parsing, the dtype table, and YAML
profiles (a sweep's options plus the nightly regression settings).

Pure: no Ray, no torch. The CLI and YAML profiles both end here, so a bad value is
rejected once, with the option's (or the profile key's) name, before anything starts.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from sweeper import knobs
from sweeper.errors import BadInput

if TYPE_CHECKING:
    from sweeper.analysis.regression import Policy

# ASCII digits only: without re.ASCII, \d (and float()) take any script's digits, full-width too
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE | re.ASCII)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$", re.ASCII)
_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}

# What a row can hold: ranks, nodes and iteration counts go to int32 columns of the results
# schema (sweeper/results/schema.py), sizes and element counts to int64 ones; seeds are int64 too.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Iterations as asked, below INT32_MAX with room: a CUDA graph rounds a block up to whole
# replays, and calibration adds its own warm-up.
ITERS_LIMIT = 10**9
# The largest size S (1 PiB, far beyond any rank's memory): where --max-size auto's grid
# ends, and small enough that a group's buffers (S times its ranks) count in int64.
SIZE_LIMIT_BYTES = 2**50
# The most steps a size grid may have: a step factor a hair above 1 would otherwise list
# sizes for ever before anything runs.
GRID_LIMIT = 10_000


def parse_size(value: object) -> int:
    """Bytes from an int or a string like nccl-tests takes: 8, 1K = 1024, 64M, 8G (binary units)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"{value} is not a size: sizes are at least 1 byte")
        size = value
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a size: use bytes with K, M, G suffixes, e.g. 64M")
        number, unit, _ = match.groups()
        # exact: a float would take 1.0000000000000000001K for 1K
        exact = Fraction(number) * _SCALE[unit.lower()]
        if exact < 1 or exact.denominator != 1:
            raise ValueError(f"{value!r} is not a whole number of bytes >= 1")
        size = int(exact)
    if size > SIZE_LIMIT_BYTES:
        raise ValueError(
            f"{value!r} is larger than the largest size, {format_size(SIZE_LIMIT_BYTES)}"
        )
    return size


def format_size(size_bytes: int) -> str:
    """The shortest exact spelling of a size: 8B, 1K, 64M, 3G, 1536K."""
    for unit in ("T", "G", "M", "K"):
        scale = _SCALE[unit.lower()]
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale}{unit}"
    return f"{size_bytes}B"


@dataclass(frozen=True)
class Dtype:
    name: str  # torch spelling, written to the `dtype` column
    itemsize: int
    aliases: tuple[str, ...] = ()
    gloo: bool = True  # gloo raises "Invalid scalar type" for the float8 types


DTYPES: dict[str, Dtype] = {
    d.name: d
    for d in (
        Dtype("float32", 4, ("float", "fp32")),
        Dtype("float64", 8, ("double", "fp64")),
        Dtype("float16", 2, ("half", "fp16")),
        Dtype("bfloat16", 2, ("bf16",)),
        Dtype("int8", 1),
        Dtype("uint8", 1),
        Dtype("int32", 4, ("int",)),
        Dtype("int64", 8),
        Dtype("float8_e4m3fn", 1, ("fp8_e4m3", "f8e4m3"), gloo=False),
        Dtype("float8_e5m2", 1, ("fp8_e5m2", "f8e5m2"), gloo=False),
    )
}
_DTYPE_BY_ALIAS = {alias: d.name for d in DTYPES.values() for alias in (d.name, *d.aliases)}


def canonical_dtype(name: str) -> str:
    try:
        return _DTYPE_BY_ALIAS[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def _split(value: object) -> object:
    """Comma lists from the command line become lists; lists from YAML pass through."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


# JSON Schema for what a profile may spell (the validators accept more than the Python types
# say: "64M" for a size, "a,b" for a list), so the published schema accepts what the model does.
_SIZE_SCHEMA = {
    "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "examples": ["64M"]}]
}
_LIST_SCHEMA = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}

Size = Annotated[int, BeforeValidator(parse_size), WithJsonSchema(_SIZE_SCHEMA)]
CommaList = Annotated[tuple[str, ...], BeforeValidator(_split), WithJsonSchema(_LIST_SCHEMA)]


@dataclass(frozen=True)
class MemLimit:
    """`--mem-limit`: bytes, or a fraction of the device's (or the rank's share of the node's)
    memory."""

    size_bytes: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, value: object) -> MemLimit:
        if isinstance(value, MemLimit):
            return value
        text = str(value).strip()
        if text.endswith("%"):
            match = _PERCENT.match(text)
            percent = float(match[1]) if match else -1.0
            if not 0 < percent <= 100:
                raise ValueError(f"{value!r} is not a percentage in (0, 100]")
            return cls(fraction=percent / 100)
        return cls(size_bytes=parse_size(value))

    def of(self, total_bytes: int) -> int:
        if self.size_bytes is not None:
            return self.size_bytes
        return int(total_bytes * (self.fraction or 1.0))

    def __str__(self) -> str:
        if self.fraction is not None:
            return f"{self.fraction * 100:g}%"
        return format_size(self.size_bytes or 0)


@dataclass(frozen=True)
class Limits:
    """How much memory a rank may use: `--mem-limit`, and for CPU ranks their share of the
    node's memory (Ray's `memory` resource of the node over the ranks placed on it)."""

    mem_limit: MemLimit | None = None
    host_share_bytes: int = 0


MemLimitField = Annotated[
    MemLimit,
    BeforeValidator(MemLimit.parse),
    PlainSerializer(str),
    WithJsonSchema({"type": "string", "examples": ["8G", "50%"]}),
]
Backend = Literal["auto", "nccl", "gloo"]
TIERS = ("nvlink", "pcie", "internode", "cpu")
NCCL_ALGOS = ("ring", "tree")  # NCCL_ALGO values a variant actor set can pin
LAUNCHES = ("graph", "eager")  # how timed iterations are issued (see timing.py)
GRAPH_NEEDS_CUDA = "--launch graph: CUDA graphs need GPU ranks (NCCL); CPU ranks launch eagerly"
ENGINES = ("torch", "nccl")  # through torch.distributed, or NCCL called directly
NCCL_NEEDS_CUDA = "--engine nccl: direct NCCL calls need GPU ranks; CPU ranks use torch (gloo)"
REGISTER_NEEDS_CUDA = "--register-buffers: NCCL registers GPU buffers; CPU ranks have none (gloo)"


def _one_of(value: tuple[str, ...], known: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The names lower-cased and each once, in order; the first unknown one is named."""
    unknown = [name for name in value if name.lower() not in known]
    if unknown:
        raise ValueError(f"unknown {what} {unknown[0]!r}; known: {', '.join(known)}")
    return tuple(dict.fromkeys(name.lower() for name in value))


class MoeSpec(BaseModel):
    """A mixture-of-experts layer whose token dispatch and combine `moe:*` measure."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: int = Field(4096, ge=1, le=INT32_MAX, description="Tokens per rank.")
    hidden: int = Field(4096, ge=1, le=INT32_MAX, description="Hidden size: elements per token.")
    top_k: int = Field(2, ge=1, le=INT32_MAX, description="Experts each token is routed to.")
    experts: int = Field(
        64, ge=1, le=INT32_MAX, description="Experts in all; expert e lives on rank e mod n."
    )
    zipf: float = Field(
        1.0,
        ge=0,
        allow_inf_nan=False,
        description="Routing skew: expert e is picked ~ (e+1)^-zipf.",
    )
    seed: int = Field(0, ge=0, le=INT64_MAX, description="Seed of the routing.")

    @model_validator(mode="after")
    def _top_k(self) -> MoeSpec:
        if self.top_k > self.experts:
            raise ValueError(f"top_k {self.top_k} is more than the {self.experts} experts")
        return self


def _or_key_values(schema: dict[str, Any]) -> None:
    """The JSON Schema of `moe`: a mapping, or key=value pairs as on the command line."""
    mapping = {"$ref": schema.pop("$ref")}
    schema["anyOf"] = [mapping, {"type": "string", "examples": ["tokens=8192,top_k=2"]}]


def _key_values(value: object) -> object:
    """--moe tokens=4096,top_k=2 from the command line; a mapping from YAML."""
    if isinstance(value, str):
        pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"{value!r}: use key=value pairs, e.g. tokens=4096,top_k=2")
        return {key.strip(): item.strip() for key, item in pairs}
    return value


def _nccl_variables(value: object) -> object:
    """--nccl-env KEY=V1,V2 (repeatable) from the command line, a list of such strings or a
    mapping of names to values (a list, or a comma string) from YAML: names -> values."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        out: dict[str, object] = {}
        for item in value:
            name, sep, values = str(item).partition("=")
            if not sep or not name.strip():
                raise ValueError(f"{item!r}: use KEY=V1,V2, e.g. NCCL_PROTO=LL,Simple")
            if name.strip() in out:
                raise ValueError(f"{name.strip()} given twice: list its values once")
            out[name.strip()] = values
        value = out
    if isinstance(value, dict):
        split = {str(name): _split(values) for name, values in value.items()}
        # YAML reads NCCL_MAX_NCHANNELS: [1, 4] as numbers: values are the text NCCL reads
        return {n: [str(v) for v in vs] if isinstance(vs, list) else vs for n, vs in split.items()}
    return value


_NCCL_ENV_SCHEMA = {
    "anyOf": [
        {"type": "object", "additionalProperties": _LIST_SCHEMA},
        {"type": "array", "items": {"type": "string", "examples": ["NCCL_PROTO=LL,Simple"]}},
    ]
}
NcclVariables = Annotated[
    dict[str, tuple[str, ...]],
    BeforeValidator(_nccl_variables),
    WithJsonSchema(_NCCL_ENV_SCHEMA),
]


class SweepSpec(BaseModel):
    """Everything a sweep needs to know; `sweeper run` options and profile keys are its fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = Field(
        None, description="Ray address; default $RAY_ADDRESS, else an embedded local Ray."
    )
    connect_timeout: float = Field(
        60.0,
        gt=0,
        le=86_400,
        allow_inf_nan=False,
        description="Seconds to reach the Ray cluster at --address before giving up.",
    )
    backend: Backend = Field(
        "auto", description="auto: NCCL when the cluster has GPUs, else gloo on CPU ranks."
    )
    world: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Total ranks (nodes x ranks per node); default all GPUs, or 2.",
    )
    nodes: int = Field(
        1, ge=1, le=INT32_MAX, description="Nodes to run on (nodes with GPUs, for NCCL)."
    )
    gpus_per_node: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="Ranks per node: GPUs (default all) or gloo CPU ranks (2).",
    )
    tiers: CommaList = Field(
        ("world",),
        min_length=1,
        description="world (every rank, one group), or nvlink,pcie,internode,cpu; all: every tier.",
    )
    pairs: Literal["all", "none"] = Field(
        "all", description="With --tiers: also every pair of GPUs / of nodes (can be many)."
    )
    force_network: bool = Field(
        False, description="internode again with NCCL P2P and SHM off: the network transport."
    )
    gpu_visibility: Literal["node", "own"] = Field(
        "node",
        description="node: each actor sees its node's GPUs (symmetric memory needs it); "
        "own: only its GPU.",
    )
    ops: CommaList = Field(("all",), min_length=1, description="Operations to run, or 'all'.")
    dtypes: CommaList = Field(
        ("float32",), min_length=1, description="Element types (torch spelling or nccl-tests')."
    )
    min_size: Size = Field(8, description="Smallest size S in bytes (K, M, G suffixes).")
    max_size: Annotated[int | Literal["auto"], WithJsonSchema(_SIZE_SCHEMA)] = Field(
        "auto", description="Largest size S, or auto: the largest that fits in memory (probed)."
    )
    mem_limit: MemLimitField | None = Field(
        None,
        description="Cap on each rank's memory, bytes (8G) or percent (50%); CPU ranks: 64M.",
    )
    step_factor: float = Field(
        2.0, gt=1, allow_inf_nan=False, description="Multiply the size by this at each step."
    )
    iters: int | None = Field(
        None,
        ge=1,
        le=ITERS_LIMIT,
        description="Timed iterations; default adaptive (a block of a few ms).",
    )
    warmup: int | None = Field(
        None,
        ge=0,
        le=ITERS_LIMIT,
        description="Warm-up iterations; default adaptive (as long as the block).",
    )
    launch: CommaList = Field(
        (),
        description="graph (the timed iterations captured once as a CUDA graph and replayed, "
        "like nccl-tests -G), eager (issued from Python), or both; default graph on GPUs, "
        "eager on CPU ranks.",
    )
    engine: CommaList = Field(
        ("torch",),
        description="torch (torch.distributed, what a PyTorch program pays), nccl (NCCL "
        "called directly, as nccl-tests does; needs sweeper-bench[nccl]), or both.",
    )
    register_buffers: bool = Field(
        False,
        description="Give the points' buffers from NCCL's allocator (ncclMemAlloc) and "
        "register them with the group's communicators, as nccl-tests -R 1 and torch's "
        "register_mem_pool do: NCCL then reads and writes peers' buffers directly.",
    )
    blocks: int = Field(
        3,
        ge=1,
        le=1000,
        description="Timed blocks per point; the row's time is the median block's.",
    )
    check: bool = Field(True, description="Check every point's result on a separate iteration.")
    samples: bool = Field(
        False, description="Keep per-iteration times (p50/p99 and the samples_us column)."
    )
    timeout: float = Field(
        300.0,
        gt=0,
        le=86_400,  # a point that runs for a day has hung
        allow_inf_nan=False,
        description="Seconds one point may take before it fails.",
    )
    seed: int = Field(0, ge=0, le=INT64_MAX, description="Seed of the deterministic input data.")
    output: Path = Field(Path("results"), description="Results directory (a Parquet dataset).")
    moe: Annotated[MoeSpec, BeforeValidator(_key_values)] = Field(
        MoeSpec(),
        description="The MoE layer of moe:dispatch/moe:combine: key=value pairs.",
        json_schema_extra=_or_key_values,
    )
    nccl_algos: CommaList = Field(
        (), description="Also run every group with NCCL_ALGO set to each: ring, tree."
    )
    nccl_env: NcclVariables = Field(
        {},
        description="NCCL variables to sweep, KEY=V1,V2 (repeatable): each combination of "
        "the values runs every group again on an actor set of its own, beside NCCL's defaults; "
        "KEY1+KEY2=V1,V2 sets both to each value (NCCL_MIN_NCHANNELS+NCCL_MAX_NCHANNELS=4: "
        "exactly 4 channels).",
    )
    concurrent: bool = Field(
        False,
        description="A node's pairs share its links on purpose: disjoint pairs in one wave "
        "(circle-method rounds), to show what they cost each other.",
    )
    copy_engine: bool = Field(
        False, description="Time peer copies between every GPU pair of a node, and fan-out."
    )
    report: bool = Field(
        True,
        description="Write an HTML report of the run at the end (needs sweeper-bench[report]).",
    )
    reports_dir: Path | None = Field(
        None, description="Where reports go; default reports/ beside the results directory."
    )
    plugins: CommaList = Field(
        (), description="Python modules that register more operations (driver and every rank)."
    )
    cluster_name: str | None = Field(
        None, description="Name recorded on every row; default the head node's host name."
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
        known = ("world", *TIERS)
        if "all" in value:
            return TIERS
        unknown = [tier for tier in value if tier not in known]
        if unknown:
            raise ValueError(f"unknown tier {unknown[0]!r}; known: {', '.join(known)}, all")
        return tuple(dict.fromkeys(value))

    @model_validator(mode="after")
    def _ranks(self) -> SweepSpec:
        self.ranks_per_node()
        return self

    def ranks_per_node(self) -> int | None:
        """Ranks on each node, from --gpus-per-node or --world; None: the backend's default."""
        if self.world is None:
            return self.gpus_per_node
        if self.world % self.nodes:
            raise ValueError(f"--world {self.world} is not a multiple of --nodes {self.nodes}")
        per_node = self.world // self.nodes
        if self.gpus_per_node not in (None, per_node):
            raise ValueError(
                f"--world {self.world} is not --nodes {self.nodes} x --gpus-per-node "
                f"{self.gpus_per_node}"
            )
        return per_node

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
            if twice := seen & set(knobs.names(name)):
                raise ValueError(f"{', '.join(sorted(twice))} given twice: tie or list it once")
            seen.update(knobs.names(name))
        return {name: tuple(dict.fromkeys(values)) for name, values in value.items()}

    def nccl_variables(self) -> dict[str, tuple[str, ...]]:
        """The swept NCCL variables: --nccl-env, and --nccl-algos as NCCL_ALGO values."""
        swept = dict(self.nccl_env)
        algos = tuple(algo.capitalize() for algo in self.nccl_algos)
        if algos:
            swept["NCCL_ALGO"] = tuple(dict.fromkeys((*swept.get("NCCL_ALGO", ()), *algos)))
        return swept

    @field_validator("launch")
    @classmethod
    def _launch(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _one_of(value, LAUNCHES, "launch mode")

    @field_validator("engine")
    @classmethod
    def _engine(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _one_of(value, ENGINES, "engine")

    @model_validator(mode="after")
    def _graph_needs_cuda(self) -> SweepSpec:
        if self.backend == "gloo" and "graph" in self.launch:
            raise ValueError(GRAPH_NEEDS_CUDA)
        if self.backend == "gloo" and "nccl" in self.engine:
            raise ValueError(NCCL_NEEDS_CUDA)
        if self.backend == "gloo" and self.register_buffers:
            raise ValueError(REGISTER_NEEDS_CUDA)
        return self

    @field_validator("ops")
    @classmethod
    def _ops(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name.strip() for name in value))

    def sizes(self, max_size: int) -> list[int]:
        """The requested grid from min_size up to max_size, like nccl-tests' -b/-e/-f."""
        if self.min_size > max_size:
            raise BadInput(
                f"--min-size {format_size(self.min_size)} is larger than "
                f"--max-size {format_size(max_size)}"
            )
        steps = math.floor(math.log(max_size / self.min_size, self.step_factor) + 1e-9)
        if steps >= GRID_LIMIT:
            raise BadInput(
                f"--step-factor {self.step_factor}: {steps + 1} sizes from "
                f"{format_size(self.min_size)} to {format_size(max_size)}; at most {GRID_LIMIT}"
            )
        grid = (round(self.min_size * self.step_factor**k) for k in range(steps + 1))
        return sorted(set(grid))


def launches(asked: tuple[str, ...], backend: str) -> tuple[str, ...]:
    """The launch modes of a sweep: as asked, else graph on GPUs and eager on CPU ranks.
    CUDA graphs need GPU ranks (BadInput on gloo)."""
    if backend != "nccl" and "graph" in asked:
        raise BadInput(GRAPH_NEEDS_CUDA)
    return asked or (("graph",) if backend == "nccl" else ("eager",))


def registers(asked: bool, backend: str) -> bool:
    """Whether the sweep registers its buffers with NCCL (BadInput on gloo)."""
    if backend != "nccl" and asked:
        raise BadInput(REGISTER_NEEDS_CUDA)
    return asked


def engines(asked: tuple[str, ...], backend: str) -> tuple[str, ...]:
    """The engines of a sweep; the nccl engine needs GPU ranks (BadInput on gloo)."""
    if backend != "nccl" and "nccl" in asked:
        raise BadInput(NCCL_NEEDS_CUDA)
    return asked


class NightlySettings(BaseModel):
    """The `nightly:` section of a profile: which runs a nightly run is compared with, and
    when a change is a regression (see sweeper/analysis/regression.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: int = Field(
        14, ge=1, description="Baseline: up to this many earlier nightly runs of the same cluster."
    )
    min_history: int = Field(
        5, ge=2, description="Fewer earlier runs than this: the series is new, nothing alarms."
    )
    z: float = Field(
        3.5, gt=0, description="Worse than the baseline median by this many robust sigmas (MAD)."
    )
    min_change: float = Field(
        0.03, ge=0, lt=1, description="Relative floor: and worse by at least this fraction."
    )
    persistence: int = Field(
        2, ge=1, description="Alarm when this many runs in a row, tonight's included, are worse."
    )
    bandwidth_min_size: Size = Field(
        256 * 2**20, description="Peak bus bandwidth is taken over sizes at least this large."
    )

    @model_validator(mode="after")
    def _history(self) -> NightlySettings:
        if self.min_history > self.window:
            raise ValueError(f"min_history {self.min_history} is more than window {self.window}")
        return self

    def policy(self) -> Policy:
        # here, not at the top: the rules bring pandas, which `sweeper run` does not need
        from sweeper.analysis.regression import Policy, RelativeFloor, RobustZ

        return Policy(
            window=self.window,
            min_history=self.min_history,
            persistence=self.persistence,
            checks=(RobustZ(self.z), RelativeFloor(self.min_change)),
            bandwidth_min_size_bytes=self.bandwidth_min_size,
        )


class Profile(SweepSpec):
    """A YAML profile: `sweeper run`'s options as keys (lists as YAML lists or comma
    strings, sizes as 64M), and a `nightly:` section that `sweeper nightly` reads."""

    nightly: NightlySettings = Field(
        default_factory=NightlySettings,
        description="sweeper nightly: which history to compare with, and regression thresholds.",
    )

    def options(self) -> dict[str, Any]:
        """The sweep options the profile sets (not the ones it leaves at their defaults)."""
        return self.model_dump(exclude_unset=True, exclude={"nightly"})


def load_profile(path: Path) -> Profile:
    """A profile from its YAML file; a missing file, bytes that are not UTF-8, bad YAML or a
    bad key is BadInput naming the file and the key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--profile {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        raise BadInput(
            f"--profile {path}: not UTF-8 text (byte {byte:#04x} at offset {exc.start})"
        ) from None
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise BadInput(f"{path}{where}: {problem}") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise BadInput(f"{path}: nested too deeply to be a profile") from None
    if not isinstance(values, dict):
        raise BadInput(f"{path}: a profile is a mapping of option names to values")
    try:
        return Profile.model_validate(values)
    except ValidationError as exc:
        raise BadInput(f"{path}: {describe(exc, key=True)}", hint=_known_key(exc)) from None


def _section(path: list[str]) -> type[BaseModel] | None:
    """The model whose keys a section of a profile (nightly, moe) or option (--moe) takes;
    None where `path` is no section."""
    model: type[BaseModel] = Profile
    for parent in path:
        section = model.model_fields[parent].annotation
        if not (isinstance(section, type) and issubclass(section, BaseModel)):
            return None
        model = section
    return model


def _known_key(exc: ValidationError) -> str | None:
    """For an unknown key, the known key it most likely meant (max-size: max_size)."""
    error = exc.errors()[0]
    if error["type"] != "extra_forbidden":
        return None
    *parents, name = (str(part) for part in error["loc"])
    model = _section(parents)
    if model is None:
        return None
    match = difflib.get_close_matches(name.replace("-", "_"), model.model_fields, n=1)
    return f"did you mean {'.'.join([*parents, match[0]])!r}?" if match else None


def build_spec(profile: Profile | None = None, **options: Any) -> SweepSpec:
    """A SweepSpec from a profile's options overridden by option values, None meaning 'not
    given'; errors become BadInput."""
    given = {key: value for key, value in options.items() if value is not None}
    try:
        spec = SweepSpec(**{**(profile.options() if profile else {}), **given})
    except ValidationError as exc:
        raise BadInput(describe(exc)) from None
    # min > max, or a grid too fine to list, is bad input now, not after Ray started
    spec.sizes(spec.max_size if isinstance(spec.max_size, int) else SIZE_LIMIT_BYTES)
    return spec


def describe(exc: ValidationError, key: bool = False) -> str:
    """One line for the first problem, named as the user wrote it: the option (--max-size),
    or with `key` the profile key (max_size, nightly.z)."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    field = ".".join(loc) if key else (loc[0] if loc else "")
    name = field if key else "--" + field.replace("_", "-")
    message = str(error["msg"]).removeprefix("Value error, ")
    if not field:  # a rule between options: the message names them
        return message
    *parents, last = loc
    if not key and parents:  # a key of an option's key=value pairs (--moe tokens=...)
        section = _section(parents)
        if error["type"] == "extra_forbidden" and section is not None:
            return f"{name}: unknown key {last!r}; known: {', '.join(section.model_fields)}"
        name = f"{name}: {'.'.join(loc[1:])}"
    if error["type"] == "extra_forbidden":
        return f"unknown {'key' if key else 'option'} {field!r}"
    if error["type"] == "literal_error" and "input" in error:
        return f"{name}: {error['input']!r} is not one of {message.split('Input should be ')[-1]}"
    return f"{name}: {message}"
