"""Rows of a GPU run that a CPU sweep cannot produce yet, written as real Parquet.

A 4x H200 node (the recorded NVML topology in tests/data/topologies) measured with NCCL:
collectives on the NVLink island, all-reduce and all-to-all algorithm variants, NCCL_ALGO
actor sets, the peer-to-peer and copy-engine matrices (one weak pair), MoE dispatch and
combine, and a point that ran out of memory. With `health`, every GPU row also carries what
NVML read of its GPUs (recorded answers replayed through the real telemetry code: GPU1's
link trained at x8, GPU2 power-capped, GPU3 replaying NVLink at one all_reduce point that
took SPIKE_SLOW times as long), and each GPU has its host<->device copies. Times follow
an alpha-beta model, so tests know what the analysis must find: the model's time is the
CUDA-graph time, and an eager call takes EAGER_US more for each call it issues (copies are
always eager). These are test data, not mocks: they go through `ResultWriter` and
come back through `load`, as a sweep's rows do.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from itertools import permutations, product
from pathlib import Path
from typing import Any

from sweeper import telemetry
from sweeper.results import records
from sweeper.results.records import RunRecord
from sweeper.results.writer import ResultWriter
from sweeper.topology import Node
from tests.nvml_replay import recorded

TOPOLOGY = Path(__file__).parent / "data" / "topologies" / "h200x4-nvswitch.json"
STARTED = datetime(2026, 11, 22, 3, 0, tzinfo=timezone.utc)
GROUP = "nvlink:n0g0,1,2,3"
SIZES = [8 * 4**k for k in range(14)]  # 8 B to 512 MiB
WEAK_PAIR = (2, 3)  # its bandwidth is half the others': the outlier to find
# (op, algorithm, variant) -> (alpha_us, algorithm bandwidth GB/s, busbw factor at n = 4)
MODELS: dict[tuple[str, str, str], tuple[float, float, float]] = {
    ("all_reduce", "native", "default"): (35.0, 240.0, 1.5),
    ("all_reduce", "native", "algo=Ring"): (45.0, 245.0, 1.5),
    ("all_reduce", "native", "algo=Tree"): (30.0, 150.0, 1.5),
    ("all_reduce", "reduce_scatter+all_gather", "default"): (79.0, 232.0, 1.5),
    ("all_reduce", "reduce+broadcast", "default"): (85.0, 180.0, 1.5),
    ("all_reduce", "symm_one_shot", "default"): (12.0, 60.0, 1.5),
    ("all_gather", "native", "default"): (31.0, 450.0, 0.75),
    ("all_to_all", "native", "default"): (39.0, 468.0, 0.75),
    ("all_to_all", "pairwise", "default"): (60.0, 440.0, 0.75),
    ("all_to_all", "hierarchical", "default"): (25.0, 300.0, 0.75),
}
COMPOSITES = ("reduce_scatter+all_gather", "reduce+broadcast")  # kind composite
# --nccl-env NCCL_PROTO=LL,Simple (with write_run(knobs=True)): LL starts sooner, moves less
KNOB_MODELS: dict[tuple[str, str, str], tuple[float, float, float]] = {
    ("all_reduce", "native", "proto=LL"): (20.0, 60.0, 1.5),
    ("all_reduce", "native", "proto=Simple"): (40.0, 250.0, 1.5),
    ("all_gather", "native", "proto=LL"): (18.0, 120.0, 0.75),
    ("all_gather", "native", "proto=Simple"): (33.0, 460.0, 0.75),
}
OOM_SIZE = 2**31
EAGER_US = 8.0  # what issuing one call from Python adds to a graph replay's time
GRAPH_ONLY = ("graph",)  # a GPU run's default
BOTH = ("graph", "eager")  # --launch graph,eager


def eager_us(algorithm: str, launch: str) -> float:
    """The time an eager launch adds: EAGER_US per call (a composite `a+b` issues two)."""
    return EAGER_US * (1 + algorithm.count("+")) if launch == "eager" else 0.0


def h200_node(host: str = "gpu-node-1") -> Node:
    record = json.loads(TOPOLOGY.read_text())
    return Node.from_record({**record, "host": host, "node_id": "f" * 56, "ip": "10.0.0.1"})


def h200_record(run_id: str, host: str = "gpu-node-1") -> RunRecord:
    command = f"sweeper run --tiers nvlink --cluster-name {host}"
    return RunRecord(run_id, command, {}, (h200_node(host),), ended="complete")


# What a GPU run's rows say its software was
SOFTWARE = {
    "sweeper_version": "0.1.0",
    "ray_version": "2.60.0",
    "torch_version": "2.11.0+cu130",
    "nccl_version": "2.28.9",
    "cuda_version": "13.0",
    "driver_version": "580.159.04",
}


def _meta(run_id: str, host: str, error: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "run_started_at": STARTED,
        "run_kind": "run",
        "cluster_name": host,
        **SOFTWARE,
        "gpu_model": "NVIDIA H200",
        "backend": "nccl",
        "nccl_env": [("NCCL_NVLS_ENABLE", "0"), ("NCCL_DEBUG", error)],
        "hosts": [host] * 4,
        "gpu_uuids": [gpu.uuid for gpu in h200_node(host).gpus],
        "world_size": 4,
        "n_nodes": 1,
        "dtype": "bfloat16",
        "status": "ok",
        "n_wrong": 0,
    }


def _timed(alpha_us: float, algbw: float, factor: float, size: int, slow: float) -> dict[str, Any]:
    time_us = (alpha_us + size / (algbw * 1e3)) * slow
    algbw_measured = size / time_us / 1e3
    return {
        "size_bytes": size,
        "time_us": time_us,
        "algbw_gb_per_s": algbw_measured,
        "busbw_gb_per_s": algbw_measured * factor,
        "busbw_factor": factor,
    }


def variant_env(variant: str) -> list[tuple[str, str]]:
    """The NCCL variables a swept variant's name stands for: algo=Ring is NCCL_ALGO=Ring."""
    pairs = (item.split("=") for item in variant.split(",") if "=" in item)
    return [(f"NCCL_{key.upper()}", value) for key, value in pairs]


def gpu_rows(
    run_id: str,
    host: str = "gpu-node-1",
    slow: float = 1.0,
    error: str = "WARN",
    launches: tuple[str, ...] = GRAPH_ONLY,
    knobs: bool = False,
) -> Iterator[dict[str, Any]]:
    """Every row of the synthetic run; `slow` multiplies every time (a regressed run),
    `error` is the text of the out-of-memory point (and of an NCCL variable), and each point
    but the copies has a row per launch mode of `launches`, as a sweep writes them; `knobs`
    adds the variants of an NCCL_PROTO sweep."""
    meta = _meta(run_id, host, error)
    clock = STARTED
    models = {**MODELS, **(KNOB_MODELS if knobs else {})}
    for (op, algorithm, variant), (alpha, algbw, factor) in models.items():
        suffix = "" if variant == "default" else f"/{variant}"
        for size in SIZES:
            clock += timedelta(milliseconds=10)
            for launch in launches:
                yield {
                    **meta,
                    "kind": "composite" if algorithm in COMPOSITES else "collective",
                    "nccl_env": meta["nccl_env"] + variant_env(variant),
                    "tier": "nvlink",
                    "variant": variant,
                    "group_id": GROUP + suffix,
                    "op": op,
                    "algorithm": algorithm,
                    "launch": launch,
                    "max_size_bytes": SIZES[-1],
                    "probe_s": 0.5,
                    "measured_at": clock,
                    **_timed(alpha + eager_us(algorithm, launch), algbw, factor, size, slow),
                }
    for launch in launches:
        yield {
            **meta,
            "kind": "collective",
            "tier": "nvlink",
            "variant": "default",
            "group_id": GROUP,
            "op": "all_gather",
            "algorithm": "native",
            "launch": launch,
            "size_bytes": OOM_SIZE,
            "status": "oom",
            "n_wrong": None,
            "error": error,
            "measured_at": clock + timedelta(seconds=1),
        }
    yield from _pairs(meta, clock + timedelta(seconds=2), slow, launches)
    yield from _moe(meta, clock + timedelta(seconds=3), slow, launches)


def _pairs(
    meta: dict[str, Any], clock: datetime, slow: float, launches: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    uuids = meta["gpu_uuids"]
    for op, algorithm, bandwidth in (
        ("p2p", "uni", 390.0),
        ("p2p", "bi", 720.0),
        ("copy", "uni", 300.0),
    ):
        modes = ("eager",) if op == "copy" else launches  # the copy engine has no graph
        for src, dst in permutations(range(4), 2):
            weak = 0.5 if (src, dst) == WEAK_PAIR else 1.0
            for (size, graph_us), launch in product(
                ((8, 9.0 + 0.01 * (src + dst)), (2**28, 9.0)), modes
            ):
                alpha = graph_us + eager_us(algorithm, launch)
                yield {
                    **meta,
                    "kind": op,  # p2p or copy
                    "tier": "nvlink",
                    "variant": "default",
                    "group_id": f"nvlink:n0g{src},{dst}",
                    "world_size": 2,
                    "hosts": meta["hosts"][:2],
                    "gpu_uuids": [uuids[src], uuids[dst]],
                    "op": op,
                    "algorithm": algorithm,
                    "launch": launch,
                    "src_rank": src,
                    "dst_rank": dst,
                    "src_gpu_uuid": uuids[src],
                    "dst_gpu_uuid": uuids[dst],
                    "concurrent": False,
                    "measured_at": clock,
                    **_timed(alpha, bandwidth * weak, 1.0, size, slow),
                }


def _moe(
    meta: dict[str, Any], clock: datetime, slow: float, launches: tuple[str, ...]
) -> Iterator[dict[str, Any]]:
    for algorithm in ("moe_dispatch", "moe_combine"):
        for tokens in (1024, 4096):
            params = {"tokens": tokens, "hidden": 7168, "top_k": 8, "experts": 256, "zipf": 1.1}
            for launch in launches:
                alpha = 40.0 + eager_us(algorithm, launch)
                yield {
                    **meta,
                    "kind": "experiment",
                    "tier": "nvlink",
                    "variant": "default",
                    "group_id": GROUP,
                    "op": "all_to_all_v",
                    "algorithm": algorithm,
                    "launch": launch,
                    "params": [(k, str(v)) for k, v in {**params, "seed": 0}.items()],
                    "measured_at": clock,
                    **_timed(alpha, 350.0, 0.75, tokens * 7168 * 2 * 8, slow),
                }


# health: the recorded NVML answers each GPU gives at every point (tests/data/telemetry)
HEALTH = {
    0: "h200-healthy.json",
    1: "h200-pcie-x8.json",  # its host<->device copies get half the pinned bandwidth
    2: "h200-power-capped.json",
    3: "h200-healthy.json",
}
SPIKE = ("all_reduce", "native", "default", SIZES[9])  # the point off its neighbours
SPIKE_SLOW = 3.0
SPIKE_GPU = (3, "h200-nvlink-replays.json")  # what that GPU read at that point
# host<->device copies alone on each GPU, GB/s: (pinned, pageable) per direction at x16
HOST_GB_PER_S = {"h2d": (55.2, 21.0), "d2h": (53.9, 18.5), "h2d+d2h": (50.1, 14.0)}


def _with_telemetry(row: dict[str, Any], at: dict[int, str]) -> dict[str, Any]:
    """The row with each of its GPUs' reading from the recorded file `at` names for it."""
    if row["status"] != "ok":
        return row
    index = {gpu.uuid: gpu.index for gpu in h200_node(row["hosts"][0]).gpus}
    readings = [recorded(at[index[uuid]]) for uuid in row["gpu_uuids"]]
    columns = telemetry.columns(readings)
    return {**row, **{k: list(v) if isinstance(v, tuple) else v for k, v in columns.items()}}


def _healthy(rows: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for row in rows:
        point = (row["op"], row["algorithm"], row["variant"], row["size_bytes"])
        if point == SPIKE and row["kind"] == "collective":
            slowed = {
                **row,
                "time_us": row["time_us"] * SPIKE_SLOW,
                "algbw_gb_per_s": row["algbw_gb_per_s"] / SPIKE_SLOW,
                "busbw_gb_per_s": row["busbw_gb_per_s"] / SPIKE_SLOW,
            }
            yield _with_telemetry(slowed, {**HEALTH, SPIKE_GPU[0]: SPIKE_GPU[1]})
        else:
            yield _with_telemetry(row, HEALTH)


def host_rows(run_id: str, host: str = "gpu-node-1") -> Iterator[dict[str, Any]]:
    """Each GPU's host<->device copies alone (a group of one), at the smallest size and
    256 MiB, each a share of its GPU's PCIe peak as the topology gives it; GPU1's link,
    trained at x8, carries half the pinned bandwidth."""
    meta = _meta(run_id, host, "WARN")
    for gpu in h200_node(host).gpus:
        for (op, (pinned, pageable)), size in product(HOST_GB_PER_S.items(), (8, 2**28)):
            for memory, gb_per_s in (("pinned", pinned), ("pageable", pageable)):
                x8 = HEALTH[gpu.index] == "h200-pcie-x8.json" and memory == "pinned"
                timed = _timed(8.0, gb_per_s / 2 if x8 else gb_per_s, 1.0, size, 1.0)
                assert gpu.pcie_gb_per_s is not None
                yield {
                    **meta,
                    "kind": "copy",
                    "tier": "local",
                    "variant": "default",
                    "group_id": f"local:n0g{gpu.index}",
                    "world_size": 1,
                    "hosts": [host],
                    "gpu_uuids": [gpu.uuid],
                    "op": op,
                    "algorithm": memory,
                    "launch": "graph",
                    "measured_at": STARTED + timedelta(seconds=4),
                    "n_wrong": None if op == "d2h" else 0,
                    "pcie_pct_of_peak": 100 * timed["algbw_gb_per_s"] / gpu.pcie_gb_per_s,
                    **timed,
                }


def write_fanout(
    results: Path, run_id: str, node: Node, times_us: dict[int, float], size: int = 2**28
) -> None:
    """The copy-engine fan-out from GPU0 of `node` to the GPUs `times_us` names, at once on
    a stream each, as `measurement.of_copy` writes it: a row per destination, its own time."""
    meta = _meta(run_id, node.host, "WARN")
    src = node.gpus[0]
    dsts = [node.gpus[index] for index in sorted(times_us)]
    writer = ResultWriter(results, run_id, STARTED.strftime("%Y-%m-%d"))
    for dst in dsts:
        time_us = times_us[dst.index]
        writer.append(
            {
                **meta,
                "kind": "copy",
                "tier": "nvlink" if node.nvlinked(0, dst.index) else "pcie",
                "variant": "default",
                "group_id": "copy:n0",
                "world_size": 1 + len(dsts),
                "hosts": [node.host] * (1 + len(dsts)),
                "gpu_uuids": [src.uuid, *(d.uuid for d in dsts)],
                "op": "copy",
                "algorithm": "fanout",
                "dtype": "uint8",
                "launch": "eager",
                "size_bytes": size,
                "time_us": time_us,
                "algbw_gb_per_s": size / time_us / 1e3,
                "busbw_gb_per_s": size / time_us / 1e3,
                "src_rank": 0,
                "dst_rank": dst.index,
                "src_gpu_uuid": src.uuid,
                "dst_gpu_uuid": dst.uuid,
                "concurrent": True,
                "n_wrong": None,
                "measured_at": STARTED,
            }
        )
    writer.flush()


def write_run(
    results: Path,
    run_id: str,
    host: str = "gpu-node-1",
    slow: float = 1.0,
    error: str = "WARN",
    launches: tuple[str, ...] = GRAPH_ONLY,
    knobs: bool = False,
    health: bool = False,
) -> None:
    """The synthetic run's rows into `results`, and its run record beside them; `health`
    adds each GPU's NVML readings to its rows, and its host<->device copies."""
    writer = ResultWriter(results, run_id, STARTED.strftime("%Y-%m-%d"))
    made = gpu_rows(run_id, host, slow, error, launches, knobs)
    if health:
        made = _healthy(itertools.chain(made, host_rows(run_id, host)))
    rows = list(made)
    # a batch's rows in one journal write (the same batches as row by row): the store's
    # per-point fsync is for live runs
    for start in range(0, len(rows), writer.batch_rows):
        writer.extend(rows[start : start + writer.batch_rows])
    writer.flush()
    records.save(results, h200_record(run_id, host))


# A run on two CPU ranks (gloo; a node without NVML), as a busy 2-core box measures it.
CPU_TOPOLOGY = TOPOLOGY.with_name("cpu-no-nvml.json")
CPU_GROUP = "cpu:n0r0,1"
CPU_SIZES = [8 * 4**k for k in range(10)]  # 8 B to 2 MiB
# all_reduce and its composites: (alpha_us, algorithm bandwidth GB/s); busbw factor 1 at n = 2
CPU_MODELS = {
    "native": (500.0, 0.5),
    "reduce_scatter+all_gather": (600.0, 0.45),
    "reduce+broadcast": (550.0, 0.4),
}
CPU_OFF = 3.0  # every other size of the native call takes this many times as long
CPU_SKIPPED = "host<->device copies need a GPU: CPU ranks have no device memory"
CPU_START_S = 0.003  # a gloo pair's process group on the 2-core box (sweeper run, 2026-12-02)


def cpu_record(run_id: str) -> RunRecord:
    node = Node.from_record(json.loads(CPU_TOPOLOGY.read_text()))
    return RunRecord(run_id, "sweeper run", {}, (node,), ended="complete")


def cpu_rows(run_id: str, spread: float = 0.5) -> Iterator[dict[str, Any]]:
    """The CPU run's rows: all_reduce and its composites, whose timed blocks vary by
    `spread` either side of their median (so that with 0.5 none is clearly best), the
    native call's odd sizes CPU_OFF times off the line through their neighbours (with no
    GPU readings to say why), and the host copies skipped: they need a GPU."""
    meta = {
        **_meta(run_id, "cpu-box", "WARN"),
        "torch_version": "2.13.0+cpu",
        "nccl_version": None,
        "cuda_version": None,
        "driver_version": None,
        "gpu_model": None,
        "backend": "gloo",
        "nccl_env": [("NCCL_NVLS_ENABLE", "0")],  # as a machine that keeps multicast off gives it
        "hosts": ["cpu-box"] * 2,
        "gpu_uuids": [],
        "world_size": 2,
        "dtype": "float32",
        "tier": "cpu",
        "variant": "default",
        "group_id": CPU_GROUP,
        "op": "all_reduce",
        "launch": "eager",
        "engine": "torch",
        "measured_at": STARTED,
        "comm_start_s": CPU_START_S,
    }
    for (algorithm, (alpha, algbw)), (k, size) in product(CPU_MODELS.items(), enumerate(CPU_SIZES)):
        off = CPU_OFF if algorithm == "native" and k % 2 else 1.0
        timed = _timed(alpha, algbw, 1.0, size, off)
        median = timed["time_us"]
        yield {
            **meta,
            "kind": "composite" if algorithm in COMPOSITES else "collective",
            "algorithm": algorithm,
            "time_us_blocks": [median * (1 - spread / 2), median, median * (1 + spread)],
            **timed,
        }
    for op in ("h2d", "d2h"):
        yield {
            **meta,
            "kind": "copy",
            "op": op,
            "algorithm": "pinned",
            "size_bytes": 8,
            "busbw_factor": 1.0,
            "status": "skipped",
            "n_wrong": None,
            "error": CPU_SKIPPED,
        }
