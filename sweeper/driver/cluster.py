"""Ray: connect (or start an embedded local Ray), place rank actors, and call them.

A `RankSet` is one set of rank actors with one environment (NCCL reads its variables once
per process, so a variant that changes them gets its own set) and one world process group.
It opens a wave's groups on their members only, issues calls to a group's members without
waiting (the executor waits on many groups at once, with `wait`), and replaces the actors of
one failed group: the others keep their processes and join a new world with them. It drops
nodes (gone, or whose actors did not start) the same way: the ranks of the others keep their
processes and join a smaller world.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import grpc
import ray
from ray._private.authentication.authentication_token_setup import (
    AUTH_MODE_ENV_VAR,
    _enable_token_auth,
)
from ray._private.authentication.authentication_utils import is_token_auth_enabled
from ray._private.grpc_utils import init_grpc_channel
from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]  # not in its stub
from ray.core.generated import (
    gcs_service_pb2,
    gcs_service_pb2_grpc,
    ray_client_pb2,
    ray_client_pb2_grpc,
)
from ray.util.placement_group import (
    NODE_ID_LABEL_KEY,
    PlacementGroup,
    placement_group,
    remove_placement_group,
)
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from sweeper.driver import stops
from sweeper.driver.actor import RankActor
from sweeper.driver.outcome import message
from sweeper.errors import BadInput, InfrastructureError, SweeperError
from sweeper.planning.placement import Member, Placement
from sweeper.rank.preflight import local_nccl_allocators
from sweeper.topology import Node, node_record
from sweeper.wire import Backend, Copied, Limits, MemLimit, MoeLayer, Point, RankInfo, Versions

# Kept in every actor set: NVLink multicast (NVLS, multimem) stays off. On shared machines a
# program that uses it can take the host's GPUs out of service.
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# The driver's own settings for these libraries reach the actors, like a launcher's would.
_FORWARDED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "NVSHMEM_", "TORCH_SYMM_MEM_")
_START_TIMEOUT_S = 120.0
_LOOPBACK = "127.0.0.1"
GRACE_S = 10.0  # after one rank failed, how long the others get to return before a rebuild
SLICE_S = 0.2  # the longest the driver waits in Ray before it looks for a signal


@dataclass
class Connection:
    embedded: bool
    address: str | None
    watch: HeadWatch | None = None  # none for Ray Client, whose driver runs on the head

    def gpus(self) -> int:
        return int(ray.cluster_resources().get("GPU", 0))

    def head_host(self) -> str:
        for node in ray.nodes():
            if node.get("Alive") and "node:__internal_head__" in node.get("Resources", {}):
                return str(node["NodeManagerHostname"])
        return socket.gethostname()

    def close(self) -> None:
        """An embedded Ray is shut down whole (no process of it left): a first signal
        meanwhile stops the run after it."""
        if head_lost():
            self._abandon()
            return
        if self.watch is not None:
            self.watch.stop()
        if self.embedded:
            with stops.held():
                ray.shutdown()

    def _abandon(self) -> None:
        """With the head lost, Ray is left as it is: ray.shutdown, and the interpreter's exit
        after it, would wait on the gone GCS until Ray's core worker ends the process itself
        (exit 1). The process ends at the start of its exit instead, once its lines are out,
        with exit 3. An embedded Ray's processes are ended; the watch stays on, to end the
        process where it does not end in time, with nothing more to say."""
        atexit.register(_end_now)  # atexit runs the last registered first: before Ray's
        if self.embedded:
            stops.end_descendants()
        if self.watch is not None:
            self.watch.epitaph = None


def _end_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(HeadLost.exit_code)


@dataclass(frozen=True, kw_only=True, slots=True)
class Address:
    """A Ray cluster to join: its GCS (HOST:PORT), or Ray Client's server (ray://HOST:PORT)."""

    host: str
    port: int
    client: bool  # ray://: through Ray Client

    @property
    def target(self) -> str:
        """host:port as gRPC takes it (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"ray://{self.target}" if self.client else self.target


# A DNS name (labels of letters, digits, '_' and '-'), an IPv4 address, or an IPv6 one
_HOST = re.compile(r"[\w-]+(\.[\w-]+)*|[0-9a-f.]*:[0-9a-f:.]*", re.ASCII)
_FORMS = (
    "give HOST:PORT (the head's GCS, port 6379 by default) or ray://HOST:PORT (Ray Client, "
    "port 10001 by default), or leave --address and $RAY_ADDRESS unset for an embedded Ray"
)


def parse_address(address: str, named: str) -> Address | None:
    """The address given as `named` (--address, $RAY_ADDRESS), checked before any connection:
    BadInput where it is none. None: auto or local, which Ray resolves itself."""
    if address in ("auto", "local"):
        return None

    def bad(why: str) -> BadInput:
        return BadInput(f"{named} {address!r} is no Ray address: {why}", hint=_FORMS)

    if not address.isprintable() or any(c.isspace() for c in address):
        raise bad("it holds a space or a control character")
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "", address
    if scheme not in ("", "ray"):
        raise bad(f"sweeper connects to no {scheme}:// address")
    parts = urlsplit(f"//{rest}")
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        raise bad("nothing may come before the host or after the port")
    if not parts.hostname:
        raise bad("no host")
    if not _HOST.fullmatch(parts.hostname):
        raise bad(f"{parts.hostname!r} is no host name")
    try:
        port = parts.port
    except ValueError:  # not a number, or over 65535
        port = -1
    if port is None:
        raise bad("no port")
    if not 0 < port <= 65535:
        raise bad("its port is no number from 1 to 65535")
    return Address(host=parts.hostname, port=port, client=scheme == "ray")


_TOKEN_HINT = (
    "`ray get-auth-token` on the head prints the cluster's token: give it as RAY_AUTH_TOKEN, "
    "in a file named by RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token"
)


def _check_reachable(address: Address, timeout_s: float) -> None:
    """One call to the address that Ray's server answers at once, with `timeout_s` as its
    deadline: it fails in time where nothing listens, where what listens never answers (a
    socket that accepts and stays silent, another server that keeps the HTTP/2 connection
    open), where it is not the Ray server that kind of address names, or where it wants a
    token. ray.init has no deadline of its own for these: it retries for minutes.

    A gRPC call, not ray.init in a thread given up at the deadline: the call's channel is
    closed here, so nothing is left running; and not Ray's GCS client, whose C++ core
    prints lines of its own as it retries. The channel is Ray's, with the token Ray would
    send; a cluster that asks for a token where none is sent gets the one Ray finds."""
    deadline = time.monotonic() + timeout_s
    failed = _first_call(address, timeout_s)
    if failed and failed[0] == grpc.StatusCode.UNAUTHENTICATED and _send_token_found():
        failed = _first_call(address, max(0.0, deadline - time.monotonic()))
    if failed:
        raise _unreachable(address, *failed, timeout_s)


def _first_call(address: Address, timeout_s: float) -> tuple[grpc.StatusCode, str] | None:
    """The status code and details of a failed call to the address; None: it answered."""
    channel = init_grpc_channel(address.target)
    try:
        if address.client:
            ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
            ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(ping, timeout=timeout_s)
        else:
            gcs = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            gcs.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)
    except grpc.RpcError as exc:
        return exc.code(), str(exc.details())
    finally:
        channel.close()
    return None


def _send_token_found() -> bool:
    """Token authentication on, where RAY_AUTH_MODE leaves it unsaid and Ray finds a token
    (RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token): the cluster
    asked for one. Ray turns it on by itself only for a cluster it finds on this machine, so
    a `ray://` address of a default cluster (token authentication on) fails without it."""
    if os.environ.get(AUTH_MODE_ENV_VAR) is not None:
        return False
    if not AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        return False
    _enable_token_auth()  # Ray's own switch: the variable, and its cached config
    return True


def _unreachable(
    address: Address, code: grpc.StatusCode, details: str, timeout_s: float
) -> InfrastructureError:
    """What a failed first call says, in a line."""
    server = "Ray Client's server" if address.client else "the head's GCS"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        given = (
            "refused the authentication token given"
            if is_token_auth_enabled()
            else ("wants an authentication token, and none was found")
        )
        return InfrastructureError(f"Ray at {address} {given}", hint=_TOKEN_HINT)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return InfrastructureError(
            f"cannot reach Ray at {address}: no answer within {timeout_s:g} s",
            hint=f"is this the port of {server}? a slow network may need more --connect-timeout",
        )
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return InfrastructureError(
            f"cannot connect to Ray at {address}: what answers there is not {server}",
            hint=_FORMS,
        )
    # gRPC's details end with the socket's: "... Connection refused", "... Domain name not found]"
    return InfrastructureError(
        f"cannot reach Ray at {address}: {details.rsplit(': ', 1)[-1].rstrip(']')}",
        hint="check --address / $RAY_ADDRESS, or leave both unset for an embedded local Ray",
    )


class HeadLost(SweeperError):
    """The head's GCS stopped answering mid-run. Exit 3 as an InfrastructureError, but not
    one: what goes on without a node that left (the scan) must not go on without the head."""

    exit_code = 3

    def __init__(self, address: str) -> None:
        super().__init__(f"lost the Ray head at {address}")
        self.address = address


class HeadWatch:
    """Asks the head's GCS whether it answers, every second, from a thread of its own.

    Where the GCS is gone, Ray's core worker retries for $RAY_gcs_rpc_server_reconnect_timeout_s
    (60 s) and then ends the driver itself, exit 1, with a line of Ray's, whatever the driver
    was doing: no row flushed, no line of sweeper's. After a third of that time the watch
    calls the head lost, and the driver's next wait raises HeadLost: the run ends as any
    error ends it, rows flushed and record marked. After two thirds the driver is stuck in a
    call that needs the GCS, and the watch ends the process itself, with `epitaph` as its
    line (given the GCS's address; none: said already) and exit 3: the rows shown are in the
    journal already (synced point by point)."""

    def __init__(self, gcs: str) -> None:
        host, port = gcs.rsplit(":", 1)  # as Ray gives it: HOST:PORT, or [IPV6]:PORT
        self.address = gcs
        self.gcs = Address(host=host.strip("[]"), port=int(port), client=False)
        limit = float(os.environ.get(_RAY_GCS_TIMEOUT_VAR) or _RAY_GCS_TIMEOUT_S)
        self.lost_after_s, self.exit_after_s = limit / 3, 2 * limit / 3
        self.lost = False
        self.epitaph: Callable[[str], str] | None = lambda gcs: f"lost the Ray head at {gcs}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sweeper-head", daemon=True)

    def start(self) -> HeadWatch:
        _WATCHES.append(self)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self in _WATCHES:
            _WATCHES.remove(self)

    def _watch(self) -> None:
        down_since: float | None = None
        while not self._stop.wait(_CHECK_S):
            if self._answers():
                down_since = None
                continue
            now = time.monotonic()
            down_since = now if down_since is None else down_since
            self.lost = self.lost or now - down_since >= self.lost_after_s
            if now - down_since >= self.exit_after_s and not self._stop.is_set():
                self._exit()

    def _answers(self) -> bool:
        """Whether the GCS answers at all: a refusal (a token it does not take) is an answer."""
        failed = _first_call(self.gcs, _CHECK_S)
        return failed is None or failed[0] not in _DOWN

    def _exit(self) -> None:
        if sys.stdout.isatty():  # a progress bar hid the cursor
            sys.stdout.write(stops.SHOW_CURSOR)
            sys.stdout.flush()
        if self.epitaph is not None:
            sys.stderr.write(f"sweeper: error: {self.epitaph(self.address)}\n")
            sys.stderr.flush()
        stops.end_descendants()  # an embedded Ray's processes, where its GCS died
        os._exit(HeadLost.exit_code)


# Ray's core worker ends the driver once the GCS has not answered for this long (its default)
_RAY_GCS_TIMEOUT_VAR = "RAY_gcs_rpc_server_reconnect_timeout_s"
_RAY_GCS_TIMEOUT_S = 60.0
_CHECK_S = 1.0
_DOWN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_WATCHES: list[HeadWatch] = []  # the connections' watches, while they are on


def head_lost() -> bool:
    """Whether a watch has called the head lost: nothing is left to ask of it."""
    return any(watch.lost for watch in _WATCHES)


def _watched(connection: Connection) -> Connection:
    """The connection, with a watch on its GCS."""
    connection.watch = HeadWatch(str(ray.get_runtime_context().gcs_address)).start()
    return connection


def connect(address: str | None, cpu_ranks: int, timeout_s: float = 60.0) -> Connection:
    """Join the Ray cluster at `address` (default $RAY_ADDRESS), else start an embedded one.

    An embedded Ray gets at least `cpu_ranks` logical CPUs, so that many CPU rank actors fit
    even on a smaller machine. An address that is none is BadInput, before any connection; a
    cluster that does not answer within `timeout_s` is an InfrastructureError. SIGTERM keeps
    the caller's handler: ray.init would make it `sys.exit`, which dies by SIGABRT in Ray's
    core instead of stopping the sweep.
    """
    named = "--address" if address else "$RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS") or None
    remote = parse_address(address, named) if address else None
    if ray.is_initialized():
        return _watched(Connection(embedded=False, address=None))
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        if address:
            if remote is not None:
                _check_reachable(remote, timeout_s)
                address = str(remote)
            try:
                ray.init(address=address, namespace="sweeper", log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InfrastructureError(f"cannot connect to Ray at {address}: {exc}") from None
            joined = Connection(embedded=False, address=address)
            return joined if remote is not None and remote.client else _watched(joined)
        ray.init(
            address="local",
            num_cpus=max(os.cpu_count() or 1, cpu_ranks),
            include_dashboard=False,
            namespace="sweeper",
            log_to_driver=False,
            configure_logging=False,
        )
        return _watched(Connection(embedded=True, address=None))
    finally:
        if on_sigterm is not None:  # None: a handler not set from Python, which Ray leaves be
            signal.signal(signal.SIGTERM, on_sigterm)


def actor_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an actor set: the driver's library settings, the set's own, and
    multicast off whatever either says."""
    env = {k: v for k, v in os.environ.items() if k.startswith(_FORWARDED_PREFIXES)}
    env.update(extra or {})
    env.update(MULTICAST_OFF)
    return env


class StartFailed(Exception):
    """An actor set's ranks did not start or could not form their world: an actor failed as
    it started (its constructor raised, its runtime env failed, it did not answer in time),
    NCCL refused the environment of its variant (an NCCL_ALGO value it cannot parse, say),
    or a rank died as it joined or left. `nodes`: the nodes whose actors failed to start,
    each with why, by node id; empty where the failure names no node. Where it names nodes,
    the set keeps the other nodes' actors, started and in no world yet: `RankSet.drop`
    those nodes to go on without them, or `close` the set."""

    def __init__(self, why: str, nodes: Mapping[str, str] | None = None) -> None:
        super().__init__(why)
        self.nodes = dict(nodes or {})


@dataclass(frozen=True)
class NodeSlot:
    """A node chosen for the sweep and how many ranks it gets."""

    node_id: str
    host: str
    ranks: int
    memory_bytes: int = 0  # Ray's `memory` resource of the node: what Ray lets tasks use


def alive() -> dict[str, dict[str, str]]:
    """Ray's alive nodes: each one's labels, by node id."""
    return {n["NodeID"]: n.get("Labels", {}) for n in ray.nodes() if n.get("Alive")}


def bundle(backend: Backend) -> dict[str, float]:
    """What one rank actor holds: a CPU, and its GPU where the ranks are NCCL's."""
    return {"CPU": 1.0, "GPU": 1.0} if backend == Backend.NCCL else {"CPU": 1.0}


def choose_nodes(backend: Backend, nodes: int | None, per_node: int | None) -> list[NodeSlot]:
    """`nodes` alive nodes (None: every one) with `per_node` GPUs (NCCL) or CPUs (gloo) each,
    most-equipped first.

    Without `per_node`, each node gets as many ranks as the least-equipped chosen one has
    GPUs (NCCL) or 2 (gloo).
    """
    resource = "GPU" if backend == Backend.NCCL else "CPU"
    alive = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(resource, 0) >= 1]
    nodes = len(alive) if nodes is None else nodes
    alive.sort(key=lambda n: (-n["Resources"][resource], n["NodeManagerHostname"], n["NodeID"]))
    fits = [n for n in alive if n["Resources"][resource] >= (per_node or 1)]
    if len(fits) < nodes:
        have = ", ".join(
            f"{n['NodeManagerHostname']} ({int(n['Resources'][resource])} {resource})"
            for n in alive
        )
        raise InfrastructureError(
            f"asked for {nodes} node(s) with {per_node or 1}+ {resource} each; "
            f"the cluster has {len(fits)}: {have or 'none'}",
            hint="lower --nodes / --gpus-per-node, or add nodes to the Ray cluster",
        )
    chosen = fits[:nodes]
    count = per_node or (
        int(min(n["Resources"][resource] for n in chosen)) if backend == Backend.NCCL else 2
    )
    return [
        NodeSlot(n["NodeID"], n["NodeManagerHostname"], count, int(n["Resources"].get("memory", 0)))
        for n in chosen
    ]


def discover(slots: Sequence[NodeSlot]) -> list[Node]:
    """Each chosen node's topology, read by a task pinned to it (no GPU asked: NVML sees all)."""
    task = ray.remote(num_cpus=0)(node_record)
    refs = [
        task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node_id, soft=False)
        ).remote()
        for slot in slots
    ]
    return [Node.from_record(record) for record in get(refs, _START_TIMEOUT_S)]


def nccl_allocators(slots: Sequence[NodeSlot]) -> list[dict[str, bool] | None]:
    """Per chosen node, whether torch can allocate from NCCL on each of its GPUs (by UUID;
    None: it cannot tell), read by a task on the node. The task's process exits after it
    (max_calls=1), so the CUDA state it made never reaches a pooled worker."""
    task = ray.remote(num_cpus=0, max_calls=1)(local_nccl_allocators)
    refs = [
        task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node_id, soft=False),
            runtime_env={"env_vars": actor_env()},
        ).remote()
        for slot in slots
    ]
    return get(refs, _START_TIMEOUT_S)


def placement(backend: Backend, nodes: Sequence[Node], infos: Sequence[RankInfo]) -> Placement:
    """Where each rank of a started set sits, matching its GPU to its node's NVML record."""
    position = {node.node_id: i for i, node in enumerate(nodes)}
    seen: dict[int, int] = {}
    members = []
    for info in infos:
        node = position[info.node_id]
        by_uuid = {gpu.uuid: gpu.index for gpu in nodes[node].gpus}
        local = by_uuid.get(info.gpu_uuid or "", seen.get(node, 0))
        seen[node] = seen.get(node, 0) + 1
        members.append(Member(info.rank, node, local, info.gpu_uuid))
    return Placement(backend, tuple(nodes), tuple(members))


@dataclass
class RankSet:
    """Rank actors on the chosen nodes, one placement group per node, in one world group.

    Each node's placement group is STRICT_PACK and pinned to that node (the ray.io/node-id
    label), so the nodes are exactly the chosen ones, also when several Ray nodes share a
    host. Ranks are numbered after the actors report their GPUs: node by node, then by PCI
    bus id, so rank order is physical order in every set and every run.
    """

    backend: Backend
    slots: Sequence[NodeSlot]
    bundle: Mapping[str, float]
    env: Mapping[str, str] = field(default_factory=dict)
    group_timeout_s: float = 600.0
    plugins: tuple[str, ...] = ()
    mem_limit: MemLimit | None = None
    moe: MoeLayer | None = None
    nccl_engine: bool = False  # each group also gets its own NCCL communicator
    start_timeout_s: float = _START_TIMEOUT_S  # an actor's start, join, leave; a group's open
    actors_started: int = field(default=0, init=False)  # by this set, replacements included
    actors: list[Any] = field(default_factory=list)
    infos: list[RankInfo] = field(default_factory=list)
    _pgs: list[PlacementGroup] = field(default_factory=list)
    _open: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    _bundles: list[tuple[PlacementGroup, int, NodeSlot]] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        return sum(slot.ranks for slot in self.slots)

    def _place(self) -> None:
        for slot in self.slots:
            pg = placement_group(
                [dict(self.bundle)] * slot.ranks,
                strategy="STRICT_PACK",
                bundle_label_selector=[{NODE_ID_LABEL_KEY: slot.node_id}] * slot.ranks,
            )
            self._pgs.append(pg)
            if not wait([pg.ready()], self.start_timeout_s):
                self.close()
                raise InfrastructureError(
                    f"cannot place {slot.ranks} {self.backend} ranks on {slot.host} "
                    f"({dict(self.bundle)} each)",
                    hint="check `ray status`: other work may hold those resources",
                )

    def _new_actor(self, pg: PlacementGroup, bundle: int, slot: NodeSlot) -> Any:
        self.actors_started += 1
        return (
            ray.remote(RankActor)
            .options(
                num_cpus=self.bundle.get("CPU", 0),
                num_gpus=self.bundle.get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=bundle
                ),
                runtime_env={"env_vars": dict(self.env)},
            )
            .remote(
                self.backend,
                self.plugins,
                Limits(mem_limit=self.mem_limit, host_share_bytes=slot.memory_bytes // slot.ranks),
                self.moe,
                self.nccl_engine,
            )
        )

    def start(self) -> list[RankInfo]:
        """An actor on every bundle, then one world of them all, ranks in physical order.
        StartFailed where some did not start (see there) or they could not join."""
        if not self._pgs:
            self._place()
        self._bundles = [
            (pg, i, slot)
            for pg, slot in zip(self._pgs, self.slots, strict=True)
            for i in range(slot.ranks)
        ]
        self.actors = [self._new_actor(*at) for at in self._bundles]
        self._order(self._started())
        try:
            self._join()
        except ray.exceptions.RayError as exc:
            raise StartFailed(message(exc)) from exc
        return self.infos

    def _started(self) -> list[RankInfo]:
        """Each actor's info once all have started; StartFailed naming each node where one
        did not (its error, or no answer in time). Where none answered, the cluster is at
        fault, not a node: the failure names none."""
        refs = [a.info.remote() for a in self.actors]
        answered = wait_all(refs, self.start_timeout_s)
        failed: dict[str, str] = {}
        for ref, (_, _, slot) in zip(refs, self._bundles, strict=True):
            if ref not in answered:
                failed.setdefault(slot.node_id, f"no answer within {self.start_timeout_s:g} s")
            elif isinstance(answered[ref], BaseException):
                failed.setdefault(slot.node_id, _start_error(answered[ref]))
        if failed:
            if not answered:
                raise StartFailed(f"no actor answered within {self.start_timeout_s:g} s")
            host = {slot.node_id: slot.host for slot in self.slots}
            why = "; ".join(f"{host[node]}: {reason}" for node, reason in failed.items())
            raise StartFailed(f"actors did not start on {why}", failed)
        return [answered[ref] for ref in refs]

    def _order(self, infos: Sequence[RankInfo]) -> None:
        """The actors (with their bundles and `infos`, one each) numbered in physical order:
        node by node as `slots` has them, then by PCI bus id."""
        node_order = {slot.node_id: i for i, slot in enumerate(self.slots)}
        order = sorted(
            range(len(infos)),
            key=lambda i: (node_order[infos[i].node_id], infos[i].gpu_pci_bus_id or "", i),
        )
        self.actors = [self.actors[i] for i in order]
        self._bundles = [self._bundles[i] for i in order]
        self.infos = [replace(infos[i], rank=rank) for rank, i in enumerate(order)]

    def _join(self) -> None:
        """Every rank joins one world. Its listeners (rank 0's store, gloo's sockets) are
        reachable only where their peers are: on loopback where the set is on one node, at
        each node's own address where it spans nodes; never on every interface."""
        one_node = len({info.node_id for info in self.infos}) == 1
        binds = [_LOOPBACK if one_node else info.ip for info in self.infos]
        (port,) = get([self.actors[0].listen.remote(binds[0])], self.start_timeout_s)
        size = len(self.actors)
        joins = [
            a.join.remote(rank, size, binds[0], port, self.group_timeout_s, binds[rank])
            for rank, a in enumerate(self.actors)
        ]
        get(joins, self.start_timeout_s)
        self._open.clear()

    def drop(self, nodes: Collection[str]) -> list[RankInfo]:
        """The set without `nodes` (gone from Ray, or whose actors did not start): their
        actors killed, their placement groups removed; every other actor leaves its world
        (where it is in one) and joins a new one of fewer ranks, numbered again in physical
        order, its process kept. Groups open before are gone. StartFailed where no actor is
        left, or one left does not leave, answer or join in time: `close` the set then."""
        kept = [i for i, (_, _, slot) in enumerate(self._bundles) if slot.node_id not in nodes]
        for i, actor in enumerate(self.actors):
            if i not in kept:
                ray.kill(actor, no_restart=True)
        for pg, slot in zip(self._pgs, self.slots, strict=True):
            if slot.node_id in nodes:
                remove_placement_group(pg)
        self._pgs = [
            pg for pg, s in zip(self._pgs, self.slots, strict=True) if s.node_id not in nodes
        ]
        self.slots = [slot for slot in self.slots if slot.node_id not in nodes]
        self.actors = [self.actors[i] for i in kept]
        self._bundles = [self._bundles[i] for i in kept]
        self.infos = []
        if not self.actors:
            raise StartFailed("no rank is left")
        try:
            # each actor runs its calls in order: its info once it has left (or started)
            left = [a.leave.remote() for a in self.actors]
            infos = get(left + [a.info.remote() for a in self.actors], self.start_timeout_s)
            self._order(infos[len(left) :])
            self._join()
        except ray.exceptions.RayError as exc:
            raise StartFailed(f"the ranks left could not join again: {message(exc)}") from exc
        return self.infos

    def replace_ranks(self, ranks: Sequence[int]) -> None:
        """New actors for `ranks` (a failed group's: killed, or dead; or none) on the same
        bundles; then every actor joins a new world, with a store of its own. An actor that
        cannot leave its world (it died while idle, or does not answer) is replaced too.
        Groups open before are gone: open them again."""
        for rank in ranks:
            self._renew(rank)
        fresh = set(ranks)
        leaving = {a.leave.remote(): r for r, a in enumerate(self.actors) if r not in fresh}
        left = wait_all(list(leaving), self.start_timeout_s)
        for ref, rank in leaving.items():
            if ref not in left or isinstance(left[ref], BaseException):
                self._renew(rank)
                fresh.add(rank)
        try:
            renewed = sorted(fresh)
            infos = get([self.actors[r].info.remote() for r in renewed], self.start_timeout_s)
            for rank, info in zip(renewed, infos, strict=True):
                self.infos[rank] = replace(info, rank=rank)
            self._join()
        except ray.exceptions.RayError as exc:  # a node gone for good cannot take its bundles
            hosts = ", ".join(sorted({self._bundles[r][2].host for r in fresh}))
            raise InfrastructureError(
                f"cannot restart the actors of rank(s) {', '.join(map(str, sorted(fresh)))} "
                f"on {hosts}: {message(exc)}",
                hint="is the node gone? `ray status`; the rows so far are kept",
            ) from exc

    def _renew(self, rank: int) -> None:
        """A new actor for `rank` on its bundle, the old one ended."""
        ray.kill(self.actors[rank], no_restart=True)
        self.actors[rank] = self._new_actor(*self._bundles[rank])

    def versions(self) -> Versions:
        versions: Versions = get([self.actors[0].versions.remote()], self.start_timeout_s)[0]
        return versions

    def _members(self, group_id: str) -> list[Any]:
        """The actors of an open group's members."""
        return [self.actors[r] for r in self._open[group_id][0]]

    def open_groups(
        self, groups: Sequence[tuple[str, tuple[int, ...], tuple[int, ...]]]
    ) -> dict[str, str]:
        """Groups of disjoint ranks, opened together on their members only: (group_id, ranks,
        each member's node). Returns the groups that did not open, with why: a member's error
        (a dead actor, a refused communicator), or no answer in time. A group is given up at
        its first failed member: the others wait in vain for it and are killed with it."""
        group_of: dict[Any, str] = {}
        for group_id, ranks, nodes in groups:
            self._open[group_id] = (ranks, nodes)
            for r in ranks:
                group_of[self.actors[r].open_group.remote(group_id, ranks, nodes)] = group_id
        failed: dict[str, str] = {}
        pending = list(group_of)
        deadline = time.monotonic() + self.start_timeout_s
        while pending:
            ready = wait(pending, deadline - time.monotonic())
            if not ready:
                break
            for ref in ready:
                value = result(ref)
                if isinstance(value, BaseException):
                    failed.setdefault(group_of[ref], message(value))
            pending = [ref for ref in pending if ref not in ready and group_of[ref] not in failed]
        for ref in pending:
            failed.setdefault(group_of[ref], f"no answer within {self.start_timeout_s:g} s")
        return failed

    def close_group(self, group_id: str) -> None:
        """Close a group on its members without waiting: each actor runs calls in order, so
        nothing else it is asked runs before the close."""
        ranks, _ = self._open.pop(group_id)
        for r in ranks:
            self.actors[r].close_group.remote(group_id)

    # A call to every member of an open group, not waited for: each returns the calls' refs.

    def budget(self, group_id: str) -> list[Any]:
        """The bytes each member can give a point (worker.Rank.budget)."""
        return [a.budget.remote() for a in self._members(group_id)]

    def prepare(self, group_id: str, point: Point) -> list[Any]:
        """Each member allocates and fills the point's buffers (worker.Rank.prepare)."""
        return [a.prepare.remote(point) for a in self._members(group_id)]

    def execute(self, group_id: str) -> list[Any]:
        """Each member times the prepared point (worker.Rank.execute)."""
        return [a.execute.remote() for a in self._members(group_id)]

    def release(self, group_id: str) -> list[Any]:
        """Each member frees the point's buffers (worker.Rank.release)."""
        return [a.release.remote() for a in self._members(group_id)]

    def kill_members(self, group_id: str) -> None:
        """End a group's actors (a hung collective ends no other way); `replace_ranks` later."""
        for actor in self._members(group_id):
            ray.kill(actor, no_restart=True)

    def copy_matrix(
        self, rank: int, sizes: Sequence[int], iters: int, warmup: int, timeout_s: float
    ) -> list[Copied]:
        """The copy-engine matrix of `rank`'s node, timed by that rank's actor."""
        ref = self.actors[rank].copy_matrix.remote(list(sizes), iters, warmup)
        copies: list[Copied] = get([ref], timeout_s)[0]
        return copies

    def kill(self) -> None:
        """End the actors; with the head lost, nothing is asked of it: they end with it."""
        for actor in [] if head_lost() else self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []

    def close(self) -> None:
        self.kill()
        for pg in [] if head_lost() else self._pgs:
            remove_placement_group(pg)
        self._pgs = []


def _start_error(exc: BaseException) -> str:
    """Why an actor did not start, in one line: where its constructor raised, that error (the
    last line of the traceback Ray wraps it in, below a line naming the actor's process)."""
    if isinstance(exc, ray.exceptions.RayActorError) and exc.actor_init_failed:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return f"its constructor raised {lines[-1]}"
    return message(exc)


def _wait(refs: Sequence[Any], num_returns: int, timeout_s: float) -> list[Any]:
    """ray.wait in slices of at most SLICE_S, each with signals held: Ray's wait runs the
    driver's signal handlers and fails (SystemError) where one raises, so a signal is raised
    between slices instead, within SLICE_S of its coming; and HeadLost, once the head is."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        for watch in _WATCHES:
            if watch.lost:
                raise HeadLost(watch.address)
        left = deadline - time.monotonic()
        with stops.held():
            ready, _ = ray.wait(
                list(refs), num_returns=num_returns, timeout=max(0.0, min(SLICE_S, left))
            )
        if len(ready) >= num_returns or left <= SLICE_S:
            return list(ready)


def wait(refs: Sequence[Any], timeout_s: float) -> list[Any]:
    """The refs among `refs` whose results are in, waiting up to `timeout_s` for one."""
    if not refs:
        return []
    if _wait(refs, 1, timeout_s):  # and whatever else is in already
        return _wait(refs, len(refs), 0)
    return []


def wait_all(refs: Sequence[Any], timeout_s: float) -> dict[Any, Any]:
    """The results (or the exceptions raised) of those of `refs` that are in within
    `timeout_s`."""
    if not refs:
        return {}
    return {ref: result(ref) for ref in _wait(refs, len(refs), timeout_s)}


def get(refs: Sequence[Any], timeout_s: float) -> list[Any]:
    """ray.get of `refs`, waited for as `wait` does: the first call's error once it is in,
    GetTimeoutError where some are not in within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    pending = list(refs)
    while pending and (ready := wait(pending, deadline - time.monotonic())):
        failed = [value for value in map(result, ready) if isinstance(value, BaseException)]
        if failed:
            raise failed[0]
        pending = [ref for ref in pending if ref not in ready]
    with stops.held():
        return list(ray.get(list(refs), timeout=0))


def result(ref: Any) -> Any:
    """A call's result, or the exception it raised (a dead actor's: RayActorError)."""
    try:
        with stops.held():
            return ray.get(ref)
    except Exception as exc:
        return exc
