"""The canonical Arrow schema of a result row, its version, and what identifies a point.

Every writer and reader goes through `SCHEMA`: columns are added (nullable), never renamed
or reordered, so columns added later read as nulls in older files. `SCHEMA_VERSION` is
written into each file's metadata; `upgrade` brings older rows to it.
"""

from __future__ import annotations

import pyarrow as pa

from sweeper.telemetry import ELEMENT_TYPES

# 1: files with no version in their metadata (every sweeper before versions), whose rows may
# lack kind, launch, engine and variant; 2: every row says all four; 3: a row that ran through
# NCCL says the transport NCCL used (`unknown` where its output told nothing).
SCHEMA_VERSION = 3
VERSION_KEY = b"sweeper.schema_version"


def _arrow(name: str) -> pa.DataType:
    """The Arrow type of a telemetry value's name: int32, float64, list<string>, ..."""
    if name.startswith("list<"):
        return pa.list_(_arrow(name.removeprefix("list<").removesuffix(">")))
    return pa.type_for_alias(name)


# GPU telemetry (sweeper.telemetry.Reading), one value per rank in group rank order, read
# outside the timed blocks: the GPU's state after the point's last block, and what its error
# counters gained over the point. Null where NVML cannot read it.
_TELEMETRY = [(name, pa.list_(_arrow(value))) for name, value in ELEMENT_TYPES.items()]
# pcie_pct_of_peak was added between the trained link and the most it allows, where it stays
_PCIE_MAX = _TELEMETRY.index(("pcie_max_gen", pa.list_(pa.int32())))
# telemetry read since go at the schema's end, so that no column moves
_LATER = _TELEMETRY.index(("pcie_max_width", pa.list_(pa.int32()))) + 1

SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("run_started_at", pa.timestamp("us", tz="UTC")),
        ("run_kind", pa.string()),
        ("cluster_name", pa.string()),
        ("sweeper_version", pa.string()),
        ("ray_version", pa.string()),
        ("torch_version", pa.string()),
        ("nccl_version", pa.string()),
        ("cuda_version", pa.string()),
        ("driver_version", pa.string()),
        ("gpu_model", pa.string()),
        ("nccl_env", pa.map_(pa.string(), pa.string())),
        ("backend", pa.string()),  # wire.Backend
        ("tier", pa.string()),  # wire.Tier
        ("variant", pa.string()),
        ("group_id", pa.string()),
        ("world_size", pa.int32()),
        ("n_nodes", pa.int32()),
        ("hosts", pa.list_(pa.string())),
        ("gpu_uuids", pa.list_(pa.string())),
        ("kind", pa.string()),  # wire.Kind
        ("op", pa.string()),
        ("algorithm", pa.string()),
        ("dtype", pa.string()),
        ("in_place", pa.bool_()),
        ("size_bytes", pa.int64()),
        ("count_elems", pa.int64()),
        ("engine", pa.string()),  # wire.Engine: torch.distributed, or NCCL called directly
        ("launch", pa.string()),  # wire.Launch: replays of a captured CUDA graph, or eager
        ("launch_note", pa.string()),  # why a point ran eagerly where a graph was asked for
        ("registered", pa.bool_()),  # buffers from ncclMemAlloc, registered (--register-buffers)
        ("warmup_iters", pa.int32()),
        ("iters", pa.int32()),
        ("time_us", pa.float64()),
        ("time_us_min", pa.float64()),
        ("time_us_p50", pa.float64()),
        ("time_us_p99", pa.float64()),
        ("time_us_blocks", pa.list_(pa.float64())),  # each timed block's time; time_us: median
        ("algbw_gb_per_s", pa.float64()),
        ("busbw_gb_per_s", pa.float64()),
        ("busbw_factor", pa.float64()),
        ("busbw_pct_of_link", pa.float64()),  # busbw / the tier's link peak (NVML, sysfs) x 100
        ("status", pa.string()),  # wire.Status
        ("error", pa.string()),
        ("n_wrong", pa.int64()),
        ("max_size_bytes", pa.int64()),
        ("probe_s", pa.float64()),
        ("samples_us", pa.list_(pa.float32())),
        ("measured_at", pa.timestamp("us", tz="UTC")),
        # point-to-point rows (op p2p, copy): who sends to whom
        ("src_rank", pa.int32()),
        ("dst_rank", pa.int32()),
        ("src_gpu_uuid", pa.string()),
        ("dst_gpu_uuid", pa.string()),
        ("concurrent", pa.bool_()),  # measured while another group of its wave shared a node
        # a row of one rank where a point gives one per rank (copies of a node's GPUs at once)
        ("rank", pa.int32()),
        ("params", pa.map_(pa.string(), pa.string())),  # an experiment's knobs (MoE routing)
        # when: the schedule's wave, and the point's execution (its groups overlap in a wave)
        ("wave", pa.int32()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("ended_at", pa.timestamp("us", tz="UTC")),
        *_TELEMETRY[:_PCIE_MAX],
        # host<->device copies: algbw as a share of the slowest GPU's PCIe peak (NVML's
        # largest generation x width, one direction)
        ("pcie_pct_of_peak", pa.float64()),
        *_TELEMETRY[_PCIE_MAX:_LATER],
        # a fleet scan's row (run_kind `scan`): the stage its group belongs to (scan.Stage:
        # gate, isolate, screen, cross-domain, bisect, confirm, pairs); null for every other
        # row, older ones included, so no upgrade step fills it
        ("stage", pa.string()),
        # what NCCL set up for the group's communicator in the row's engine, from NCCL's own
        # INFO lines (sweeper/fabric): the transport in one word (P2P/CUMEM, SHM, NET/Socket,
        # NET/IB+GDRDMA, NVLS, mixed:...), where it breaks the tier's contract and why, each
        # connection, the collective channels, the point's algorithm and protocol
        ("transport", pa.string()),
        ("transport_flag", pa.string()),
        ("nccl_connections", pa.list_(pa.string())),
        ("nccl_channels", pa.int32()),
        ("nccl_algo", pa.string()),
        ("nccl_proto", pa.string()),
        # a point that timed out: the ranks whose reply was not in at its deadline, as group
        # ranks (places in `hosts` and `gpu_uuids`), so a resumed scan names the node that hung
        # as the scan did; null on every other row, older ones included, so no upgrade step
        # fills it (their `error` says the ranks in words)
        ("unanswered", pa.list_(pa.int32())),
        # the group's communicator in the row's engine: the seconds it took to open, the
        # slowest rank's; null on older rows, so no upgrade step fills it
        ("comm_start_s", pa.float64()),
        # what the group's GPUs used over the row's timed blocks (NVML's total energy counter,
        # summed over the ranks), and per GB of S moved per iteration; null on older rows
        ("energy_j", pa.float64()),
        ("energy_j_per_gb", pa.float64()),
        # NCCL's view of the point's first step in the row's engine (sweeper's observing tuner
        # plugin): whether it was seen, NCCL's predicted time of what it ran (the calls
        # summed), each algorithm/protocol's prediction, and the measured time over it; null
        # on older rows and rows through no NCCL collective
        ("nccl_view", pa.string()),
        ("nccl_predicted_us", pa.float64()),
        ("nccl_predictions", pa.map_(pa.string(), pa.float64())),
        ("measured_over_predicted", pa.float64()),
        # NCCL's own split of the slowest rank's communicator start (its Init timings line)
        ("nccl_init_s", pa.map_(pa.string(), pa.float64())),
        *_TELEMETRY[_LATER:],  # other_processes: null on older rows
    ],
    metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()},
)
# The columns every row of one run shares: what a run is, where and with which software.
RUN_COLUMNS = (
    "run_id",
    "run_started_at",
    "run_kind",
    "cluster_name",
    "backend",
    "gpu_model",
    "sweeper_version",
    "ray_version",
    "torch_version",
    "nccl_version",
    "cuda_version",
    "driver_version",
)
PARTITION = pa.schema([("date", pa.string())])
DATASET_SCHEMA = pa.unify_schemas([SCHEMA, PARTITION])
COLUMNS = tuple(SCHEMA.names)

# What one row measures, compared across runs: a group (its tier, variant and size), an
# operation and dtype, in place or not, an engine and launch mode (a graph replay and an
# eager call are different measurements), a size, and for pair, per-GPU and MoE rows the
# pair, the rank and the parameters.
POINT = (
    "tier",
    "variant",
    "group_id",
    "world_size",
    "op",
    "algorithm",
    "dtype",
    "in_place",
    "launch",
    "engine",
    "size_bytes",
    "src_rank",
    "dst_rank",
    "concurrent",
    "rank",
    "params",
)
# What tells the rows of one run apart (a resumed run matches rows by it): within a run the
# group id names the tier, variant and world size, and a point measured once has one
# in-place-ness, concurrency and parameter set; what is left are plain, hashable values.
RUN_POINT = tuple(
    c
    for c in POINT
    if c not in ("tier", "variant", "world_size", "in_place", "concurrent", "params")
)
# A curve over sizes within a run: one group's operation and dtype in one engine and launch
# mode, whatever its size and pair.
CURVE = tuple(c for c in RUN_POINT if c not in ("size_bytes", "src_rank", "dst_rank", "rank"))
# What one `--max-size auto` probe bounds: a curve in every engine and launch mode at once
# (the executor's point key is this, with the operation by name, and an element count).
PROBED = tuple(c for c in CURVE if c not in ("launch", "engine"))
