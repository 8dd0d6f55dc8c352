"""The next wave of a scan, from the fleet and the outcomes so far. Pure and deterministic
(given the strategy's seed): a real scan and a simulation call the same function.

Every strategy starts with the gate (each node alone, all at once); a node that fails its
gate stays out of the internode stages (`excluded` says why). Then:

- `adaptive`: screen disjoint groups of ~sqrt(N) nodes (or one domain each); one group of a
  representative per passing group (cross-domain); bisect each failing group into halves
  padded back to its shape with known-good nodes, down to single nodes, and where both halves
  pass but the whole failed, probe across the boundary (halves of each side, two at a time)
  down to one pair; confirm each suspect node with two different known-good partners, and
  each suspect link by each end beside a known-good partner and the pair again.
- `ring` (node i with i+1: 2 waves), `bisect` (i with i + N/2: 1 wave), `random:K` (K seeded
  random perfect matchings), `all` (every pair: N-1 waves by the circle method).

`Policy` is fed each wave's outcomes as the scan goes; `next_wave` replays it from the start
on a scan's rows so far (a resume), each wave decided from the outcomes of the waves before
it, so both give the same waves. The executor answers every group of a wave (`missing`
where no row came back).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from math import isqrt

from sweeper.scan.fleet import Fleet, Group, Outcome, Stage, Wave
from sweeper.scan.thresholds import Failure, Judged, Thresholds, judge_groups
from sweeper.wire import Name


class Scheme(Name):
    """How a scan picks its internode groups (`--strategy`): adaptive, or a fixed pairing."""

    ADAPTIVE = "adaptive"
    RING = "ring"
    BISECT = "bisect"
    RANDOM = "random"
    ALL = "all"


@dataclass(frozen=True, kw_only=True, slots=True)
class Strategy:
    kind: Scheme
    rounds: int = 0  # random:K
    seed: int = 0  # random matchings; recorded with the scan

    @classmethod
    def parse(cls, text: str, *, seed: int = 0) -> Strategy:
        """`adaptive`, `ring`, `bisect`, `all`, or `random:K`."""
        name, _, count = text.partition(":")
        kind = Scheme(name)
        if (kind is Scheme.RANDOM) != bool(count):
            raise ValueError(f"strategy {text!r}: random takes a count (random:5), nothing else")
        rounds = int(count) if count else 0
        if kind is Scheme.RANDOM and rounds < 1:
            raise ValueError(f"strategy {text!r}: at least one random matching")
        return cls(kind=kind, rounds=rounds, seed=seed)

    def __str__(self) -> str:
        return f"random:{self.rounds}" if self.kind is Scheme.RANDOM else str(self.kind)


def blocks(ids: Sequence[str]) -> list[tuple[str, ...]]:
    """The fleet in order, cut into blocks of about sqrt(N) nodes (the screen's groups where
    nodes carry no domain label)."""
    size = max(2, isqrt(len(ids)))
    count = max(1, len(ids) // size)
    return [tuple(ids[i * len(ids) // count : (i + 1) * len(ids) // count]) for i in range(count)]


def gate_group(node: str) -> Group:
    return Group(wave=0, stage=Stage.GATE, nodes=(node,))


def gate_wave(fleet: Fleet) -> Wave:
    return Wave(index=0, stage=Stage.GATE, groups=tuple(gate_group(n) for n in fleet.ids))


def excluded(fleet: Fleet, outcomes: Sequence[Outcome], thresholds: Thresholds) -> dict[str, str]:
    """Nodes kept out of the internode stages, each with the reason its gate gave."""
    gates = [o for o in outcomes if o.group.stage is Stage.GATE]
    judged = judge_groups(fleet, gates, thresholds)
    out = {n: "no gate result" for n in fleet.ids}
    for group, j in judged.items():
        node = group.nodes[0]
        if j.passed:
            del out[node]
        else:
            out[node] = f"gate {j.failure}: {j.why}"
    return out


def waves(
    fleet: Fleet, strategy: Strategy, thresholds: Thresholds, history: list[Outcome]
) -> Iterator[Wave]:
    """The scan's waves in order. After yielding a wave it reads that wave's outcomes from
    `history`, which the caller extends before asking for the next one."""
    if strategy.kind is Scheme.ADAPTIVE:
        yield from _Adaptive(fleet, thresholds, history).waves()
        return
    yield gate_wave(fleet)
    out = excluded(fleet, history, thresholds)
    nodes = [n for n in fleet.ids if n not in out]
    k = 0
    while pairs := _fixed(strategy, nodes, k):
        k += 1
        groups = tuple(Group(wave=k, stage=Stage.SCREEN, nodes=p) for p in pairs)
        yield Wave(index=k, stage=Stage.SCREEN, groups=groups)


class Policy:
    """A scan's policy fed as it goes: `next(outcomes of the last wave)` gives the next wave,
    None when the scan is done."""

    def __init__(self, fleet: Fleet, strategy: Strategy, thresholds: Thresholds) -> None:
        self.history: list[Outcome] = []
        self._waves = waves(fleet, strategy, thresholds, self.history)

    def next(self, outcomes: Sequence[Outcome] = ()) -> Wave | None:
        self.history.extend(outcomes)
        return next(self._waves, None)


def next_wave(
    fleet: Fleet, outcomes: Sequence[Outcome], strategy: Strategy, thresholds: Thresholds
) -> Wave | None:
    """The wave to run after these outcomes (a resumed scan's rows), or None when the scan is
    done: the policy replayed from the start, each wave decided from the waves before it."""
    by_group = {o.group: o for o in outcomes}
    history: list[Outcome] = []
    for wave in waves(fleet, strategy, thresholds, history):
        got = [by_group.get(g) for g in wave.groups]
        done = [o for o in got if o is not None]
        if len(done) < len(got):
            return wave
        history.extend(done)
    return None


# ---- fixed strategies: the k-th matching of the nodes that passed the gate ----


def _fixed(strategy: Strategy, nodes: Sequence[str], k: int) -> list[tuple[str, str]]:
    n = len(nodes)
    if n < 2:
        return []
    if strategy.kind is Scheme.RING:
        # even n: (0,1)(2,3).. then (1,2)(3,4)..(n-1,0); odd n takes a third wave
        edges = [(i, (i + 1) % n) for i in range(n if n > 2 else 1)]
        rounds = [edges[0::2], edges[1::2]] if n % 2 == 0 else _pack_edges(edges)
        return [(nodes[a], nodes[b]) for a, b in rounds[k]] if k < len(rounds) else []
    if strategy.kind is Scheme.BISECT:
        half = n // 2
        return [(nodes[i], nodes[i + half]) for i in range(half)] if k == 0 else []
    if strategy.kind is Scheme.RANDOM:
        if k >= strategy.rounds:
            return []
        rng = random.Random(strategy.seed)
        order = list(nodes)
        for _ in range(k + 1):
            rng.shuffle(order)
        return [(order[i], order[i + 1]) for i in range(0, n - 1, 2)]
    # all: the circle method, a bye where n is odd
    ring: list[str | None] = [*nodes, None] if n % 2 else list(nodes)
    m = len(ring)
    if k >= m - 1:
        return []
    rest = ring[1:]
    turned = [ring[0], *rest[k:], *rest[:k]]
    pairs = [(turned[i], turned[m - 1 - i]) for i in range(m // 2)]
    return [(a, b) for a, b in pairs if a is not None and b is not None]


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


@dataclass(frozen=True, slots=True)
class _Split:
    """A failing group's members under test: which of them fails? `recheck`: not known to
    fail yet (the rest of a group once its culprits are out), so tested whole first."""

    nodes: tuple[str, ...]
    shape: int
    recheck: bool = False


@dataclass(frozen=True, slots=True)
class _Cross:
    """Two halves that each passed while their union failed: a link between a node of one and
    a node of the other. `diagonal`: the next probes are (A1+B1, A2+B2), else (A1+B2, A2+B1)."""

    left: tuple[str, ...]
    right: tuple[str, ...]
    shape: int
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
    halves: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # the cross probe's sides


def _halves(nodes: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    cut = (len(nodes) + 1) // 2
    return nodes[:cut], nodes[cut:]


class _Adaptive:
    """The adaptive scan as a generator of waves; after each one it reads that wave's outcomes
    from `history`, which its caller fills."""

    def __init__(self, fleet: Fleet, thresholds: Thresholds, history: list[Outcome]) -> None:
        self.fleet = fleet
        self.thresholds = thresholds
        self.history = history
        self.order = {n: i for i, n in enumerate(fleet.ids)}
        self.good: list[str] = []  # known-good nodes, in the order they were cleared
        self.cursor = 0  # where the next padding starts, so partners change between waves
        self.index = 0
        self.unresolved: list[str] = []  # members of failures no part reproduced

    def judged(self, wave: Wave) -> list[Judged]:
        groups = set(wave.groups)
        judged = judge_groups(self.fleet, self.history, self.thresholds, only=groups)
        return [judged[group] for group in wave.groups]

    def passing(self, wave: Wave) -> list[bool]:
        return [j.passed for j in self.judged(wave)]

    def wave(self, stage: Stage, groups: Sequence[tuple[tuple[str, ...], tuple[str, ...]]]) -> Wave:
        made = tuple(
            Group(wave=self.index, stage=stage, nodes=nodes + pads, partners=pads)
            for nodes, pads in groups
        )
        self.index += 1
        return Wave(index=self.index - 1, stage=stage, groups=made)

    def clear(self, nodes: Sequence[str]) -> None:
        known = set(self.good)
        self.good.extend(n for n in nodes if n not in known)

    def pads(self, count: int, busy: set[str]) -> tuple[str, ...]:
        free = [n for n in self.good if n not in busy]
        if not free or count <= 0:
            return ()
        start = self.cursor % len(free)
        picked = (free[start:] + free[:start])[: min(count, len(free))]
        self.cursor += len(picked)
        busy.update(picked)
        return tuple(picked)

    def waves(self) -> Iterator[Wave]:
        gate = gate_wave(self.fleet)
        self.index = 1
        yield gate
        out = excluded(self.fleet, self.history, self.thresholds)
        nodes = [n for n in self.fleet.ids if n not in out]
        if len(nodes) < 2:
            return
        screen = self.wave(Stage.SCREEN, [(g, ()) for g in self.screen_groups(nodes)])
        yield screen
        problems: list[_Problem] = []
        passing = []
        for group, ok in zip(screen.groups, self.passing(screen), strict=True):
            if ok:
                passing.append(group)
                self.clear(group.nodes)
            else:
                problems.append(_Split(group.nodes, len(group.nodes)))
        if len(passing) >= 2:
            reps = tuple(g.nodes[0] for g in passing)
            cross = self.wave(Stage.CROSS_DOMAIN, [(reps, ())])
            yield cross
            if not self.passing(cross)[0]:
                problems.append(_Split(reps, len(reps)))
        suspects: list[str] = []
        links: list[tuple[str, str]] = []
        origins = [p for p in problems if isinstance(p, _Split)]
        while problems:
            probes, found, found_links = self.probes(problems)
            suspects += found
            links += found_links
            if probes:
                # no pad from an open problem: a cleared half may still hold a link's end
                busy = {n for p in problems for n in _members(p)}
                shaped = [
                    (p.tested, self.pads(p.problem.shape - len(p.tested), busy)) for p in probes
                ]
                wave = self.wave(Stage.BISECT, shaped)
                yield wave
                problems = self.follow(probes, wave)
                rechecked = {p.problem for p in probes if isinstance(p.problem, _Split)}
                origins += [
                    _Split(p.nodes, p.shape)
                    for p in rechecked
                    if p.recheck and _Split(p.nodes, p.shape) in problems
                ]
                continue
            # a failing group's culprits found: the rest of it again, for a second fault the
            # first one hid (a slow link beside a slow node)
            problems = []
            for origin in origins:
                rest = tuple(n for n in origin.nodes if n not in suspects)
                if len(rest) > 1 and len(rest) < len(origin.nodes):
                    problems.append(_Split(rest, origin.shape, recheck=True))
            origins = []
        # each member of a failure no part reproduced is confirmed like a suspect: a node
        # that fails one time in two shows beside its partners
        suspects += [n for n in dict.fromkeys(self.unresolved) if n not in suspects]
        yield from self.confirm(suspects, links)

    def screen_groups(self, nodes: list[str]) -> list[tuple[str, ...]]:
        domains: dict[str | None, list[str]] = {}
        for n in nodes:
            domains.setdefault(self.fleet.node(n).domain, []).append(n)
        if len(domains) > 1 or None not in domains:
            labelled = [d for d in domains.values() if len(d) > 1]
            alone = [d[0] for d in domains.values() if len(d) == 1]
            if len(alone) > 1:
                labelled.append(alone)
            elif alone and labelled:
                labelled[-1].append(alone[0])
            return [tuple(g) for g in labelled]
        # blocks of the whole fleet, so a node left out at the gate moves no other node; a
        # block left with one node joins the next
        screened = set(nodes)
        groups: list[list[str]] = []
        carry: list[str] = []
        for block in blocks(self.fleet.ids):
            kept = carry + [n for n in block if n in screened]
            carry = [] if len(kept) > 1 else kept
            if len(kept) > 1:
                groups.append(kept)
        if carry and groups:
            groups[-1] += carry
        return [tuple(g) for g in groups]

    def probes(
        self, problems: list[_Problem]
    ) -> tuple[list[_Probe], list[str], list[tuple[str, str]]]:
        probes: list[_Probe] = []
        suspects: list[str] = []
        links: list[tuple[str, str]] = []
        for problem in problems:
            if isinstance(problem, _Split) and problem.recheck:
                probes.append(_Probe(problem, problem.nodes))
                continue
            if isinstance(problem, _Split):
                if len(problem.nodes) == 1:
                    suspects.append(problem.nodes[0])
                    continue
                probes += [_Probe(problem, half) for half in _halves(problem.nodes)]
                continue
            if len(problem.left) == 1 and len(problem.right) == 1:
                links.append((problem.left[0], problem.right[0]))
                continue
            (a1, a2), (b1, b2) = _halves(problem.left), _halves(problem.right)
            sides = [(a1, b1), (a2, b2)] if problem.diagonal else [(a1, b2), (a2, b1)]
            probes += [_Probe(problem, a + b, (a, b)) for a, b in sides if a and b]
        return probes, suspects, links

    def doubt(self, nodes: Sequence[str]) -> None:
        """Known-good nodes no longer known good: no pad again, confirmed at the end."""
        self.good = [n for n in self.good if n not in nodes]
        self.unresolved += nodes

    def follow(self, probes: list[_Probe], wave: Wave) -> list[_Problem]:
        """The problems left once a bisect wave's outcomes are in. A group that failed with an
        error puts its pads in doubt: the slowness its tested half may hold explains no
        error, and a node that fails one time in two passes the screen as often as not."""
        judged = self.judged(wave)
        results = [(p, j.passed) for p, j in zip(probes, judged, strict=True)]
        for p, ok in results:
            if ok:
                self.clear(p.tested)
        for group, j in zip(wave.groups, judged, strict=True):
            if j.failure is Failure.FAILED:
                self.doubt(group.partners)
        problems: list[_Problem] = []
        for problem in dict.fromkeys(p.problem for p in probes):
            mine = [(p, ok) for p, ok in results if p.problem == problem]
            failing = [p for p, ok in mine if not ok]
            if isinstance(problem, _Split) and problem.recheck:
                problems += [_Split(problem.nodes, problem.shape) for _ in failing]
            elif isinstance(problem, _Split):
                problems += [_Split(p.tested, problem.shape) for p in failing]
                if not failing:
                    left, right = (p.tested for p, _ in mine)
                    problems.append(_Cross(left, right, problem.shape))
            else:
                problems += [_Cross(*p.halves, problem.shape) for p in failing]
                if not failing and problem.diagonal:
                    problems.append(_Cross(problem.left, problem.right, problem.shape, False))
                elif not failing:
                    # the whole failed and no part does: an intermittent fault among them
                    self.unresolved += _members(problem)
        return problems

    def confirm(self, suspects: list[str], links: list[tuple[str, str]]) -> Iterator[Wave]:
        """Each suspect beside two different known-good partners; each suspect link's ends
        beside one each, and the pair again."""
        under = set(suspects) | {n for link in links for n in link}
        links = [link for link in links if not set(link) & set(suspects)]
        tests: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        busy = set(under)
        for node in suspects:
            tests += [((node,), self.pads(1, busy)), ((node,), self.pads(1, busy))]
        for a, b in links:
            tests += [((a,), self.pads(1, busy)), ((b,), self.pads(1, busy))]
        # a node beside no partner is no internode test: there were no known-good nodes left
        tests = [(nodes, pads) for nodes, pads in tests if pads]
        tests += [((a, b), ()) for a, b in links]
        for batch in _pack(tests):
            wave = self.wave(Stage.CONFIRM, batch)
            yield wave


def _pack(
    tests: list[tuple[tuple[str, ...], tuple[str, ...]]],
) -> list[list[tuple[tuple[str, ...], tuple[str, ...]]]]:
    """Tests into waves of disjoint groups, first fit, in order."""
    waves: list[tuple[set[str], list[tuple[tuple[str, ...], tuple[str, ...]]]]] = []
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
