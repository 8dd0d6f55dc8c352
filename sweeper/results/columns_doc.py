"""What each result column means: docs/RESULTS.md is written from here and the schema.

A column of `schema.SCHEMA` is described once, in `DESCRIBED`: its unit, its meaning and when
it is null; its name and type come from the schema itself. A new column needs an entry here,
then `python -m sweeper.results.columns_doc > docs/RESULTS.md` (tests/contracts/test_results_doc.py
says so when either is missing).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from sweeper.results.schema import SCHEMA


@dataclass(frozen=True, kw_only=True, slots=True)
class Described:
    """One column, in words: its unit ("" where it has none), what it says, when it is null
    ("" where it never is)."""

    meaning: str
    unit: str = ""
    null: str = ""


_NOT_RUN = "the point did not run (not ok)"
_NO_GPU = (
    "NVML cannot read it (CPU ranks, a GPU or driver without the reading), copy-engine rows, "
    "points that did not run"
)
_PAIR = "rows of no pair (every kind but p2p and copy)"
_NO_NVLINK = f"{_NO_GPU}, or a GPU without NVLink"
# NVLink's counters cost about 1 ms a link and counter, so a GPU reads them every 2 s at most
_NVLINK_READ = (
    "since the GPU's previous reading of them, all active links (read at most every 2 s, so "
    "its rows summed give all it counted)"
)
_NVLINK_NULL = f"{_NO_NVLINK}, or a point that read no NVLink counter (within 2 s of one that did)"
_TRANSPORT_NULL = (
    "not through NCCL (gloo ranks, copies), a group of one GPU, a point that did not run, "
    "rows written before sweeper read it (but NCCL's: `unknown`)"
)


def _microseconds(meaning: str, null: str = _NOT_RUN) -> Described:
    return Described(meaning=meaning, unit="microseconds", null=null)


def _per_rank(meaning: str, nvml: str, unit: str = "", null: str = _NO_GPU) -> Described:
    """A GPU telemetry column: `nvml` names the NVML call (sweeper/telemetry.py) it is read by."""
    return Described(
        meaning=f"{meaning}; from {nvml}; one value per rank, in group rank order",
        unit=unit,
        null=null,
    )


DESCRIBED: dict[str, Described] = {
    # the run: the same in every row of one run
    "run_id": Described(meaning="the run, `YYYYMMDDTHHMMSSZ-xxxxxx` (its start and a random tag)"),
    "run_started_at": Described(meaning="when the run started", unit="UTC"),
    "run_kind": Described(
        meaning="`run` (sweeper run), `nightly` (sweeper nightly: a sweep, or a scan where its "
        "profile has `scan:`) or `scan` (sweeper scan)"
    ),
    "cluster_name": Described(meaning="the profile's cluster name, else the Ray head's host name"),
    "sweeper_version": Described(meaning="sweeper's version"),
    "ray_version": Described(meaning="Ray's version on the driver"),
    "torch_version": Described(meaning="torch's version in the rank processes"),
    "nccl_version": Described(meaning="NCCL's version", null="CPU ranks (gloo)"),
    "cuda_version": Described(meaning="the CUDA version torch was built for", null="CPU ranks"),
    "driver_version": Described(meaning="the NVIDIA driver's version", null="CPU ranks"),
    "gpu_model": Described(meaning="the GPUs' model name (NVML)", null="CPU ranks"),
    "nccl_env": Described(
        meaning="the `NCCL_*` variables of the actor set that measured the row: the user's "
        "environment's, as given, and its variant's (empty: none)"
    ),
    "backend": Described(meaning="torch.distributed's backend: `nccl` on GPUs, `gloo` on CPU"),
    # the group
    "tier": Described(
        meaning="the slowest link the group crosses: `nvlink`, `pcie`, `internode`, `cpu`, "
        "`gpu` (a GPU's own copies), `local` (one GPU, NCCL's single-rank path)"
    ),
    "variant": Described(
        meaning="the NCCL variables swept (`proto=LL,max_nchannels=4`), `default` otherwise"
    ),
    "group_id": Described(meaning="the group within the run: its tier, variant and ranks"),
    "world_size": Described(meaning="ranks in the group", unit="ranks"),
    "n_nodes": Described(meaning="nodes the group spans", unit="nodes"),
    "hosts": Described(meaning="each rank's host, in group rank order"),
    "gpu_uuids": Described(
        meaning="each rank's GPU UUID, in group rank order (empty on CPU ranks)"
    ),
    # the point
    "kind": Described(
        meaning="what the row measured: `collective`, `composite`, `p2p`, `copy`, `experiment`"
    ),
    "op": Described(meaning="the operation (`all_reduce`, `send_recv`, `h2d`, `copy`, ...)"),
    "algorithm": Described(
        meaning="how the operation is performed (`native`, a composite's steps, a pair's "
        "pattern, a copy's kind)"
    ),
    "dtype": Described(meaning="the element type (`float32`, `bfloat16`, ...)"),
    "in_place": Described(meaning="output written over the input"),
    "size_bytes": Described(
        meaning="S, nccl-tests' size: the bytes of each rank's buffer the operation is "
        "named by (docs/PERFORMANCE.md)",
        unit="bytes",
    ),
    "count_elems": Described(meaning="S in elements of `dtype`", unit="elements"),
    "engine": Described(meaning="`torch` (torch.distributed) or `nccl` (NCCL called directly)"),
    "launch": Described(meaning="`graph` (replays of a captured CUDA graph) or `eager`"),
    "launch_note": Described(
        meaning="why the point ran eagerly where a graph was asked for",
        null="it ran as asked",
    ),
    "registered": Described(
        meaning="its buffers came from NCCL's allocator, registered (`--register-buffers`)",
        null=_NOT_RUN,
    ),
    # the clock
    "warmup_iters": Described(meaning="untimed iterations before the blocks", null=_NOT_RUN),
    "iters": Described(meaning="iterations per timed block", null=_NOT_RUN),
    "time_us": _microseconds("t: the median block's time per iteration, max over ranks"),
    "time_us_min": _microseconds("the fastest block's time per iteration, max over ranks"),
    "time_us_p50": _microseconds(
        "the median of the per-iteration samples", "no samples (`--samples` not given) or not ok"
    ),
    "time_us_p99": _microseconds(
        "the 99th percentile of the per-iteration samples",
        "no samples (`--samples` not given) or not ok",
    ),
    "time_us_blocks": _microseconds(
        "each timed block's time per iteration (`time_us` is their median)"
    ),
    "algbw_gb_per_s": Described(
        meaning="algorithm bandwidth, S / t", unit="GB/s (1e9 bytes)", null=_NOT_RUN
    ),
    "busbw_gb_per_s": Described(
        meaning="bus bandwidth, algbw x `busbw_factor` (nccl-tests')",
        unit="GB/s (1e9 bytes)",
        null=_NOT_RUN,
    ),
    "busbw_factor": Described(
        meaning="busbw / algbw for this operation on `world_size` ranks (docs/PERFORMANCE.md)"
    ),
    "busbw_pct_of_link": Described(
        meaning="busbw as a share of the one-direction peak of the link the group's tier "
        "crosses, the slowest of its members': for `nvlink` a GPU's active NVLinks at NVML's "
        "per-link speed (or by NVLink version: 4.0 is 26.5625 GB/s a link, 18 links 478 GB/s); "
        "for `pcie` and `p2p-off` PCIe generation x width as trained, per lane after encoding "
        "(gen 4: 1.969 GB/s, gen 5: 3.938); for `internode` the node's active InfiniBand/RoCE "
        "ports' `rate`, else its Ethernet interfaces' `speed`, from sysfs (a group of one GPU "
        "per node, which NCCL may send through the NIC nearest its GPU alone, can read low)",
        unit="percent",
        null="not ok; tiers `cpu`, `local` and `gpu` (copies carry `pcie_pct_of_peak`); a link "
        "whose speed NVML or sysfs cannot give",
    ),
    "status": Described(meaning="how the point ended: `ok`, `oom`, `timeout`, `error`, `skipped`"),
    "error": Described(meaning="why the point is not ok", null="status `ok`"),
    "n_wrong": Described(
        meaning="elements the exact check found wrong, summed over ranks",
        unit="elements",
        null="not checked (the point did not run)",
    ),
    "max_size_bytes": Described(
        meaning="the largest size of the series: the grid's limit, or what `--max-size auto` "
        "found so far",
        unit="bytes",
        null="`--max-size auto` before its probe found a bound",
    ),
    "probe_s": Described(
        meaning="time `--max-size auto` spent probing the series so far",
        unit="seconds",
        null="a fixed `--max-size`",
    ),
    "samples_us": _microseconds(
        "every timed iteration's time, max over ranks (`--samples`)",
        "`--samples` not given, or not ok",
    ),
    "measured_at": Described(meaning="when the row was made", unit="UTC"),
    "src_rank": Described(meaning="the sending rank", null=_PAIR),
    "dst_rank": Described(meaning="the receiving rank", null=_PAIR),
    "src_gpu_uuid": Described(meaning="the sending GPU's UUID", null=_PAIR),
    "dst_gpu_uuid": Described(meaning="the receiving GPU's UUID", null=_PAIR),
    "concurrent": Described(
        meaning="measured while other pairs or GPUs of the same node ran at once",
        null="rows of no pair and no per-GPU copy",
    ),
    "rank": Described(
        meaning="the one rank a row stands for, where a point gives a row per GPU (host "
        "copies of a node's GPUs at once)",
        null="rows that stand for the whole group",
    ),
    "params": Described(
        meaning="an experiment's parameters (MoE routing), name to value",
        null="rows of no experiment",
    ),
    "wave": Described(meaning="the schedule's wave the group ran in, from 0"),
    "started_at": Described(meaning="when the point's execution started", unit="UTC"),
    "ended_at": Described(meaning="when the point's execution ended", unit="UTC"),
    # GPU telemetry (NVML), read outside the timed blocks
    "sm_clock_mhz": _per_rank(
        "SM clock after the last timed block: a GPU below its peers' was held back",
        "`nvmlDeviceGetClockInfo` (SM)",
        "MHz",
    ),
    "mem_clock_mhz": _per_rank(
        "memory clock after the last timed block", "`nvmlDeviceGetClockInfo` (MEM)", "MHz"
    ),
    "power_w": _per_rank(
        "power draw after the last timed block (the driver's averaging window, about 1 s on "
        "most GPUs)",
        "`nvmlDeviceGetPowerUsage`",
        "W",
    ),
    "power_limit_w": _per_rank("enforced power limit", "`nvmlDeviceGetEnforcedPowerLimit`", "W"),
    "temperature_c": _per_rank(
        "GPU temperature after the last timed block",
        "`nvmlDeviceGetTemperature` (GPU)",
        "degrees C",
    ),
    "throttle_reasons": _per_rank(
        "the active clock throttle reasons, named: `gpu_idle`, `applications_clocks_setting`, "
        "`sw_power_cap`, `hw_slowdown`, `sync_boost`, `sw_thermal_slowdown`, "
        "`hw_thermal_slowdown`, `hw_power_brake_slowdown`, `display_clock_setting`; `gpu_idle` "
        "after a short point is normal",
        "`nvmlDeviceGetCurrentClocksThrottleReasons`",
    ),
    "ecc_corrected_delta": _per_rank(
        "corrected ECC errors gained over the point",
        "`nvmlDeviceGetTotalEccErrors` (volatile)",
        "errors",
    ),
    "ecc_uncorrected_delta": _per_rank(
        "uncorrected ECC errors gained over the point",
        "`nvmlDeviceGetTotalEccErrors` (volatile)",
        "errors",
    ),
    "nvlink_replay_delta": _per_rank(
        f"NVLink replays counted {_NVLINK_READ}",
        "`nvmlDeviceGetNvLinkErrorCounter`",
        "events",
        _NVLINK_NULL,
    ),
    "nvlink_crc_delta": _per_rank(
        f"NVLink CRC errors (flit and data) counted {_NVLINK_READ}",
        "`nvmlDeviceGetNvLinkErrorCounter`",
        "errors",
        _NVLINK_NULL,
    ),
    "nvlink_recovery_delta": _per_rank(
        f"NVLink recoveries counted {_NVLINK_READ}",
        "`nvmlDeviceGetNvLinkErrorCounter`",
        "events",
        _NVLINK_NULL,
    ),
    "xid_codes": _per_rank(
        "XID errors the driver reported during the point (empty: none)",
        "an event set for `nvmlEventTypeXidCriticalError`",
        null=f"{_NO_GPU}, or a driver that delivers no events (many VMs and containers)",
    ),
    "pcie_gen": _per_rank(
        "PCIe generation as trained just after the point (an idle GPU trains down, so the "
        "survey's reading can be lower)",
        "`nvmlDeviceGetCurrPcieLinkGeneration`",
    ),
    "pcie_width": _per_rank(
        "PCIe lanes as trained just after the point", "`nvmlDeviceGetCurrPcieLinkWidth`", "lanes"
    ),
    "pcie_pct_of_peak": Described(
        meaning="a host<->device copy's algbw as a share of its GPU's PCIe peak (NVML's "
        "largest generation x width, one direction; the slowest GPU's for several)",
        unit="percent",
        null="rows of no host copy, or a PCIe link NVML cannot read",
    ),
    "pcie_max_gen": _per_rank(
        "the highest PCIe generation the GPU and its slot allow: below it, `pcie_gen` shows a "
        "link that came up slower",
        "`nvmlDeviceGetMaxPcieLinkGeneration`",
    ),
    "pcie_max_width": _per_rank(
        "the most PCIe lanes the GPU and its slot allow: against `pcie_width`, a link that came "
        "up at x8 of x16 shows",
        "`nvmlDeviceGetMaxPcieLinkWidth`",
        "lanes",
    ),
    "other_processes": _per_rank(
        "compute processes on the GPU just after the point other than the rank's own: a job "
        "sharing it with the measurement (docs/measurements/h200-x1-2026-12-02.md: one beside "
        "an H200 halved its d2d copies)",
        "`nvmlDeviceGetComputeRunningProcesses`, by process id",
        "processes",
        null=f"{_NO_GPU}, NVML cannot list them, or rows written before sweeper read them",
    ),
    "stage": Described(
        meaning="a fleet scan's row: the stage its group belongs to (`gate`, `isolate`, "
        "`screen`, `cross-domain`, `bisect`, `confirm`, `pairs`)",
        null="rows of a sweep (`sweeper run`, a nightly sweep)",
    ),
    "transport": Described(
        meaning="the transport NCCL set up between the group's GPUs for this engine's "
        "communicator, from NCCL's own INFO lines: `P2P/<mode>` (`CUMEM`, `IPC`, `direct`, "
        "`indirect`; `/read`, `/CE`), `SHM` (through host memory), `NET/<plugin>` "
        "(`NET/Socket`: TCP; `NET/IB`, `NET/AWS Libfabric`: RDMA) with `+GDRDMA` where "
        "GPUDirect RDMA carries it, `NVLS`, `CollNet/<plugin>`; several: `mixed:` and each, "
        "comma-separated (an internode group's P2P inside a node and NET between nodes). "
        "`unknown` where NCCL's output could not be read (the user's NCCL_DEBUG settings leave "
        "nothing readable) or told of no connection, and on NCCL rows written before sweeper "
        "read it",
        null=_TRANSPORT_NULL,
    ),
    "transport_flag": Described(
        meaning="where the transport breaks the tier's contract, why, and what to check: an "
        "`nvlink` group through SHM or NET, a `pcie` group through NET, an `internode` group "
        "over NET/Socket where its nodes have active RDMA ports, an RDMA NET connection "
        "without GPUDirect RDMA on a node whose peer-memory module (nvidia_peermem, "
        "nv_peer_mem) is loaded; `; ` between several",
        null=f"the contract holds, or cannot be judged; {_TRANSPORT_NULL}",
    ),
    "nccl_connections": Described(
        meaning="each connection NCCL set up on the group's communicator, every rank's, once: "
        "`0->1 P2P/CUMEM`, `3->0 NET/IB/0/GDRDMA (mlx5_0)` (NCCL's ranks of the "
        "communicator, then NCCL's words after `via`, and the net plugin's device), "
        "`0 COLLNET/SHARP/0`, `NVLS`; at most 256, then `... and N more`",
        null=f"no connection known; {_TRANSPORT_NULL}",
    ),
    "nccl_channels": Described(
        meaning="the collective channels of the group's communicator (the most over its "
        "ranks), as NCCL said when it started",
        null=f"not said; {_TRANSPORT_NULL}",
    ),
    "nccl_algo": Described(
        meaning="the algorithm NCCL chose for the point's first call (`RING`, `TREE`, `NVLS`, "
        "`NVLS_TREE`, `COLLNET_DIRECT`, `COLLNET_CHAIN`, `PAT`; `+` between several: a "
        "composite's calls)",
        null="NCCL printed no TUNING line for it and NCCL's view (`nccl_view`) is not "
        "`observed` (the least-time pair of its cost table fills it then): sweeper does not ask "
        "for TUNING lines (they print a line per call, inside timed loops), so they come only "
        "where the user set NCCL_DEBUG_SUBSYS with TUNING into a NCCL_DEBUG_FILE; "
        f"point-to-point calls; {_TRANSPORT_NULL}",
    ),
    "nccl_proto": Described(
        meaning="the protocol NCCL chose for the point's first call (`LL`, `LL128`, `SIMPLE`)",
        null="as `nccl_algo`",
    ),
    "unanswered": Described(
        meaning="a point that timed out: the ranks whose reply was not in at its deadline, as "
        "group ranks (0 to `world_size` - 1: their places in `hosts` and `gpu_uuids`; `error` "
        "names them by the run's rank numbers where others answered). A scan holds the node of "
        "those ranks `failed`, not its group's links, where it is the group's one node or "
        "another node of the group answered; a resumed scan reads it here",
        null="the point did not time out; rows written before sweeper kept it (their `error` "
        "names the ranks)",
    ),
    "comm_start_s": Described(
        meaning="how long the group's communicator in the row's engine took to open, the "
        "slowest rank's: for `torch`, torch.distributed's process group made with the "
        "group's device (NCCL's communicator started at once; the world's join where the "
        "group is the world), for `nccl`, ncclCommInitRank with its unique id passed through "
        "the store; the same on every row of the group and engine",
        unit="seconds",
        null=f"{_NOT_RUN}, or rows written before sweeper timed it",
    ),
    "energy_j": Described(
        meaning="the energy the group's GPUs used over the row's timed blocks: what each "
        "GPU's total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ) gained from "
        "after the first block's barrier to the end of the last, summed over the ranks",
        unit="joules",
        null="the blocks lasted under 1 s (the counter advances every 100 ms on an H200: "
        "--iters gives longer blocks), any rank's GPU has no such counter (before Volta), "
        f"{_NO_GPU}",
    ),
    "nccl_view": Described(
        meaning="whether the row carries NCCL's own view of the point's first call in its "
        "engine: `observed` (sweeper's observing tuner plugin saw the cost table NCCL made for "
        "each collective call, and left it unchanged), `no collective call` (the step made "
        "none NCCL tunes: send/recv and what torch builds from them, and any call of a "
        "communicator of one rank, which NCCL runs as a local copy), or `partial: ` and why "
        "not (a tuner plugin of the user's or the machine's is NCCL's, NCCL_TUNER_PLUGIN or "
        "libnccl-tuner.so or a network plugin's; no C compiler to build sweeper's; an NCCL "
        "before 2.22, which has no tuner v3 to open the communicator with it)",
        null="not through NCCL (gloo ranks, copies), a point that did not run, rows written "
        "before sweeper read it",
    ),
    "nccl_predicted_us": Described(
        meaning="NCCL's predicted time of the point's first call in the row's engine (a "
        "graph row's: its capture's last step, which NCCL tunes as registered buffers): the "
        "least of its cost table (what NCCL runs, as its tuner left it), summed over the "
        "step's calls (two for a composite); from rank 0's NCCL",
        unit="microseconds",
        null="`nccl_view` is not `observed`, or null",
    ),
    "nccl_predictions": Described(
        meaning="each algorithm/protocol NCCL considered for the call and its predicted time "
        "(`RING/LL`: 14.2); with several calls each is named by its function first "
        "(`AllGather RING/SIMPLE`); pairs NCCL ignores (not supported here, or left out by "
        "NCCL_ALGO, NCCL_PROTO) are not listed",
        unit="microseconds",
        null="as `nccl_predicted_us`",
    ),
    "measured_over_predicted": Described(
        meaning="`time_us` over `nccl_predicted_us`: above 1 the call took longer than NCCL's "
        "model expected",
        null="as `nccl_predicted_us`, or no time",
    ),
    "nccl_init_s": Described(
        meaning="NCCL's own split of the start of the group's communicator in the row's "
        "engine, as its `Init timings` line said on the rank whose total was longest: `total`, "
        "then `kernels`, `alloc`, `bootstrap`, `allgathers`, `topo`, `graphs`, `connections`, "
        "`rest` (NCCL 2.23 on; `comm_start_s` is sweeper's own clock around the same start)",
        unit="seconds",
        null=f"NCCL printed no such line (the user's debug settings leave INIT out); "
        f"{_TRANSPORT_NULL}",
    ),
    "energy_j_per_gb": Described(
        meaning="`energy_j` per GB (1e9 bytes) of S over the blocks' iterations: the energy "
        "the collective cost per byte of its size, beside `busbw_gb_per_s`",
        unit="joules per GB",
        null="as `energy_j`",
    ),
}


def type_name(t: pa.DataType) -> str:
    """An Arrow type as the docs spell it: `list<string>`, `map<string, string>`."""
    if pa.types.is_list(t):
        return f"list<{type_name(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{type_name(t.key_type)}, {type_name(t.item_type)}>"
    return str(t)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(schema: pa.Schema = SCHEMA) -> str:
    """docs/RESULTS.md: a table of every column of `schema`, in its order. KeyError names a
    column with no description."""
    missing = [name for name in schema.names if name not in DESCRIBED]
    if missing:
        raise KeyError(f"columns with no description in {__name__}.DESCRIBED: {missing}")
    lines = [
        "# Result columns",
        "",
        "<!-- written by `python -m sweeper.results.columns_doc > docs/RESULTS.md`: edit "
        "sweeper/results/columns_doc.py, not this file -->",
        "",
        "One row per measurement (run x group x operation x algorithm x dtype x size x launch x "
        "engine, and pair or rank where there is one), in the order of "
        "`sweeper/results/schema.py`. Every column is nullable; *null when* says when it is "
        "null (blank: never). GB = 1e9 bytes. The GPU telemetry columns hold a list, one value "
        "per rank, read through NVML before the warm-up and after "
        "the last check, never inside a timed block; the `*_delta` counters are differences of "
        "those two readings, so a non-zero value is evidence against the point, and the state "
        "columns describe the GPU just after its blocks, not an average over them.",
        "",
        "The transport columns (`transport` to `nccl_proto`) are NCCL's own account, read from "
        "its INFO lines in each rank's process after each communicator starts and after each "
        "point's first (untimed) call. Where the user set none of NCCL_DEBUG, "
        "NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE (environment or NCCL's configuration files), "
        "the rank sets them, before NCCL starts, to INFO for the INIT and NET subsystems into "
        "a memory file of its own: debug output variables, which change none of NCCL's "
        "choices, printed as communicators start and connect, never per call. Where the user "
        "set any of them, sweeper sets nothing and reads their NCCL_DEBUG_FILE where it is "
        "INFO with INIT; else `unknown`. The rows' `nccl_env` leaves out what sweeper set.",
        "",
        "Beyond that debug output, sweeper sets no NCCL, PyTorch or NVSHMEM variable: each "
        "actor set is given the driver's `NCCL_*`, `NVSHMEM_*`, `TORCH_NCCL_*`, "
        "`TORCH_SYMM_MEM_*` and `GLOO_*` variables unchanged (a joined cluster's Ray workers "
        "would not inherit them), then its `--nccl-env` variant's; NCCL's configuration files "
        "and defaults decide the rest, NVLink SHARP (NVLS) included where NCCL would use it. A "
        "shared machine that must keep NVLink multicast off keeps it off in its environment "
        "(`NCCL_NVLS_ENABLE=0`, `TORCH_SYMM_MEM_DISABLE_MULTICAST=1`, `NVSHMEM_DISABLE_NVLS=1`) "
        "and in /etc/nccl.conf (`NCCL_NVLS_ENABLE=0`): those values reach every actor, rank "
        "and rank template unchanged. The multicast variables (`NCCL_NVLS_*`, "
        "`NCCL_NVLSTREE_*`, `NCCL_MNNVL_*`) join an `--nccl-env` grid only with "
        "`--allow-multicast-knobs`, which such a machine must never be given.",
        "",
        "A row with a `transport_flag` makes the run's report open with a Transport section "
        "(each flagged group, engine, transport and what to check; and the internode groups "
        "that crossed nodes over TCP because none of their nodes has an RDMA device), and "
        "`sweeper run` exit 5 where every point ran (4, failed points, comes first). Before a "
        "run of several nodes, or with `--force-network`, one line per node on stderr gives "
        "its RDMA ports (name, InfiniBand, RoCE or EFA, state, rate), GPUDirect RDMA "
        "(peer-memory module, dma-buf), NCCL's net plugin and the transport NCCL will choose "
        "between nodes, with a warning where the run would measure TCP: sockets beside RDMA "
        "ports, or `--force-network` on a node with none.",
        "",
        "| column | type | unit | meaning | null when |",
        "|---|---|---|---|---|",
    ]
    for f in schema:
        d = DESCRIBED[f.name]
        cells = (f"`{f.name}`", f"`{type_name(f.type)}`", d.unit, d.meaning, d.null)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
