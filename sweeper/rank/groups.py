"""The rank's world and the groups it opens in it: each group a torch process group (its
agreements and barriers, and the torch engine's communicator) and a communicator in each
other engine the sweep asks for, opened by the engine's entry (`engines.ENGINES`).

Every rank of a set joins the world together, told its size with the join. They leave it
together when failed peers are replaced or a node's ranks dropped, and the next world may be
smaller. A group opens on its members only, while the wave's other groups open on other ranks."""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
import struct
import time

import torch
import torch.distributed as dist
from torch.distributed import TCPStore  # type: ignore[attr-defined]

from sweeper.ops.descriptor import Comm
from sweeper.rank.engines import ENGINES, Opening
from sweeper.rank.nccl import NcclComm
from sweeper.rank.nccl_debug import NcclDebug
from sweeper.rank.nccl_view import NcclViews
from sweeper.rank.torch_engine import TorchComm
from sweeper.wire import Backend, Engine


class Groups:
    """This rank's place in its world: the rendezvous store, and each open group's
    communicators, by group id and engine."""

    def __init__(
        self,
        backend: Backend,
        device: torch.device,
        stream: torch.cuda.Stream | None,
        engines: tuple[Engine, ...],
        nccl_debug: NcclDebug | None = None,
        nccl_view: NcclViews | None = None,
    ) -> None:
        self.rank = -1  # given at join(), once the driver has put the set in physical order
        self.world_size = 0  # given at join() too: a world may have fewer ranks than the last
        self.timeout = datetime.timedelta(minutes=30)  # given at join(): its collectives' limit
        self.backend = backend
        self.device = device
        self.stream = stream  # the one the nccl engine's calls go to
        self.engines = engines  # each group's communicators: one in each
        self.store: TCPStore | None = None
        self._listener: int | None = None  # rank 0's, from listen() to join(): the store's
        self.torch: dict[str, TorchComm] = {}
        self.opened: set[tuple[int, ...]] = set()  # rank sets with a group in this world
        self.comms: dict[tuple[str, Engine], Comm] = {}
        self.nccl_debug = nccl_debug  # what NCCL said as each communicator started
        self.nccl_view = nccl_view  # NCCL's cost tables, by the communicators each group opened
        # seconds each group's communicator in each engine took to open on this rank
        self.started: dict[tuple[str, Engine], float] = {}

    def comm(self, engine: Engine, group_id: str) -> Comm:
        """The group's communicator on an engine."""
        return self.comms[group_id, engine]

    @property
    def nccl(self) -> dict[str, NcclComm]:
        """The groups' direct NCCL communicators, which --register-buffers registers the
        point's buffers with (ncclCommRegister) beside torch's."""
        return {g: c for (g, _), c in self.comms.items() if isinstance(c, NcclComm)}

    def _opening(self) -> int:
        return self.nccl_view.opening() if self.nccl_view is not None else 0

    def _opened(self, key: tuple[str, Engine], since: int) -> None:
        if self.nccl_view is not None:
            self.nccl_view.opened(key, since)

    def listen(self, host: str) -> int:
        """Rank 0 only, before join: a socket for the rendezvous store at `host` (its address
        alone: torch's own store listens on every interface), on a port the OS picks. The
        store starts on it at join(), which gives the world's size; peers that connect
        before wait in its backlog."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as listener:
            listener.bind((host, 0))
            listener.listen(socket.SOMAXCONN)  # every peer connects at once
            port: int = listener.getsockname()[1]
            self._listener = listener.detach()
        return port

    def join(
        self, rank: int, world_size: int, host: str, port: int, timeout_s: float, bind: str
    ) -> None:
        """Join a world of `world_size` ranks as `rank`, with the store at host:port; every
        rank of the set calls this at the same time. gloo's sockets listen at `bind`, this
        rank's address for its peers, unless GLOO_SOCKET_IFNAME says otherwise."""
        self.rank, self.world_size = rank, world_size
        self.timeout = datetime.timedelta(seconds=timeout_s)
        interface = interface_of(bind)
        if interface is not None:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", interface)
        if self._listener is not None:  # the store's now: it closes the socket
            fd, self._listener = self._listener, None
            self.store = TCPStore(
                host, port, world_size, True, wait_for_workers=False, master_listen_fd=fd
            )
        else:
            self.store = TCPStore(host, port, world_size, False)
        began, marked = time.perf_counter(), self._opening()
        # The world is not bound to the device (no device_id): torch would then make every
        # subgroup by splitting the world's communicator (ncclCommSplit, a collective over
        # every rank of the world), which a group opened on its members only never completes.
        dist.init_process_group(
            self.backend,
            store=self.store,
            rank=self.rank,
            world_size=self.world_size,
            timeout=self.timeout,
        )
        world = dist.group.WORLD
        assert world is not None
        if self.device.type == "cuda":  # make NCCL's communicator now: a refused setting fails here
            dist.all_reduce(torch.zeros(1, device=self.device), group=world)
            torch.cuda.synchronize(self.device)
        self.started["world", Engine.TORCH] = time.perf_counter() - began
        self._opened(("world", Engine.TORCH), marked)
        self.torch["world"] = TorchComm(world, self.rank, self.world_size)
        if self.nccl_debug is not None:
            self.nccl_debug.take(("world", Engine.TORCH))

    def open(self, group_id: str, ranks: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        """Called on the group's members only (local synchronization: no rank outside the
        group takes part, so the groups of a wave open at the same time). A group of every
        rank is the world group itself."""
        debug = self.nccl_debug
        if len(ranks) == self.world_size:
            group = self.torch["world"].group
            self.started[group_id, Engine.TORCH] = self.started["world", Engine.TORCH]
            if self.nccl_view is not None:
                self.nccl_view.share(("world", Engine.TORCH), (group_id, Engine.TORCH))
            if debug is not None:
                debug.share(("world", Engine.TORCH), (group_id, Engine.TORCH))
        elif ranks in self.opened:
            # torch names the group by its ranks (and the groups alive, the world alone here):
            # a second one would take the first's rendezvous keys from the world's store
            raise RuntimeError(f"ranks {ranks} open a second group in one world")
        else:
            self.opened.add(ranks)
            began, marked = time.perf_counter(), self._opening()
            group = dist.new_group(
                list(ranks),
                use_local_synchronization=True,
                # the world's: torch's default is its own (30 minutes), so a member blocked
                # beside one that hung would outwait any point's deadline
                timeout=self.timeout,
                # made now, among the members (the open is timed apart from the first point)
                device_id=self.device if self.device.type == "cuda" else None,
            )
            self.started[group_id, Engine.TORCH] = time.perf_counter() - began
            self._opened((group_id, Engine.TORCH), marked)
        self.torch[group_id] = TorchComm(group, ranks.index(self.rank), len(ranks), nodes)
        if debug is not None:
            debug.take((group_id, Engine.TORCH))
        assert self.store is not None
        at = Opening(
            group_id=group_id,
            ranks=ranks,
            rank=self.rank,
            nodes=nodes,
            store=self.store,
            process_group=self.torch[group_id],
            stream=self.stream,
        )
        for engine in self.engines:
            began, marked = time.perf_counter(), self._opening()
            self.comms[group_id, engine] = ENGINES[engine].open(at)
            self._opened((group_id, engine), marked)
            # an engine whose communicator is the group's process group adds ~0 to its start
            opened_s = time.perf_counter() - began
            self.started[group_id, engine] = self.started.get((group_id, engine), 0.0) + opened_s
            if debug is not None:
                debug.take((group_id, engine))

    def close(self, group_id: str) -> None:
        if self.nccl_debug is not None:
            self.nccl_debug.forget(group_id)
        self.started = {key: s for key, s in self.started.items() if key[0] != group_id}
        if self.nccl_view is not None:
            self.nccl_view.forget(group_id)
        comm = self.torch.pop(group_id, None)
        if comm is not None and comm.group is not dist.group.WORLD:
            dist.destroy_process_group(comm.group)
        for engine in self.engines:
            opened = self.comms.pop((group_id, engine), None)
            if opened is not None:
                ENGINES[engine].close(opened)

    def leave(self) -> None:
        """Drop every group and the world, to join a new world with replaced peers or fewer
        ranks. A rank in no world (new, or gone from one already) has nothing to leave."""
        for (_, engine), comm in self.comms.items():
            ENGINES[engine].close(comm)
        self.comms.clear()
        self.torch.clear()
        self.started.clear()
        if self.nccl_view is not None:
            self.nccl_view.comms.clear()
        if self.nccl_debug is not None:
            self.nccl_debug.heard.clear()
        self.opened.clear()
        if dist.is_initialized():
            dist.destroy_process_group()
        self.store = None
        if self._listener is not None:  # listened, never joined
            os.close(self._listener)
            self._listener = None


_SIOCGIFADDR = 0x8915  # Linux's ioctl for an interface's IPv4 address


def interface_of(address: str) -> str | None:
    """The network interface that has IPv4 `address` (lo for 127.0.0.1), or None: gloo binds
    to an interface by name alone (GLOO_SOCKET_IFNAME)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            try:
                request = struct.pack("256s", name.encode()[:15])
                answer = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)
            except OSError:  # no IPv4 address
                continue
            if socket.inet_ntoa(answer[20:24]) == address:
                return name
    return None
