"""A point's buffers on one rank: allocated (from NCCL's allocator and registered with the
group's communicators, under --register-buffers), filled with the point's pattern, checked
after one iteration, and given back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch
import torch.distributed as dist

from sweeper.ops.descriptor import Buffers, Collective, Layout, Step
from sweeper.rank import data
from sweeper.rank.nccl import NcclComm
from sweeper.rank.preflight import no_nccl_allocator
from sweeper.rank.torch_engine import TorchComm
from sweeper.wire import Kind, Point

if TYPE_CHECKING:
    from torch._C._distributed_c10d import ProcessGroupNCCL


def gpu_reserve_bytes(total_bytes: int) -> int:
    """Device memory kept free under a budget: allocator rounding, NCCL's lazy buffers."""
    return max(256 * 2**20, total_bytes // 100)


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError))


def registers(collective: Collective) -> bool:
    """Whether --register-buffers applies: not to copies (no communicator moves them), nor to
    symmetric-memory algorithms (their buffers are symmetric memory, registered as such)."""
    return collective.kind != Kind.COPY and not collective.symmetric


class Registration:
    """A point's buffers from NCCL's allocator (ncclMemAlloc, through a torch MemPool), each
    registered with the group's communicators (ncclCommRegister): torch's through
    `register_mem_pool`, the nccl engine's directly. NCCL then moves data into a peer's
    buffer itself instead of through its staging buffers, eagerly and inside CUDA graphs, as
    with nccl-tests -R 1 (nccl-tests' buffers are always ncclMemAlloc's, which NCCL also
    registers as a graph captures them; torch's cudaMalloc'd ones it does not)."""

    def __init__(self, group: dist.ProcessGroup, device: torch.device) -> None:
        self.backend = cast("ProcessGroupNCCL", group._get_backend(device))
        if not self.backend.supports_tensor_alloc(device):
            raise RuntimeError(no_nccl_allocator(torch.cuda.get_device_name(device)))
        self.pool = torch.cuda.MemPool(self.backend.mem_allocator)
        self.device = device
        self.direct: NcclComm | None = None
        self.handles: list[int] = []
        self.registered = False

    def register(self, direct: NcclComm | None) -> None:
        self.backend.register_mem_pool(self.pool)
        self.registered = True
        if direct is not None:
            # Segment by segment, as torch registers the pool: the caching allocator carves
            # small buffers out of one segment, and a send/recv whose two buffers were
            # registered one by one inside it hung (2x H200, NCCL 2.28.9, 1 MiB).
            self.direct = direct
            self.handles = [
                direct.register(s["address"], s["total_size"])
                for s in self.pool.snapshot()
                if s["device"] == self.device.index
            ]

    def close(self) -> None:
        """Deregister everywhere; the pool's memory goes back once its tensors are gone."""
        if not self.registered:
            return
        if self.direct is not None:
            for handle in self.handles:
                self.direct.deregister(handle)
        self.backend.deregister_mem_pool(self.pool)


def allocate(
    collective: Collective, layout: Layout, dtype: torch.dtype, device: torch.device
) -> Buffers:
    def empty(elements: int) -> torch.Tensor:
        return torch.empty(elements, dtype=dtype, device=device)

    if collective.symmetric:
        from torch.distributed import _symmetric_memory as symm_mem

        send = symm_mem.empty(layout.send, dtype=dtype, device=device)
    else:
        send = empty(layout.send)
    recv = empty(layout.recv) if layout.recv else None
    return Buffers(send, recv, empty(layout.work) if layout.work else None)


@dataclass
class Ready:
    """A prepared point: its buffers on this rank, and what fills and checks them."""

    point: Point
    collective: Collective
    comm: TorchComm
    layout: Layout
    buffers: Buffers
    levels: int
    device: torch.device
    registration: Registration | None = None

    def fill(self) -> None:
        seed = self.point.timing.seed
        data.fill(self.buffers.send, self.layout.inputs, self.comm.size, self.levels, seed)
        if self.buffers.recv is not None:
            data.poison(self.buffers.recv)

    def check(self, step: Step) -> int | None:
        """Elements wrong after one more iteration on freshly filled buffers (None: nothing
        to check on this rank)."""
        self.fill()
        step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if not self.layout.expected:
            return None
        seed = self.point.timing.seed
        return data.count_wrong(
            self.buffers.out, self.layout.expected, self.comm.size, self.levels, seed
        )
