"""The cluster's nodes and the rank actors on them: choose the nodes, read their topology,
place one actor per rank, and call them (connecting is `connection`'s).

A `RankSet` is one set of rank actors with one NCCL environment and one world process group.
It opens a wave's groups on their members only and calls a group without waiting, since the
executor waits on many at once. It replaces a failed group's actors and drops lost nodes: the
other ranks keep their processes and join a new world."""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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

from sweeper.driver.actor import RankActor
from sweeper.driver.connection import get, head_lost, result, wait, wait_all
from sweeper.driver.outcome import message
from sweeper.errors import InfrastructureError
from sweeper.fabric.node import Offer, offer
from sweeper.planning.placement import Member, Placement
from sweeper.rank.preflight import local_nccl_allocators
from sweeper.topology import Node, node_record
from sweeper.wire import (
    SET_ENV_PREFIXES,
    Backend,
    Copied,
    Engine,
    Limits,
    MemLimit,
    MoeLayer,
    Point,
    RankInfo,
    Versions,
)

_START_TIMEOUT_S = 120.0
_LOOPBACK = "127.0.0.1"
GRACE_S = 10.0  # after one rank failed, how long the others get to return before a rebuild


def actor_env(
    extra: Mapping[str, str] | None = None, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The environment of an actor set: the driver's (`environ`) settings of the ranks' libraries
    (wire.SET_ENV_PREFIXES: NCCL_*, NVSHMEM_*, TORCH_NCCL_*, TORCH_SYMM_MEM_*, GLOO_*) as the
    user set them, then the set's own (a grid's variant). sweeper adds and overrides nothing
    else: NCCL's configuration files and defaults decide the rest (fabric/multicast.py)."""
    # Handed on explicitly, as a launcher would: the workers of a joined cluster were started
    # by their own node's raylet, with its environment, not the driver's.
    env = {k: v for k, v in environ.items() if k.startswith(SET_ENV_PREFIXES)}
    env.update(extra or {})
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


def offers(slots: Sequence[NodeSlot], env: Mapping[str, str]) -> list[Offer]:
    """What each chosen node offers NCCL's network (its RDMA ports, GPUDirect RDMA, net
    plugin), read by a task on the node for ranks whose actors are given `env`."""
    task = ray.remote(num_cpus=0)(_offer_here)
    refs = [
        task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node_id, soft=False)
        ).remote(env)
        for slot in slots
    ]
    return get(refs, _START_TIMEOUT_S)


def _offer_here(env: Mapping[str, str]) -> Offer:
    """The node's offer, in a task: its own environment with what the actors are given."""
    return offer({**os.environ, **env})


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
    engines: tuple[Engine, ...] = (Engine.TORCH,)  # each group gets a communicator in each
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
                self.engines,
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
