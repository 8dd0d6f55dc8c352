"""The rank actor: one process per GPU (or CPU rank) that the driver steps through a sweep.

Every step is a method the driver calls on all ranks of a set and waits for: join the
world group, open a subgroup, prepare a point (allocate and fill; report success), then,
only when every rank of the group prepared, execute it. So no rank ever sits in a
collective that a peer did not enter because it ran out of memory.
"""

from __future__ import annotations

import datetime
import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed import TCPStore  # type: ignore[attr-defined]

from sweeper import data
from sweeper.collectives import REGISTRY, Buffers, Collective, Comm, Layout, load_plugins
from sweeper.plan import Point
from sweeper.spec import MemLimit
from sweeper.timing import TARGET_BLOCK_S, Block, CudaTimer, HostTimer, Timer, calibrate
from sweeper.topology import RankInfo, Versions, nvml_driver_version


@dataclass(frozen=True)
class Prepared:
    status: str  # "ok" or "oom"
    error: str | None = None


@dataclass(frozen=True)
class Measured:
    block: Block
    warmup_iters: int
    n_wrong: int | None  # None: not checked here (no output on this rank, or --no-check)


@dataclass(frozen=True)
class Limits:
    """How much memory a rank may use: `--mem-limit`, and for CPU ranks their share of the
    node's memory (Ray's `memory` resource of the node over the ranks placed on it)."""

    mem_limit: MemLimit | None = None
    host_share_bytes: int = 0


def gpu_reserve_bytes(total_bytes: int) -> int:
    """Device memory kept free under a budget: allocator rounding, NCCL's lazy buffers."""
    return max(256 * 2**20, total_bytes // 100)


@dataclass
class _Ready:
    point: Point
    collective: Collective
    comm: Comm
    layout: Layout
    buffers: Buffers
    levels: int


PCI_PARTS = ("domain", "bus", "device")


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError))


class Rank:
    """A rank of an actor set. `cluster.py` runs it as a Ray actor."""

    def __init__(
        self,
        world_size: int,
        backend: str,
        plugins: tuple[str, ...] = (),
        limits: Limits | None = None,
    ) -> None:
        load_plugins(plugins)
        self.limits = limits or Limits()
        self.rank = -1  # given at join(), once the driver has put the set in physical order
        self.world_size = world_size
        self.backend = backend
        self.device = self._device() if backend == "nccl" else torch.device("cpu")
        if self.device.type == "cuda" and self.limits.mem_limit is not None:
            # The allocator itself refuses past the cap, so a small cap gives real OOMs.
            total = torch.cuda.get_device_properties(self.device).total_memory
            cap = min(1.0, self.limits.mem_limit.of(total) / total)
            torch.cuda.set_per_process_memory_fraction(cap, self.device)
        self.timer: Timer = CudaTimer(self.device) if backend == "nccl" else HostTimer()
        self.store: TCPStore | None = None
        self.comms: dict[str, Comm] = {}
        self.ready: _Ready | None = None

    @staticmethod
    def _device() -> torch.device:
        import ray

        # Ray's GPU id names a device of the node as CUDA numbers them; when the process sees
        # a subset (CUDA_VISIBLE_DEVICES, which Ray narrows to that id unless told not to),
        # CUDA renumbers from 0 in that list's order.
        gpu_id = str(ray.get_gpu_ids()[0])
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        index = [i.strip() for i in visible.split(",")].index(gpu_id) if visible else int(gpu_id)
        torch.cuda.set_device(index)
        return torch.device("cuda", index)

    def info(self) -> RankInfo:
        import ray

        context = ray.get_runtime_context()
        uuid = bus = None
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            uuid = f"GPU-{props.uuid}"
            domain, bus_id, device = (
                getattr(props, f"pci_{k}_id", 0) for k in ("domain", "bus", "device")
            )
            bus = f"{domain:08x}:{bus_id:02x}:{device:02x}.0"
        return RankInfo(
            rank=self.rank,
            host=socket.gethostname(),
            ip=ray.util.get_node_ip_address(),
            node_id=context.get_node_id(),
            pid=os.getpid(),
            device=str(self.device),
            ray_gpu_ids=tuple(str(i) for i in ray.get_gpu_ids()),
            gpu_uuid=uuid,
            gpu_pci_bus_id=bus,
            nccl_env=tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("NCCL_"))),
        )

    def versions(self) -> Versions:
        cuda = self.device.type == "cuda"
        return Versions(
            torch=torch.__version__,
            nccl=".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
            cuda=torch.version.cuda if cuda else None,
            driver=nvml_driver_version() if cuda else None,
            gpu_model=torch.cuda.get_device_name(self.device) if cuda else None,
        )

    def listen(self) -> int:
        """Rank 0 only, before join: start the rendezvous store on a port the OS picks."""
        self.store = TCPStore("0.0.0.0", 0, self.world_size, True, wait_for_workers=False)
        return int(self.store.port)

    def join(self, rank: int, host: str, port: int, timeout_s: float) -> None:
        """Join the world group as `rank`; every rank of the set calls this at the same time."""
        self.rank = rank
        if self.store is None:
            self.store = TCPStore(host, port, self.world_size, False)
        dist.init_process_group(
            self.backend,
            store=self.store,
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
            device_id=self.device if self.device.type == "cuda" else None,
        )
        world = dist.group.WORLD
        assert world is not None
        self.comms["world"] = Comm(world, self.rank, self.world_size)

    def open_group(self, group_id: str, ranks: tuple[int, ...]) -> None:
        """Every rank of the set calls this in the same order, members or not (new_group's rule:
        with a device-bound NCCL world group, non-members take part in the communicator split).
        A group of every rank is the world group itself."""
        if len(ranks) == self.world_size:
            self.comms[group_id] = self.comms["world"]
            return
        group = dist.new_group(list(ranks))
        if self.rank in ranks:
            self.comms[group_id] = Comm(group, ranks.index(self.rank), len(ranks))

    def close_group(self, group_id: str) -> None:
        comm = self.comms.pop(group_id, None)
        if comm is not None and comm.group is not dist.group.WORLD:
            dist.destroy_process_group(comm.group)

    def budget(self) -> int:
        """Bytes this rank can still give a point: free memory (after a warm-up, so NCCL's own
        buffers are taken) less a reserve, within --mem-limit; on CPU, its share of the node."""
        self.release()
        if self.device.type != "cuda":
            share = self.limits.host_share_bytes
            limit = self.limits.mem_limit
            return share if limit is None else min(share, limit.of(share))
        free, total = torch.cuda.mem_get_info(self.device)
        budget = free - gpu_reserve_bytes(total)
        if self.limits.mem_limit is not None:
            allowed = self.limits.mem_limit.of(total) - torch.cuda.memory_reserved(self.device)
            budget = min(budget, allowed)
        return max(0, budget)

    def prepare(self, point: Point) -> Prepared:
        """Allocate and fill this rank's buffers; 'oom' (and nothing held) if they do not fit."""
        self.release()
        collective = REGISTRY[point.op]
        comm = self.comms[point.group_id]
        dtype = getattr(torch, point.dtype)
        layout = collective.layout(point.count, comm.size, comm.rank)
        if self.device.type != "cuda":  # host memory is shared: keep to this rank's share
            need = layout.elements * dtype.itemsize + data.scratch_bytes("cpu", layout.elements)
            if need > (budget := self.budget()):
                return Prepared("oom", f"rank {self.rank}: needs {need} B, budget {budget} B")
        try:
            send = torch.empty(layout.send, dtype=dtype, device=self.device)
            recv = (
                torch.empty(layout.recv, dtype=dtype, device=self.device) if layout.recv else None
            )
        except Exception as exc:
            if _is_oom(exc):
                return Prepared("oom", f"rank {self.rank}: {str(exc).splitlines()[0]}")
            raise
        levels = data.levels(dtype, comm.size, collective.reduces)
        self.ready = _Ready(point, collective, comm, layout, Buffers(send, recv), levels)
        self._fill()
        return Prepared("ok")

    def _fill(self) -> None:
        assert self.ready is not None
        r = self.ready
        data.fill(r.buffers.send, r.layout.inputs, r.comm.size, r.levels, r.point.timing.seed)
        if r.buffers.recv is not None:
            data.poison(r.buffers.recv)

    def execute(self) -> Measured:
        """Warm up, time a block of back-to-back iterations, then check one more."""
        assert self.ready is not None, "execute() before a successful prepare()"
        r = self.ready
        timing = r.point.timing

        def step() -> None:
            r.collective.run(r.buffers, r.comm)

        warm = timing.warmup or 0
        for _ in range(warm):
            step()
        iters = timing.iters
        if iters is None or timing.warmup is None:
            extra, calibrated = calibrate(self.timer, step, self._agree, TARGET_BLOCK_S)
            warm += extra
            iters = iters or calibrated
        self._barrier()
        block = self.timer.time(step, iters, timing.samples)
        n_wrong = self._check() if timing.check else None
        return Measured(block, warm, n_wrong)

    def _check(self) -> int | None:
        assert self.ready is not None
        r = self.ready
        self._fill()
        r.collective.run(r.buffers, r.comm)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if not r.layout.expected:
            return None
        seed = r.point.timing.seed
        return data.count_wrong(r.buffers.out, r.layout.expected, r.comm.size, r.levels, seed)

    def _agree(self, seconds: float) -> float:
        """The slowest rank's time, so that every rank takes the same decision from it."""
        assert self.ready is not None
        value = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX, group=self.ready.comm.group)
        return float(value.item())

    def _barrier(self) -> None:
        assert self.ready is not None
        group = self.ready.comm.group
        if self.device.type == "cuda":
            dist.barrier(group=group, device_ids=[self.device.index])
        else:
            dist.barrier(group=group)

    def release(self) -> None:
        """Drop this point's buffers (and, on GPU, give the memory back to the allocator)."""
        self.ready = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
