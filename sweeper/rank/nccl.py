"""The nccl engine: NCCL called directly, as nccl-tests and vLLM's pynccl call it, on the same
torch tensors and the rank's work stream, with nothing of torch.distributed between.

The binding is nccl4py's low-level `nccl.bindings.nccl` (the `sweeper-bench[nccl]` extra):
docs/ARCHITECTURE.md, "Inside the rooms", says why. Every step is bound once per point, so an
iteration is one call into the binding (a few, in one NCCL group, for point-to-point).
`NcclComm` implements `ops.descriptor.Comm`, as `torch_engine.TorchComm` does."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from sweeper.ops.descriptor import Pairs, Step, blocks, rooted

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
# The first NCCL with ncclGather, ncclScatter and ncclAlltoAll (NCCL_VERSION_CODE 2.28.0);
# before it nccl-tests, and this engine, issue them as grouped sends and receives.
ROOTED_AND_ALLTOALL = 22800


def binding() -> Any:
    """nccl4py's low-level module; ImportError (with the extra to install) where it is missing."""
    try:
        import nccl.bindings.nccl as module
    except ImportError as exc:
        raise ImportError(
            f"the nccl engine needs sweeper's nccl extra (pip install '.[nccl]' in its "
            f"clone) ({exc})"
        ) from None
    return module


def unique_id() -> str:
    """A new ncclUniqueId (128 bytes) as hex text, to pass through the set's store."""
    return bytes(binding().get_unique_id()).hex()


class NcclComm:
    """One group's NCCL communicator on one rank, and the stream its calls go to."""

    group = None  # no torch.distributed between: torch-only operations do not run here

    def __init__(
        self, uid: str, rank: int, size: int, nodes: tuple[int, ...], stream: torch.cuda.Stream
    ):
        self.nccl = binding()
        with torch.cuda.device(stream.device):  # NCCL binds a communicator to the current GPU
            self.handle = self.nccl.comm_init_rank_scalable(
                size, rank, 1, bytearray.fromhex(uid), 0
            )
        self.rank = rank
        self.size = size
        self.nodes = nodes
        self.stream = int(stream.cuda_stream)
        self.native = self.nccl.get_version() >= ROOTED_AND_ALLTOALL

    def destroy(self) -> None:
        self.nccl.comm_destroy(self.handle)

    def register(self, address: int, nbytes: int) -> int:
        """ncclCommRegister: NCCL may move data straight into this memory; a handle to drop."""
        return int(self.nccl.comm_register(self.handle, address, nbytes))

    def deregister(self, handle: int) -> None:
        self.nccl.comm_deregister(self.handle, handle)

    def grouped(self, sends: Pairs, recvs: Pairs) -> Step:
        """Sends and receives in one NCCL group (to itself too: NCCL copies that alongside)."""
        nccl, comm, stream = self.nccl, self.handle, self.stream
        calls = [
            partial(nccl.send, t.data_ptr(), t.numel(), DTYPES[t.dtype], peer, comm, stream)
            for t, peer in sends
        ]
        calls += [
            partial(nccl.recv, t.data_ptr(), t.numel(), DTYPES[t.dtype], peer, comm, stream)
            for t, peer in recvs
        ]
        start, end = nccl.group_start, nccl.group_end

        def step() -> None:
            start()
            for call in calls:
                call()
            end()

        return step

    def _call(
        self, call: Any, send: torch.Tensor, recv: torch.Tensor, count: int, *args: int
    ) -> Step:
        """One NCCL call from `send` into `recv`: `count` elements of their type as NCCL
        counts them for the call, then `args` (the reduction, the root)."""
        dtype = DTYPES[send.dtype]
        return partial(
            call, send.data_ptr(), recv.data_ptr(), count, dtype, *args, self.handle, self.stream
        )

    def all_reduce(self, data: torch.Tensor) -> Step:
        return self._call(self.nccl.all_reduce, data, data, data.numel(), SUM)

    def reduce(self, data: torch.Tensor, root: int) -> Step:
        return self._call(self.nccl.reduce, data, data, data.numel(), SUM, root)

    def broadcast(self, data: torch.Tensor, root: int) -> Step:
        return self._call(self.nccl.broadcast, data, data, data.numel(), root)

    def all_gather(self, out: torch.Tensor, mine: torch.Tensor) -> Step:
        return self._call(self.nccl.all_gather, mine, out, mine.numel())

    def reduce_scatter(self, out: torch.Tensor, whole: torch.Tensor) -> Step:
        return self._call(self.nccl.reduce_scatter, whole, out, out.numel(), SUM)

    def gather(self, out: torch.Tensor, mine: torch.Tensor, root: int) -> Step:
        return self._rooted(out, mine, root, gather=True)

    def scatter(self, out: torch.Tensor, whole: torch.Tensor, root: int) -> Step:
        return self._rooted(whole, out, root, gather=False)

    def _rooted(self, whole: torch.Tensor, mine: torch.Tensor, root: int, gather: bool) -> Step:
        """ncclGather (or ncclScatter) of each rank's `mine`, its chunk of the root's `whole`;
        before NCCL 2.28, grouped sends and receives."""
        if not self.native:
            return rooted(self, whole, mine, root, gather)
        if gather:
            return self._call(self.nccl.gather, mine, whole, mine.numel(), root)
        return self._call(self.nccl.scatter, whole, mine, mine.numel(), root)

    def all_to_all(self, out: torch.Tensor, whole: torch.Tensor) -> Step:
        if not self.native:
            sends, recvs = blocks(whole, self.size).unbind(0), blocks(out, self.size).unbind(0)
            return self.grouped(
                [(c, p) for p, c in enumerate(sends)], [(c, p) for p, c in enumerate(recvs)]
            )
        return self._call(self.nccl.allto_all, whole, out, out.numel() // self.size)
