"""The scan's nodes and its one actor set over them: the nodes named or counted (resuming,
its record's), and the set started on those still in, the others' ranks joining again
without the nodes lost (`started`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Container, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import ray

from sweeper.driver import cluster
from sweeper.errors import InfrastructureError
from sweeper.scan.fleet import Fleet, FleetNode
from sweeper.scan.waves import renamed
from sweeper.topology import Node
from sweeper.wire import Backend, RankInfo


def fleet_of(slots: Sequence[cluster.NodeSlot], label: str | None, gpu_model: str | None) -> Fleet:
    """The scan's fleet: its nodes in their order, each in the domain its Ray node `label`
    (the scan's --domain-label) gives it."""
    labels = cluster.alive()
    return Fleet(
        nodes=tuple(
            FleetNode(
                id=slot.node_id,
                host=slot.host,
                gpus=slot.ranks,
                domain=labels.get(slot.node_id, {}).get(label) if label else None,
            )
            for slot in slots
        ),
        gpu_model=gpu_model,
    )


def layout(
    backend: Backend,
    per_node: int | None,
    asked: int | tuple[str, ...] | None,
    machines: Sequence[Node] | None,
    gone: dict[str, str],
) -> tuple[list[cluster.NodeSlot], list[Node]]:
    """The scan's nodes and their topology: the count or the nodes `asked`; resuming, the
    record's `machines` in its order, those Ray no longer has out of the scan (in `gone`, and
    their topology the record's)."""
    if machines is not None:
        names = [m.node_id for m in machines]
    elif isinstance(asked, tuple):
        names = list(asked)
    else:
        slots = cluster.choose_nodes(backend, asked, per_node)
        return slots, cluster.discover(slots)
    every = cluster.choose_nodes(backend, None, per_node)
    slots, unknown = named(every, names)
    if machines is None:
        if unknown:
            raise InfrastructureError(
                f"--nodes: the Ray cluster has no node {', '.join(unknown)} alive "
                "(a host name or a Ray node id)",
                hint="sweeper topo lists the nodes",
            )
        return slots, cluster.discover(slots)
    found = {s.node_id: node for s, node in zip(slots, cluster.discover(slots), strict=True)}
    ranks = slots[0].ranks if slots else 1
    for node in unknown:
        gone[node] = "it left the cluster before the scan went on"
    kept = {s.node_id: s for s in slots}
    return (
        [kept.get(m.node_id) or cluster.NodeSlot(m.node_id, m.host, ranks) for m in machines],
        [found.get(m.node_id, m) for m in machines],
    )


def moved(machines: Sequence[Node], alive: Sequence[cluster.NodeSlot]) -> dict[str, str]:
    """The record's nodes that Ray knows by another id now (a Ray started anew, an embedded
    one above all, gives its nodes new ids), by host: old id -> new, where the host holds
    exactly one of the record's nodes Ray lost and one alive node no record's node is."""
    known = {s.node_id for s in alive}
    taken = {m.node_id for m in machines}
    lost = [m for m in machines if m.node_id not in known]
    free = [s for s in alive if s.node_id not in taken]
    found: dict[str, str] = {}
    for machine in lost:
        here = [s.node_id for s in free if s.host == machine.host]
        if len(here) == 1 and sum(m.host == machine.host for m in lost) == 1:
            found[machine.node_id] = here[0]
    return found


def rehomed(
    machines: Sequence[Node], waves: Sequence[dict[str, Any]], alive: Sequence[cluster.NodeSlot]
) -> tuple[tuple[Node, ...], tuple[dict[str, Any], ...]]:
    """A resumed scan's nodes and finished waves with the ids Ray has for them now (`moved`)."""
    ids = moved(machines, alive)
    return (
        tuple(replace(m, node_id=ids.get(m.node_id, m.node_id)) for m in machines),
        tuple(renamed(wave, ids) for wave in waves),
    )


def named(
    slots: Sequence[cluster.NodeSlot], names: Sequence[str]
) -> tuple[list[cluster.NodeSlot], list[str]]:
    """The slots of the nodes `names` gives (each a Ray node id or a host name, every node of
    that host), in the order named; and the names no slot has."""
    out: dict[str, cluster.NodeSlot] = {}
    unknown = []
    for name in names:
        found = [s for s in slots if name in (s.node_id, s.host)]
        if not found:
            unknown.append(name)
        out.update((s.node_id, s) for s in found)
    return list(out.values()), unknown


class Forming(Protocol):
    """What `started` asks of an actor set (`cluster.RankSet`)."""

    def start(self) -> list[RankInfo]: ...
    def drop(self, nodes: Collection[str]) -> list[RankInfo]: ...
    def close(self) -> None: ...


S = TypeVar("S", bound=Forming)


def lose(
    slots: Sequence[cluster.NodeSlot], lost: dict[str, str], why: str, alive: Container[str]
) -> bool:
    """The nodes of `slots` not `alive` (Ray's) and not yet `lost`, put in `lost` with `why`;
    whether there were any."""
    gone = [s.node_id for s in slots if s.node_id not in alive and s.node_id not in lost]
    for node in gone:
        lost[node] = why
    return bool(gone)


def started(
    slots: Sequence[cluster.NodeSlot],
    lost: dict[str, str],
    new_set: Callable[[Sequence[cluster.NodeSlot]], S],
    alive: Callable[[], Container[str]],
    running: S | None = None,
) -> tuple[S, list[RankInfo]]:
    """An actor set on the nodes of `slots` not `lost`, started, and its ranks: `running`
    (the scan's set, some of its nodes lost since it started) without the lost nodes, its
    other ranks joined again in their processes (`drop`); else a `new_set`, started.

    Where the actors of some nodes did not start (the set names them: a constructor or
    runtime env that failed, no answer in time) or the nodes are gone from Ray, those nodes
    are out (`lost`, unreachable, with why). The others' actors, started already, then join
    without them; where they cannot (a drop that failed, a failure that names no node), a
    new set starts without them. A new set's failure that names no node and finds none gone
    stops the scan (InfrastructureError, exit 3); the set is closed whenever one escapes."""
    ranks, rejoin = running, running is not None
    try:
        while True:
            if not any(s.node_id not in lost for s in slots):
                raise InfrastructureError("no node of the scan could start its actors")
            if ranks is None:
                ranks = new_set([s for s in slots if s.node_id not in lost])
            try:
                return ranks, ranks.drop(lost) if rejoin else ranks.start()
            except (InfrastructureError, cluster.StartFailed, ray.exceptions.RayError) as exc:
                named = exc.nodes if isinstance(exc, cluster.StartFailed) else {}
                for node, why in named.items():
                    lost.setdefault(node, f"its actors did not start: {why}")
                gone = lose(slots, lost, f"its actors did not start: {exc}", alive())
                if not (rejoin or gone or named):
                    raise InfrastructureError(f"the ranks did not start: {exc}") from exc
                rejoin = bool(named)  # the other nodes' actors started: they join without
                if not rejoin:
                    ranks.close()
                    ranks = None
    except BaseException:
        if ranks is not None:
            ranks.close()
        raise
