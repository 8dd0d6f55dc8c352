"""A scan of a simulated fleet: planted faults, an oracle that measures each group with noise,
the same policy and judge as a real scan, a cost model that times each wave, and the
verdicts scored against the planted truth. Its noise is drawn from recorded GPU runs
(`noise`); `benchmarks/scan_envelope.py` measures it over severities, densities and fleets.

    sweeper scan --simulate --nodes 1024 --gpus-per-node 8 --faults slow-node=26 --slowdown 0.2
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from math import isqrt, log2

from sweeper.errors import BadInput
from sweeper.ops.registry import performing
from sweeper.planning.costs import DEFAULT_TIERS, GPU_OVERHEADS, CostModel
from sweeper.scan.deadline import stall_s
from sweeper.scan.fleet import (
    Fleet,
    FleetNode,
    GroupOutcome,
    MemberReading,
    Result,
    ScanGroup,
    ScanWave,
    Stage,
)
from sweeper.scan.judge import verdicts_and_findings
from sweeper.scan.noise import Noise, recorded
from sweeper.scan.policy import ScanPolicy, Strategy
from sweeper.scan.thresholds import Finding, Thresholds
from sweeper.scan.verdict import Subject, Verdict
from sweeper.topology import MAX_GPUS as MAX_GPUS_PER_NODE
from sweeper.wire import Name, Tier

GiB = 1 << 30
BANDWIDTH_BYTES = 1 << 20  # from here a recorded point's noise is its bandwidth's


@dataclass(frozen=True, kw_only=True, slots=True)
class Costs:
    """Every figure the simulation's clock and oracle use, with where it comes from. An
    assumption says so: nothing here was measured on a fleet."""

    # Every point, wave and actor set is priced as `sweeper plan` prices them
    # (planning.costs, PERFORMANCE.md's cost model): its GPU figures, measured on 4 H200.
    model: CostModel = field(default_factory=CostModel)
    # Starting the actor set and joining its world: the model's; the actors themselves are
    # added below.
    set_start_s: float = GPU_OVERHEADS.set_start_s
    # Ray creates actors at 389 a second: ray-project/ray release log 1.12.0,
    # release_logs/1.12.0/benchmarks/many_actors.json (10 000 actors in 25.7 s).
    actors_per_s: float = 388.9
    # Creating one NCCL communicator, linear in its ranks. The slope: stock NCCL took ~265 s
    # to initialise at 96k GPUs (Meta, "Collective Communication for 100k+ GPUs", NCCLX,
    # arXiv:2510.20171): 2.8 ms a rank. The intercept: a group's communicator of one rank,
    # 23.1 ms on nvidia-h100-x1 (benchmarks/scan_costs.py, h100-x1-2026-11-25.md).
    comm_base_s: float = 0.0231
    comm_per_rank_s: float = 265.0 / 96_000
    # Opening a wave's groups: the model's.
    wave_open_s: float = GPU_OVERHEADS.wave_open_s
    # Points a group runs: all_reduce at the smallest size and at the bandwidth size; the
    # gate adds each GPU's d2d, h2d and d2h at 256 MiB, all GPUs at once (issue 31).
    internode_points: int = 2
    gate_points: int = 5
    # The most a point is given (`--timeout`'s default); one that hangs holds its wave for its
    # stall deadline, a multiple of its expected time under this (`deadline.stall_s`).
    timeout_s: float = 300.0
    # Latency of the smallest all_reduce: 35 us on 4x H200 NVLink
    # (docs/measurements/h200-x4-2026-11-22.md); across nodes 50 us, PERFORMANCE.md's
    # assumed internode tier.
    gate_latency_us: float = 35.0
    internode_latency_us: float = DEFAULT_TIERS[Tier.INTERNODE].latency_us
    copy_latency_us: float = DEFAULT_TIERS[Tier.GPU].latency_us  # the model's, assumed
    # Journaling a wave's rows on the driver, one write and one fsync (driver/scan.py): a
    # point's rows, the model's, and each further point of the wave, 56 us, nvidia-h200's
    # 1024 points of 2 recorded rows in 59.7 ms (benchmarks/scan_costs.py,
    # docs/measurements/h200-x1-2026-12-03.md).
    row_s: float = GPU_OVERHEADS.row_s
    wave_point_s: float = 0.0000555
    # The healthy fleet the oracle measures. Across nodes: 400 GB/s all_reduce busbw, the
    # published H100/H200 + InfiniBand NDR figure (reference.py). An NVLink island: 361 GB/s,
    # 4x H200 nccl-tests all_reduce (h200-x4-2026-11-22.md; the 4-GPU figure stands in for
    # 8). Each GPU's pinned h2d: 54.9 GB/s, one H100 on PCIe Gen5 x16
    # (docs/measurements/h100-x1-2026-11-23.md).
    internode_busbw_gb_per_s: float = 400.0
    island_busbw_gb_per_s: float = 361.0
    copy_gb_per_s: float = 54.9
    # Its d2d: 3810 GB/s busbw, one H200's recorded default run (reference.py's entry).
    d2d_gb_per_s: float = 3810.0
    # An all_to_all across nodes, as `Collective.nic_rate` gives it (each GPU's share for other
    # nodes through its NIC): the reference's derived 45 GB/s (reference.py), assumed. A pair
    # of GPUs of one node: 339.6 GB/s, 2x H200 all_reduce (h200-x2-2026-11-24.md), assumed
    # for a send_recv over NVLink.
    internode_a2a_gb_per_s: float = 45.0
    pair_busbw_gb_per_s: float = 339.6
    # Each figure over its model's: a recorded GPU point's time over its series' median, at
    # the bandwidth sizes the scan judges (1 MiB and up: 252 points, 0.4% of them 10-11% slow;
    # tests/data/results, `noise.recorded`). Every size's (0.6% 25-79% slow) is the heavier
    # tail the envelope also runs. Those runs are of one node: internode noise is assumed alike.
    noise: Noise = field(default_factory=lambda: recorded(BANDWIDTH_BYTES))

    def comm_s(self, ranks: int) -> float:
        return self.comm_base_s + self.comm_per_rank_s * ranks

    def journal_s(self, points: int) -> float:
        return self.row_s + self.wave_point_s * (points - 1) if points else 0.0

    def point_s(self, latency_us: float, size_bytes: int, factor: float, busbw: float) -> float:
        iteration = latency_us / 1e6 + size_bytes * factor / (busbw * 1e9)
        return self.model.point_of(iteration, size_bytes)

    def expected_s(self, stage: Stage, op: str, ranks: int, nodes: int, size_bytes: int) -> float:
        """A point of a healthy group by this model: what its stall deadline is a multiple
        of (`deadline.stall_s`)."""
        if stage is Stage.GATE:
            latency, busbw = self.gate_latency_us, self.island_busbw_gb_per_s
        elif stage is Stage.ISOLATE:
            latency, busbw = self.gate_latency_us, self.pair_busbw_gb_per_s
        else:
            latency, busbw = self.internode_latency_us, self.busbw_across(op, ranks, nodes)
        return self.point_s(latency, size_bytes, factor(op, ranks), busbw)

    def busbw_across(
        self, op: str, ranks: int, nodes: int, speed: float = 1.0, fewest: int | None = None
    ) -> float:
        """A healthy group's busbw across nodes at `speed` of it: an operation judged per NIC
        (`Collective.per_nic`) from the NIC's rate, back to busbw (`fewest`: the fewest GPUs
        a node of it has taking part, where not all do), any other the fleet's."""
        performed = performing(op)
        if performed is None or not performed.per_nic(nodes):
            return self.internode_busbw_gb_per_s * speed
        return performed.busbw_at(self.internode_a2a_gb_per_s * speed, ranks, nodes, fewest)


class Fault(Name):
    SLOW_NODE = "slow-node"  # its traffic across nodes (its PCIe root, its NICs' firmware)
    SLOW_LINK = "slow-link"  # a pair of nodes: every flow between them loses a share (a cut)
    CAPPED_LINK = "capped-link"  # a pair of nodes: the path between them carries at most a rate
    DEAD_NODE = "dead-node"  # never answers: its actors do not start
    SLOW_NIC = "slow-nic"  # its NICs (sysfs says so where one trained down a speed step)
    SLOW_GPU = "slow-gpu"  # one GPU held back (shared, clocks down at its power cap)
    FLAPPING = "flapping"  # its network fails a test at random, with its chance
    HUNG_ONCE = "hung-once"  # stops answering in one of its first HANG_WITHIN tests
    HUNG = "hung-node"  # stops answering at its first test, and for good


DEFAULT_FAULTS = (Fault.SLOW_NODE, Fault.SLOW_LINK, Fault.DEAD_NODE)
# The share of its speed a slow fault keeps where none is asked (`--slowdown`): a NIC trained
# at 200 of 400 Gb/s. The envelope (`benchmarks/scan_envelope.py`) runs 10-50% slowdowns.
RATES = {
    Fault.SLOW_NODE: 0.55,
    Fault.SLOW_LINK: 0.5,
    Fault.CAPPED_LINK: 0.5,
    Fault.SLOW_NIC: 0.5,
    Fault.SLOW_GPU: 0.5,
}
LINKS = (Fault.SLOW_LINK, Fault.CAPPED_LINK)
FLAP_FAILS = 0.5  # a flapping node fails a test with this chance, where none is asked
NIC_GBIT_PER_S = 400  # a NIC's link speed (NDR), which sysfs gives at a step (200, 100) down
# A rack: a Ray label's nodes, 32 as in a DGX SuperPOD's scalable unit (NVIDIA DGX SuperPOD
# reference architecture: 32 nodes a leaf group).
RACK_NODES = 32
HANG_WITHIN = 3  # a node that hangs once does so in one of its first tests, the gate's included
# A GPU held back runs its SM clock at this share of its peers' (1.68 against 1.98 GHz: an
# H200 shared with another process, issue 41) and draws its power cap.
SLOW_CLOCK = 0.85
SM_CLOCK_MHZ = 1980.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Planted:
    fault: Fault
    nodes: tuple[str, ...]
    gpu: int | None = None
    rate: float | None = None  # a slow fault: the share of its speed it keeps; None: RATES'
    fails: float | None = None  # a flapping node: its chance to fail a test; None: FLAP_FAILS

    @property
    def speed(self) -> float:
        return self.rate if self.rate is not None else RATES.get(self.fault, 1.0)

    @property
    def failing(self) -> float:
        return self.fails if self.fails is not None else FLAP_FAILS

    @property
    def subject(self) -> tuple[Subject, tuple[str, ...], int | None]:
        if self.fault is Fault.SLOW_GPU:
            return Subject.GPU, self.nodes, self.gpu
        if self.fault in LINKS:
            return Subject.LINK, self.nodes, None
        return Subject.NODE, self.nodes, None


def cycle(count: int) -> tuple[Fault, ...]:
    """`count` faults: the default three, then the others in turn."""
    order = (
        *DEFAULT_FAULTS,
        Fault.SLOW_GPU,
        Fault.FLAPPING,
        Fault.HUNG_ONCE,
        Fault.HUNG,
        Fault.SLOW_NIC,
        Fault.CAPPED_LINK,
    )
    return tuple(order[i % len(order)] for i in range(count))


def parse_faults(text: str) -> tuple[Fault, ...]:
    """`--faults`: a count (the default three, then the others in turn), names
    (slow-node,flapping) or names with counts (slow-node=26,slow-link=2); BadInput otherwise."""
    if text.isascii() and text.isdigit():
        if int(text) > MAX_NODES:  # refused before a fault is listed
            raise BadInput(f"--faults {text}: the simulation plants at most {MAX_NODES}")
        return cycle(int(text))
    out: list[Fault] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, given = item.partition("=")
        count = given or "1"
        if name not in Fault.values() or not (count.isascii() and count.isdigit()):
            raise BadInput(
                f"--faults {text}: a count, or names among {', '.join(Fault.values())}, each "
                "with =COUNT where more than one"
            )
        if len(out) + int(count) > MAX_NODES:
            raise BadInput(f"--faults {text}: the simulation plants at most {MAX_NODES}")
        out += [Fault(name)] * int(count)
    return tuple(out)


def fleet_of(
    nodes: int, gpus_per_node: int, gpu_model: str | None = "H100", *, racks: int = 0, seed: int = 0
) -> Fleet:
    """A fleet of `nodes`; with `racks`, each node labelled with its rack of that many nodes,
    placed at random in the order of ids, as Ray's random node ids place them."""
    where = list(range(nodes))
    random.Random(seed).shuffle(where)
    return Fleet(
        nodes=tuple(
            FleetNode(
                id=f"n{i:04d}",
                host=f"host{i:04d}",
                gpus=gpus_per_node,
                domain=f"rack{where[i] // racks:03d}" if racks else None,
            )
            for i in range(nodes)
        ),
        gpu_model=gpu_model,
    )


def plant(
    fleet: Fleet,
    faults: Sequence[Fault],
    seed: int,
    *,
    slowdown: float | None = None,
    fails: float | None = None,
    rack: bool = False,
    hub: int = 1,
) -> tuple[Planted, ...]:
    """Distinct nodes for each fault, drawn at random: any node may be one a policy would
    take as a partner. A slow link's two ends are drawn from different blocks of ~sqrt(N)
    nodes (a switch's, which a screen of blocks would keep apart) where the fleet has two.

    `slowdown`: what a slow fault takes off its speed (0.15: it keeps 85%; None: RATES');
    `fails`: a flapping node's chance to fail a test; `rack`: the slow nodes fill the fleet's
    racks (its labels) one after another, from one drawn at random; `hub`: links in runs of
    `hub` sharing one end (2: two slow pairs on one node)."""
    rng = random.Random(seed)
    ids = list(fleet.ids)
    block = max(2, isqrt(len(ids)))
    free = set(range(len(ids)))
    racked = _racked(fleet, rng) if rack else []
    rate = None if slowdown is None else 1 - slowdown
    planted: list[Planted] = []
    shared: int | None = None  # the hub of the run of links under way
    links = 0  # links planted so far
    for fault in faults:
        if fault in LINKS and shared is not None and links % hub:
            i = shared
        else:
            i = racked.pop(0) if fault is Fault.SLOW_NODE and racked else _draw(rng, free)
            free.discard(i)
            shared = i
        if fault in LINKS:
            apart = [j for j in sorted(free) if j // block != i // block]
            j = _draw(rng, set(apart) or free)
            free.discard(j)
            planted.append(Planted(fault=fault, nodes=(ids[min(i, j)], ids[max(i, j)]), rate=rate))
            links += 1
            continue
        gpu = rng.randrange(fleet.nodes[i].gpus) if fault is Fault.SLOW_GPU else None
        planted.append(
            Planted(
                fault=fault,
                nodes=(ids[i],),
                gpu=gpu,
                rate=rate if fault in RATES else None,
                fails=fails if fault is Fault.FLAPPING else None,
            )
        )
    return tuple(planted)


def _draw(rng: random.Random, free: set[int]) -> int:
    if not free:
        raise BadInput("--faults: more faulty nodes than the fleet holds")
    return rng.choice(sorted(free))


def _racked(fleet: Fleet, rng: random.Random) -> list[int]:
    """The fleet's nodes rack by rack (by label), from a rack drawn at random."""
    racks: dict[str | None, list[int]] = {}
    for i, node in enumerate(fleet.nodes):
        racks.setdefault(node.domain, []).append(i)
    names = sorted(racks, key=str)
    first = rng.randrange(len(names))
    return [i for name in names[first:] + names[:first] for i in racks[name]]


class Oracle:
    """Measures a group as the planted fleet would, with noise (`Costs.noise`), by the
    physics of each fault:

    - a slow GPU holds back every collective its rank is in (its node's gate, its pairs, any
      group across nodes holding its rank), not its host copies nor a group that leaves it
      out; its SM clock is low and it draws its power cap;
    - a slow node, or NIC, every group across nodes holding it (a NIC trained down a step,
      to a half or a quarter, says so in sysfs);
    - a cut pair of nodes (`slow-link`) only what flows between its two nodes, whatever group
      holds them: an all_to_all always (each member sends to each; a flow's loss scales its
      goodput whatever its share of the NIC, and the operation ends with its slowest flow), a
      ring all_reduce only where the two are ring neighbours;
    - a capped pair (`capped-link`) carries at most its rate of one node's NICs between its
      two nodes: an all_to_all of k nodes asks 1/(k-1) of that of each pair, so it is slowed
      only where the cap is below the share asked (by min(1, rate x (k-1))); a ring's
      neighbours ask all of it;
    - a flapping node fails each test across nodes with its chance;
    - a node that hangs stops answering (at its k-th test, or from its first on): its group
      times out after the point's deadline and names it, the others answer;
    - a dead node's actors never start: its groups bring nothing back;
    - a fleet-wide `shift` scales every figure."""

    def __init__(
        self, planted: Sequence[Planted], costs: Costs, seed: int, shift: float = 1.0
    ) -> None:
        self.costs = costs
        self.shift = shift
        self.rng = random.Random(seed + 1)
        self.dead = {p.nodes[0] for p in planted if p.fault is Fault.DEAD_NODE}
        self.flapping = {p.nodes[0]: p.failing for p in planted if p.fault is Fault.FLAPPING}
        self.hung = {p.nodes[0] for p in planted if p.fault is Fault.HUNG}
        self.hangs_at = {
            p.nodes[0]: self.rng.randrange(HANG_WITHIN)
            for p in planted
            if p.fault is Fault.HUNG_ONCE
        }
        self.tests: dict[str, int] = {}
        self.node_rate = {
            p.nodes[0]: p.speed for p in planted if p.fault in (Fault.SLOW_NODE, Fault.SLOW_NIC)
        }
        self.nic = {
            p.nodes[0]: p.speed
            for p in planted
            if p.fault is Fault.SLOW_NIC and log2(1 / p.speed) in (1.0, 2.0)
        }
        self.cut = {frozenset(p.nodes): p.speed for p in planted if p.fault is Fault.SLOW_LINK}
        self.capped = {frozenset(p.nodes): p.speed for p in planted if p.fault is Fault.CAPPED_LINK}
        self.gpus = {(p.nodes[0], p.gpu): p.speed for p in planted if p.fault is Fault.SLOW_GPU}

    def noisy(self, value: float) -> float:
        return value * self.shift / self.costs.noise.draw(self.rng)

    def gpu_rate(self, node: str, gpu: int) -> float:
        return self.gpus.get((node, gpu), 1.0)

    def hanging(self, group: ScanGroup) -> tuple[str, ...]:
        """The members that do not answer this test (each test counted for each member)."""
        out = []
        for n in group.nodes:
            k = self.tests.get(n, 0)
            self.tests[n] = k + 1
            if n in self.hung or self.hangs_at.get(n) == k:
                out.append(n)
        return tuple(out)

    def measure(self, fleet: Fleet, group: ScanGroup) -> GroupOutcome:
        if self.dead & set(group.nodes):
            return GroupOutcome(
                group=group, result=Result.MISSING, op=group.op, reason="its actors did not start"
            )
        if hung := self.hanging(group):
            gpus = fleet.node(hung[0]).gpus
            timed_out = GroupOutcome(
                group=group, result=Result.FAILED, op=group.op, unanswered=hung
            )
            waited = hung_s(fleet, timed_out, self.costs)
            reason = f"timed out after {waited:.0f} s: ranks 0-{gpus - 1} of {', '.join(hung)}"
            return replace(timed_out, reason=reason + " did not answer")
        if group.stage is Stage.GATE:
            return self.gate(fleet, group.nodes[0], group)
        if group.stage is Stage.ISOLATE and len(group.nodes) == 1:
            return self.isolate(group)
        return self.across(fleet, group)

    def pairs_rate(self, group: ScanGroup) -> float:
        """What the group's slow pairs leave of its speed: the slowest flow between a pair's
        ends that the group's traffic holds."""
        nodes = group.nodes
        held = set(nodes)
        performed = performing(group.op)
        if performed is not None and performed.every_pair:  # each member to every other
            crossing = {link for link in (*self.cut, *self.capped) if link <= held}
        else:  # a ring: each node with the next
            ring = {frozenset(p) for p in zip(nodes, nodes[1:] + nodes[:1], strict=True)}
            crossing = {link for link in (*self.cut, *self.capped) if link in ring}
        asked = performed.pair_share(len(nodes)) if performed is not None else 1.0
        rates = [self.cut[link] for link in crossing if link in self.cut]
        rates += [min(1.0, self.capped[link] / asked) for link in crossing if link in self.capped]
        return min(rates, default=1.0)

    def across(self, fleet: Fleet, group: ScanGroup) -> GroupOutcome:
        if any(self.rng.random() < self.flapping[n] for n in group.nodes if n in self.flapping):
            return GroupOutcome(
                group=group, result=Result.FAILED, op=group.op, reason="NCCL error: remote closed"
            )
        nodes = group.nodes
        held = set(nodes)
        # a GPU left out of the group holds none of it back
        taking = dict(group.members(fleet)) if group.subsets else {}
        rate = min(
            [self.node_rate.get(n, 1.0) for n in nodes]
            + [r for (n, g), r in self.gpus.items() if n in held and g in taking.get(n, (g,))]
            + [self.pairs_rate(group)]
        )
        readings = tuple(
            MemberReading(
                node=n,
                flags=(f"NIC mlx5_3 at {NIC_GBIT_PER_S * r:.0f} of {NIC_GBIT_PER_S} Gb/s",),
            )
            for n, r in self.nic.items()
            if n in held
        )
        fewest = group.fewest(fleet) if group.subsets else None
        busbw = self.costs.busbw_across(group.op, group.ranks(fleet), len(nodes), rate, fewest)
        return GroupOutcome(
            group=group,
            result=Result.OK,
            op=group.op,
            busbw_gb_per_s=self.noisy(busbw),
            latency_us=self.noisy(self.costs.internode_latency_us),
            size_bytes=GiB,
            readings=readings,
        )

    def isolate(self, group: ScanGroup) -> GroupOutcome:
        node = group.nodes[0]
        if len(group.gpus) == 1:
            (g,) = group.gpus
            copy = MemberReading(
                node=node, gpu=g, copy_gb_per_s=self.noisy(self.costs.copy_gb_per_s)
            )
            return GroupOutcome(group=group, result=Result.OK, op=group.op, readings=(copy,))
        rate = min(self.gpu_rate(node, g) for g in group.gpus)
        return GroupOutcome(
            group=group,
            result=Result.OK,
            op=group.op,
            busbw_gb_per_s=self.noisy(self.costs.pair_busbw_gb_per_s * rate),
            latency_us=self.noisy(self.costs.gate_latency_us),
            size_bytes=GiB,
        )

    def gate(self, fleet: Fleet, node: str, group: ScanGroup) -> GroupOutcome:
        rates = [self.gpu_rate(node, g) for g in range(fleet.node(node).gpus)]
        readings = tuple(
            MemberReading(
                node=node,
                gpu=g,
                copy_gb_per_s=self.noisy(self.costs.copy_gb_per_s),
                sm_clock_mhz=SM_CLOCK_MHZ * (SLOW_CLOCK if r < 1 else 1.0),
                at_power_cap=r < 1,
            )
            for g, r in enumerate(rates)
        )
        return GroupOutcome(
            group=group,
            result=Result.OK,
            op=group.op,
            busbw_gb_per_s=self.noisy(self.costs.island_busbw_gb_per_s * min(rates)),
            latency_us=self.noisy(self.costs.gate_latency_us),
            size_bytes=GiB,
            readings=readings,
        )


def factor(op: str, ranks: int) -> float:
    """busbw / algbw, the operation's own (`ops.registry`); 1 for a group of one rank."""
    performed = performing(op)
    if performed is None:
        raise KeyError(f"no operation performs {op!r}")
    return performed.busbw_factor(ranks) if ranks > 1 else 1.0


def wave_seconds(fleet: Fleet, outcomes: Sequence[GroupOutcome], costs: Costs) -> float:
    """A wave lasts as long as its slowest group (a group that hangs: its point's stall
    deadline, `hung_s`), plus opening its groups and journaling its rows (on the driver, as
    one write)."""
    slowest = 0.0
    points = 0
    for o in outcomes:
        gate = o.group.stage is Stage.GATE
        inside = gate or (o.group.stage is Stage.ISOLATE and len(o.group.nodes) == 1)
        ranks = o.group.ranks(fleet)
        seconds = costs.comm_s(ranks)
        latency = costs.gate_latency_us if inside else costs.internode_latency_us
        if o.unanswered:
            seconds += hung_s(fleet, o, costs)
        elif o.result is Result.OK and o.busbw_gb_per_s is not None:
            bus = factor(o.op, ranks)
            seconds += costs.point_s(latency, 8, bus, o.busbw_gb_per_s)
            seconds += costs.point_s(latency, o.size_bytes, bus, o.busbw_gb_per_s)
        if gate or len(o.group.gpus) == 1:  # d2d, h2d and d2h
            copy = costs.point_s(costs.copy_latency_us, 256 << 20, 1.0, costs.copy_gb_per_s)
            own = costs.point_s(costs.copy_latency_us, 256 << 20, 2.0, costs.d2d_gb_per_s)
            seconds += 2 * copy + own
        points += costs.gate_points if gate else costs.internode_points
        slowest = max(slowest, seconds)
    return costs.wave_open_s + slowest + costs.journal_s(points)


def hung_s(fleet: Fleet, o: GroupOutcome, costs: Costs) -> float:
    """How long a group that stopped answering held its wave: its bandwidth point's stall
    deadline (the larger of its two points')."""
    ranks = o.group.ranks(fleet)
    expected = costs.expected_s(o.group.stage, o.op, ranks, len(o.group.nodes), o.size_bytes)
    return stall_s(expected, costs.timeout_s)


@dataclass(frozen=True, kw_only=True, slots=True)
class WaveRun:
    index: int
    stage: Stage
    groups: int
    largest: int  # nodes in its largest group
    seconds: float
    hung: bool = False  # a group of it timed out: it lasted the point's deadline
    stall_s: float = 0.0  # that deadline: the longest a hung group of it held the wave


@dataclass(frozen=True, kw_only=True, slots=True)
class Score:
    condemned: int  # verdicts slow, failed, unreachable or flaky
    true_positives: int  # of those, planted
    named: int  # planted faults condemned as themselves
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
    outcomes: tuple[GroupOutcome, ...] = field(repr=False)  # every group's, in the order they ran
    verdicts: tuple[Verdict, ...] = field(repr=False)
    findings: tuple[Finding, ...] = ()
    score: Score

    @property
    def seconds(self) -> float:
        return self.start_s + sum(w.seconds for w in self.waves)

    def seconds_at(self, deadline_s: float) -> float:
        """The estimate had a hung point been waited for `deadline_s` (a flat --timeout)
        rather than its stall deadline."""
        return self.seconds + sum(deadline_s - w.stall_s for w in self.waves if w.hung)

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
    """The verdicts against the planted truth: a fault is named when its subject (the node,
    the GPU, the pair of nodes) is condemned; a condemned node's GPUs go with it (one thing
    to fix)."""
    truth = {p.subject: p for p in planted}
    key = {v: (v.subject, v.nodes, v.gpu) for v in verdicts}
    down = {v.nodes[0] for v in verdicts if v.subject is Subject.NODE and v.condemned}
    condemned = [
        v
        for v in verdicts
        if v.condemned and not (v.subject in (Subject.GPU, Subject.NVLINK) and v.nodes[0] in down)
    ]
    hits = [v for v in condemned if key[v] in truth]
    return Score(
        condemned=len(condemned),
        true_positives=len(hits),
        named=len({key[v] for v in hits}),
        planted=len(truth),
        healthy_condemned=tuple(
            v.name for v in condemned if key[v] not in truth and v.subject is Subject.NODE
        ),
    )


# The largest simulated fleet: 8x the 1024 nodes a scan plans for (8192 nodes of 8 GPUs
# simulate in 3 s with 3 faults).
MAX_NODES = 8192
MAX_GPUS = 65_536  # as many as a sweep plans ranks (planning.spec.MAX_RANKS)


def nodes_needed(faults: Sequence[Fault], hub: int = 1) -> int:
    """The nodes these faults take, each its own: one a fault, a link two, a run of `hub`
    links sharing one end."""
    links = sum(f in LINKS for f in faults)
    return len(faults) + -(-links // hub)


def check(nodes: int, gpus_per_node: int, faults: Sequence[Fault], hub: int = 1) -> None:
    """BadInput where the simulation cannot be what was asked, before anything is built: a
    fleet past MAX_NODES or MAX_GPUS, or more faulty nodes than it holds."""
    if not 1 <= nodes <= MAX_NODES:
        raise BadInput(f"--nodes {nodes}: the simulation holds 1 to {MAX_NODES} nodes")
    if not 1 <= gpus_per_node <= MAX_GPUS_PER_NODE:
        raise BadInput(
            f"--gpus-per-node {gpus_per_node}: a node holds 1 to {MAX_GPUS_PER_NODE} GPUs"
        )
    if nodes * gpus_per_node > MAX_GPUS:
        raise BadInput(
            f"--nodes {nodes} x --gpus-per-node {gpus_per_node}: the simulation holds at "
            f"most {MAX_GPUS} GPUs"
        )
    if (needed := nodes_needed(faults, hub)) > nodes:
        raise BadInput(
            f"--faults: {len(faults)} faults take {needed} nodes of their own; the fleet has "
            f"{nodes}"
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
    shift: float = 1.0,
    slowdown: float | None = None,
) -> Simulation:
    """A scan of a simulated fleet; `shift` scales every figure (a fleet off as a whole),
    `slowdown` is what each slow fault takes off its speed (`plant`)."""
    check(nodes, gpus_per_node, faults)
    if slowdown is not None and not 0 < slowdown < 1:
        raise BadInput(f"--slowdown {slowdown}: a share of its speed a fault takes, in (0, 1)")
    fleet = fleet_of(nodes, gpus_per_node, gpu_model)
    return run(
        fleet,
        plant(fleet, faults, seed, slowdown=slowdown),
        strategy=strategy or Strategy.parse("adaptive", seed=seed),
        seed=seed,
        thresholds=thresholds,
        costs=costs,
        shift=shift,
    )


def run(
    fleet: Fleet,
    planted: tuple[Planted, ...],
    *,
    strategy: Strategy,
    seed: int = 0,
    thresholds: Thresholds | None = None,
    costs: Costs | None = None,
    shift: float = 1.0,
) -> Simulation:
    """The scan of `fleet` with these faults planted: the policy's waves measured by the
    oracle and timed by the cost model, then judged and scored."""
    thresholds = thresholds or Thresholds()
    costs = costs or Costs()
    oracle = Oracle(planted, costs, seed, shift)
    policy = ScanPolicy(fleet, strategy, thresholds)
    outcomes: list[GroupOutcome] = []
    runs: list[WaveRun] = []
    wave: ScanWave | None = policy.next()
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
                hung=any(o.unanswered for o in got),
                stall_s=max((hung_s(fleet, o, costs) for o in got if o.unanswered), default=0.0),
            )
        )
        wave = policy.next(got)
    verdicts, found = verdicts_and_findings(fleet, outcomes, thresholds)
    gpus = fleet.nodes[0].gpus if fleet.nodes else 0
    return Simulation(
        nodes=len(fleet.nodes),
        gpus_per_node=gpus,
        strategy=str(strategy),
        seed=seed,
        planted=planted,
        waves=tuple(runs),
        start_s=costs.set_start_s + fleet.gpus(fleet.ids) / costs.actors_per_s,
        outcomes=tuple(outcomes),
        verdicts=tuple(verdicts),
        findings=tuple(found),
        score=score(verdicts, planted),
    )
