"""The nccl engine: NCCL called directly, as nccl-tests and vLLM's pynccl call it, on the
same torch tensors and the rank's work stream, with nothing of torch.distributed between.

The binding is CuPy's `cupy.cuda.nccl` (the `sweeper[nccl]` extra): a thin Cython layer whose
calls take raw pointers, measured at about 5 us per eager call on an H200 against 11 us for
nccl4py's pythonic layer and 6 us for nccl-tests itself (docs/PERFORMANCE.md). Every step is
bound once per point to its pointers, counts and stream, so an iteration is one call into
the binding (a few, inside one NCCL group, for point-to-point patterns).

Only the worker imports this module, and only for a sweep that asks for the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import torch

from sweeper.descriptor import Step

# ncclDataType_t and ncclRedOp_t values of nccl.h (stable across NCCL 2.x).
DTYPES: dict[torch.dtype, int] = {
    torch.int8: 0,
    torch.uint8: 1,
    torch.int32: 2,
    torch.int64: 4,
    torch.float16: 6,
    torch.float32: 7,
    torch.float64: 8,
    torch.bfloat16: 9,
    torch.float8_e4m3fn: 10,
    torch.float8_e5m2: 11,
}
SUM = 0


def binding() -> Any:
    """CuPy's NCCL module; ImportError (with the extra to install) where it is missing."""
    try:
        from cupy.cuda import nccl
    except ImportError as exc:
        raise ImportError(f"the nccl engine needs pip install 'sweeper[nccl]' ({exc})") from None
    return nccl


def unique_id() -> str:
    """A new ncclUniqueId as hex text, to pass through the set's store. CuPy 14 gives bytes;
    older releases a tuple of signed chars."""
    raw = binding().get_unique_id()
    return bytes(raw if isinstance(raw, (bytes, bytearray)) else (v % 256 for v in raw)).hex()


class NcclComm:
    """One group's NCCL communicator on one rank, and the stream its calls go to."""

    def __init__(self, uid: str, rank: int, size: int, stream: torch.cuda.Stream):
        self.module = binding()
        raw = bytes.fromhex(uid)
        try:
            self.handle = self.module.NcclCommunicator(size, raw, rank)
        except TypeError:  # CuPy before 14 takes the id as a tuple of signed chars
            signed = tuple(b - 256 if b > 127 else b for b in raw)
            self.handle = self.module.NcclCommunicator(size, signed, rank)
        self.rank = rank
        self.size = size
        self.stream = int(stream.cuda_stream)

    def destroy(self) -> None:
        self.handle.destroy()

    def grouped(
        self, sends: Sequence[tuple[torch.Tensor, int]], recvs: Sequence[tuple[torch.Tensor, int]]
    ) -> Step:
        """Sends and receives in one NCCL group (to itself too: NCCL copies that alongside)."""
        calls = [
            partial(self.handle.send, t.data_ptr(), t.numel(), DTYPES[t.dtype], peer, self.stream)
            for t, peer in sends
        ]
        calls += [
            partial(self.handle.recv, t.data_ptr(), t.numel(), DTYPES[t.dtype], peer, self.stream)
            for t, peer in recvs
        ]
        start, end = self.module.groupStart, self.module.groupEnd

        def step() -> None:
            start()
            for call in calls:
                call()
            end()

        return step

    def all_reduce(self, data: torch.Tensor) -> Step:
        ptr = data.data_ptr()
        return partial(
            self.handle.allReduce, ptr, ptr, data.numel(), DTYPES[data.dtype], SUM, self.stream
        )

    def reduce(self, data: torch.Tensor, root: int) -> Step:
        ptr = data.data_ptr()
        dtype = DTYPES[data.dtype]
        return partial(self.handle.reduce, ptr, ptr, data.numel(), dtype, SUM, root, self.stream)

    def broadcast(self, data: torch.Tensor, root: int) -> Step:
        ptr = data.data_ptr()
        dtype = DTYPES[data.dtype]
        return partial(self.handle.broadcast, ptr, ptr, data.numel(), dtype, root, self.stream)

    def all_gather(self, out: torch.Tensor, mine: torch.Tensor) -> Step:
        dtype = DTYPES[mine.dtype]
        return partial(
            self.handle.allGather, mine.data_ptr(), out.data_ptr(), mine.numel(), dtype, self.stream
        )

    def reduce_scatter(self, out: torch.Tensor, whole: torch.Tensor) -> Step:
        dtype = DTYPES[out.dtype]
        return partial(
            self.handle.reduceScatter,
            whole.data_ptr(),
            out.data_ptr(),
            out.numel(),
            dtype,
            SUM,
            self.stream,
        )
