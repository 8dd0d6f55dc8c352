"""What each result column means: docs/RESULTS.md is written from here and the schema.

A column of `schema.SCHEMA` is described once, in `DESCRIBED`: its unit, its meaning and when
it is null; its name and type come from the schema itself. A new column needs an entry here,
then `python -m sweeper.results.columns_doc > docs/RESULTS.md` (tests/unit/test_results_doc.py
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
_NO_GPU = "NVML cannot read it (CPU ranks, a GPU or driver without the reading)"
_PAIR = "rows of no pair (every kind but p2p and copy)"


def _microseconds(meaning: str, null: str = _NOT_RUN) -> Described:
    return Described(meaning=meaning, unit="microseconds", null=null)


def _per_rank(meaning: str, unit: str = "") -> Described:
    return Described(
        meaning=f"{meaning}; one value per rank, in group rank order", unit=unit, null=_NO_GPU
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
        meaning="the `NCCL_*` variables of the actor set that measured the row (empty: none)"
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
        meaning="busbw as a share of the tier's one-direction link peak (NVML, sysfs)",
        unit="percent",
        null="not ok, CPU ranks, or a link whose speed cannot be read",
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
    "sm_clock_mhz": _per_rank("SM clock after the last timed block", "MHz"),
    "mem_clock_mhz": _per_rank("memory clock after the last timed block", "MHz"),
    "power_w": _per_rank("power draw after the last timed block", "W"),
    "power_limit_w": _per_rank("enforced power limit", "W"),
    "temperature_c": _per_rank("GPU temperature after the last timed block", "degrees C"),
    "throttle_reasons": _per_rank("NVML's clock throttle reasons (`sw_power_cap`, ...)"),
    "ecc_corrected_delta": _per_rank("corrected ECC errors gained over the point", "errors"),
    "ecc_uncorrected_delta": _per_rank("uncorrected ECC errors gained over the point", "errors"),
    "nvlink_replay_delta": _per_rank("NVLink replays gained over the point, all links", "events"),
    "nvlink_crc_delta": _per_rank("NVLink CRC errors gained over the point, all links", "errors"),
    "nvlink_recovery_delta": _per_rank(
        "NVLink recoveries gained over the point, all links", "events"
    ),
    "xid_codes": _per_rank("XID errors the driver reported during the point"),
    "pcie_gen": _per_rank("PCIe generation as trained now (idle GPUs train down)"),
    "pcie_width": _per_rank("PCIe lanes as trained now", "lanes"),
    "pcie_pct_of_peak": Described(
        meaning="a host<->device copy's algbw as a share of its GPU's PCIe peak (NVML's "
        "largest generation x width, one direction; the slowest GPU's for several)",
        unit="percent",
        null="rows of no host copy, or a PCIe link NVML cannot read",
    ),
    "pcie_max_gen": _per_rank("the highest PCIe generation the GPU and its slot allow"),
    "pcie_max_width": _per_rank("the most PCIe lanes the GPU and its slot allow", "lanes"),
    "stage": Described(
        meaning="a fleet scan's row: the stage its group belongs to (`gate`, `screen`, "
        "`cross-domain`, `bisect`, `confirm`)",
        null="rows of a sweep (`sweeper run`, a nightly sweep)",
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
        "per rank, read through NVML outside the timed blocks.",
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
