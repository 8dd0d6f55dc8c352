"""The rank: one process per GPU (or CPU rank) that the driver steps through a sweep, through its
Ray actor. It keeps the rank's device, its groups (`groups.py`) and the point it holds
(`buffers.py`), and times that point (`execution.py`).

Every rank of a set joins the world group together; everything after runs on one group's
members only, and a point is executed only once every member prepared it. So no rank ever waits
in a collective that a peer, out of memory, never entered (docs/ARCHITECTURE.md, "Inside the
rooms")."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from contextlib import nullcontext

import torch

from sweeper.ops.registry import REGISTRY, configure_moe, load_plugins
from sweeper.planning.sizing import scratch_bytes
from sweeper.rank import data
from sweeper.rank.buffers import (
    Ready,
    Registration,
    allocate,
    gpu_reserve_bytes,
    is_oom,
    registers,
)
from sweeper.rank.copy_matrix import copy_matrix
from sweeper.rank.execution import Execution
from sweeper.rank.groups import Groups
from sweeper.rank.nccl_debug import NcclDebug, nccl_variables
from sweeper.rank.nccl_view import NcclViews
from sweeper.rank.timing import CudaTimer, HostTimer, Timer
from sweeper.telemetry import Watch
from sweeper.topology import nvml_driver_version
from sweeper.wire import (
    Backend,
    Copied,
    Engine,
    Limits,
    MoeLayer,
    Point,
    Prepared,
    RankInfo,
    RankTimings,
    RayFacts,
    Status,
    Versions,
)

PCI_PARTS = ("domain", "bus", "device")


class Rank:
    """A rank of an actor set. `rank/process.py` runs it in a process of its actor's own."""

    def __init__(
        self,
        backend: Backend,
        plugins: tuple[str, ...] = (),
        limits: Limits | None = None,
        moe: MoeLayer | None = None,
        engines: tuple[Engine, ...] = (Engine.TORCH,),
        *,
        facts: RayFacts,
    ) -> None:
        self.facts = facts
        cuda = backend == Backend.NCCL
        # before NCCL's first call: it reads its debug variables once, as it first logs
        self.nccl_debug = NcclDebug.start() if cuda else None
        self.nccl_view = NcclViews.start() if cuda else None  # NCCL's tuner: before NCCL starts
        load_plugins(plugins)
        if moe is not None:
            configure_moe(moe)
        self.limits = limits or Limits()
        self.device = self._device(facts.gpu_ids) if cuda else torch.device("cpu")
        if self.device.type == "cuda" and self.limits.mem_limit is not None:
            # The allocator itself refuses past the cap, so a small cap gives real OOMs.
            total = torch.cuda.get_device_properties(self.device).total_memory
            cap = min(1.0, self.limits.mem_limit.of(total) / total)
            torch.cuda.set_per_process_memory_fraction(cap, self.device)
        self.timer: Timer = CudaTimer(self.device) if cuda else HostTimer()
        # Points run on a stream of their own, as nccl-tests' ranks do: the stream the nccl
        # engine's bound calls name, graphs are captured and replayed on, and events time.
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self.watch = Watch.open(self._gpu_uuid()) if self.device.type == "cuda" else None
        self.groups = Groups(
            backend, self.device, self.stream, engines, self.nccl_debug, self.nccl_view
        )
        self.ready: Ready | None = None

    @property
    def rank(self) -> int:
        return self.groups.rank

    @staticmethod
    def _device(gpu_ids: tuple[str, ...]) -> torch.device:
        # Ray's GPU id names a device of the node as CUDA numbers them; when the process sees
        # a subset (CUDA_VISIBLE_DEVICES, which Ray narrows to that id unless told not to),
        # CUDA renumbers from 0 in that list's order.
        gpu_id = gpu_ids[0]
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        index = [i.strip() for i in visible.split(",")].index(gpu_id) if visible else int(gpu_id)
        torch.cuda.set_device(index)
        return torch.device("cuda", index)

    def _gpu_uuid(self) -> str:
        return f"GPU-{torch.cuda.get_device_properties(self.device).uuid}"

    def info(self) -> RankInfo:
        uuid = bus = None
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            uuid = self._gpu_uuid()
            domain, bus_id, device = (getattr(props, f"pci_{k}_id", 0) for k in PCI_PARTS)
            bus = f"{domain:08x}:{bus_id:02x}:{device:02x}.0"
        return RankInfo(
            rank=self.rank,
            host=socket.gethostname(),
            ip=self.facts.ip,
            node_id=self.facts.node_id,
            pid=os.getpid(),
            device=str(self.device),
            ray_gpu_ids=self.facts.gpu_ids,
            gpu_uuid=uuid,
            gpu_pci_bus_id=bus,
            nccl_env=nccl_variables(os.environ, self._added()),
        )

    def _added(self) -> tuple[str, ...]:
        """The NCCL variables sweeper set in this process (its debug output, its tuner
        observer): the rows' nccl_env list the user's alone."""
        debug = self.nccl_debug.added if self.nccl_debug is not None else ()
        return (*debug, *(self.nccl_view.added if self.nccl_view is not None else ()))

    def versions(self) -> Versions:
        cuda = self.device.type == "cuda"
        return Versions(
            torch=torch.__version__,
            nccl=".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
            cuda=torch.version.cuda if cuda else None,
            driver=nvml_driver_version() if cuda else None,
            gpu_model=torch.cuda.get_device_name(self.device) if cuda else None,
        )

    def listen(self, host: str) -> int:
        """Rank 0 only, before join: the rendezvous store's port at `host`, one the OS
        picks."""
        return self.groups.listen(host)

    def join(
        self, rank: int, world_size: int, host: str, port: int, timeout_s: float, bind: str
    ) -> None:
        """Join a world of `world_size` ranks as `rank`; every rank of the set calls this at
        the same time. Its sockets listen at `bind`."""
        self.groups.join(rank, world_size, host, port, timeout_s, bind)

    def open_group(self, group_id: str, ranks: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        self.groups.open(group_id, ranks, nodes)

    def close_group(self, group_id: str) -> None:
        if self.ready is not None and self.ready.point.group_id == group_id:
            self.release()  # its buffers may be registered with the communicators going now
        self.groups.close(group_id)

    def leave(self) -> None:
        """Drop every group and the world, to join a new world with replaced peers (a
        failed group's actors) or without a node's ranks; this rank's process, device and
        buffers' allocator stay."""
        self.release()
        self.groups.leave()

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
        comm = self.groups.torch[point.group_id]
        dtype = getattr(torch, point.dtype)
        layout = collective.layout(point.count, comm.size, comm.rank)
        if self.device.type != "cuda":  # host memory is shared: keep to this rank's share
            need = layout.elements * dtype.itemsize + scratch_bytes("cpu", layout.elements)
            if need > (budget := self.budget()):
                why = (
                    f"rank {self.rank}: needs {need / 2**20:.1f} MiB, over its budget of "
                    f"{budget / 2**20:.1f} MiB (--mem-limit raises it)"
                )
                return Prepared(status=Status.OOM, error=why)
        levels = data.levels(dtype, comm.size, collective.reduces)
        registers_buffers = point.timing.register and registers(collective)
        registration = Registration(comm.group, self.device) if registers_buffers else None
        try:  # the fill's scratch is memory too: running out there is the same answer
            with (
                torch.cuda.use_mem_pool(registration.pool, self.device)
                if registration
                else nullcontext()
            ):
                buffers = allocate(collective, layout, dtype, self.device)
            self.ready = Ready(
                point=point,
                collective=collective,
                comm=comm,
                layout=layout,
                buffers=buffers,
                levels=levels,
                device=self.device,
                registration=registration,
            )
            if registration is not None:
                registration.register(self.groups.nccl.get(point.group_id))
            self.ready.fill()
        except Exception as exc:
            if not is_oom(exc):
                raise
            self.release()
            why = f"rank {self.rank}: {str(exc).splitlines()[0]}"
            return Prepared(status=Status.OOM, error=why)
        return Prepared(status=Status.OK)

    def execute(self) -> RankTimings:
        """Time the point with each engine and in each launch mode it asks for (`Execution`).
        On a GPU everything runs on the rank's own stream, after the fill (on the default
        stream) is done, and NVML is read before and after it all."""
        assert self.ready is not None, "execute() before a successful prepare()"
        r = self.ready
        if r.collective.setup is not None:
            r.collective.setup(r.buffers, r.comm)
        meter = self.watch.energy_mj if self.watch is not None else None
        execution = Execution(r, self.groups, self.timer, self.stream, self.device, meter)
        if self.stream is None:
            return RankTimings(timed=execution.run())
        watch = self.watch
        before = watch.start() if watch is not None else None
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            timed = execution.run()
        telemetry = (
            watch.since(before, r.point.timing.nvlink_every_s)
            if watch is not None and before
            else None
        )
        return RankTimings(timed=timed, telemetry=telemetry)

    def copy_matrix(self, sizes: Sequence[int], iters: int, warmup: int) -> list[Copied]:
        """Peer copies among every GPU this rank sees (`copy_matrix.copy_matrix`)."""
        self.release()
        return copy_matrix(sizes, iters, warmup)

    def release(self) -> None:
        """Drop this point's buffers (and, on GPU, give the memory back to the allocator)."""
        registration = self.ready.registration if self.ready is not None else None
        if registration is not None:
            registration.close()
        self.ready = None
        del registration  # the last reference to its pool: emptied below with the rest
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
