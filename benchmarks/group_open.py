"""How to open a wave's groups: the wall time to open and close every group of one wave of
internode node pairs, three ways, on a fake multi-node Ray cluster (ray.cluster_utils, gloo).

- `local`: `dist.new_group(ranks, use_local_synchronization=True)` on the members only,
  every group at once (what the executor does, `worker.Rank.open_group`).
- `world`: every rank of the world calls `dist.new_group` for every group of the wave, in
  the same order (the members keep theirs), as sweeper did before the schedule.
- `stores`: each group's first member serves a TCPStore of its own; the members build the
  gloo group on it directly, never touching the world's store.

Each way opens the groups, runs one 4-byte all-reduce on each (gloo connects its mesh when
the group is made, so this only shows the group works) and closes them; the driver fans the
calls out with Ray as the executor does. The wave is the schedule's own: its largest wave of
internode groups for `--nodes` nodes of 2 CPU ranks. Each way opens in a fresh world (the
join is not timed); ways are interleaved over `--repeats` rounds after one to warm up; the
table gives each way's median and fastest wall time and its ratio to `local`'s median. The
box's cores bound the absolute figures: every rank actor and raylet shares them.

    RAY_AUTH_MODE=disabled python benchmarks/group_open.py [--nodes 8] [--repeats 7]
"""

from __future__ import annotations

import argparse
import datetime
import socket
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ray
import torch
import torch.distributed as dist
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from torch.distributed import PrefixStore, TCPStore  # type: ignore[attr-defined]

from sweeper.commands.plan_estimate import recorded_node, replicated
from sweeper.driver.cluster import actor_env
from sweeper.ops.registry import resolve
from sweeper.planning import request
from sweeper.planning.placement import expected_placement
from sweeper.planning.profile import build_spec
from sweeper.planning.schedule import schedule
from sweeper.wire import Backend

CPU_NODE = Path(__file__).parents[1] / "tests" / "data" / "topologies" / "cpu-no-nvml.json"
RANKS_PER_NODE = 2
TIMEOUT = datetime.timedelta(seconds=120)
Groups = Sequence[tuple[int, ...]]


class Member:
    """One rank of the world: joins it, then opens and closes groups whichever way asked."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.rank = -1
        self.store: Any = None
        self.groups: dict[tuple[int, ...], Any] = {}  # the members' groups, by their ranks
        self.served: dict[tuple[int, ...], Any] = {}  # per-group stores this rank serves

    def listen(self) -> int:
        self.store = TCPStore("0.0.0.0", 0, self.world_size, True, wait_for_workers=False)
        return int(self.store.port)

    def leave(self) -> None:
        """Out of the world: the next way starts from a new one (a new store, no names)."""
        dist.destroy_process_group()
        self.store = None

    def join(self, rank: int, host: str, port: int) -> None:
        self.rank = rank
        if self.store is None:
            self.store = TCPStore(host, port, self.world_size, False)
        dist.init_process_group(
            "gloo", store=self.store, rank=rank, world_size=self.world_size, timeout=TIMEOUT
        )

    def host(self) -> str:
        return socket.gethostbyname(socket.gethostname())

    def open_local(self, ranks: tuple[int, ...]) -> None:
        self.groups[ranks] = dist.new_group(list(ranks), use_local_synchronization=True)
        self._probe(ranks)

    def open_world(self, groups: Groups) -> None:
        for ranks in groups:
            group = dist.new_group(list(ranks))  # every rank, in the same order
            if self.rank in ranks:
                self.groups[ranks] = group
                self._probe(ranks)

    def serve(self, ranks: tuple[int, ...]) -> int:
        """The group's first member: its store, on a port the OS picks."""
        store = TCPStore("0.0.0.0", 0, len(ranks), True, wait_for_workers=False)
        self.served[ranks] = store
        return int(store.port)

    def open_store(self, ranks: tuple[int, ...], host: str, port: int) -> None:
        store = self.served.get(ranks) or TCPStore(host, port, len(ranks), False)
        prefixed = PrefixStore("/".join(map(str, ranks)), store)
        self.groups[ranks] = dist.ProcessGroupGloo(
            prefixed, ranks.index(self.rank), len(ranks), TIMEOUT
        )
        self._probe(ranks)

    def _probe(self, ranks: tuple[int, ...]) -> None:
        group, one = self.groups[ranks], torch.ones(1)
        if isinstance(group, dist.ProcessGroupGloo):
            group.allreduce([one]).wait()  # not registered with torch.distributed
        else:
            dist.all_reduce(one, group=group)
        assert one.item() == len(ranks)

    def close(self) -> None:
        for group in self.groups.values():
            if not isinstance(group, dist.ProcessGroupGloo):
                dist.destroy_process_group(group)
        self.groups.clear()
        self.served.clear()


def wave_of_pairs(nodes: int) -> list[tuple[int, ...]]:
    """The largest wave of internode groups the schedule makes for `nodes` nodes."""
    spec = build_spec(
        backend="gloo",
        nodes=nodes,
        gpus_per_node=RANKS_PER_NODE,
        tiers="internode",
        pairs="all",
        ops="all_reduce",
    )
    placement = expected_placement(
        "gloo", replicated(recorded_node(CPU_NODE), nodes), [RANKS_PER_NODE] * nodes
    )
    run = request.resolve(spec, Backend.GLOO)
    planned = schedule(placement, run.request(resolve(spec.ops)))
    wave = max(planned.waves, key=lambda w: len(w.groups))
    return [group.ranks for group in wave.groups]


def start(nodes: int) -> list[Any]:
    """RANKS_PER_NODE actors on each of the cluster's nodes."""
    actor = ray.remote(num_cpus=1, runtime_env={"env_vars": actor_env()})(Member)
    node_ids = [n["NodeID"] for n in ray.nodes() if n["Resources"].get("CPU")]
    assert len(node_ids) == nodes, node_ids
    world = nodes * RANKS_PER_NODE
    ranks = [
        actor.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
        ).remote(world)
        for node_id in node_ids
        for _ in range(RANKS_PER_NODE)
    ]
    return ranks


def join(ranks: list[Any]) -> None:
    """A new world of every rank. Each way's round opens and closes its groups in a world of
    its own: a group closed and opened again in one world gets the same name (local
    synchronization hashes its ranks) and could read its predecessor's keys in the store."""
    port = ray.get(ranks[0].listen.remote())
    host = ray.get(ranks[0].host.remote())
    ray.get([r.join.remote(i, host, port) for i, r in enumerate(ranks)])


def local(ranks: list[Any], groups: Groups) -> None:
    ray.get([ranks[r].open_local.remote(g) for g in groups for r in g])


def world(ranks: list[Any], groups: Groups) -> None:
    ray.get([r.open_world.remote(groups) for r in ranks])


def stores(ranks: list[Any], groups: Groups) -> None:
    ports = ray.get([ranks[g[0]].serve.remote(g) for g in groups])
    hosts = ray.get([ranks[g[0]].host.remote() for g in groups])
    ray.get(
        [
            ranks[r].open_store.remote(g, host, port)
            for g, host, port in zip(groups, hosts, ports, strict=True)
            for r in g
        ]
    )


WAYS: dict[str, Callable[[list[Any], Groups], None]] = {
    "local": local,
    "world": world,
    "stores": stores,
}


def measure(nodes: int, repeats: int) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(nodes):
        cluster.add_node(num_cpus=RANKS_PER_NODE)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        ranks = start(nodes)
        groups = wave_of_pairs(nodes)
        took: dict[str, list[float]] = {way: [] for way in WAYS}
        for repeat in range(repeats + 1):  # the first round warms up every way
            order = list(WAYS)[repeat % len(WAYS) :] + list(WAYS)[: repeat % len(WAYS)]
            for way in order:
                join(ranks)
                begin = time.perf_counter()
                WAYS[way](ranks, groups)
                ray.get([r.close.remote() for r in ranks])
                if repeat:
                    took[way].append(time.perf_counter() - begin)
                ray.get([r.leave.remote() for r in ranks])
    finally:
        ray.shutdown()
        cluster.shutdown()
    sizes = sorted({len(g) for g in groups})
    print(
        f"{nodes} nodes x {RANKS_PER_NODE} ranks, a wave of {len(groups)} groups of "
        f"{'/'.join(map(str, sizes))} ranks, {repeats} rounds\n"
    )
    print("| way | median ms | fastest ms | per group ms | x local |")
    print("|---|---|---|---|---|")
    chosen = statistics.median(took["local"])
    for way, times in took.items():
        median = statistics.median(times)
        print(
            f"| {way} | {median * 1e3:.0f} | {min(times) * 1e3:.0f} | "
            f"{median / len(groups) * 1e3:.1f} | {median / chosen:.2f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    measure(args.nodes, args.repeats)


if __name__ == "__main__":
    main()
