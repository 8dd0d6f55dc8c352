"""Across nodes: the internode groups' failures explained, each by a node that did not
answer, a slow pair, a culprit node or none yet; a failure that did not reproduce is
transient, and a node's own failures are a sequential test for flakiness. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from math import ceil, log

from sweeper.scan.fleet import Stage
from sweeper.scan.thresholds import Failure, Judged

# A node is a culprit only where this share of its groups, or more, fail with no other
# culprit to explain them: every node shares a screen group with every other, so a healthy
# node also sits in the one group of each slow pair and beside each faulty node (2 of its 38
# at 1024 nodes where it shares two slow pairs' groups), while a node failing one test in two
# fails half. A node failing less often than this is not told from its neighbours' faults.
FAIL_SHARE = 0.25
# A node's failures across nodes that no other cause explains, its transient ones included,
# are a sequential probability ratio test (Wald's): that its groups fail at the fleet's noise
# rate (the share of the screen's groups whose failure did not reproduce, at least
# NOISE_SHARE: 0.6% of recorded GPU points are 25-79% slow, scan.noise), against that it
# fails one test in 1/FLAKY_RATE more. Past ln((1 - FLAKY_BETA) / FLAKY_ALPHA) it is flaky:
# a healthy node is called flaky at most FLAKY_ALPHA of the time, one failing one in five
# missed FLAKY_BETA. Every node of a fleet is so tested: at 0.001, a healthy 1024-node fleet
# under every size's noise had a node called flaky in 2 scans of 100 (docs/SCAN.md's
# envelope).
FLAKY_RATE = 0.2
FLAKY_ALPHA = 0.0001
FLAKY_BETA = 0.01
NOISE_SHARE = 0.01
# A link's own tests (its two nodes alone, no partner put in) stand it once it failed
# `link_fails` of them and two more than it passed: the fewest failures that no healthy pair
# reaches by chance, under LINK_ALPHA a scan over every pair tested alone, each failing a
# test at the pairs' chance rate (rate^k x pairs <= LINK_ALPHA; a record of k failures and a
# pass among them is some k times as likely, within a scan's 1 in 100), at least LINK_FAILS
# and at most LINK_FAILS_MOST (pairs failing one test in eight would need 10: that is their
# state, not chance). The rate is the share of the pairs stage's first tests that failed
# where LINK_SAMPLE pairs ran, else NOISE_SHARE. Under every size's noise at 1024 nodes 1.13%
# of 531 404 pairs failed their first test (healthy, seed 1): 5 failures, where 3 stood 1-2
# healthy links a scan and 4 one in some five scans; 4 at 100 nodes; 3 under the bandwidth
# sizes' noise, where no pair fails by chance (docs/SCAN.md's envelope).
LINK_ALPHA = 0.001
LINK_FAILS = 3
LINK_FAILS_MOST = 6
LINK_SAMPLE = 100


@dataclass(frozen=True, kw_only=True, slots=True)
class Explained:
    """The internode groups' failures, each explained by a node that did not answer, a link,
    a culprit node, or none (`unexplained`: a fault among its members not yet separated)."""

    tests: list[Judged]
    members: list[set[str]]
    passes: dict[str, list[int]]
    fails: dict[str, list[int]]
    hung: dict[str, list[int]]
    culprits: dict[str, list[int]]
    pairs: list[set[str]]  # slow as a pair, both ends passing elsewhere: links until shown not
    unexplained: set[int]
    # failures that did not reproduce: each failing group whose nodes were run again, whole,
    # and passed the last time, with that passing test; held against no one
    transient: dict[int, int] = field(default_factory=dict)
    # each node with failures of its own (`sequential`): its log likelihood ratio, flaky past
    # FLAKY_LIMIT; one above 0 and under it is in doubt, for the policy to test again
    sequential: dict[str, float] = field(default_factory=dict)
    # the failures a link's own tests need to stand it (`link_fails`), and each pair whose own
    # tests failed, not by chance, fewer times than that (`_doubt`): unconfirmed, to run again
    link_fails: int = LINK_FAILS
    doubt: set[frozenset[str]] = field(default_factory=set)

    def known_good(self, node: str) -> bool:
        """Whether it passed beside at least two different sets of partners."""
        seen: set[frozenset[str]] = set()
        for i in self.passes.get(node, []):
            seen.add(frozenset(self.members[i]))
            if len(seen) > 1:
                return True
        return False


def link_fails(tests: Sequence[Judged]) -> int:
    """The failures a link's own tests need to stand it (LINK_ALPHA's comment)."""
    pairs: set[frozenset[str]] = set()
    first: dict[frozenset[str], bool] = {}
    for j in tests:
        g = j.outcome.group
        if len(g.nodes) == 2 and not g.partners:
            pairs.add(key := frozenset(g.nodes))
            if g.stage is Stage.PAIRS:
                first.setdefault(key, j.passed)
    rate = NOISE_SHARE
    if len(first) >= LINK_SAMPLE:
        rate = sum(not passed for passed in first.values()) / len(first)
    return needed(len(pairs), rate)


def needed(pairs: int, rate: float) -> int:
    """The fewest failures that none of `pairs` healthy pairs, each failing a test at `rate`,
    reaches by chance but under LINK_ALPHA a scan, within LINK_FAILS to LINK_FAILS_MOST."""
    if pairs < 1 or rate <= 0:
        return LINK_FAILS
    if rate >= 1:
        return LINK_FAILS_MOST
    need = ceil(log(LINK_ALPHA / pairs) / log(rate))
    return min(LINK_FAILS_MOST, max(LINK_FAILS, need))


def link_record(seen: Sequence[bool], need: int) -> bool | None:
    """A link's own tests in order (each passed or not): True where they stand it (`need`
    failures, two more than its passes), False where they clear it (no failure, or the last a
    pass and more passes than failures), None while in doubt."""
    fails = seen.count(False)
    passes = len(seen) - fails
    if fails >= need and fails >= passes + 2:
        return True
    if not fails or (seen[-1] and passes > fails):
        return False
    return None


def _is_link(tests: Sequence[Judged], order: Sequence[int]) -> bool:
    """Whether these runs of one node set, in order, are a link's own tests: two nodes, the
    last with no partner put in."""
    g = tests[order[-1]].outcome.group
    return len(g.nodes) == 2 and not g.partners


def _runs(tests: Sequence[Judged]) -> dict[frozenset[str], list[int]]:
    runs: dict[frozenset[str], list[int]] = defaultdict(list)
    for i, j in enumerate(tests):
        runs[frozenset(j.outcome.group.nodes)].append(i)
    return runs


def _ordered(tests: Sequence[Judged], idx: Sequence[int]) -> list[int]:
    return sorted(idx, key=lambda i: (tests[i].outcome.group.wave, i))


def transient(
    tests: Sequence[Judged], runs: Mapping[frozenset[str], list[int]] | None = None
) -> dict[int, int]:
    """Each failing group whose very nodes were run again later and passed the last time
    (the policy runs a failing group again before it bisects it), and, a link's own test of
    two nodes, passed at least as often as it failed, with that last test: a slow block or an
    error that did not reproduce (0.6% of recorded GPU points are 25-79% slow, scan.noise).
    A hang or a group that brought nothing back is never transient."""
    out: dict[int, int] = {}
    for idx in (runs if runs is not None else _runs(tests)).values():
        if len(idx) < 2:  # most groups, run once (the pairs of 1024 nodes: 523 776)
            continue
        order = _ordered(tests, idx)
        last = order[-1]
        if not tests[last].passed:
            continue
        # a link's own tests: cleared where they passed at least as often as they failed
        seen = [tests[i].passed for i in order]
        if _is_link(tests, order) and 2 * sum(seen) < len(seen):
            continue
        for i in idx:
            j = tests[i]
            if not j.passed and j.failure is not Failure.MISSING and not j.outcome.unanswered:
                out[i] = last
    return out


def _doubt(
    tests: Sequence[Judged],
    need: int,
    runs: Mapping[frozenset[str], list[int]],
    passing: Mapping[int, int],
) -> set[frozenset[str]]:
    """Each pair whose own tests failed, not by chance (`transient`), but fewer times than
    its fleet's pairs need past LINK_FAILS (`link_fails`): where LINK_FAILS do, a failing
    link stands as it did."""
    if need <= LINK_FAILS:
        return set()
    return {
        nodes
        for nodes, idx in runs.items()
        if len(nodes) == 2
        and _is_link(tests, order := _ordered(tests, idx))
        and any(not tests[i].passed and i not in passing for i in idx)
        and link_record([tests[i].passed for i in order], need) is not True
        and not any(tests[i].outcome.unanswered for i in idx)
    }


FLAKY_LIMIT = log((1 - FLAKY_BETA) / FLAKY_ALPHA)


def _holding(
    tests: Collection[int], members: Sequence[set[str]], pairs: Sequence[set[str]]
) -> set[int]:
    """The tests whose members hold both ends of one of `pairs` (a pair's ends indexed: the
    pairs of 1024 nodes are 523 776 tests)."""
    by_node: dict[str, list[set[str]]] = defaultdict(list)
    for pair in pairs:
        for n in pair:
            by_node[n].append(pair)
    return {i for i in tests if any(pair <= members[i] for n in members[i] for pair in by_node[n])}


def ratio(failures: int, tests: int, noise: float) -> float:
    """Wald's log likelihood ratio of `failures` in `tests`: failing one test in
    1/FLAKY_RATE beyond the `noise` rate, against failing at the noise rate."""
    flaky = noise + (1 - noise) * FLAKY_RATE
    return failures * log(flaky / noise) + (tests - failures) * log((1 - flaky) / (1 - noise))


def explain(tests: list[Judged]) -> Explained:
    members = [set(j.outcome.group.nodes) for j in tests]
    need = link_fails(tests)
    runs = _runs(tests)
    passing = transient(tests, runs)
    failing = {i for i, j in enumerate(tests) if not j.passed and i not in passing}
    fails: dict[str, list[int]] = defaultdict(list)
    passes: dict[str, list[int]] = defaultdict(list)
    for i, j in enumerate(tests):
        if i in passing:
            continue
        # in the group's own order, not its set's: the culprits' ties are broken by the order
        # nodes come in, which a set's string hashes would change from one process to another
        for n in j.outcome.group.nodes:
            (fails if i in failing else passes)[n].append(i)
    hung: dict[str, list[int]] = defaultdict(list)
    for i in sorted(failing):
        for n in tests[i].outcome.unanswered:
            hung[n].append(i)
    timed_out = {i for mine in hung.values() for i in mine}
    # a slow node explains slow groups, not errors: a flaky node's error in a group a slow
    # node was also in stays the flaky node's to explain
    slow = {i for i in failing - timed_out if tests[i].failure is Failure.SLOW}
    # a pair slow as a pair whose ends each pass elsewhere, at least a third as often as they
    # fail: a node slow near the threshold passes a group of 40 now and then, and its pairs
    # beside known-good partners are its own, not links
    pairs = [
        members[i]
        for i in slow
        if len(members[i]) == 2
        and all(passes[n] and 3 * len(passes[n]) >= len(fails[n]) for n in members[i])
    ]
    held = _holding(slow, members, pairs)
    # a node that passed every test of its beside known-good partners, two or more, is no
    # slow node: slow groups of its are a hub's slow pairs, to bisect (a node failing one
    # test in two with errors is another matter: the errors are its own)
    confirmed: dict[str, list[bool]] = defaultdict(list)
    for j in tests:
        if (g := j.outcome.group).stage is Stage.CONFIRM and g.partners:
            for n in g.tested:
                confirmed[n].append(j.passed)
    cleared = {n for n, seen in confirmed.items() if len(seen) > 1 and all(seen)}
    slow_nodes, slow_left = _explain(slow - held, fails, passes, members, cleared)
    if any(pair & slow_nodes for pair in pairs):  # a slow node's own pairs: no links
        pairs = [pair for pair in pairs if not pair & slow_nodes]
        held = _holding(slow, members, pairs)
        slow_nodes, slow_left = _explain(slow - held, fails, passes, members, cleared)
    broken_nodes, broken_left = _explain(failing - slow - timed_out, fails, passes, members)
    culprits = {
        n: [i for i in fails[n] if i not in timed_out]
        for n in fails
        if n in slow_nodes | broken_nodes and n not in hung
    }
    unexplained = slow_left | held | broken_left
    noise = _noise(tests, passing)
    free = slow_left | broken_left  # what no culprit, hang or slow pair explains
    passing_of: dict[str, set[int]] = defaultdict(set)
    for i in passing:
        for n in members[i]:
            passing_of[n].add(i)
    counted: dict[str, set[int]] = {}
    for n in sorted({n for i in free | set(passing) for n in members[i]} | set(culprits)):
        if n in hung:
            continue
        # errors and transient failures: a slow group that reproduced is for bisection
        errors = {i for i in fails.get(n, []) if i in free and tests[i].failure is not Failure.SLOW}
        own = set(culprits.get(n, [])) | errors
        counted[n] = own | passing_of[n]

    def llr(n: str) -> float:
        return ratio(len(counted[n]), len(counted[n]) + len(passes.get(n, [])), noise)

    sequential = {n: llr(n) for n in counted}
    # the most certain first, its failures then held against none of its partners (a flaky
    # node's errors fail every group it is in: two healthy nodes beside it in six of theirs
    # crossed the limit on them), until no other node is past the limit
    while True:
        left = [n for n in counted if n not in culprits and sequential[n] >= FLAKY_LIMIT]
        if not left:
            break
        n = max(left, key=lambda m: (sequential[m], m))
        culprits[n] = sorted(counted[n])
        unexplained -= counted[n]
        for m, theirs in counted.items():
            if m not in culprits and theirs & counted[n]:
                theirs.difference_update(counted[n])
                sequential[m] = llr(m)
    return Explained(
        tests=tests,
        members=members,
        passes=dict(passes),
        fails=dict(fails),
        hung=dict(hung),
        culprits=culprits,
        pairs=pairs,
        unexplained=unexplained,
        transient=passing,
        sequential=sequential,
        link_fails=need,
        doubt=_doubt(tests, need, runs, passing),
    )


def _noise(tests: Sequence[Judged], passing: Mapping[int, int]) -> float:
    """The fleet's noise rate: the share of the screen's groups (which measure every node
    alike) whose failure did not reproduce, or of every group's where no screen ran; at least
    NOISE_SHARE. Over every group it was 2.5% where the screen's was 3.8% (1024 nodes, every
    size's noise), since bisection's and confirmation's small groups fail less often, and a
    healthy node failing 8 of its 38 screen groups by chance was called flaky."""
    screen = [i for i, j in enumerate(tests) if j.outcome.group.stage is Stage.SCREEN]
    pool = screen or range(len(tests))
    if not pool:
        return NOISE_SHARE
    return max(NOISE_SHARE, sum(i in passing for i in pool) / len(pool))


def _explain(
    failing: set[int],
    fails: Mapping[str, list[int]],
    passes: Mapping[str, list[int]],
    members: list[set[str]],
    cleared: Collection[str] = (),
) -> tuple[set[str], set[int]]:
    """The fewest culprits for the `failing` groups, each node that failed most consistently
    first (its share of them, then their count), among those that failed in at least two
    with different partners and FAIL_SHARE of theirs; and the groups they leave unexplained."""
    unexplained = set(failing)
    culprits: set[str] = set()
    keys = {i: frozenset(members[i]) for i in failing}
    # each test below only fails more as groups are explained (fewer left, a smaller share,
    # more shared partners), so a node that fails one is out for good: at 1024 nodes with 40
    # faults, most nodes fail some screen group and would be read again for every culprit;
    # and a node none of whose groups a culprit took keeps its score, so only those read again
    candidates = {n: mine for n, mine in fails.items() if n not in cleared}
    holders: dict[int, list[str]] = defaultdict(list)  # a failing group's candidates
    for n, mine in candidates.items():
        for i in mine:
            if i in unexplained:
                holders[i].append(n)
    scores: dict[str, tuple[float, int]] = {}
    dirty = set(candidates)
    while True:
        for n in [n for n in candidates if n in dirty]:
            left = [i for i in candidates[n] if i in unexplained]
            share = len(left) / (len(left) + len(passes.get(n, []))) if left else 0.0
            # all of them beside one other node: that one, or the link between the two,
            # explains them as well (a slow node's follower down the bisection, a link's end)
            if (
                share < FAIL_SHARE
                or len(left) < 2
                or len({keys[i] for i in left}) < 2
                or _beside_one(n, left, members)
            ):
                del candidates[n]
                continue
            scores[n] = (share, len(left))
        dirty.clear()
        best: str | None = None
        for n in candidates:  # the first of the most consistent, in the order they came
            if best is None or scores[n] > scores[best]:
                best = n
        if best is None:
            return culprits, unexplained
        culprits.add(best)
        del candidates[best]
        taken = unexplained & set(fails[best])
        unexplained -= taken
        dirty.update(m for i in taken for m in holders[i] if m in candidates)


def _beside_one(node: str, groups: Sequence[int], members: list[set[str]]) -> bool:
    """Whether another node is in every one of `groups` (read until none is: most nodes of a
    fleet with many faults share no partner after two or three)."""
    common = members[groups[0]] - {node}
    for i in groups[1:]:
        common &= members[i]
        if not common:
            return False
    return bool(common)
