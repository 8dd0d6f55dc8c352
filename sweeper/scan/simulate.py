"""A scan of a simulated fleet: planted faults, an oracle that measures each group with noise,
the same policy and judge as a real scan, a cost model that times each wave, and the
verdicts scored against the planted truth. A failing group is an error returned at once: a
hang would add the point's timeout (`--timeout`, 300 s by default) to its wave.

    sweeper scan --simulate --nodes 1024 --gpus-per-node 8 --faults 3 --strategy adaptive
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from sweeper.planning.estimate import CostModel
from sweeper.scan.fleet import Fleet, Group, Node, Outcome, Reading, Result, Stage, Wave
from sweeper.scan.judge import Health, Subject, Verdict, judge
from sweeper.scan.policy import Policy, Strategy, blocks
from sweeper.scan.thresholds import Thresholds
from sweeper.wire import Name

GiB = 1 << 30


@dataclass(frozen=True, kw_only=True, slots=True)
class Costs:
    """Every figure the simulation's clock and oracle use, with where it comes from. An
    assumption says so: nothing here was measured on a fleet."""

    # Starting the actor set and joining its world: the planner's figure (CostModel), 10.6 s
    # measured for one NCCL rank on nvidia-h100-x1 (benchmarks/scan_costs.py,
    # docs/measurements/h100-x1-2026-11-25.md); the actors themselves are added below.
    set_start_s: float = CostModel.set_start_s
    # Ray creates actors at 389 a second: ray-project/ray release log 1.12.0,
    # release_logs/1.12.0/benchmarks/many_actors.json (10 000 actors in 25.7 s).
    actors_per_s: float = 388.9
    # Creating one NCCL communicator, linear in its ranks. The slope: stock NCCL took ~265 s
    # to initialise at 96k GPUs (Meta, "Collective Communication for 100k+ GPUs", NCCLX,
    # arXiv:2510.20171): 2.8 ms a rank. The intercept: a group's communicator of one rank,
    # 23.1 ms on nvidia-h100-x1 (benchmarks/scan_costs.py, h100-x1-2026-11-25.md).
    comm_base_s: float = 0.0231
    comm_per_rank_s: float = 265.0 / 96_000
    # Opening a wave's groups, a point's overhead and its adaptive timed blocks: the
    # planner's figures (CostModel; PERFORMANCE.md, cost model), a point's blocks 3 of at
    # least 5 iterations with as long again of warm-up, plus two iterations (the first call,
    # the check).
    wave_open_s: float = CostModel.wave_open_s
    point_overhead_s: float = CostModel.point_overhead_s
    timed_s: float = CostModel.adaptive_s
    timed_iterations: int = 15
    # Points a group runs: all_reduce at the smallest size and at the bandwidth size; the
    # gate adds each GPU's h2d and d2h at 256 MiB, all GPUs at once (issue 31).
    internode_points: int = 2
    gate_points: int = 4
    # Latency of the smallest all_reduce: 35 us on 4x H200 NVLink
    # (docs/measurements/h200-x4-2026-11-22.md); across nodes 50 us, PERFORMANCE.md's
    # assumed internode tier.
    gate_latency_us: float = 35.0
    internode_latency_us: float = 50.0
    copy_latency_us: float = 10.0  # PERFORMANCE.md's `gpu` tier, assumed
    # Journaling a point's rows on the driver (one fsync), serial over a wave's groups:
    # 3.2 ms on nvidia-h100-x1 (benchmarks/scan_costs.py, h100-x1-2026-11-25.md).
    row_s: float = 0.0032
    # The healthy fleet the oracle measures. Across nodes: 400 GB/s all_reduce busbw, the
    # published H100/H200 + InfiniBand NDR figure (reference.py). An NVLink island: 361 GB/s,
    # 4x H200 nccl-tests all_reduce (h200-x4-2026-11-22.md; the 4-GPU figure stands in for
    # 8). Each GPU's pinned h2d: 54.9 GB/s, one H100 on PCIe Gen5 x16
    # (docs/measurements/h100-x1-2026-11-23.md).
    internode_busbw_gb_per_s: float = 400.0
    island_busbw_gb_per_s: float = 361.0
    copy_gb_per_s: float = 54.9
    noise: float = 0.01  # one sigma of each figure's run-to-run spread (~1-2%), assumed

    def comm_s(self, ranks: int) -> float:
        return self.comm_base_s + self.comm_per_rank_s * ranks

    def point_s(self, latency_us: float, size_bytes: int, factor: float, busbw: float) -> float:
        iteration = latency_us / 1e6 + size_bytes * factor / (busbw * 1e9)
        timed = max(self.timed_s, self.timed_iterations * iteration)
        return self.point_overhead_s + 2 * timed + 2 * iteration


class Fault(Name):
    SLOW_NODE = "slow-node"
    SLOW_LINK = "slow-link"
    DEAD_NODE = "dead-node"
    SLOW_NIC = "slow-nic"
    SLOW_GPU = "slow-gpu"
    FLAPPING = "flapping"


DEFAULT_FAULTS = (Fault.SLOW_NODE, Fault.SLOW_LINK, Fault.DEAD_NODE)
# How much slower a planted fault makes what crosses it (assumptions: faults a scan must
# see, such as a NIC trained at 200 of 400 Gb/s).
SLOWDOWN = {Fault.SLOW_NODE: 0.55, Fault.SLOW_LINK: 0.5, Fault.SLOW_NIC: 0.5, Fault.SLOW_GPU: 0.5}
FLAP_FAILS = 0.5  # a flapping node fails one group in two


@dataclass(frozen=True, kw_only=True, slots=True)
class Planted:
    fault: Fault
    nodes: tuple[str, ...]
    gpu: int | None = None

    @property
    def subject(self) -> tuple[Subject, tuple[str, ...], int | None]:
        if self.fault is Fault.SLOW_GPU:
            return Subject.GPU, self.nodes, self.gpu
        if self.fault is Fault.SLOW_LINK:
            return Subject.LINK, self.nodes, None
        return Subject.NODE, self.nodes, None


def cycle(count: int) -> tuple[Fault, ...]:
    """`count` faults: the default three, then the others in turn."""
    order = (*DEFAULT_FAULTS, Fault.SLOW_NIC, Fault.SLOW_GPU, Fault.FLAPPING)
    return tuple(order[i % len(order)] for i in range(count))


def fleet_of(nodes: int, gpus_per_node: int, gpu_model: str | None = "H100") -> Fleet:
    return Fleet(
        nodes=tuple(
            Node(id=f"n{i:04d}", host=f"host{i:04d}", gpus=gpus_per_node) for i in range(nodes)
        ),
        gpu_model=gpu_model,
    )


def plant(fleet: Fleet, faults: Sequence[Fault], seed: int) -> tuple[Planted, ...]:
    """Distinct nodes for each fault. A slow link joins two neighbours in the middle of one
    of the screen's blocks of ~sqrt(N) nodes: a link within one switch, which the screen's
    groups keep together (a link between nodes no group holds is one no scan of groups can
    see)."""
    rng = random.Random(seed)
    ids = list(fleet.ids)
    middles = []  # the first of the two nodes in the middle of each screen block
    for block in blocks(ids):
        middles.append(ids.index(block[len(block) // 2 - 1]))
    taken: set[int] = set()
    planted: list[Planted] = []
    for fault in faults:
        if fault is Fault.SLOW_LINK:
            i = rng.choice([i for i in middles if not {i - 1, i, i + 1, i + 2} & taken])
            taken |= {i, i + 1}
            planted.append(Planted(fault=fault, nodes=(ids[i], ids[i + 1])))
            continue
        i = rng.choice([k for k in range(len(ids)) if k not in taken])
        taken.add(i)
        gpu = rng.randrange(fleet.nodes[i].gpus) if fault is Fault.SLOW_GPU else None
        planted.append(Planted(fault=fault, nodes=(ids[i],), gpu=gpu))
    return tuple(planted)


class Oracle:
    """Measures a group as the planted fleet would: the slowest member's or link's rate,
    with noise."""

    def __init__(self, planted: Sequence[Planted], costs: Costs, seed: int) -> None:
        self.costs = costs
        self.rng = random.Random(seed + 1)
        self.dead = {p.nodes[0] for p in planted if p.fault is Fault.DEAD_NODE}
        self.flapping = {p.nodes[0] for p in planted if p.fault is Fault.FLAPPING}
        self.node_rate = {
            p.nodes[0]: SLOWDOWN[p.fault]
            for p in planted
            if p.fault in (Fault.SLOW_NODE, Fault.SLOW_NIC)
        }
        self.nic = {p.nodes[0] for p in planted if p.fault is Fault.SLOW_NIC}
        self.links = {frozenset(p.nodes) for p in planted if p.fault is Fault.SLOW_LINK}
        self.gpus = {(p.nodes[0], p.gpu) for p in planted if p.fault is Fault.SLOW_GPU}
        self.marked = {n for p in planted for n in p.nodes}

    def noisy(self, value: float) -> float:
        return value * (1 + self.rng.gauss(0, self.costs.noise))

    def measure(self, fleet: Fleet, group: Group) -> Outcome:
        if group.stage is not Stage.GATE and not self.marked.intersection(group.nodes):
            return self.healthy(group)
        if self.dead & set(group.nodes):
            return Outcome(group=group, result=Result.MISSING, reason="its actors did not start")
        if group.stage is Stage.GATE:
            return self.gate(fleet, group.nodes[0], group)
        if self.flapping & set(group.nodes) and self.rng.random() < FLAP_FAILS:
            return Outcome(group=group, result=Result.FAILED, reason="NCCL error: remote closed")
        rate = min(
            [self.node_rate.get(n, 1.0) for n in group.nodes]
            + [SLOWDOWN[Fault.SLOW_LINK] for link in self.links if link <= set(group.nodes)]
        )
        readings = tuple(
            Reading(node=n, flags=("NIC mlx5_3 at 200 of 400 Gb/s",))
            for n in group.nodes
            if n in self.nic
        )
        return Outcome(
            group=group,
            result=Result.OK,
            busbw_gb_per_s=self.noisy(self.costs.internode_busbw_gb_per_s * rate),
            latency_us=self.noisy(self.costs.internode_latency_us),
            size_bytes=GiB,
            readings=readings,
        )

    def healthy(self, group: Group) -> Outcome:
        return Outcome(
            group=group,
            result=Result.OK,
            busbw_gb_per_s=self.noisy(self.costs.internode_busbw_gb_per_s),
            latency_us=self.noisy(self.costs.internode_latency_us),
            size_bytes=GiB,
        )

    def gate(self, fleet: Fleet, node: str, group: Group) -> Outcome:
        rates = [0.5 if (node, g) in self.gpus else 1.0 for g in range(fleet.node(node).gpus)]
        readings = tuple(
            Reading(node=node, gpu=g, copy_gb_per_s=self.noisy(self.costs.copy_gb_per_s * r))
            for g, r in enumerate(rates)
        )
        return Outcome(
            group=group,
            result=Result.OK,
            busbw_gb_per_s=self.noisy(self.costs.island_busbw_gb_per_s * min(rates)),
            latency_us=self.noisy(self.costs.gate_latency_us),
            size_bytes=GiB,
            readings=readings,
        )


def wave_seconds(fleet: Fleet, outcomes: Sequence[Outcome], costs: Costs) -> float:
    """A wave lasts as long as its slowest group, plus opening its groups and writing its
    rows (on the driver, one after another)."""
    slowest = 0.0
    rows = 0
    for o in outcomes:
        gate = o.group.stage is Stage.GATE
        ranks = o.group.ranks(fleet)
        seconds = costs.comm_s(ranks)
        if o.result is Result.OK and o.busbw_gb_per_s is not None:
            factor = 2 * (ranks - 1) / ranks if ranks > 1 else 1.0
            latency = costs.gate_latency_us if gate else costs.internode_latency_us
            seconds += costs.point_s(latency, 8, factor, o.busbw_gb_per_s)
            seconds += costs.point_s(latency, o.size_bytes, factor, o.busbw_gb_per_s)
            if gate:  # h2d and d2h at 256 MiB, every GPU at once
                copy = costs.point_s(costs.copy_latency_us, 256 << 20, 1.0, costs.copy_gb_per_s)
                seconds += 2 * copy
        rows += costs.gate_points if gate else costs.internode_points
        slowest = max(slowest, seconds)
    return costs.wave_open_s + slowest + rows * costs.row_s


@dataclass(frozen=True, kw_only=True, slots=True)
class WaveRun:
    index: int
    stage: Stage
    groups: int
    largest: int  # nodes in its largest group
    seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Score:
    condemned: int  # verdicts slow, failed or unreachable
    true_positives: int  # of those, planted
    named: int  # planted faults named (a flapping node: unconfirmed counts)
    planted: int
    healthy_condemned: tuple[str, ...]  # condemned, nothing planted there

    @property
    def precision(self) -> float:
        return self.true_positives / self.condemned if self.condemned else 1.0

    @property
    def recall(self) -> float:
        return self.named / self.planted if self.planted else 1.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Simulation:
    nodes: int
    gpus_per_node: int
    strategy: str
    seed: int
    planted: tuple[Planted, ...]
    waves: tuple[WaveRun, ...]
    start_s: float  # the actor set's start
    outcomes: tuple[Outcome, ...] = field(repr=False)  # every group's, in the order they ran
    verdicts: tuple[Verdict, ...] = field(repr=False)
    score: Score

    @property
    def seconds(self) -> float:
        return self.start_s + sum(w.seconds for w in self.waves)

    @property
    def groups(self) -> int:
        return sum(w.groups for w in self.waves)

    def stages(self) -> dict[str, int]:
        """Waves per stage."""
        out: dict[str, int] = {}
        for w in self.waves:
            out[str(w.stage)] = out.get(str(w.stage), 0) + 1
        return out


def score(verdicts: Sequence[Verdict], planted: Sequence[Planted]) -> Score:
    truth = {p.subject: p for p in planted}
    key = {v: (v.subject, v.nodes, v.gpu) for v in verdicts}
    down = {v.nodes[0] for v in verdicts if v.subject is Subject.NODE and v.condemned}
    # a condemned node's GPUs go with it: one thing to fix
    condemned = [
        v for v in verdicts if v.condemned and not (v.subject is Subject.GPU and v.nodes[0] in down)
    ]
    hits = [v for v in condemned if key[v] in truth]
    named = {
        key[v]
        for v in verdicts
        if key[v] in truth
        and (
            v.condemned
            or (v.health is Health.UNCONFIRMED and truth[key[v]].fault is Fault.FLAPPING)
        )
    }
    return Score(
        condemned=len(condemned),
        true_positives=len(hits),
        named=len(named),
        planted=len(truth),
        healthy_condemned=tuple(
            v.name for v in condemned if key[v] not in truth and v.subject is Subject.NODE
        ),
    )


def simulate(
    *,
    nodes: int,
    gpus_per_node: int = 8,
    faults: Sequence[Fault] = DEFAULT_FAULTS,
    strategy: Strategy | None = None,
    seed: int = 0,
    thresholds: Thresholds | None = None,
    costs: Costs | None = None,
    gpu_model: str | None = "H100",
) -> Simulation:
    strategy = strategy or Strategy.parse("adaptive", seed=seed)
    thresholds = thresholds or Thresholds()
    costs = costs or Costs()
    fleet = fleet_of(nodes, gpus_per_node, gpu_model)
    planted = plant(fleet, faults, seed)
    oracle = Oracle(planted, costs, seed)
    policy = Policy(fleet, strategy, thresholds)
    outcomes: list[Outcome] = []
    runs: list[WaveRun] = []
    wave: Wave | None = policy.next()
    while wave is not None:
        got = [oracle.measure(fleet, g) for g in wave.groups]
        outcomes += got
        runs.append(
            WaveRun(
                index=wave.index,
                stage=wave.stage,
                groups=len(wave.groups),
                largest=max(len(g.nodes) for g in wave.groups),
                seconds=wave_seconds(fleet, got, costs),
            )
        )
        wave = policy.next(got)
    verdicts = judge(fleet, outcomes, thresholds)
    return Simulation(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        strategy=str(strategy),
        seed=seed,
        planted=planted,
        waves=tuple(runs),
        start_s=costs.set_start_s + nodes * gpus_per_node / costs.actors_per_s,
        outcomes=tuple(outcomes),
        verdicts=tuple(verdicts),
        score=score(verdicts, planted),
    )
