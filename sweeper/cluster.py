"""Ray: connect (or start an embedded local Ray), place rank actors, and step them through points.

A `RankSet` is one set of rank actors with one environment (NCCL reads its variables once
per process, so a variant that changes them gets its own set) and one world process group.
Its `run_point` is the two-phase protocol: every member prepares, and only when all of them
allocated their buffers do they execute. A point that outlives its timeout gets its actors
killed and the set rebuilt, and the sweep goes on.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import ray
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

from sweeper.errors import InfrastructureError
from sweeper.plan import Member, Placement, Point
from sweeper.spec import MemLimit, MoeSpec
from sweeper.topology import Node, RankInfo, Versions, read_nvml
from sweeper.worker import Copied, Limits, Measured, Prepared, Rank

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
_GRACE_S = 10.0  # after one rank failed, how long the others get to return before a rebuild
_POLL_S = 1.0


@dataclass
class Connection:
    embedded: bool
    address: str | None

    def gpus(self) -> int:
        return int(ray.cluster_resources().get("GPU", 0))

    def head_host(self) -> str:
        for node in ray.nodes():
            if node.get("Alive") and "node:__internal_head__" in node.get("Resources", {}):
                return str(node["NodeManagerHostname"])
        return socket.gethostname()

    def close(self) -> None:
        if self.embedded:
            ray.shutdown()


# HTTP/2's connection preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, and its
# client server behind ray://) answers them with a SETTINGS frame of its own.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail within `timeout_s`, not hang, where nothing listens at a host:port address, the
    port is no port (foo:bar, localhost:99999), or what listens does not speak Ray's gRPC
    (ray.init would wait for it forever)."""
    if address in ("auto", "local"):
        return
    hint = "check --address / $RAY_ADDRESS, or leave both unset for an embedded local Ray"
    try:
        parts = urlsplit(address if "://" in address else f"tcp://{address}")
        port = parts.port  # ValueError: not a number, or not in 0-65535
        if not (parts.hostname and port):
            return
        with socket.create_connection((parts.hostname, port), timeout=timeout_s) as conn:
            conn.sendall(_HTTP2_PREFACE)
            answer = conn.recv(9)
    except TimeoutError:
        raise InfrastructureError(
            f"cannot reach Ray at {address}: no answer within {timeout_s:g} s", hint=hint
        ) from None
    except (OSError, ValueError) as exc:
        raise InfrastructureError(
            f"cannot reach Ray at {address}: {getattr(exc, 'strerror', None) or exc}", hint=hint
        ) from None
    if len(answer) < 9 or answer[3] != _SETTINGS:
        raise InfrastructureError(f"cannot reach Ray at {address}: it does not speak gRPC")


def connect(address: str | None, cpu_ranks: int, timeout_s: float = 60.0) -> Connection:
    """Join the Ray cluster at `address` (default $RAY_ADDRESS), else start an embedded one.

    An embedded Ray gets at least `cpu_ranks` logical CPUs, so that many CPU rank actors fit
    even on a smaller machine. A cluster that does not answer within `timeout_s` is an
    InfrastructureError. SIGTERM keeps the caller's handler: ray.init would make it
    `sys.exit`, which dies by SIGABRT in Ray's core instead of stopping the sweep.
    """
    if ray.is_initialized():
        return Connection(embedded=False, address=None)
    address = address or os.environ.get("RAY_ADDRESS") or None
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        if address:
            _check_reachable(address, timeout_s)
            try:
                ray.init(address=address, namespace="sweeper", log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InfrastructureError(f"cannot connect to Ray at {address}: {exc}") from None
            return Connection(embedded=False, address=address)
        ray.init(
            address="local",
            num_cpus=max(os.cpu_count() or 1, cpu_ranks),
            include_dashboard=False,
            namespace="sweeper",
            log_to_driver=False,
            configure_logging=False,
        )
        return Connection(embedded=True, address=None)
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


@dataclass(frozen=True)
class Outcome:
    """How a point went on its group: 'ok' with each rank's measurement, or why not."""

    status: str
    measured: tuple[Measured, ...] = ()
    error: str | None = None
    launched: bool = True  # False: refused at allocation, before any rank ran a collective


@dataclass(frozen=True)
class NodeSlot:
    """A node chosen for the sweep and how many ranks it gets."""

    node_id: str
    host: str
    ranks: int
    memory_bytes: int = 0  # Ray's `memory` resource of the node: what Ray lets tasks use


def choose_nodes(backend: str, nodes: int, per_node: int | None) -> list[NodeSlot]:
    """`nodes` alive nodes with `per_node` GPUs (NCCL) or CPUs (gloo) each, most-equipped first.

    Without `per_node`, each node gets as many ranks as the least-equipped chosen one has
    GPUs (NCCL) or 2 (gloo).
    """
    resource = "GPU" if backend == "nccl" else "CPU"
    alive = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(resource, 0) >= 1]
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
        int(min(n["Resources"][resource] for n in chosen)) if backend == "nccl" else 2
    )
    return [
        NodeSlot(n["NodeID"], n["NodeManagerHostname"], count, int(n["Resources"].get("memory", 0)))
        for n in chosen
    ]


def _node_record() -> dict[str, Any]:
    record = read_nvml()
    record.update(
        host=socket.gethostname(),
        node_id=ray.get_runtime_context().get_node_id(),
        ip=ray.util.get_node_ip_address(),
        cpus=os.cpu_count() or 0,
    )
    return record


def discover(slots: Sequence[NodeSlot]) -> list[Node]:
    """Each chosen node's topology, read by a task pinned to it (no GPU asked: NVML sees all)."""
    task = ray.remote(num_cpus=0)(_node_record)
    refs = [
        task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node_id, soft=False)
        ).remote()
        for slot in slots
    ]
    return [Node.from_record(record) for record in ray.get(refs, timeout=_START_TIMEOUT_S)]


def placement(backend: str, nodes: Sequence[Node], infos: Sequence[RankInfo]) -> Placement:
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

    backend: str
    slots: Sequence[NodeSlot]
    bundle: Mapping[str, float]
    env: Mapping[str, str] = field(default_factory=dict)
    group_timeout_s: float = 600.0
    plugins: tuple[str, ...] = ()
    mem_limit: MemLimit | None = None
    moe: MoeSpec | None = None
    nccl_engine: bool = False  # each group also gets its own NCCL communicator
    actors: list[Any] = field(default_factory=list)
    infos: list[RankInfo] = field(default_factory=list)
    _pgs: list[PlacementGroup] = field(default_factory=list)
    _open: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)

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
            if not ray.wait([pg.ready()], timeout=_START_TIMEOUT_S)[0]:
                self.close()
                raise InfrastructureError(
                    f"cannot place {slot.ranks} {self.backend} ranks on {slot.host} "
                    f"({dict(self.bundle)} each)",
                    hint="check `ray status`: other work may hold those resources",
                )

    def start(self) -> list[RankInfo]:
        if not self._pgs:
            self._place()
        remote = ray.remote(Rank)
        actors: list[Any] = [
            remote.options(
                num_cpus=self.bundle.get("CPU", 0),
                num_gpus=self.bundle.get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=i
                ),
                runtime_env={"env_vars": dict(self.env)},
            ).remote(
                self.world_size,
                self.backend,
                self.plugins,
                Limits(self.mem_limit, slot.memory_bytes // slot.ranks),
                self.moe,
                self.nccl_engine,
            )
            for pg, slot in zip(self._pgs, self.slots, strict=True)
            for i in range(slot.ranks)
        ]
        infos = ray.get([a.info.remote() for a in actors], timeout=_START_TIMEOUT_S)
        node_order = {slot.node_id: i for i, slot in enumerate(self.slots)}
        order = sorted(
            range(len(actors)),
            key=lambda i: (node_order[infos[i].node_id], infos[i].gpu_pci_bus_id or "", i),
        )
        self.actors = [actors[i] for i in order]
        self.infos = [replace(infos[i], rank=rank) for rank, i in enumerate(order)]
        port = ray.get(self.actors[0].listen.remote(), timeout=_START_TIMEOUT_S)
        host = self.infos[0].ip
        joins = [
            a.join.remote(rank, host, port, self.group_timeout_s)
            for rank, a in enumerate(self.actors)
        ]
        ray.get(joins, timeout=_START_TIMEOUT_S)
        for group_id in self._open:
            self._open_everywhere(group_id)
        return self.infos

    def versions(self) -> Versions:
        result: Versions = ray.get(self.actors[0].versions.remote(), timeout=_START_TIMEOUT_S)
        return result

    def open_group(self, group_id: str, ranks: tuple[int, ...], nodes: tuple[int, ...]) -> None:
        """A subgroup on every rank (new_group's rule), `nodes` giving each member's node."""
        self._open[group_id] = (ranks, nodes)
        self._open_everywhere(group_id)

    def _open_everywhere(self, group_id: str) -> None:
        ranks, nodes = self._open[group_id]
        refs = [a.open_group.remote(group_id, ranks, nodes) for a in self.actors]
        ray.get(refs, timeout=_START_TIMEOUT_S)

    def close_group(self, group_id: str) -> None:
        self._open.pop(group_id, None)
        ray.get([a.close_group.remote(group_id) for a in self.actors], timeout=_START_TIMEOUT_S)

    def _prepare(self, members: Sequence[Any], point: Point, deadline: float) -> Outcome | None:
        """Phase one on every member; None when all hold their buffers, else why not (and
        then nobody holds any)."""
        prepared, timed_out = _gather([m.prepare.remote(point) for m in members], deadline)
        if timed_out:
            self._rebuild()
            return Outcome("timeout", error="prepare timed out", launched=False)
        failed = next((p for p in prepared if isinstance(p, BaseException)), None)
        if failed is not None:
            self._release(members)
            return Outcome("error", error=_message(failed), launched=False)
        ooms = [p.error or "" for p in prepared if isinstance(p, Prepared) and p.status == "oom"]
        if ooms:
            self._release(members)
            more = f"; and {len(ooms) - 3} more ranks" if len(ooms) > 3 else ""
            return Outcome("oom", error="; ".join(ooms[:3]) + more, launched=False)
        return None

    def run_point(self, point: Point, timeout_s: float) -> Outcome:
        (outcome,) = self.run_points([point], timeout_s)
        return outcome

    def run_points(self, points: Sequence[Point], timeout_s: float) -> list[Outcome]:
        """Points of disjoint groups at the same time (one point: the usual case): each
        group prepares, then every group that prepared executes, all at once."""
        deadline = time.monotonic() + timeout_s
        members = [[self.actors[r] for r in self._open[p.group_id][0]] for p in points]
        outcomes: list[Outcome | None] = [
            self._prepare(m, p, deadline) for m, p in zip(members, points, strict=True)
        ]
        if any(o is not None and o.status == "timeout" for o in outcomes):
            return [
                o or Outcome("timeout", error="another group's prepare timed out") for o in outcomes
            ]
        launched = [i for i, o in enumerate(outcomes) if o is None]
        refs = [[m.execute.remote() for m in members[i]] for i in launched]
        results, timed_out = _gather([ref for group in refs for ref in group], deadline)
        if timed_out:
            self._rebuild()
        for i, group in zip(launched, refs, strict=True):
            measured = results[: len(group)]
            results = results[len(group) :]
            outcomes[i] = self._outcome(measured, timed_out, timeout_s)
        if not timed_out and any(o and o.status != "ok" and o.launched for o in outcomes):
            # A rank that failed inside a collective can leave the communicator unusable.
            self._rebuild()
        return [o for o in outcomes if o is not None]

    @staticmethod
    def _outcome(measured: list[Any], timed_out: bool, timeout_s: float) -> Outcome:
        if timed_out and any(m is None for m in measured):
            return Outcome("timeout", error=f"point took over {timeout_s:g} s")
        failed = next((m for m in measured if isinstance(m, BaseException)), None)
        if failed is not None:
            return Outcome("oom" if _out_of_memory(failed) else "error", error=_message(failed))
        return Outcome("ok", measured=tuple(measured))

    def allocates(self, point: Point, timeout_s: float) -> bool:
        """Whether every member can hold the point's buffers: phase one alone, then freed."""
        members = [self.actors[r] for r in self._open[point.group_id][0]]
        if self._prepare(members, point, time.monotonic() + timeout_s) is not None:
            return False
        self._release(members)
        return True

    def budgets(self, group_id: str) -> list[int]:
        """Each member's memory budget in bytes, in group rank order."""
        members = [self.actors[r] for r in self._open[group_id][0]]
        return list(ray.get([m.budget.remote() for m in members], timeout=_START_TIMEOUT_S))

    def copy_matrix(
        self, rank: int, sizes: Sequence[int], iters: int, warmup: int, timeout_s: float
    ) -> list[Copied]:
        """The copy-engine matrix of `rank`'s node, timed by that rank's actor."""
        ref = self.actors[rank].copy_matrix.remote(list(sizes), iters, warmup)
        result: list[Copied] = ray.get(ref, timeout=timeout_s)
        return result

    def _release(self, members: Sequence[Any]) -> None:
        ray.get([m.release.remote() for m in members], timeout=_START_TIMEOUT_S)

    def _rebuild(self) -> None:
        """New actors and process groups for this set, its open groups opened again."""
        self.kill()
        self.start()

    def kill(self) -> None:
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []

    def close(self) -> None:
        self.kill()
        for pg in self._pgs:
            remove_placement_group(pg)
        self._pgs = []


def _gather(refs: list[Any], deadline: float) -> tuple[list[Any], bool]:
    """Every result in order (a failure as its exception), and whether some never came.

    Once one rank has failed, the others get a short grace: if they are stuck in a
    collective the failed rank left, waiting for the full timeout would only lose time.
    """
    results: dict[Any, Any] = {}
    pending = list(refs)
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return [results.get(r) for r in refs], True
        ready, pending = ray.wait(
            pending, num_returns=len(pending), timeout=min(remaining, _POLL_S)
        )
        for ref in ready:
            try:
                results[ref] = ray.get(ref)
            except Exception as exc:
                results[ref] = exc
                deadline = min(deadline, time.monotonic() + _GRACE_S)
    return [results[r] for r in refs], False


def _out_of_memory(exc: BaseException) -> bool:
    """torch's OutOfMemoryError, or NCCL's report of a CUDA allocation that failed inside it."""
    cause = getattr(exc, "cause", None) or exc
    return type(cause).__name__ == "OutOfMemoryError" or "out of memory" in str(cause).lower()


def _message(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"
