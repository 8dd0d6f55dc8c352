"""What each Python binding of NCCL costs per eager call, on one GPU (world size 1).

The nccl engine's eager rows are as cheap as its binding: this measures the candidates on the
same torch tensor, stream and NCCL library, the way nccl-tests `-g 1` times its eager loop
(iterations issued back to back between two events on the stream):

- torch.distributed's all_reduce (the torch engine's path, the anchor);
- nccl4py's low-level `nccl.bindings.nccl` (sweeper's nccl engine);
- nccl4py's pythonic `nccl.core`, where it installs (it needs cuda-bindings);
- CuPy's `cupy.cuda.nccl`, where it installs.

Candidates are interleaved round by round so a slow spell of the machine hits all of them;
each figure is the median round. Ratios are against torch.distributed measured in the same
run. Run it on a GPU machine with the candidates installed:

    python benchmarks/nccl_bindings.py --iters 2000 --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

import torch
import torch.distributed as dist

from sweeper.cluster import MULTICAST_OFF

Call = Callable[[], None]
FLOAT32, SUM = 7, 0  # ncclFloat32, ncclSum


def _torch(data: torch.Tensor) -> Call:
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=data.device)
    return lambda: dist.all_reduce(data)


def _nccl4py_bindings(data: torch.Tensor, stream: int) -> Call:
    from nccl.bindings import nccl

    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(nccl.get_unique_id()), 0)
    ptr, n = data.data_ptr(), data.numel()
    return lambda: nccl.all_reduce(ptr, ptr, n, FLOAT32, SUM, comm, stream)


def _nccl4py_core(data: torch.Tensor, stream: int) -> Call:
    import nccl.core as nccl

    comm = nccl.Communicator.init(1, 0, nccl.get_unique_id())
    return lambda: comm.allreduce(data, data, nccl.SUM, stream=stream)


def _cupy(data: torch.Tensor, stream: int) -> Call:
    from cupy.cuda import nccl

    comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    ptr, n = data.data_ptr(), data.numel()
    return lambda: comm.allReduce(ptr, ptr, n, FLOAT32, SUM, stream)


def _per_call_us(call: Call, iters: int, stream: torch.cuda.Stream) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        for _ in range(iters):
            call()
        end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--elements", type=int, default=2, help="float32 elements (2 = 8 B)")
    args = parser.parse_args()
    os.environ.update(MULTICAST_OFF)  # as every sweeper process has it, before NCCL loads
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(0)
    data = torch.ones(args.elements, device="cuda")
    stream = torch.cuda.Stream()
    handle = int(stream.cuda_stream)

    candidates: dict[str, Call] = {"torch.distributed": _torch(data)}
    for name, make in [
        ("nccl4py nccl.bindings", _nccl4py_bindings),
        ("nccl4py nccl.core", _nccl4py_core),
        ("cupy.cuda.nccl", _cupy),
    ]:
        try:
            candidates[name] = make(data, handle)
        except Exception as exc:  # a candidate that does not install or start is reported
            print(f"{name}: unavailable ({type(exc).__name__}: {exc})")
    for call in candidates.values():  # first calls connect and compile; not timed
        _per_call_us(call, 50, stream)

    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(args.rounds):
        for name, call in candidates.items():
            times[name].append(_per_call_us(call, args.iters, stream))
    anchor = statistics.median(times["torch.distributed"])
    print(f"all_reduce of {data.nbytes} B, world 1, {args.iters} eager calls x {args.rounds}")
    print(f"{'binding':<24}{'us/call':>10}{'min':>8}{'max':>8}{'vs torch':>10}")
    for name, runs in times.items():
        mid = statistics.median(runs)
        print(f"{name:<24}{mid:>10.2f}{min(runs):>8.2f}{max(runs):>8.2f}{mid / anchor:>10.2f}")
    print(f"torch {torch.__version__} on NCCL {torch.cuda.nccl.version()}")
    try:
        from nccl.bindings import nccl

        print(f"nccl4py on NCCL {nccl.get_version()} from {nccl.get_library_path()}")
    except ImportError:
        pass
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
