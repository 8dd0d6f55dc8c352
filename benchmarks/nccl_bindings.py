"""What each Python binding of NCCL costs per eager call, on one GPU (world size 1).

The nccl engine's eager rows are as cheap as its binding: this measures the candidates on the
same torch tensors, stream and NCCL library, the way nccl-tests `-g 1` times its eager loop
(iterations issued back to back between two events on the stream):

- a C loop making the same NCCL call, compiled here (cc) and run in this process: what
  nccl-tests' loop costs on this machine, with no Python between the calls (the anchor);
- torch.distributed (the torch engine's path): all_reduce in place, and out of place its
  reduce_scatter_tensor, the same one-rank copy in NCCL (torch has no out-of-place all_reduce);
- nccl4py's low-level `nccl.bindings.nccl` (sweeper's nccl engine);
- nccl4py's pythonic `nccl.core`, where it installs (it needs cuda-bindings);
- CuPy's `cupy.cuda.nccl`, where it installs.

Two calls: in place (NCCL has nothing to do on one rank and returns: the call path alone) and
out of place (NCCL's one-rank copy is enqueued: a call with work, as every out-of-place
operation of `--world 1` makes). Candidates are interleaved round by round so a slow spell of
the machine hits all of them; each figure is the median round, and each ratio the median over
rounds of the candidate's time over the C loop's in that round. Run it on a GPU machine with
the candidates installed:

    python benchmarks/nccl_bindings.py --iters 2000 --rounds 9
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from sweeper.fabric.multicast import MULTICAST_OFF

Calls = Callable[[int], None]  # issues n eager calls
FLOAT32, SUM = 7, 0  # ncclFloat32, ncclSum
ANCHOR = "C loop"
# ncclAllReduce's signature with its enums as ints, so no nccl.h is needed to build it.
C_LOOP = """
#include <stddef.h>
typedef int (*all_reduce_t)(const void*, void*, size_t, int, int, void*, void*);
int loop(all_reduce_t f, const void* send, void* recv, size_t count, int type, int op,
         void* comm, void* stream, int calls) {
  for (int i = 0; i < calls; i++) {
    int status = f(send, recv, count, type, op, comm, stream);
    if (status) return status;
  }
  return 0;
}
"""


def looped(call: Callable[[], object]) -> Calls:
    def calls(n: int) -> None:
        for _ in range(n):
            call()

    return calls


def _c_loop(send: torch.Tensor, recv: torch.Tensor, stream: int) -> Calls:
    """ncclAllReduce called from C, n times per call into Python, on the communicator type
    and library the nccl engine uses (nccl4py's): nccl-tests' loop, in this process."""
    from nccl.bindings import nccl

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc, gcc) on PATH")
    build = Path(tempfile.mkdtemp(prefix="nccl-loop-"))
    (build / "loop.c").write_text(C_LOOP)
    library = build / "loop.so"
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-o", library, build / "loop.c"], check=True
    )
    loop = ctypes.CDLL(str(library)).loop
    loop.restype = ctypes.c_int
    function = ctypes.cast(ctypes.CDLL(nccl.get_library_path()).ncclAllReduce, ctypes.c_void_p)
    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(nccl.get_unique_id()), 0)
    args = (
        function,
        ctypes.c_void_p(send.data_ptr()),
        ctypes.c_void_p(recv.data_ptr()),
        ctypes.c_size_t(send.numel()),
        ctypes.c_int(FLOAT32),
        ctypes.c_int(SUM),
        ctypes.c_void_p(int(comm)),
        ctypes.c_void_p(stream),
    )

    def calls(n: int) -> None:
        if status := loop(*args, ctypes.c_int(n)):
            raise RuntimeError(f"ncclAllReduce failed: ncclResult_t {status}")

    return calls


def _torch(send: torch.Tensor, recv: torch.Tensor, stream: int) -> Calls:
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=send.device)
    if send.data_ptr() == recv.data_ptr():
        return looped(lambda: dist.all_reduce(send))
    # out of place, as torch.distributed says it: the one-rank reduce into recv
    return looped(lambda: dist.reduce_scatter_tensor(recv, send))


def _nccl4py_bindings(send: torch.Tensor, recv: torch.Tensor, stream: int) -> Calls:
    from nccl.bindings import nccl

    comm = nccl.comm_init_rank_scalable(1, 0, 1, bytearray(nccl.get_unique_id()), 0)
    s, r, n = send.data_ptr(), recv.data_ptr(), send.numel()
    return looped(lambda: nccl.all_reduce(s, r, n, FLOAT32, SUM, comm, stream))


def _nccl4py_core(send: torch.Tensor, recv: torch.Tensor, stream: int) -> Calls:
    import nccl.core as nccl

    comm = nccl.Communicator.init(1, 0, nccl.get_unique_id())
    return looped(lambda: comm.allreduce(send, recv, nccl.SUM, stream=stream))


def _cupy(send: torch.Tensor, recv: torch.Tensor, stream: int) -> Calls:
    from cupy.cuda import nccl

    comm = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    s, r, n = send.data_ptr(), recv.data_ptr(), send.numel()
    return looped(lambda: comm.allReduce(s, r, n, FLOAT32, SUM, stream))


def _per_call_us(calls: Calls, iters: int, stream: torch.cuda.Stream) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        calls(iters)
        end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) * 1e3 / iters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--elements", type=int, default=2, help="float32 elements (2 = 8 B)")
    args = parser.parse_args()
    os.environ.update(MULTICAST_OFF)  # as the shared machines set it, before NCCL loads
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(0)
    data = torch.ones(args.elements, device="cuda")
    other = torch.ones(args.elements, device="cuda")
    stream = torch.cuda.Stream()
    handle = int(stream.cuda_stream)

    makers: list[tuple[str, Callable[[torch.Tensor, torch.Tensor, int], Calls]]] = [
        (ANCHOR, _c_loop),
        ("torch.distributed", _torch),
        ("nccl4py nccl.bindings", _nccl4py_bindings),
        ("nccl4py nccl.core", _nccl4py_core),
        ("cupy.cuda.nccl", _cupy),
    ]
    candidates: dict[tuple[str, str], Calls] = {}
    for place, recv in (("in place", data), ("out of place", other)):
        for name, make in makers:
            try:
                candidates[name, place] = make(data, recv, handle)
            except Exception as exc:  # a candidate that does not install or start is reported
                print(f"{name}, {place}: unavailable ({type(exc).__name__}: {exc})")
    for calls in candidates.values():  # first calls connect and compile; not timed
        _per_call_us(calls, 50, stream)

    times: dict[tuple[str, str], list[float]] = {key: [] for key in candidates}
    for _ in range(args.rounds):
        for key, calls in candidates.items():
            times[key].append(_per_call_us(calls, args.iters, stream))
    print(f"all_reduce of {data.nbytes} B, world 1, {args.iters} eager calls x {args.rounds}")
    print(f"{'binding':<24}{'call':>14}{'us/call':>10}{'min':>8}{'max':>8}{'vs C':>8}")
    for (name, place), runs in times.items():
        anchor = times.get((ANCHOR, place))
        ratio = (
            f"{statistics.median(t / a for t, a in zip(runs, anchor, strict=True)):>8.2f}"
            if anchor
            else f"{'':>8}"
        )
        mid = statistics.median(runs)
        print(f"{name:<24}{place:>14}{mid:>10.2f}{min(runs):>8.2f}{max(runs):>8.2f}{ratio}")
    print(f"torch {torch.__version__} on NCCL {torch.cuda.nccl.version()}")
    try:
        from nccl.bindings import nccl

        print(f"nccl4py on NCCL {nccl.get_version()} from {nccl.get_library_path()}")
    except ImportError:
        pass
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
