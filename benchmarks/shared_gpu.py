"""One GPU alone and shared: what its own copies (d2d, and h2d and d2h pinned, at the scan's
256 MiB) and NVML (the compute processes on it, utilization, clocks, power and its cap,
throttle reasons) show idle and beside a second process that keeps it busy with bf16
8192 x 8192 x 8192 matrix products; with --sweeper, also the rows `sweeper run` times of
those copies and what `sweeper scan` says, in each case. The figures behind the one-GPU
scan's rule (docs/measurements/h200-x1-2026-12-02.md, "A GPU shared with another process").

    python benchmarks/shared_gpu.py --out DIR --rounds 10 --sweeper

This process never opens CUDA (a context of its own would be one more process on the GPU):
the copies are timed in a child (`probe`), the busy process is another child, killed at the
end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

COPY_BYTES = 256 << 20  # sweeper.scan.plan.COPY_BYTES
ITERS = 20  # copies a timed round: d2d 20 x 0.14 ms, host copies 20 x 4.9 ms idle
MATMUL = 8192


def busy(ready: Path) -> None:
    """Matrix products until killed; `ready` appears once the first ones have run."""
    import torch

    a = torch.randn(MATMUL, MATMUL, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(MATMUL, MATMUL, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    ready.write_text(str(os.getpid()))
    while True:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()  # keeps the queue short, so a kill ends it at once


def nvml_state() -> dict[str, Any]:
    """GPU 0 as NVML sees it now, each call's answer or its error's name."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        calls: dict[str, Any] = {
            "compute_processes": lambda: [
                {"pid": p.pid, "used_mib": (p.usedGpuMemory or 0) >> 20}
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            ],
            "utilization": lambda: vars_of(pynvml.nvmlDeviceGetUtilizationRates(handle)),
            "process_utilization": lambda: [
                {"pid": s.pid, "sm": s.smUtil, "mem": s.memUtil}
                for s in pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
            ],
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, 1),
            "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, 2),
            "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
            "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3,
            "throttle_mask": lambda: pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle),
            "compute_mode": lambda: pynvml.nvmlDeviceGetComputeMode(handle),
            "pcie": lambda: [
                pynvml.nvmlDeviceGetCurrPcieLinkGeneration(handle),
                pynvml.nvmlDeviceGetCurrPcieLinkWidth(handle),
                pynvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
                pynvml.nvmlDeviceGetMaxPcieLinkWidth(handle),
            ],
        }
        out: dict[str, Any] = {"pid": os.getpid(), "at": time.time()}
        for name, call in calls.items():
            try:
                out[name] = call()
            except Exception as error:  # what NVML cannot answer is a finding
                out[name] = f"error: {type(error).__name__}: {error}"
        return out
    finally:
        pynvml.nvmlShutdown()


def vars_of(struct: Any) -> dict[str, Any]:
    return {name: getattr(struct, name) for name, _ in struct._fields_}


def probe(rounds: int) -> dict[str, Any]:
    """Each round: d2d, h2d and d2h, ITERS copies each timed by CUDA events (GB/s of one
    buffer, as sweeper's algbw), then NVML."""
    import torch

    device = torch.device("cuda", 0)
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    copies = {
        "d2d": lambda: dst.copy_(src, non_blocking=True),
        "h2d": lambda: dst.copy_(host, non_blocking=True),
        "d2h": lambda: host.copy_(src, non_blocking=True),
    }
    out: dict[str, list[Any]] = {name: [] for name in copies} | {"nvml": []}
    for _ in range(rounds):
        for name, copy in copies.items():
            for _ in range(3):
                copy()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(ITERS):
                copy()
            end.record()
            end.synchronize()
            out[name].append(COPY_BYTES * ITERS / (start.elapsed_time(end) / 1e3) / 1e9)
        out["nvml"].append(nvml_state())
    return out


def _sweeper(args: list[str], where: Path) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=where,
    )
    return {
        "args": args,
        "rc": done.returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "stdout": done.stdout[-20000:],
        "stderr": done.stderr[-4000:],
    }


def _copy_rows(results: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    wanted = [
        "op",
        "size_bytes",
        "algbw_gb_per_s",
        "busbw_gb_per_s",
        "time_us_blocks",
        "status",
        "sm_clock_mhz",
        "power_w",
        "power_limit_w",
        "throttle_reasons",
        "pcie_pct_of_peak",
    ]
    rows = [r for f in sorted(results.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return [{k: r[k] for k in wanted} for r in rows if r["size_bytes"] == COPY_BYTES]


def phase(name: str, work: Path, rounds: int, sweeper: bool) -> dict[str, Any]:
    """Outside CUDA: NVML, the probe child, then (with `sweeper`) a run of the copies and a
    scan, each in its own results directory under `work`."""
    got: dict[str, Any] = {"nvml_before": nvml_state()}
    child = subprocess.run(
        [sys.executable, __file__, "probe", "--rounds", str(rounds)],
        capture_output=True,
        text=True,
        check=True,
    )
    got["probe"] = json.loads(child.stdout)
    if sweeper:
        runs = work / f"{name}-run"
        copies = ["run", "--world", "1", "--ops", "d2d,h2d,d2h", "--min-size", "256M"]
        copies += ["--max-size", "256M", "--results", str(runs), "--no-report"]
        got["run"] = _sweeper(copies, Path.cwd())
        got["rows"] = _copy_rows(runs) if got["run"]["rc"] == 0 else []
        scan = ["scan", "--format", "json", "--results", str(work / f"{name}-scan")]
        got["scan"] = _sweeper(scan, Path.cwd())
    got["nvml_after"] = nvml_state()
    return got


def _summary(name: str, got: dict[str, Any]) -> str:
    lines = [f"{name}:"]
    for op in ("d2d", "h2d", "d2h"):
        values = got["probe"][op]
        lines.append(
            f"  probe {op}: median {statistics.median(values):.1f} GB/s, "
            f"{min(values):.1f}-{max(values):.1f} over {len(values)} rounds"
        )
    lines += [
        f"  row {r['op']}: {r['algbw_gb_per_s']:.1f} GB/s {r['status']}"
        for r in got.get("rows", [])
    ]
    before = got["nvml_before"]
    lines.append(
        f"  nvml: processes {before['compute_processes']}, utilization {before['utilization']}"
    )
    if "scan" in got:
        lines.append(f"  scan: rc {got['scan']['rc']} in {got['scan']['wall_s']} s")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=("probe", "busy"), default=None)
    parser.add_argument("--out", type=Path, default=Path("shared-gpu"), help="for its JSON")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--ready", type=Path)
    parser.add_argument("--sweeper", action="store_true")
    args = parser.parse_args()
    if args.mode == "probe":
        print(json.dumps(probe(args.rounds)))
        return
    if args.mode == "busy":
        busy(args.ready)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="shared-gpu-"))  # results folders: names with '='
    report: dict[str, Any] = {"idle": phase("idle", work, args.rounds, args.sweeper)}
    print(_summary("idle", report["idle"]), flush=True)
    ready = work / "busy.ready"
    worker = subprocess.Popen([sys.executable, __file__, "busy", "--ready", str(ready)])
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the busy process did not start its matrix products")
            time.sleep(0.1)
        report["busy_pid"] = worker.pid
        report["busy"] = phase("busy", work, args.rounds, args.sweeper)
        print(_summary("busy", report["busy"]), flush=True)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    report["after_kill"] = nvml_state()
    (args.out / "shared_gpu.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
