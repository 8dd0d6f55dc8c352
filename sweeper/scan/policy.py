"""The next wave of a scan, from the fleet and the outcomes so far. Pure and deterministic
(given the strategy's seed): a real scan and a simulation call the same function.

Every strategy starts with the gate (each node alone) and isolates the nodes it doubts
(`to_isolate`). Then come its own waves: `adaptive` (an affine-plane screen, then its suspects
bisected and confirmed), `ring`, `bisect`, `random:K` or `all`, each one entry of `STRATEGIES`.
`ScanPolicy` is fed each wave's outcomes; `next_wave` replays it on a resumed scan's rows.
docs/ARCHITECTURE.md, "Inside the rooms", gives the rules."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import isqrt
from typing import TypeVar

from sweeper.planning.inputs import quoted
from sweeper.scan.across import (
    FLAKY_LIMIT,
    LINK_FAILS,
    Explained,
    explain,
    link_fails,
    link_record,
)
from sweeper.scan.alone import judged_alone
from sweeper.scan.beside import across, beside_waves
from sweeper.scan.fleet import Fleet, GroupOutcome, ScanGroup, ScanWave, Stage
from sweeper.scan.inside import (
    by_node,
    isolated,
    leaving,
    left_out,
    low_alone,
    settled_gates,
    telemetry,
)
from sweeper.scan.scattered import slow_share
from sweeper.scan.thresholds import (
    Census,
    Failure,
    Judged,
    Thresholds,
    findings,
    gpu_copy_limit,
    judge_groups,
)
from sweeper.scan.verdict import Health
from sweeper.wire import Name

T = TypeVar("T")

# Known-good partners each suspect node is tested beside: with its screen's q + 1 tests, a
# node failing one test in two shows both passes and failures (flaky) but once in 2^(q+4)
CONFIRMS = 3
# Waves of disjoint pairs that prove nodes where the screen's groups are mostly slow
# (`each_node`): a known-good node passed beside two different partners
MATCHINGS = 2
# The most waves spent settling the nodes the sequential test leaves in doubt: a node failing
# one test in five gains about 0.3 of its log ratio a test beside a known-good partner
# (across.FLAKY_LIMIT is 9.2), a healthy one loses about 0.2; 12 waves missed 2 of 60 such
# nodes at 1024 (simulated, seeds 0-14), 24 none
SETTLE_WAVES = 24
# Runs again of what failed on one observation, each of what still fails: a node's low GPU
# pairs and host copies (`relink`), a gate slow on its figure (`regate`), a failed
# confirmation (`confirming`). 1.1% of recorded GPU points are 15% slow or more
# (scan.noise), so at 1024 nodes some 90 host copies, 36 GPU pairs and 11 gates are low once
# a scan, one or two low twice, and none three times in a hundred scans.
RERUNS = 2
# The pair tests a scan runs by default (`Strategy.pair_rounds`, `--pair-rounds`;
# `_Adaptive.pairs`): every pair of 1024 nodes, about 9 min of a 14-minute scan there. A fleet
# of N nodes has N - 1 rounds, each a wave of N/2 pairs journaled as one write; a larger one
# runs as many rounds as these tests fill, a window the seed moves on (`window`): 255 of 4095
# at 4096, some 3 min, where all would add some 50 (docs/measurements/cpu-2026-12-04-scan-pairs.md).
PAIR_TESTS = 1024 * 1023 // 2
# The most runs of a test of two nodes that failed before it is settled (`unsettled`): a
# pair capped at 80% of its rate passes a test 15% below the fleet's now and then under the
# recorded noise, and one pass after its failure cleared it (0.933 of such pairs named at 100
# nodes); a healthy pair fails two in a row 0.02% of the time there (scan.noise).
PAIR_RUNS = 6
# A pair that passed its round by less than this share above its threshold runs once more
# (`pairs`): under 90% of the fleet's median where the threshold is 85% of it, which 1-2% of
# healthy pairs are under the recorded noise (scan.noise)
MARGIN = 1.06


class Scheme(Name):
    """How a scan picks its internode groups (`--strategy`): adaptive, or a fixed pairing."""

    ADAPTIVE = "adaptive"
    RING = "ring"
    BISECT = "bisect"
    RANDOM = "random"
    ALL = "all"


# The most random matchings a scan runs (random:K), each a wave of its own: random:99999999999
# grew the plan to 2.2 GB and never answered.
MAX_ROUNDS = 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class Strategy:
    kind: Scheme
    rounds: int = 0  # random:K
    seed: int = 0  # random matchings; recorded with the scan
    # the adaptive scan's rounds of pairs alone, at most; None: as many as PAIR_TESTS fill
    pair_rounds: int | None = None

    @classmethod
    def parse(cls, text: str, *, seed: int = 0) -> Strategy:
        """`adaptive`, `ring`, `bisect`, `all`, or `random:K`."""
        name, _, count = text.partition(":")
        if name not in Scheme.values():
            raise ValueError("not a strategy")
        kind = Scheme(name)
        if (kind is Scheme.RANDOM) != bool(count):
            raise ValueError(f"strategy {text!r}: random takes a count (random:5), nothing else")
        if count and not (count.isdigit() and len(count) <= 4 and 1 <= int(count) <= MAX_ROUNDS):
            raise ValueError(
                f"strategy {quoted(text)}: 1 to {MAX_ROUNDS} random matchings, a wave each "
                "(more than a fleet of that many nodes has rounds of pairs: use all)"
            )
        rounds = int(count) if count else 0
        return cls(kind=kind, rounds=rounds, seed=seed)

    def __str__(self) -> str:
        return f"random:{self.rounds}" if self.kind is Scheme.RANDOM else str(self.kind)


def blocks(ids: Sequence[str]) -> list[tuple[str, ...]]:
    """The fleet in order, cut into blocks of about sqrt(N) nodes (a switch's, say: the
    simulation's bound on its faults counts them)."""
    size = max(2, isqrt(len(ids)))
    count = max(1, len(ids) // size)
    return [tuple(ids[i * len(ids) // count : (i + 1) * len(ids) // count]) for i in range(count)]


def gate_group(node: str) -> ScanGroup:
    return ScanGroup(wave=0, stage=Stage.GATE, nodes=(node,))


def gate_wave(fleet: Fleet) -> ScanWave:
    return ScanWave(index=0, stage=Stage.GATE, groups=tuple(gate_group(n) for n in fleet.ids))


def to_isolate(fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds) -> list[str]:
    """The nodes to isolate: those whose gate ran and failed (slow, an error, NVML evidence),
    or missed an absolute threshold a fleet finding waived (the finding excuses condemning the
    node on that threshold, not holding its GPUs against each other, which a fleet-wide cause
    leaves alike), or whose GPUs disagree in telemetry, or whose one GPU's copies are slow
    against its reference (`alone`: its GPU copies alone again); not those that did not
    answer."""
    gates = [o for o in outcomes if o.group.stage is Stage.GATE]
    judged = judge_groups(fleet, gates, thresholds)
    out = []
    for group, j in judged.items():
        answered = j.failure is not Failure.MISSING and not j.outcome.unanswered
        lone = fleet.node(group.nodes[0]).gpus == 1
        slow = lone and judged_alone(j, [], fleet.gpu_model, thresholds).health is Health.SLOW
        if answered and (not j.passed or j.excused or telemetry(j.outcome.readings) or slow):
            out.append(group.nodes[0])
    return sorted(out, key=fleet.ids.index)


def proven(
    fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds, doubted: Sequence[str]
) -> list[str]:
    """The nodes whose gate passed and that are not isolated: partners a node of two GPUs
    pairs its GPUs with (`beside`)."""
    gates = [o for o in outcomes if o.group.stage is Stage.GATE]
    passed = {g.nodes[0] for g, j in judge_groups(fleet, gates, thresholds).items() if j.passed}
    return [n for n in fleet.ids if n in passed and n not in doubted]


def isolate_waves(fleet: Fleet, nodes: Sequence[str], start: int) -> list[ScanWave]:
    """Each GPU of each node alone, then its GPUs in pairs: the circle method's n - 1 rounds
    of disjoint pairs (n rounds where n is odd), every node's round k in one wave."""
    made: list[list[ScanGroup]] = []
    alone: list[tuple[str, tuple[int, ...]]] = [
        (n, (g,)) for n in nodes for g in range(fleet.node(n).gpus)
    ]
    rounds: list[list[tuple[str, tuple[int, ...]]]] = [alone]
    for n in nodes:
        for k, pairs in enumerate(_rounds(fleet.node(n).gpus)):
            while len(rounds) <= k + 1:
                rounds.append([])
            rounds[k + 1] += [(n, pair) for pair in pairs]
    for i, batch in enumerate(r for r in rounds if r):
        made.append(
            [ScanGroup(wave=start + i, stage=Stage.ISOLATE, nodes=(n,), gpus=g) for n, g in batch]
        )
    return [
        ScanWave(index=start + i, stage=Stage.ISOLATE, groups=tuple(groups))
        for i, groups in enumerate(made)
    ]


def circle(items: Sequence[T], which: Iterable[int] | None = None) -> list[list[tuple[T, T]]]:
    """Every pair of `items` in rounds of disjoint pairs: the circle method, n - 1 rounds
    (n where n is odd: each round one item sits out); `which`: those rounds alone, in order
    (4096 nodes' 4095 rounds are 8.4 million pairs)."""
    ring: list[T | None] = [*items, None] if len(items) % 2 else list(items)
    m = len(ring)
    out = []
    for k in range(circled(len(items))) if which is None else which:
        rest = ring[1:]
        turned = [ring[0], *rest[k:], *rest[:k]]
        pairs = [(turned[i], turned[m - 1 - i]) for i in range(m // 2)]
        out.append([(a, b) for a, b in pairs if a is not None and b is not None])
    return out


def circled(count: int) -> int:
    """The circle method's rounds of `count` items: one sits out each round where odd."""
    return count - 1 + count % 2


def window(rounds: int, pairs: int, most: int | None, seed: int) -> Sequence[int]:
    """Which of `rounds` rounds of `pairs` pairs a scan runs: all where they fit `most`
    (None: as many as fill PAIR_TESTS), else that many in a row from where the seed puts
    them, so the scans of seeds 0, 1, 2, ... run every round in turn: ceil((N - 1) / most)
    scans test every pair of N nodes."""
    if most is None:
        most = PAIR_TESTS // max(1, pairs)
    if most >= rounds:
        return range(rounds)
    start = seed * most % rounds
    return [(start + i) % rounds for i in range(most)]


def _rounds(count: int) -> list[list[tuple[int, int]]]:
    """Every pair of `count` GPUs in rounds of disjoint pairs (the circle method)."""
    return [[(min(a, b), max(a, b)) for a, b in r] for r in circle(range(count)) if r]


def relink(
    fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds, index: int
) -> list[ScanWave]:
    """What a node's isolation found on one observation, run again from wave `index`, in
    waves of disjoint GPUs: each low pair of GPUs the median of its GPUs' pairs does not
    explain (`Inside.doubtful`: an NVLink, a GPU named by two low pairs) and each GPU whose
    host copies were low at the gate and alone (`inside.low_alone`). The judge counts each
    by its last run; the scan calls this, and `regate`, in turn while either has something
    to run, at most 2 x RERUNS times."""
    mine = [o for o in outcomes if o.group.stage in (Stage.GATE, Stage.ISOLATE)]
    judged = judge_groups(fleet, mine, thresholds)
    gates = {
        j.outcome.group.nodes[0]: j for j in judged.values() if j.outcome.group.stage is Stage.GATE
    }
    copies = gpu_copy_limit(mine)
    low = copies.limit(thresholds) if copies else None
    each = by_node(j for j in judged.values() if j.outcome.group.stage is Stage.ISOLATE)
    pending: list[tuple[str, tuple[int, ...]]] = []
    for node, inside in each.items():
        gate = gates.get(node)
        pending += [
            (node, pair) for pair in isolated(node, inside, gate, thresholds.min_ratio).doubtful
        ]
        if gate is not None and low is not None:
            pending += [(node, (g,)) for g in low_alone(gate, inside, low)]
    made: list[list[ScanGroup]] = []
    held: list[set[tuple[str, int]]] = []
    for node, gpus in pending:
        taken = {(node, g) for g in gpus}
        k = next((i for i, used in enumerate(held) if not used & taken), len(made))
        if k == len(made):
            made.append([])
            held.append(set())
        made[k].append(ScanGroup(wave=index + k, stage=Stage.ISOLATE, nodes=(node,), gpus=gpus))
        held[k] |= taken
    return [
        ScanWave(index=index + k, stage=Stage.ISOLATE, groups=tuple(groups))
        for k, groups in enumerate(made)
    ]


def regate(
    fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds, index: int
) -> ScanWave | None:
    """The gate again, as wave `index`, of each node whose last gate's own figure was under
    its threshold (no NVML evidence) while its isolation named no GPU or NVLink: one slow
    point condemns nothing (`inside.settled_gates` takes the last gate); None where there is
    none. The scan calls this after each `relink`."""
    mine = [o for o in outcomes if o.group.stage in (Stage.GATE, Stage.ISOLATE)]
    judged = judge_groups(fleet, mine, thresholds)
    each = by_node(j for j in judged.values() if j.outcome.group.stage is Stage.ISOLATE)
    last = {
        j.outcome.group.nodes[0]: j
        for j in sorted(judged.values(), key=lambda j: j.outcome.group.wave)
        if j.outcome.group.stage is Stage.GATE
    }
    nodes = []
    for j in last.values():
        o = j.outcome
        own, limit = j.figure_gb_per_s, j.threshold_gb_per_s
        below = own is not None and limit is not None and own < limit
        if o.group.stage is not Stage.GATE or j.failure is not Failure.SLOW or not below:
            continue
        node = o.group.nodes[0]
        if (
            any(r.flags for r in o.readings)
            or isolated(node, each.get(node, []), j, thresholds.min_ratio).named
        ):
            continue
        nodes.append(node)
    if not nodes:
        return None
    groups = tuple(ScanGroup(wave=index, stage=Stage.GATE, nodes=(n,)) for n in nodes)
    return ScanWave(index=index, stage=Stage.GATE, groups=groups)


def left_gpus(
    fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds
) -> dict[str, tuple[int, ...]]:
    """The nodes that go on without some GPUs, and those GPUs (`inside.leaving`)."""
    mine = [o for o in outcomes if o.group.stage in (Stage.GATE, Stage.ISOLATE)]
    judged = judge_groups(fleet, mine, thresholds)
    inside = [j for j in judged.values() if j.outcome.group.stage is Stage.ISOLATE]
    gates = settled_gates(fleet, judged.values(), inside, mine, thresholds)
    return leaving(fleet, gates, inside, thresholds.min_ratio)


def without(fleet: Fleet, group: ScanGroup, left: Mapping[str, tuple[int, ...]]) -> ScanGroup:
    """The group with the GPUs `left` names left out of its nodes (`left_gpus`)."""
    if not left.keys() & set(group.nodes):
        return group
    subsets = tuple(
        tuple(g for g in range(fleet.node(n).gpus) if g not in left.get(n, ())) for n in group.nodes
    )
    return replace(group, subsets=subsets)


def excluded(
    fleet: Fleet, outcomes: Sequence[GroupOutcome], thresholds: Thresholds
) -> dict[str, str]:
    """Nodes kept out of the internode stages, each with the reason its gate or its isolation
    gave."""
    mine = [o for o in outcomes if o.group.stage in (Stage.GATE, Stage.ISOLATE)]
    judged = judge_groups(fleet, mine, thresholds)
    inside = [j for j in judged.values() if j.outcome.group.stage is Stage.ISOLATE]
    gates = settled_gates(fleet, judged.values(), inside, mine, thresholds)
    out = {n: "no gate result" for n in fleet.ids}
    each = by_node(inside)
    for node, gate in gates.items():
        j = gate.judged
        seen = isolated(node, each.get(node, []), j, thresholds.min_ratio)
        lone = fleet.node(node).gpus == 1
        alone = judged_alone(j, each.get(node, []), fleet.gpu_model, thresholds) if lone else None
        if left_out(fleet, node, seen, j):
            del out[node]  # it goes on without them (`left_gpus`)
        elif seen.named:
            named = [f"gpu{g}" for g in seen.slow_gpus] + [
                f"gpu{a}-gpu{b}" for a, b in seen.slow_links
            ]
            out[node] = f"isolated: slow {', '.join(named)}"
        elif alone is not None and alone.health is Health.SLOW:
            out[node] = f"alone: slow gpu0 ({alone.evidence})"
        elif j.passed:
            del out[node]
        elif j.outcome.unanswered:
            out[node] = f"gate: did not answer ({j.why})"
        else:
            out[node] = f"gate {j.failure}: {j.why}"
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Internode:
    """What a strategy is handed once the gate and the isolation are done: the nodes they
    left in (in fleet order, at least two), the index of its first wave, and the outcomes so
    far (`history`, which grows by each wave's as the scan goes)."""

    fleet: Fleet
    strategy: Strategy
    thresholds: Thresholds
    history: list[GroupOutcome]
    nodes: tuple[str, ...]
    start: int
    left: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # GPUs left out (`left_gpus`)


# A strategy: the internode waves it gives, in order, each decided from the outcomes before it
Strategist = Callable[[Internode], Iterator[ScanWave]]


def waves(
    fleet: Fleet, strategy: Strategy, thresholds: Thresholds, history: list[GroupOutcome]
) -> Iterator[ScanWave]:
    """The scan's waves in order: the gate, the isolation, then the strategy's (`STRATEGIES`)
    over the nodes they left in. After yielding a wave it reads that wave's outcomes from
    `history`, which the caller extends before asking for the next one."""
    yield gate_wave(fleet)
    doubted = to_isolate(fleet, history, thresholds)
    inside = isolate_waves(fleet, doubted, 1)
    inside += beside_waves(
        fleet,
        [n for n in doubted if across(fleet, n)],
        proven(fleet, history, thresholds, doubted),
        1 + len(inside),
    )
    yield from inside
    index = 1 + len(inside)
    # what is still low run again, the gate's re-runs' copies too, while any is
    for _ in range(2 * RERUNS):
        rerun = relink(fleet, history, thresholds, index)
        yield from rerun
        index += len(rerun)
        again = regate(fleet, history, thresholds, index)
        if again is not None:
            yield again
            index += 1
        elif not rerun:
            break
    out = excluded(fleet, history, thresholds)
    nodes = tuple(n for n in fleet.ids if n not in out)
    if len(nodes) > 1:
        start = index
        at = Internode(
            fleet=fleet,
            strategy=strategy,
            thresholds=thresholds,
            history=history,
            nodes=nodes,
            start=start,
            left=left_gpus(fleet, history, thresholds),
        )
        yield from STRATEGIES[strategy.kind](at)


class ScanPolicy:
    """A scan's policy fed as it goes: `next(outcomes of the last wave)` gives the next wave,
    None when the scan is done."""

    def __init__(self, fleet: Fleet, strategy: Strategy, thresholds: Thresholds) -> None:
        self.history: list[GroupOutcome] = []
        self._waves = waves(fleet, strategy, thresholds, self.history)

    def next(self, outcomes: Sequence[GroupOutcome] = ()) -> ScanWave | None:
        self.history.extend(outcomes)
        return next(self._waves, None)


def next_wave(
    fleet: Fleet, outcomes: Sequence[GroupOutcome], strategy: Strategy, thresholds: Thresholds
) -> ScanWave | None:
    """The wave to run after these outcomes (a resumed scan's rows), or None when the scan is
    done: the policy replayed from the start, each wave decided from the waves before it."""
    by_group = {o.group: o for o in outcomes}
    history: list[GroupOutcome] = []
    for wave in waves(fleet, strategy, thresholds, history):
        got = [by_group.get(g) for g in wave.groups]
        done = [o for o in got if o is not None]
        if len(done) < len(got):
            return wave
        history.extend(done)
    return None


# ---- fixed strategies: rounds of groups fixed in advance, each round a screen wave ----


Rounds = list[list[tuple[str, ...]]]  # each wave's groups, as their nodes


def screens(rounds: Callable[[Strategy, Sequence[str]], Rounds]) -> Strategist:
    """A strategy whose groups do not depend on what the scan finds: each of its rounds a
    wave of screen groups (of any size), run in turn."""

    def strategist(at: Internode) -> Iterator[ScanWave]:
        for k, groups in enumerate(g for g in rounds(at.strategy, at.nodes) if g):
            index = at.start + k
            made = tuple(
                without(at.fleet, ScanGroup(wave=index, stage=Stage.SCREEN, nodes=g), at.left)
                for g in groups
            )
            yield ScanWave(index=index, stage=Stage.SCREEN, groups=made)

    return strategist


def _ring(strategy: Strategy, nodes: Sequence[str]) -> Rounds:
    """Each node with the next: even n (0,1)(2,3).. then (1,2)(3,4)..(n-1,0); odd n takes a
    third wave."""
    n = len(nodes)
    edges = [(i, (i + 1) % n) for i in range(n if n > 2 else 1)]
    rounds = [edges[0::2], edges[1::2]] if n % 2 == 0 else _pack_edges(edges)
    return [[(nodes[a], nodes[b]) for a, b in r] for r in rounds]


def _bisect(strategy: Strategy, nodes: Sequence[str]) -> Rounds:
    """Each node of the first half with its place in the second, once."""
    half = len(nodes) // 2
    return [[(nodes[i], nodes[i + half]) for i in range(half)]]


def _random(strategy: Strategy, nodes: Sequence[str]) -> Rounds:
    """`rounds` random matchings, drawn from the strategy's seed."""
    rng = random.Random(strategy.seed)
    order = list(nodes)
    out: Rounds = []
    for _ in range(strategy.rounds):
        rng.shuffle(order)
        out.append([(order[i], order[i + 1]) for i in range(0, len(order) - 1, 2)])
    return out


def _all(strategy: Strategy, nodes: Sequence[str]) -> Rounds:
    """Every pair: the circle method, a bye where n is odd."""
    return [list(pairs) for pairs in circle(nodes)]


def _pack_edges(edges: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    rounds: list[list[tuple[int, int]]] = []
    for edge in edges:
        for r in rounds:
            if not any(set(edge) & set(e) for e in r):
                r.append(edge)
                break
        else:
            rounds.append([edge])
    return rounds


# ---- adaptive ----


def smallest_prime(at_least: int) -> int:
    n = max(2, at_least)
    while any(n % d == 0 for d in range(2, isqrt(n) + 1)):
        n += 1
    return n


def affine(nodes: Sequence[str]) -> list[list[tuple[str, ...]]]:
    """The screen's design: the nodes on the points of the affine plane AG(2, q), q the
    smallest prime with q^2 >= N, node i at (i // q, i % q); its q + 1 parallel classes of
    lines (y = m x + b for each slope m, and x = c), each class a wave of disjoint groups.
    Two points lie on exactly one line, so every pair of nodes shares exactly one group.
    Points no node holds are left out rather than padded (a pair of real nodes keeps its one
    line), so a class's lines hold N/q nodes or fewer; lines of one node are dropped."""
    n = len(nodes)
    q = smallest_prime(isqrt(n - 1) + 1 if n > 1 else 2)
    classes: list[list[tuple[str, ...]]] = []
    for slope in range(q + 1):
        lines = []
        for b in range(q):
            if slope == q:
                points = [b * q + y for y in range(q)]
            else:
                points = [x * q + (slope * x + b) % q for x in range(q)]
            line = tuple(nodes[i] for i in sorted(points) if i < n)
            if len(line) > 1:
                lines.append(line)
        if lines:
            classes.append(lines)
    return classes


@dataclass(frozen=True, slots=True)
class _Split:
    """Members of a failing group no culprit explains: which pair of them fails? `recheck`:
    not known to fail (the rest of a group a culprit explains), so tested whole first."""

    nodes: tuple[str, ...]
    recheck: bool = False


@dataclass(frozen=True, slots=True)
class _Cross:
    """Two parts that each passed while their union failed: a pair with an end in each.
    `diagonal`: the next probes are (A1+B1, A2+B2), else (A1+B2, A2+B1)."""

    left: tuple[str, ...]
    right: tuple[str, ...]
    diagonal: bool = True


_Problem = _Split | _Cross


def _members(problem: _Problem) -> tuple[str, ...]:
    if isinstance(problem, _Split):
        return problem.nodes
    return problem.left + problem.right


@dataclass(frozen=True, slots=True)
class _Probe:
    problem: _Problem
    tested: tuple[str, ...]
    halves: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # a cross probe's sides


def _halves(nodes: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    cut = (len(nodes) + 1) // 2
    return nodes[:cut], nodes[cut:]


Test = tuple[tuple[str, ...], tuple[str, ...]]  # the nodes under test, their known-good pads


class _Adaptive:
    """The adaptive scan after the gate and the isolation, as a generator of waves; after
    each one it reads that wave's outcomes from `history`, which its caller fills."""

    def __init__(self, at: Internode) -> None:
        self.fleet = at.fleet
        self.thresholds = at.thresholds
        self.history = at.history
        self.nodes = list(at.nodes)
        self.left = at.left
        self.census = Census(at.fleet)  # the history's figures, read once as it grows
        self.strategy = at.strategy
        self.index = at.start
        self.gone: set[str] = set()  # did not answer: out of every later wave
        self.doubted: set[str] = set()  # a probe failed beside it as a pad: no pad again
        self.cursor = 0  # where the next pad is taken, so partners change between tests
        self.matched: set[int] = set()  # the shifts of `matching` run
        self._explained: tuple[int, Explained] | None = None  # at a history's length
        self._judged: list[Judged] = []  # the history's first outcomes, judged
        self._populations: tuple[int, ...] | None = None  # what they were judged against

    def judgements(self) -> list[Judged]:
        """Every outcome of the history judged. Those judged before are judged again only
        where the fleet's populations moved (an outcome of a stage that measures every node,
        or any where none did): the pairs of 1024 nodes are 523 776 outcomes, which judging
        whole after each of their 1023 waves cost most of a simulated scan."""
        census = self.census.update(self.history)
        populations = census.populations
        if populations != self._populations:
            self._judged, self._populations = [], populations
        new = self.history[len(self._judged) :]
        if new:
            only = [o.group for o in new]
            judged = judge_groups(
                self.fleet, self.history, self.thresholds, only=only, census=census
            )
            self._judged += [judged[group] for group in only]
        return self._judged

    def judged(self, wave: ScanWave) -> list[Judged]:
        """The wave's outcomes judged: the history's last ones."""
        if not wave.groups:
            return []
        last = {j.outcome.group: j for j in self.judgements()[-len(wave.groups) :]}
        return [last[group] for group in wave.groups]

    def explained(self) -> Explained:
        """The history's failures explained, read again only once the history has grown."""
        if self._explained is not None and self._explained[0] == len(self.history):
            return self._explained[1]
        inside = (Stage.GATE, Stage.ISOLATE)
        e = explain([j for j in self.judgements() if j.outcome.group.stage not in inside])
        self._explained = (len(self.history), e)
        return e

    def wave(self, stage: Stage, groups: Sequence[Test]) -> ScanWave:
        made = tuple(
            without(
                self.fleet,
                ScanGroup(wave=self.index, stage=stage, nodes=nodes + pads, partners=pads),
                self.left,
            )
            for nodes, pads in groups
        )
        self.index += 1
        return ScanWave(index=self.index - 1, stage=stage, groups=made)

    def answered(self, wave: ScanWave) -> list[Judged]:
        """The wave's judged outcomes, the nodes that did not answer out from now on."""
        judged = self.judged(wave)
        for j in judged:
            self.gone.update(j.outcome.unanswered)
        return judged

    def waves(self) -> Iterator[ScanWave]:
        for lines in self.screen(self.nodes):
            live = [kept for line in lines if len(kept := self.live(line)) > 1]
            if live:
                wave = self.wave(Stage.SCREEN, [(line, ()) for line in live])
                yield wave
                self.answered(wave)
        yield from self.off_or_part()
        yield from self.each_node()
        e = self.explained()
        blamed = set(e.culprits) | set(e.hung)
        problems: list[_Problem] = []
        # each failing group no culprit explains, run again whole before it is bisected: a
        # failure that does not reproduce is transient (`across.transient`), not a pair to find
        for i in sorted(e.unexplained):
            problems.append(_Split(self.live(e.tests[i].outcome.group.nodes), recheck=True))
        # the rest of each group a culprit or a hang explains, again: a fault it hid
        for n in sorted(blamed, key=self.fleet.ids.index):
            for i in e.culprits.get(n, []) + e.hung.get(n, []):
                rest = tuple(
                    m for m in self.live(e.tests[i].outcome.group.nodes) if m not in blamed
                )
                problems.append(_Split(rest, recheck=True))
        problems = [p for p in dict.fromkeys(problems) if len(_members(p)) > 1]
        links: list[tuple[str, str]] = []
        unresolved: list[str] = []
        yield from self.bisect(problems, links, unresolved)
        # the rest of each group a slow pair explains, again without one end of it: a second
        # pair the first hid (two slow pairs in one screen group of 28 nodes, one across the
        # halves the other failed in, was never tested apart)
        rests: list[tuple[_Split, _Split, set[str]]] = []
        for problem in problems:
            group = set(_members(problem))
            if held := [link for link in dict.fromkeys(links) if set(link) <= group]:
                a, b = ({link[side] for link in held} for side in (0, 1))
                rests.append(
                    (
                        _Split(tuple(n for n in _members(problem) if n not in a), True),
                        _Split(tuple(n for n in _members(problem) if n not in b), True),
                        a | b,
                    )
                )
        first = [one for one, _, _ in rests if len(one.nodes) > 1]
        yield from self.bisect(first, links, unresolved)
        unresolved = yield from self.dead_ends(unresolved)
        unresolved = yield from self.rebisect(unresolved, links)
        yield from self.confirm(links, unresolved)
        # where that rest passed and its pairs' ends were confirmed (no culprit among them),
        # the rest without the other end too: the second pair may share either (a hub's three
        # pairs, two in one screen group: the rest without the hub passed, and its second
        # pair was lost). Not before the confirmation: at 10% of the fleet slow a slow node
        # looks like a hub until confirmed, and the second rest of each took the estimate
        # from 13.7 to 17.0 min (seed 0)
        e = self.explained()
        passed = {frozenset(j.outcome.group.nodes) for j in e.tests if j.passed}
        second: list[_Problem] = [
            two
            for one, two, ends in rests
            if frozenset(one.nodes) in passed
            and not ends & (set(e.culprits) | self.gone)
            and len(two.nodes) > 1
        ]
        # and a culprit its confirmations cleared (a hub of two slow pairs fails both their
        # screen groups, beside different partners) leaves its groups unexplained: each is
        # run again and bisected now, as the others were
        handled = {frozenset(_members(p)) for p in [*problems, *first, *second]}
        late: list[_Problem] = second + [
            _Split(nodes, recheck=True)
            for i in sorted(e.unexplained)
            if len(nodes := self.live(e.tests[i].outcome.group.nodes)) > 1
            and frozenset(e.tests[i].outcome.group.nodes) not in handled
            and not any(pair <= e.members[i] for pair in e.pairs)  # a slow pair's group
        ]
        if late:
            found: list[tuple[str, str]] = []
            lost: list[str] = []
            yield from self.bisect(list(dict.fromkeys(late)), found, lost)
            lost = yield from self.dead_ends(lost)
            lost = yield from self.rebisect(lost, found)
            yield from self.confirm(found, lost)
        yield from self.settle()
        yield from self.pairs()

    def off_or_part(self) -> Iterator[ScanWave]:
        """Where the screen's groups miss an absolute threshold as the fleet would off as a
        whole, one wave of disjoint pairs, each node with the one half a fleet away (across
        any rack of consecutive nodes): a fleet off passes none, a third of it slow scattered
        passes 44% of them, which no screen group of 32 does (0.67^32: none of 1024 nodes'
        1056), and `scattered.slow_share` reads the difference."""
        found = findings(self.fleet, self.history, self.thresholds, self.census)
        if not any(f.off and f.kind == "internode" for f in found):
            return
        yield from self.matching(0)

    def matching(self, shift: int) -> Iterator[ScanWave]:
        """One wave of disjoint pairs, each node of the fleet's first half with one of its
        second, `shift` further on (each shift another partner), once a scan."""
        if shift in self.matched:
            return
        self.matched.add(shift)
        nodes = self.live(self.nodes)
        half = len(nodes) // 2
        first, second = nodes[:half], nodes[half : 2 * half]
        tests: list[Test] = [((a, second[(i + shift) % half]), ()) for i, a in enumerate(first)]
        if tests:
            wave = self.wave(Stage.SCREEN, tests)
            yield wave
            self.answered(wave)

    def each_node(self) -> Iterator[ScanWave]:
        """Where the screen's groups hold more than one slow node each on average (the share
        their passes give, `scattered.slow_share`, times their size), each node on its own
        instead of each group bisected: MATCHINGS waves of disjoint pairs prove the nodes
        that pass beside two different partners, and every other node is tested beside
        CONFIRMS proven ones. Bisection finds a group's slow nodes one after another: a third
        of 1024 nodes slow took 659 bisection waves, 19 min (docs/SCAN.md); this takes a
        few waves, whatever the share."""
        nodes = self.live(self.nodes)
        if len(nodes) < 2 * MATCHINGS:  # a half of fewer nodes gives a node the same partner
            return
        e = self.explained()
        screened = [
            (len(e.members[i]), j.passed)
            for i, j in enumerate(e.tests)
            if j.outcome.group.stage is Stage.SCREEN
        ]
        if not screened:
            return
        mean = sum(g for g, _ in screened) / len(screened)
        if slow_share(screened) * mean <= 1:
            return
        for shift in range(MATCHINGS):
            yield from self.matching(shift)
        e = self.explained()
        nodes = self.live(self.nodes)
        proven = [n for n in nodes if n not in e.culprits and e.known_good(n)]
        suspects = [n for n in nodes if n not in proven]
        yield from self.beside_good(suspects, proven, set(suspects), [])

    def pairs(self) -> Iterator[ScanWave]:
        """Every pair of the nodes left, alone, in the circle method's rounds of disjoint
        pairs, as many rounds as `Strategy.pair_rounds` allows (`window`): a pair of nodes
        whose path caps its rate (not a cut) slows no all_to_all of more nodes than
        1/cap + 1, since each member asks 1/(k - 1) of it, so the screen's groups never see
        it. Each pair that fails is then confirmed as a link: its ends beside known-good
        partners, and the pair again."""
        e = self.explained()
        nodes = [n for n in self.nodes if n not in self.gone and n not in e.culprits]
        if len(nodes) < 2:
            return
        chosen = self.strategy
        taken = window(circled(len(nodes)), len(nodes) // 2, chosen.pair_rounds, chosen.seed)
        for pairs in circle(nodes, taken):
            tests: list[Test] = [((a, b), ()) for a, b in pairs if len(self.live((a, b))) == 2]
            if tests:
                wave = self.wave(Stage.PAIRS, tests)
                yield wave
                self.answered(wave)
        # a pass within MARGIN of its threshold, once more: a pair capped at 80% passed its
        # one round 1.5% above a threshold of 85% (49 nodes, seed 4), and was never seen again
        close: list[Test] = [
            (g.nodes, ())
            for j in self.explained().tests
            if (g := j.outcome.group).stage is Stage.PAIRS
            and j.passed
            and j.figure_gb_per_s is not None
            and j.threshold_gb_per_s is not None
            and j.figure_gb_per_s < MARGIN * j.threshold_gb_per_s
        ]
        for batch in _pack(close):
            wave = self.wave(Stage.PAIRS, batch)
            yield wave
            self.answered(wave)
        e = self.explained()
        links = [
            (a, b)
            for i in sorted(e.unexplained)
            if (g := e.tests[i].outcome.group).stage is Stage.PAIRS
            for a, b in [g.nodes]
        ]
        if links:
            yield from self.confirm(links, [])

    def settle(self) -> Iterator[ScanWave]:
        """Each node the sequential test leaves in doubt (`across.explain`: failures of its
        own, not yet enough to call it flaky or to clear it) beside one more known-good
        partner a wave, until none is in doubt or SETTLE_WAVES have run."""
        for _ in range(SETTLE_WAVES):
            e = self.explained()
            doubt = [
                n
                for n, llr in e.sequential.items()
                if 0 < llr < FLAKY_LIMIT and n not in self.gone and n not in e.culprits
            ]
            good = self.good(e, set(doubt))
            tests = [t for n in doubt for t in self.beside(n, 1, good, set(doubt))]
            if not tests:
                return
            yield from self.confirming(_pack(tests))

    def confirming(
        self, batches: list[list[Test]]
    ) -> Generator[ScanWave, None, list[tuple[ScanGroup, Judged]]]:
        """Waves of confirmation tests, then each lone failure of them (`lone`) run again,
        whole, up to RERUNS times while it fails: one failed test of two nodes is one
        observation, and one that passes when run again is transient (`across.transient`),
        held against neither. The first runs' groups and outcomes."""
        first: list[tuple[ScanGroup, Judged]] = []
        for batch in batches:
            wave = self.wave(Stage.CONFIRM, batch)
            yield wave
            first += zip(wave.groups, self.answered(wave), strict=True)
        ran = first
        every = [group for group, _ in first]
        for _ in range(RERUNS):
            failed = self.lone(ran)
            if not failed:
                break
            ran = []
            for batch in _pack(failed):
                wave = self.wave(Stage.CONFIRM, batch)
                yield wave
                ran += zip(wave.groups, self.answered(wave), strict=True)
            every += [group for group, _ in ran]
        for _ in range(PAIR_RUNS):
            unsettled = self.unsettled(every)
            if not unsettled:
                break
            for batch in _pack(unsettled):
                wave = self.wave(Stage.CONFIRM, batch)
                yield wave
                self.answered(wave)
                every += wave.groups
        return first

    def unsettled(self, groups: Sequence[ScanGroup]) -> list[Test]:
        """The tests of a pair of nodes (a link's own, no partner put in) among `groups` whose
        record is not yet a verdict (`across.link_record`: it stands once it failed the
        fleet's `link_fails` times and twice more often than it passed, and is cleared once
        it passed more often than it failed, the last time a pass); each once more, up to
        PAIR_RUNS runs, and two more for each failure past LINK_FAILS that stands a link (a
        healthy pair of 1024 nodes failed 4 of 4, then passed 4: one more pass clears it)."""
        last = {frozenset(g.nodes): g for g in groups if len(g.nodes) == 2 and not g.partners}
        runs: dict[frozenset[str], list[bool]] = defaultdict(list)
        judged = self.judgements()  # not `explained`: read again after each of its waves
        for j in judged:
            nodes = frozenset(j.outcome.group.nodes)
            if len(nodes) == 2 and nodes in last:
                runs[nodes].append(j.passed)
        need = link_fails(judged)
        out: list[Test] = []
        for nodes, g in last.items():
            seen = runs.get(nodes, [])
            if (
                self.gone & nodes
                or not seen
                or link_record(seen, need) is not None
                or len(seen) >= PAIR_RUNS + 2 * (need - LINK_FAILS)
            ):
                continue
            out.append((g.tested, g.partners))
        return out

    def lone(self, ran: Sequence[tuple[ScanGroup, Judged]]) -> list[Test]:
        """The failed tests of two nodes among `ran` that nothing else holds against the
        pair: no larger failing group holds both that did not pass again and holds no culprit
        or hang (the pair's own failure would otherwise stand on a slow node's group), and
        the node under test failed beside no other partner there (beside two, the failures
        are its own)."""
        e = self.explained()
        beside: dict[tuple[str, ...], set[tuple[str, ...]]] = defaultdict(set)
        for group, j in ran:
            if not j.passed:
                beside[group.tested].add(group.partners)
        out: list[Test] = []
        for group, j in ran:
            both = set(group.nodes)
            if j.passed or len(both) != 2 or self.gone & both or len(beside[group.tested]) > 1:
                continue
            blamed = set(e.culprits) | set(e.hung)
            failed = (both < e.members[i] and not e.members[i] & blamed for i in e.unexplained)
            if not any(failed):
                out.append((group.tested, group.partners))
        return out

    def dead_ends(self, unresolved: list[str]) -> Generator[ScanWave, None, list[str]]:
        """Each failing group no culprit or pair explains that holds a node its bisection
        left `unresolved` (no part of it reproduced the failure), run again whole, up to
        RERUNS times while it fails: one that passes is transient (`across.transient`: slow
        by chance, where 1.1% of recorded points are 15% slow or more, and a group that
        passes at 0.9 of the screen's median 3.4% of the time), not 28 suspects. The nodes
        still unresolved."""
        if not unresolved:
            return []
        left = set(unresolved)
        for _ in range(RERUNS):
            e = self.explained()
            groups = dict.fromkeys(
                nodes
                for i in sorted(e.unexplained)
                if e.members[i] & left
                and not any(pair <= e.members[i] for pair in e.pairs)
                and len(nodes := self.live(e.tests[i].outcome.group.nodes)) > 1
            )
            if not groups:
                break
            for batch in _pack([(nodes, ()) for nodes in groups]):
                wave = self.wave(Stage.BISECT, batch)
                yield wave
                self.answered(wave)
        e = self.explained()
        still = {n for i in e.unexplained for n in e.members[i]}
        return [n for n in unresolved if n in still]

    def rebisect(
        self, unresolved: list[str], links: list[tuple[str, str]]
    ) -> Generator[ScanWave, None, list[str]]:
        """Each failing group that holds a node a bisection left `unresolved` and failed
        again when run whole (`dead_ends`), bisected anew, up to RERUNS times: a half that
        failed by chance (a group of 13 passes at the screen's threshold 96% of the time under
        every size's noise) sent its bisection down the wrong side, while the pair is still
        in the group, which left 27 healthy nodes in one unconfirmed group. Each pair found
        into `links`; the nodes still unresolved."""
        for _ in range(RERUNS):
            if not unresolved:
                break
            e = self.explained()
            left = set(unresolved)
            found = [set(link) for link in links]
            problems: list[_Problem] = list(
                dict.fromkeys(
                    _Split(nodes)
                    for i in sorted(e.unexplained)
                    if e.members[i] & left
                    and not any(pair <= e.members[i] for pair in [*e.pairs, *found])
                    and len(nodes := self.live(e.tests[i].outcome.group.nodes)) > 1
                )
            )
            if not problems:
                break
            lost: list[str] = []
            yield from self.bisect(problems, links, lost)
            lost = yield from self.dead_ends(lost)
            e = self.explained()
            found = [set(link) for link in links]
            still = {
                n
                for i in e.unexplained
                if not any(pair <= e.members[i] for pair in [*e.pairs, *found])
                for n in e.members[i]
            }
            unresolved = [n for n in dict.fromkeys(unresolved + lost) if n in still]
        return unresolved

    def bisect(
        self, problems: Sequence[_Problem], links: list[tuple[str, str]], unresolved: list[str]
    ) -> Iterator[ScanWave]:
        """Each problem probed down to its slow pairs (into `links`), or to members no part
        reproduced (into `unresolved`)."""
        while problems:
            probes, found = self.probes(problems)
            links += found
            if not probes:
                break
            waves = self.probe_waves(probes)
            results: dict[_Probe, bool] = {}
            for wave, chosen in waves:
                yield wave
                for p, j in zip(chosen, self.answered(wave), strict=True):
                    results[p] = j.passed
            problems, lost = self.follow(probes, results)
            unresolved += lost

    def live(self, nodes: Sequence[str]) -> tuple[str, ...]:
        return tuple(n for n in nodes if n not in self.gone)

    def screen(self, nodes: list[str]) -> list[list[tuple[str, ...]]]:
        """The screen's waves: one group a domain where nodes carry a label, then the affine
        plane's classes."""
        domains: dict[str | None, list[str]] = {}
        for n in nodes:
            domains.setdefault(self.fleet.node(n).domain, []).append(n)
        first = [tuple(d) for d in domains.values() if len(d) > 1]
        labelled = len(domains) > 1 or None not in domains
        return ([first] if labelled and first else []) + affine(nodes)

    def probe_waves(self, probes: list[_Probe]) -> list[tuple[ScanWave, list[_Probe]]]:
        """The probes packed into waves of disjoint groups."""
        left = list(probes)
        out = []
        while left:
            used: set[str] = set()
            chosen = []
            for p in left:
                if not used & set(p.tested):
                    used.update(p.tested)
                    chosen.append(p)
            taken = set(chosen)
            left = [p for p in left if p not in taken]
            out.append((self.wave(Stage.BISECT, [(p.tested, ()) for p in chosen]), chosen))
        return out

    def probes(self, problems: Sequence[_Problem]) -> tuple[list[_Probe], list[tuple[str, str]]]:
        probes: list[_Probe] = []
        links: list[tuple[str, str]] = []
        for problem in problems:
            if isinstance(problem, _Split) and problem.recheck:
                probes.append(_Probe(problem, problem.nodes))
            elif isinstance(problem, _Split) and len(problem.nodes) == 2:
                a, b = problem.nodes
                links.append((a, b))
            elif isinstance(problem, _Split):
                halves = [h for h in _halves(problem.nodes) if len(h) > 1]
                probes += [_Probe(problem, half) for half in halves]
                if not halves:  # no half holds a pair: the pair crosses them
                    probes += self.probes([_Cross(*_halves(problem.nodes))])[0]
            elif len(problem.left) == 1 and len(problem.right) == 1:
                links.append((problem.left[0], problem.right[0]))
            else:
                (a1, a2), (b1, b2) = _halves(problem.left), _halves(problem.right)
                sides = [(a1, b1), (a2, b2)] if problem.diagonal else [(a1, b2), (a2, b1)]
                probes += [_Probe(problem, a + b, (a, b)) for a, b in sides if a and b]
                if not any(a and b for a, b in sides):
                    probes += self.probes([replace(problem, diagonal=not problem.diagonal)])[0]
        return probes, links

    def follow(
        self, probes: list[_Probe], passed: dict[_Probe, bool]
    ) -> tuple[list[_Problem], list[str]]:
        """The problems left once a bisect round's outcomes are in, and the members of those
        that no part reproduced (an intermittent fault among them: confirmed as suspects)."""
        problems: list[_Problem] = []
        lost: list[str] = []
        by_problem: dict[_Problem, list[_Probe]] = {}
        for p in probes:
            by_problem.setdefault(p.problem, []).append(p)
        for problem, mine in by_problem.items():
            failing = [p for p in mine if not passed[p]]
            if any(self.gone & set(p.tested) for p in failing):  # a hang: the rest again
                problems.append(_Split(self.live(_members(problem)), recheck=True))
            elif isinstance(problem, _Split) and problem.recheck:
                problems += [_Split(problem.nodes) for _ in failing]
            elif isinstance(problem, _Split):
                problems += [_Split(p.tested) for p in failing]
                if not failing:
                    problems.append(_Cross(*_halves(problem.nodes)))
            else:
                problems += [_Cross(*p.halves) for p in failing]
                if not failing and problem.diagonal:
                    problems.append(_Cross(problem.left, problem.right, False))
                elif not failing:
                    lost += _members(problem)
        return [p for p in problems if len(_members(p)) > 1], lost

    def good(self, e: Explained, busy: set[str]) -> list[str]:
        """Known-good nodes: passed beside at least two different partners, blamed for
        nothing, in no failing group left unexplained, and never beside a failure as a pad."""
        suspect = set(e.culprits) | set(e.hung) | self.gone | self.doubted | busy
        suspect |= {n for i in e.unexplained for n in e.members[i]}
        return [n for n in self.fleet.ids if n not in suspect and e.known_good(n)]

    def pads(self, good: list[str], count: int, busy: set[str]) -> tuple[str, ...]:
        free = [n for n in good if n not in busy]
        if not free or count <= 0:
            return ()
        start = self.cursor % len(free)
        picked = (free[start:] + free[:start])[: min(count, len(free))]
        self.cursor += len(picked)
        busy.update(picked)
        return tuple(picked)

    def confirm(self, links: list[tuple[str, str]], unresolved: list[str]) -> Iterator[ScanWave]:
        """Each suspect node beside CONFIRMS different known-good partners; each suspect
        link's ends beside one each, and the pair again; then each pad a probe failed beside,
        beside two others."""
        e = self.explained()
        # a culprit that only brought nothing back left the scan: nothing to confirm
        there = [
            n
            for n, idx in e.culprits.items()
            if any(e.tests[i].failure is not Failure.MISSING for i in idx)
        ]
        suspects = [n for n in there if n not in self.gone]
        suspects += [
            n for n in dict.fromkeys(unresolved) if n not in suspects and n not in self.gone
        ]
        links = [link for link in dict.fromkeys(links) if not set(link) & set(suspects)]
        ends = {n for link in links for n in link}
        # a node that never passed, whose failures other culprits explained (with 10% of the
        # fleet slow each of its groups held another, so no group was its own): beside
        # known-good partners too, or it is left unconfirmed, slow or not
        suspects += [
            n
            for n in self.fleet.ids
            if n in e.fails
            and n not in e.passes
            and n not in suspects
            and n not in ends
            and n not in e.hung
            and n not in self.gone
            and len({frozenset(e.members[i]) for i in e.fails[n]}) > 1
            and any(e.tests[i].failure is not Failure.MISSING for i in e.fails[n])
        ]
        under = set(suspects) | ends
        good = self.good(e, under)
        tests: list[Test] = []
        for a, b in links:
            tests += self.beside(a, 1, good, under) + self.beside(b, 1, good, under)
        tests += [((a, b), ()) for a, b in links]
        yield from self.beside_good(suspects, good, under, tests)

    def beside_good(
        self, suspects: list[str], good: list[str], under: set[str], more: list[Test]
    ) -> Iterator[ScanWave]:
        """Each suspect beside CONFIRMS of the `good` partners, with `more` tests; then each
        pad a test failed beside, beside two others."""
        tests = [t for node in suspects for t in self.beside(node, CONFIRMS, good, under)]
        doubted: list[str] = []
        for group, j in (yield from self.confirming(_pack(tests + more))):
            if not j.passed:
                doubted += group.partners
        self.doubted.update(doubted)
        good = self.good(self.explained(), set(doubted))
        retests = [t for pad in dict.fromkeys(doubted) for t in self.beside(pad, 2, good, under)]
        yield from self.confirming(_pack(retests))

    def beside(self, node: str, count: int, good: list[str], under: set[str]) -> list[Test]:
        """`count` tests of `node`, each beside another known-good partner (fewer where too
        few are known: a node beside no partner is no internode test). A partner may serve
        other nodes' tests; the waves keep each test's nodes apart."""
        taken = under | {node}
        return [((node,), pads) for _ in range(count) if (pads := self.pads(good, 1, taken))]


def _pack(tests: list[Test]) -> list[list[Test]]:
    """Tests into waves of disjoint groups, first fit, in order."""
    waves: list[tuple[set[str], list[Test]]] = []
    for test in tests:
        nodes = set(test[0]) | set(test[1])
        for used, batch in waves:
            if not used & nodes:
                used.update(nodes)
                batch.append(test)
                break
        else:
            waves.append((nodes, [test]))
    return [batch for _, batch in waves]


# Every strategy, by its --strategy name: a function of the nodes the gate and the isolation
# left in that gives its waves of groups. The adaptive one reads each wave's outcomes before
# it picks the next; the fixed ones are rounds fixed in advance.
STRATEGIES: dict[Scheme, Strategist] = {
    Scheme.ADAPTIVE: lambda at: _Adaptive(at).waves(),
    Scheme.RING: screens(_ring),
    Scheme.BISECT: screens(_bisect),
    Scheme.RANDOM: screens(_random),
    Scheme.ALL: screens(_all),
}
