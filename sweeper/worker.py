"""The rank: one process per GPU (or CPU rank) that the driver steps through a sweep, started
and relayed to by its Ray actor (host.py).

Every rank of a set joins the world group together (and leaves it together when failed
peers are replaced). Everything after that is called on one group's members only, while
other groups of the wave run on other ranks: open the group (local synchronization, no
world-wide step), prepare a point (allocate and fill; report success), then, only when
every member prepared, execute it; release, close. The driver waits on the calls of a whole
wave at once, never on a rank outside the group. So no rank ever sits in a collective that
a peer did not enter because it ran out of memory.
"""

from __future__ import annotations

import datetime
import gc
import math
import os
import socket
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from itertools import combinations, permutations
from typing import TYPE_CHECKING, cast

import torch
import torch.distributed as dist
from torch.distributed import TCPStore  # type: ignore[attr-defined]

from sweeper import data
from sweeper.collectives import REGISTRY, configure_moe, load_plugins
from sweeper.descriptor import Buffers, Collective, Comm, Layout, Step
from sweeper.plan import Point, Timing
from sweeper.spec import Limits, MoeSpec
from sweeper.telemetry import Reading, Watch
from sweeper.timing import (
    GRAPH_ITERS,
    Block,
    CudaTimer,
    Eager,
    Graph,
    HostTimer,
    Launcher,
    Timer,
    block_target_s,
    calibrate,
    graph_unit,
)
from sweeper.topology import nvml_driver_version
from sweeper.wire import RankInfo, RayFacts, Versions

if TYPE_CHECKING:
    from torch._C._distributed_c10d import ProcessGroupNCCL

    from sweeper.nccl import NcclComm


@dataclass(frozen=True)
class Prepared:
    status: str  # "ok" or "oom"
    error: str | None = None


@dataclass(frozen=True)
class Timed:
    """A point's blocks in one engine and launch mode on one rank."""

    engine: str  # torch (torch.distributed) or nccl (NCCL called directly)
    launch: str  # graph or eager: how the timed iterations were issued
    blocks: tuple[Block, ...]
    warmup_iters: int
    n_wrong: int | None = None  # None: not checked here (no output on this rank, --no-check)
    note: str | None = None  # why it ran eagerly where a graph was asked for
    skipped: str | None = None  # why there is nothing to time (then there are no blocks)
    registered: bool = False  # its buffers registered with this engine's communicator


@dataclass(frozen=True)
class Measured:
    timed: tuple[Timed, ...]  # per engine, per launch mode, in the order the point asks
    telemetry: Reading | None = None  # the GPU around the point (None: a CPU rank, no NVML)


def gpu_reserve_bytes(total_bytes: int) -> int:
    """Device memory kept free under a budget: allocator rounding, NCCL's lazy buffers."""
    return max(256 * 2**20, total_bytes // 100)


@dataclass(frozen=True)
class Copied:
    """Peer copies timed together: `seconds[i]` is the copy from `src` to `dsts[i]`, per
    iteration (for `bi`, the two directions timed as one)."""

    kind: str  # uni, bi, fanout
    src: str  # GPU UUIDs
    dsts: tuple[str, ...]
    size_bytes: int
    seconds: tuple[float, ...]


def _time_copies(
    copies: Sequence[tuple[int, int]],
    src: Sequence[torch.Tensor],
    dst: Sequence[Sequence[torch.Tensor]],
    streams: Sequence[Sequence[torch.cuda.Stream]],
    iters: int,
    warmup: int,
) -> tuple[float, ...]:
    """Each copy a->b on its own stream of device a (so concurrent copies truly overlap),
    timed with events on that stream; `bi` takes the span of both as one time."""
    for _ in range(warmup):
        for a, b in copies:
            with torch.cuda.stream(streams[a][b]):
                dst[a][b].copy_(src[a], non_blocking=True)
    for device in {a for a, _ in copies} | {b for _, b in copies}:
        torch.cuda.synchronize(device)
    marks = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in copies
    ]
    for (a, b), (start, _) in zip(copies, marks, strict=True):
        start.record(streams[a][b])
    for _ in range(iters):
        for a, b in copies:
            with torch.cuda.stream(streams[a][b]):
                dst[a][b].copy_(src[a], non_blocking=True)
    for (a, b), (_, end) in zip(copies, marks, strict=True):
        end.record(streams[a][b])
    for _, end in marks:
        end.synchronize()
    seconds = tuple(start.elapsed_time(end) / 1e3 / iters for start, end in marks)
    if len(copies) == 2 and copies[0] == copies[1][::-1]:  # both ways: one link, one time
        return (max(seconds),)
    return seconds


@dataclass
class _Ready:
    point: Point
    collective: Collective
    comm: Comm
    layout: Layout
    buffers: Buffers
    levels: int
    registration: _Registration | None = None


def no_nccl_allocator(gpu: str) -> str:
    """Why --register-buffers cannot run on a GPU model: torch hands out NCCL's allocator only
    where the GPU supports multicast (one H100 of a cloud machine does not), whatever
    NCCL_NVLS_ENABLE says."""
    return (
        f"--register-buffers: torch cannot allocate from NCCL (ncclMemAlloc) on {gpu}: "
        "it needs the GPU's multicast support"
    )


def local_nccl_allocators() -> dict[str, bool] | None:
    """For each GPU this process sees, by UUID as NVML names it: whether torch can allocate
    from NCCL there, as --register-buffers needs (torch's own test, on a one-rank group that
    never makes a communicator). None where torch has no NCCL or sees no GPU."""
    if not (torch.cuda.is_available() and dist.is_nccl_available()):
        return None
    from torch.distributed import HashStore, ProcessGroupNCCL  # type: ignore[attr-defined]

    backend = ProcessGroupNCCL(HashStore(), 0, 1, ProcessGroupNCCL.Options())
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return {
        f"GPU-{torch.cuda.get_device_properties(d).uuid}": bool(backend.supports_tensor_alloc(d))
        for d in devices
    }


class _Registration:
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


PCI_PARTS = ("domain", "bus", "device")
EMPTY_GRAPH = (
    "nothing to time: the CUDA graph holds no GPU work (NCCL moves nothing for an in-place "
    "operation on one rank; the eager row shows what the call costs)"
)


def _registers(collective: Collective) -> bool:
    """Whether --register-buffers applies: not to copies (no communicator moves them), nor to
    symmetric-memory algorithms (their buffers are symmetric memory, registered as such)."""
    return collective.kind != "copy" and not collective.symmetric


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError))


class Rank:
    """A rank of an actor set. `host.py` runs it in a process of its actor's own."""

    def __init__(
        self,
        world_size: int,
        backend: str,
        plugins: tuple[str, ...] = (),
        limits: Limits | None = None,
        moe: MoeSpec | None = None,
        nccl_engine: bool = False,
        *,
        facts: RayFacts,
    ) -> None:
        self.facts = facts
        load_plugins(plugins)
        if moe is not None:
            configure_moe(moe)
        self.limits = limits or Limits()
        self.rank = -1  # given at join(), once the driver has put the set in physical order
        self.world_size = world_size
        self.backend = backend
        self.device = self._device(facts.gpu_ids) if backend == "nccl" else torch.device("cpu")
        if self.device.type == "cuda" and self.limits.mem_limit is not None:
            # The allocator itself refuses past the cap, so a small cap gives real OOMs.
            total = torch.cuda.get_device_properties(self.device).total_memory
            cap = min(1.0, self.limits.mem_limit.of(total) / total)
            torch.cuda.set_per_process_memory_fraction(cap, self.device)
        self.timer: Timer = CudaTimer(self.device) if backend == "nccl" else HostTimer()
        # Points run on a stream of their own, as nccl-tests' ranks do: the stream the nccl
        # engine's bound calls name, graphs are captured and replayed on, and events time.
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self.watch = Watch.open(self._gpu_uuid()) if self.device.type == "cuda" else None
        self.nccl_engine = nccl_engine
        self.store: TCPStore | None = None
        self.comms: dict[str, Comm] = {}
        self.opened: set[tuple[int, ...]] = set()  # rank sets with a group in this world
        self.nccl_comms: dict[str, NcclComm] = {}
        self.ready: _Ready | None = None

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
            domain, bus_id, device = (
                getattr(props, f"pci_{k}_id", 0) for k in ("domain", "bus", "device")
            )
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
        # The world is not bound to the device (no device_id): torch would then make every
        # subgroup by splitting the world's communicator (ncclCommSplit, a collective over
        # every rank of the world), which a group opened on its members only never completes.
        dist.init_process_group(
            self.backend,
            store=self.store,
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        world = dist.group.WORLD
        assert world is not None
        if self.device.type == "cuda":  # make NCCL's communicator now: a refused setting fails here
            dist.all_reduce(torch.zeros(1, device=self.device), group=world)
            torch.cuda.synchronize(self.device)
        self.comms["world"] = Comm(world, self.rank, self.world_size)

    def open_group(self, group_id: str, ranks: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        """Called on the group's members only (local synchronization: no rank outside the
        group takes part, so the groups of a wave open at the same time). A group of every
        rank is the world group itself."""
        if len(ranks) == self.world_size:
            group = self.comms["world"].group
        elif ranks in self.opened:
            # torch names the group by its ranks (and the groups alive, the world alone here):
            # a second one would take the first's rendezvous keys from the world's store
            raise RuntimeError(f"ranks {ranks} open a second group in one world")
        else:
            self.opened.add(ranks)
            group = dist.new_group(
                list(ranks),
                use_local_synchronization=True,
                # made now, among the members (the open is timed apart from the first point)
                device_id=self.device if self.device.type == "cuda" else None,
            )
        self.comms[group_id] = Comm(group, ranks.index(self.rank), len(ranks), nodes)
        if self.nccl_engine:
            self.nccl_comms[group_id] = self._nccl_comm(group_id, ranks)

    def _nccl_comm(self, group_id: str, ranks: tuple[int, ...]) -> NcclComm:
        """The group's own NCCL communicator: its first rank makes the unique id and passes it
        through the set's store; every member then joins (NCCL waits for all of them)."""
        from sweeper import nccl

        assert self.store is not None
        assert self.stream is not None
        key = f"sweeper/nccl-id/{group_id}"  # a group opens once per world
        if self.rank == ranks[0]:
            self.store.set(key, nccl.unique_id())
        uid = self.store.get(key).decode()
        return nccl.NcclComm(uid, ranks.index(self.rank), len(ranks), self.stream)

    def close_group(self, group_id: str) -> None:
        if self.ready is not None and self.ready.point.group_id == group_id:
            self.release()  # its buffers may be registered with the communicators going now
        comm = self.comms.pop(group_id, None)
        if comm is not None and comm.group is not dist.group.WORLD:
            dist.destroy_process_group(comm.group)
        direct = self.nccl_comms.pop(group_id, None)
        if direct is not None:
            direct.destroy()

    def leave(self) -> None:
        """Drop every group and the world, to join a new world with replaced peers (a
        failed group's actors); this rank's process, device and buffers' allocator stay."""
        self.release()
        for direct in self.nccl_comms.values():
            direct.destroy()
        self.nccl_comms.clear()
        self.comms.clear()
        self.opened.clear()
        dist.destroy_process_group()
        self.store = None

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
        levels = data.levels(dtype, comm.size, collective.reduces)
        registers = point.timing.register and _registers(collective)
        registration = _Registration(comm.group, self.device) if registers else None
        try:  # the fill's scratch is memory too: running out there is the same answer
            with (
                torch.cuda.use_mem_pool(registration.pool, self.device)
                if registration
                else nullcontext()
            ):
                buffers = self._allocate(collective, layout, dtype)
            self.ready = _Ready(point, collective, comm, layout, buffers, levels, registration)
            if registration is not None:
                registration.register(self.nccl_comms.get(point.group_id))
            self._fill()
        except Exception as exc:
            if not _is_oom(exc):
                raise
            self.release()
            return Prepared("oom", f"rank {self.rank}: {str(exc).splitlines()[0]}")
        return Prepared("ok")

    def _allocate(self, collective: Collective, layout: Layout, dtype: torch.dtype) -> Buffers:
        def empty(elements: int) -> torch.Tensor:
            return torch.empty(elements, dtype=dtype, device=self.device)

        if collective.symmetric:
            from torch.distributed import _symmetric_memory as symm_mem

            send = symm_mem.empty(layout.send, dtype=dtype, device=self.device)
        else:
            send = empty(layout.send)
        recv = empty(layout.recv) if layout.recv else None
        return Buffers(send, recv, empty(layout.work) if layout.work else None)

    def _fill(self) -> None:
        assert self.ready is not None
        r = self.ready
        data.fill(r.buffers.send, r.layout.inputs, r.comm.size, r.levels, r.point.timing.seed)
        if r.buffers.recv is not None:
            data.poison(r.buffers.recv)

    def execute(self) -> Measured:
        """Time the point with each engine and in each launch mode it asks for, on the same
        buffers, each engine's result checked on one more iteration, issued eagerly outside
        the timed blocks. On a GPU everything runs on the rank's own stream, after the fill
        (on the default stream) is done, and NVML is read before and after it all."""
        assert self.ready is not None, "execute() before a successful prepare()"
        r = self.ready
        if r.collective.setup is not None:
            r.collective.setup(r.buffers, r.comm)
        if self.stream is None:
            return Measured(self._engines())
        watch = self.watch
        before = watch.start() if watch is not None else None
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            timed = self._engines()
        return Measured(timed, watch.since(before) if watch is not None and before else None)

    def _engines(self) -> tuple[Timed, ...]:
        assert self.ready is not None
        r = self.ready
        timing = r.point.timing
        timed: list[Timed] = []
        for engine in timing.engines:
            if engine == "nccl" and r.collective.nccl is None:
                why = "no direct NCCL form: this operation runs on the torch engine only"
                timed += [Timed(engine, launch, (), 0, skipped=why) for launch in timing.launches]
                continue
            if engine == "nccl":
                assert r.collective.nccl is not None
                step = r.collective.nccl(r.buffers, self.nccl_comms[r.point.group_id])
            else:
                step = r.collective.bind(r.buffers, r.comm)
            step()  # first call: connections, lazy buffers, kernel loads (capture needs them)
            mine = self._launches(engine, step, timing)
            n_wrong = self._check(step) if timing.check else None
            registered = r.registration is not None
            timed += [replace(t, n_wrong=n_wrong, registered=registered) for t in mine]
        return tuple(timed)

    def _launches(self, engine: str, step: Step, timing: Timing) -> list[Timed]:
        timed: list[Timed] = []
        eager_note: str | None = None
        for launch in timing.launches:
            launcher, note = self._launcher(launch, step, timing)
            if note is not None and "eager" in timing.launches:
                eager_note = note  # the eager rows say it; no second eager measurement
                continue
            try:
                if isinstance(launcher, Graph) and launcher.empty:
                    timed.append(Timed(engine, launch, (), 0, skipped=EMPTY_GRAPH))
                else:
                    timed.append(self._time(engine, launcher, timing, note))
            finally:
                launcher.close()
        if eager_note is not None:
            timed = [replace(t, note=eager_note) if t.launch == "eager" else t for t in timed]
        return timed

    def _launcher(self, launch: str, step: Step, timing: Timing) -> tuple[Launcher, str | None]:
        """The launcher for a mode, and why it is eager where a graph was asked for. Every rank
        must issue the same collectives, so a capture that failed on any rank makes every
        rank fall back."""
        if launch == "eager":
            return Eager(step), None
        if timing.iters is not None:
            unit = graph_unit(timing.iters)
        else:  # a graph as long as a quarter of a block, so calibration replays it whole
            one = self._agree(self.timer.time(Eager(step), 1, samples=False).seconds)
            quarter = block_target_s(timing.blocks) / 4
            unit = max(1, min(GRAPH_ITERS, math.floor(quarter / max(one, 1e-9))))
        assert self.stream is not None  # graphs exist on CUDA ranks only (spec.launches)
        graph: Graph | None = None
        error = ""
        try:
            graph = Graph(step, unit, self.stream)
        except Exception as exc:
            error = f"cannot capture a CUDA graph: {str(exc).strip().splitlines()[0]}"
        if self._agree(0.0 if graph else 1.0):
            if graph is not None:
                graph.close()
            return Eager(step), error or "another rank of the group cannot capture a CUDA graph"
        assert graph is not None
        return graph, None

    def _time(self, engine: str, launcher: Launcher, timing: Timing, note: str | None) -> Timed:
        """Warm up, then the point's blocks, each after a barrier (so no rank's block starts
        while a peer is still busy with the last one). The garbage collector waits, as in
        timeit: a collection in the middle of a block would be timed as the operation's."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._blocks(engine, launcher, timing, note)
        finally:
            if collecting:
                gc.enable()

    def _blocks(self, engine: str, launcher: Launcher, timing: Timing, note: str | None) -> Timed:
        unit = launcher.unit
        warm, calls = 0, None
        if timing.warmup is not None:
            warm = math.ceil(timing.warmup / unit)
            for _ in range(warm):
                launcher.run()
            warm *= unit
        if timing.iters is not None:
            calls = math.ceil(timing.iters / unit)
        if calls is None or timing.warmup is None:
            target_s = block_target_s(timing.blocks)
            extra, calibrated = calibrate(self.timer, launcher, self._agree, target_s)
            warm += extra
            calls = calls or calibrated
        blocks = []
        for _ in range(timing.blocks):
            self._barrier()
            blocks.append(self.timer.time(launcher, calls, timing.samples))
        return Timed(engine, launcher.launch, tuple(blocks), warm, note=note)

    def _check(self, step: Step) -> int | None:
        assert self.ready is not None
        r = self.ready
        self._fill()
        step()
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

    def copy_matrix(self, sizes: Sequence[int], iters: int, warmup: int) -> list[Copied]:
        """Peer copies (`copy_` between devices, the copy engines) among every GPU this rank
        sees: each ordered pair one way, each pair both ways at once, and each source fanning
        out to all the others at once on separate streams. Needs every GPU of the node
        visible (--gpu-visibility node)."""
        self.release()
        devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
        uuids = [f"GPU-{torch.cuda.get_device_properties(d).uuid}" for d in devices]
        out: list[Copied] = []
        for size in sizes:
            src = [torch.ones(size, dtype=torch.uint8, device=d) for d in devices]
            dst = [
                [torch.empty(size, dtype=torch.uint8, device=d) for d in devices] for _ in devices
            ]
            streams = [[torch.cuda.Stream(d) for _ in devices] for d in devices]
            for a, b in permutations(range(len(devices)), 2):
                copies = [(a, b)]
                seconds = _time_copies(copies, src, dst, streams, iters, warmup)
                out.append(Copied("uni", uuids[a], (uuids[b],), size, seconds))
            for a, b in combinations(range(len(devices)), 2):
                seconds = _time_copies([(a, b), (b, a)], src, dst, streams, iters, warmup)
                out.append(Copied("bi", uuids[a], (uuids[b],), 2 * size, seconds))
            for a in range(len(devices)):
                fan = [(a, b) for b in range(len(devices)) if b != a]
                seconds = _time_copies(fan, src, dst, streams, iters, warmup)
                out.append(
                    Copied("fanout", uuids[a], tuple(uuids[b] for _, b in fan), size, seconds)
                )
            del src, dst
            torch.cuda.empty_cache()
        return out

    def release(self) -> None:
        """Drop this point's buffers (and, on GPU, give the memory back to the allocator)."""
        registration = self.ready.registration if self.ready is not None else None
        if registration is not None:
            registration.close()
        self.ready = None
        del registration  # the last reference to its pool: emptied below with the rest
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
