"""Did a group pass? Its busbw against the fleet's median for the same group shape (robust sigmas
from 1.4826 x MAD, and a minimum ratio) and against an absolute floor per tier (the settings'
`min_busbw_gb_per_s`, else a share of the reference figure). The policy asks this to choose
the next wave, the judge to name what failed. Missing data never passes.

The defaults are for a fleet whose screen gives `min_samples` groups or more. A fleet of a few
nodes relies on the absolute floor, and a fake cluster's scan gives its own thresholds
(docs/ARCHITECTURE.md, "Inside the rooms", says why)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median

from sweeper.ops.registry import performing
from sweeper.scan.fleet import Fleet, GroupOutcome, Result, ScanGroup, Stage
from sweeper.scan.reference import Reference, reference
from sweeper.scan.scattered import slow_share
from sweeper.wire import Name, Tier

# The stages that measure every node, not suspects: the fleet's medians come from these.
UNBIASED = (Stage.GATE, Stage.SCREEN, Stage.CROSS_DOMAIN)
# A group of two whole nodes outside those stages is judged against the pairs stage's own
# figures once it has `min_samples` of its shape: that stage measures every pair of the nodes
# left alike, where across nodes the nodes' best groups are each a maximum over some 38 noisy
# screen groups at 1024 nodes, 5% above a typical pair (47.5 against 45 GB/s under every
# size's noise), so that 2.4% of healthy pairs failed their first test there, not 1.1%.
# Across nodes, a fleet of fewer nodes than this is held to an absolute threshold (the
# reference, a flag), never to itself: at 2 nodes every group holds a slow node, at 3 two of
# the three, so its own median is the fault's; where there is none, a pass says nothing.
FEW_NODES = 4
MAD_TO_SIGMA = 1.4826  # a normal distribution's sigma is 1.4826 x its median absolute deviation


class Failure(Name):
    SLOW = "slow"  # ran, below the threshold
    FAILED = "failed"  # an error, a hang, wrong data, or NVML evidence at the gate
    MISSING = "missing"  # no data: never a pass


@dataclass(frozen=True, kw_only=True, slots=True)
class Thresholds:
    sigmas: float = 4.0  # how many robust sigmas below the median a figure must fall
    min_ratio: float = 0.85  # ... and below this share of the median
    min_busbw_gb_per_s: Mapping[Tier, float] = field(default_factory=dict)  # absolute, per tier
    reference_share: float = 0.8  # of the reference figure, for tiers the settings leave out
    # fewer figures of a group shape than this: compared with every internode group's (an
    # all_reduce's busbw across nodes is bound by the NICs whatever the group's size; an
    # assumption where no shape of its own was measured often enough)
    min_samples: int = 8
    # an absolute threshold missed by more than this share of the nodes, in every group of
    # theirs that measures every node (or by the fleet's median), and across nodes by this
    # share read from its groups' passes (`scattered.slow_share`), is a fleet finding, not a
    # verdict on each: the fleet as a whole, never a minority (a rack, or a third of 100
    # nodes scattered, is named node by node: docs/SCAN.md's envelope)
    fleet_share: float = 0.5


@dataclass(frozen=True, kw_only=True, slots=True)
class Judged:
    outcome: GroupOutcome
    failure: Failure | None  # None: passed
    fleet_gb_per_s: float | None  # the median it was compared with
    threshold_gb_per_s: float | None
    why: str  # what it missed, in words; empty when it passed
    figure_gb_per_s: float | None = None  # what was compared (`rate`), None where nothing ran
    source: str = ""  # where the threshold came from: the fleet's median, the reference, a flag
    # the absolute threshold it missed that a fleet finding waived, in words; empty where
    # none: a pass on the fleet's own figures only, which clears no GPU inside the group
    excused: str = ""
    # the reference figure for its GPU model, tier, ranks and operation; None where none is
    # known (whatever decided its threshold)
    reference: Reference | None = None
    # across fewer than FEW_NODES nodes with no absolute threshold: a pass on the fleet's
    # own figure, which says nothing (a fleet of two with no reference for its GPUs)
    unheld: bool = False

    @property
    def passed(self) -> bool:
        return self.failure is None


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """The fleet as a subject: much of it fails one threshold the same way, or its median sits
    below its reference (`off`; no node is condemned on that threshold alone); or nothing
    absolute to hold it to (no reference for its model, no flag), so that a fleet-wide shift
    cannot show."""

    kind: str  # "gate" or "internode"
    off: bool
    figure_gb_per_s: float  # the fleet's median
    threshold_gb_per_s: float | None
    source: str
    below: int  # nodes under the threshold in every group of theirs that measures every node
    nodes: int  # nodes such groups measured
    evidence: str

    @property
    def line(self) -> str:
        """The finding in one line, as the console prints it before any verdict: its figure,
        its threshold and where that comes from first."""
        held = (
            f"threshold {figure(self.threshold_gb_per_s)} GB/s ({self.source})"
            if self.threshold_gb_per_s is not None
            else "no absolute threshold"
        )
        state = "off" if self.off else "not held to a reference"
        said = f"fleet {self.kind}: {state}: median {figure(self.figure_gb_per_s)} GB/s, {held}"
        return f"{said}; {self.below} of {self.nodes} nodes below it" if self.off else said


@dataclass(frozen=True, kw_only=True, slots=True)
class Robust:
    median: float
    sigma: float
    count: int = 0
    of_what: str = "groups"  # what its figures are: "groups", or "nodes' best groups"

    @classmethod
    def of(cls, values: Sequence[float], of_what: str = "groups") -> Robust:
        mid = median(values)
        sigma = MAD_TO_SIGMA * median(abs(v - mid) for v in values)
        return cls(median=mid, sigma=sigma, count=len(values), of_what=of_what)

    def limit(self, thresholds: Thresholds) -> float:
        return min(self.median * thresholds.min_ratio, self.median - thresholds.sigmas * self.sigma)


def figure(gb_per_s: float) -> str:
    """A bandwidth in words: whole GB/s where that says enough, three digits below 100 (CPU
    ranks move a fraction of a GB/s)."""
    return f"{gb_per_s:.0f}" if gb_per_s >= 100 else f"{gb_per_s:.3g}"


def tier(group: ScanGroup) -> Tier:
    return Tier.INTERNODE if len(group.nodes) > 1 else Tier.NVLINK


def _per_nic(o: GroupOutcome) -> bool:
    """Whether its operation's figure across nodes is per NIC (`Collective.per_nic`)."""
    performed = performing(o.op)
    return performed is not None and performed.per_nic(len(o.group.nodes))


def rate(fleet: Fleet, o: GroupOutcome) -> float | None:
    """The figure a group is judged by: its operation's own (`Collective.nic_rate`: for one
    that sends to every rank, across nodes, what each GPU moved through its NIC, so groups
    of any size compare), else its busbw."""
    busbw = o.busbw_gb_per_s
    performed = performing(o.op)
    if busbw is None or performed is None:
        return busbw
    fewest = o.group.fewest(fleet) if o.group.subsets else None
    return performed.nic_rate(busbw, o.group.ranks(fleet), len(o.group.nodes), fewest)


def _floor(
    group: ScanGroup, ref: Reference | None, thresholds: Thresholds
) -> tuple[float, str] | None:
    if (given := thresholds.min_busbw_gb_per_s.get(tier(group))) is not None:
        return given, f"the flag's {figure(given)} GB/s for {tier(group)}"
    if ref is None:
        return None
    share = thresholds.reference_share
    return ref.busbw_gb_per_s * share, (
        f"{share:.0%} of the reference {figure(ref.busbw_gb_per_s)} GB/s ({ref.source})"
    )


def gpu_copy_limit(outcomes: Iterable[GroupOutcome]) -> Robust | None:
    """The fleet's GPUs' own copy rates at the gate, as one population."""
    rates = [
        r.copy_gb_per_s
        for o in outcomes
        if o.group.stage is Stage.GATE and o.result is Result.OK
        for r in o.readings
        if r.copy_gb_per_s is not None
    ]
    return Robust.of(rates) if rates else None


def _key(fleet: Fleet, o: GroupOutcome) -> tuple[bool, str, int]:
    """A group's population: gate or not, its operation, its ranks (any, where its figure is
    per NIC)."""
    gate = o.group.stage is Stage.GATE
    return gate, o.op, 0 if _per_nic(o) else o.group.ranks(fleet)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Population:
    robust: Robust | None
    floor: tuple[float, str] | None
    finding: Finding | None
    waived: tuple[float, str] | None = None  # the floor the finding took the place of
    reference: Reference | None = None
    unheld: bool = False  # a few nodes and no absolute threshold (`FEW_NODES`)


def findings(
    fleet: Fleet,
    outcomes: Sequence[GroupOutcome],
    thresholds: Thresholds,
    census: Census | None = None,
) -> list[Finding]:
    """The fleet findings: for the gate and for the groups across nodes, an absolute threshold
    (a flag, or a share of the reference) that the fleet's median misses, or that at least
    more than `fleet_share` of the nodes miss in every group of theirs that measures every
    node.
    Such a threshold decides no group: the fleet is off as a whole (the driver, NCCL, the
    fabric's configuration) or the threshold is wrong, and the finding says so."""
    _, populations = _judging(fleet, outcomes, range(len(outcomes)), thresholds, census)
    return list({p.finding: None for p in populations.values() if p.finding})


@dataclass
class _Tally:
    """Figures of passing groups by shape and by kind, and each node's best by kind and by
    shape."""

    count: int = 0  # outcomes taken, passing or not
    by_shape: dict[tuple[bool, str, int], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    by_kind: dict[tuple[bool, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    best: dict[tuple[bool, str], dict[str, float]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    best_by_shape: dict[tuple[bool, str, int], dict[str, float]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    sized: dict[tuple[bool, str], list[tuple[int, float]]] = field(  # (nodes, figure) by kind
        default_factory=lambda: defaultdict(list)
    )
    _robust: dict[object, tuple[int, Robust]] = field(default_factory=dict)

    def add(self, o: GroupOutcome, key: tuple[bool, str, int], value: float | None) -> None:
        """Takes an outcome, its population and its figure (`Census.update` works both out
        once)."""
        self.count += 1
        if o.result is not Result.OK or value is None:
            return
        self.by_shape[key].append(value)
        self.by_kind[key[:2]].append(value)
        self.sized[key[:2]].append((len(o.group.nodes), value))
        for best in (self.best[key[:2]], self.best_by_shape[key]):
            for n in o.group.nodes:
                best[n] = max(best.get(n, value), value)

    def robust(self, key: tuple[bool, str, int], min_samples: int) -> Robust | None:
        """Across nodes, each node's best figure of the shape where `min_samples` nodes have
        one: a group runs at its slowest member's pace, so slow nodes scattered through a
        fleet drag down most of its groups (26 slow of 1024 hold one in most screen groups of
        28) but no healthy node's best, as long as one of its groups held none. Else the
        shape's groups where it has `min_samples` figures, else its kind's (nodes, then
        groups, of a shape measured fewer times are of its kind)."""
        shape = self.by_shape.get(key, [])
        at = key if len(shape) >= min_samples else key[:2]
        nodes = self.best_by_shape[key] if at == key else self.best.get(key[:2], {})
        if not key[0] and len(nodes) >= min_samples:
            made = self._robust.get(("nodes", at))
            if made is None or made[0] != self.count:  # a node's best only ever rises
                robust = Robust.of(list(nodes.values()), "nodes' best groups")
                made = self._robust[("nodes", at)] = (self.count, robust)
            return made[1]
        values = shape if at == key else self.by_kind.get(key[:2])
        if not values:
            return None
        made = self._robust.get(at)
        if made is None or made[0] != len(values):  # figures only ever join a population
            made = self._robust[at] = (len(values), Robust.of(values))
        return made[1]


class Census:
    """The figures the fleet's populations are made of, read from a history that only grows
    (the policy's): each outcome once, however many waves ask, where reading the whole
    history at every wave cost most of a simulated scan at 1024 nodes. `update` takes what
    joined since the last call; a history that is another list is read again."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._source: Sequence[GroupOutcome] | None = None
        self._read = 0
        self.unbiased = _Tally()  # the stages that measure every node
        self.every = _Tally()  # every stage: where none of those ran
        # each outcome's population (`_key`) and figure (`rate`), by its place in the history:
        # worked out once, where each wave's judging worked them out again (3.8 million calls
        # of `rate` in a simulated scan of 1024 nodes, a fifth of its time)
        self.keys: list[tuple[bool, str, int]] = []
        self.rates: list[float | None] = []
        # the pairs stage's figures by shape, whole nodes: no tally, as nothing reads their
        # nodes' best (531 270 outcomes at 1024 nodes)
        self.pairs: dict[tuple[bool, str, int], list[float]] = defaultdict(list)
        self._paired: dict[tuple[bool, str, int], Robust] = {}

    def update(self, outcomes: Sequence[GroupOutcome]) -> Census:
        if outcomes is not self._source or len(outcomes) < self._read:
            self._source, self._read = outcomes, 0
            self.unbiased, self.every = _Tally(), _Tally()
            self.keys, self.rates = [], []
            self.pairs, self._paired = defaultdict(list), {}
        for o in outcomes[self._read :]:
            key, value = _key(self.fleet, o), rate(self.fleet, o)
            self.keys.append(key)
            self.rates.append(value)
            self.every.add(o, key, value)
            if o.group.stage in UNBIASED and not o.group.gpus:
                self.unbiased.add(o, key, value)
            elif (
                o.group.stage is Stage.PAIRS
                and not o.group.gpus
                and o.result is Result.OK
                and value is not None
            ):
                self.pairs[key].append(value)
        self._read = len(outcomes)
        # made again only once their count has doubled: the median of n figures moves by
        # about 1.25 sigma / sqrt(n), and every outcome judged against them is judged again
        # when they move (the policy's `judgements`), 1023 waves of pairs at 1024 nodes
        for key, values in self.pairs.items():
            made = self._paired.get(key)
            if made is None or len(values) >= 2 * made.count:
                self._paired[key] = Robust.of(values, "pairs of nodes")
        return self

    @property
    def populations(self) -> tuple[int, ...]:
        """What judgements against this census depend on: as long as it holds, an outcome
        judged before is judged alike."""
        unbiased = self.unbiased.count
        return unbiased, unbiased or self.every.count, *(r.count for r in self._paired.values())

    def paired(self, key: tuple[bool, str, int], min_samples: int) -> Robust | None:
        """The pairs stage's figures of this shape, where it has `min_samples` of them."""
        made = self._paired.get(key)
        return made if made is not None and made.count >= min_samples else None


def _pair(o: GroupOutcome) -> bool:
    """Whether it is a test of two whole nodes outside the stages that measure every node."""
    g = o.group
    return len(g.nodes) == 2 and not g.gpus and g.stage not in UNBIASED


_Slot = tuple[tuple[bool, str, int], bool]  # a population: the key, and whether of the pairs


def _slot(census: Census, at: int, o: GroupOutcome, thresholds: Thresholds) -> _Slot:
    key = census.keys[at]
    return key, _pair(o) and census.paired(key, thresholds.min_samples) is not None


def _judging(
    fleet: Fleet,
    outcomes: Sequence[GroupOutcome],
    chosen: Iterable[int],
    thresholds: Thresholds,
    census: Census | None = None,
) -> tuple[Census, dict[_Slot, _Population]]:
    """The population of each group `chosen` (places in `outcomes`) belongs to: the fleet's
    median and spread from the stages that measure every node (all outcomes where none does;
    a test of two nodes, the pairs stage's where it ran), and its floor, or the finding that
    the floor is the fleet's, not a group's."""
    census = (census or Census(fleet)).update(outcomes)
    unbiased = census.unbiased.count > 0
    tally = census.unbiased if unbiased else census.every
    out: dict[_Slot, _Population] = {}
    for at in chosen:
        o = outcomes[at]
        slot = _slot(census, at, o, thresholds)
        if slot in out:
            continue
        key = slot[0]
        fleet_wide = tally.robust(key, thresholds.min_samples)
        paired = census.paired(key, thresholds.min_samples) if slot[1] else None
        robust = paired or fleet_wide
        ref = reference(fleet.gpu_model, tier(o.group), o.group.ranks(fleet), o.op)
        floor = _floor(o.group, ref, thresholds)
        peers = tally.by_shape.get(key, []) if unbiased else []
        finding = _unheld(key, o, fleet, peers) if floor is None and peers else None
        waived = None
        few = not key[0] and len(tally.best[key[:2]]) < FEW_NODES
        if floor is not None and few:
            # a fleet of a few nodes has no figure of its own to hold against the floor (at
            # two, one slow node holds every group): the floor decides, and says so
            count = len(tally.best[key[:2]])
            floor = floor[0], f"{floor[1]}; a fleet of {count} nodes is held to it, not to itself"
        elif floor is not None and peers:
            # nodes whose every group (of any size) misses it: one slow node does, a fleet off
            # as a whole all of them (its groups are no measure: each holds many nodes)
            nodes = tally.best[key[:2]]
            below = sum(v < floor[0] for v in nodes.values())
            off = median(nodes.values()) < floor[0]  # the fleet's nodes, whatever its size
            # across nodes, a node's best group is no measure of it once slow nodes fill most
            # groups (20% of 256 nodes slow: most healthy ones never sat in a clean group of
            # 16); the share its groups' passes give is (sweeper/scan/scattered.py)
            if (off or below > thresholds.fleet_share * len(nodes)) and (
                key[0]
                or slow_share((g, v >= floor[0]) for g, v in tally.sized[key[:2]])
                > thresholds.fleet_share
            ):
                finding = _finding(key, o, floor, below, len(nodes), fleet_wide or Robust.of(peers))
                floor, waived = None, floor
        out[slot] = _Population(
            robust=robust,
            floor=floor,
            finding=finding,
            waived=waived,
            reference=ref,
            unheld=few and floor is None,
        )
    return census, out


def _finding(
    key: tuple[bool, str, int],
    o: GroupOutcome,
    floor: tuple[float, str],
    below: int,
    nodes: int,
    fleet: Robust,
) -> Finding:
    mid = fleet.median
    return Finding(
        kind="gate" if key[0] else "internode",
        off=True,
        figure_gb_per_s=mid,
        threshold_gb_per_s=floor[0],
        source=floor[1],
        below=below,
        nodes=nodes,
        evidence=(
            f"the fleet: {below} of {nodes} nodes below {figure(floor[0])} GB/s in every "
            f"{_what(key, o)} they took part in ({floor[1]}), the median of its "
            f"{fleet.count} {fleet.of_what} {figure(mid)} GB/s, "
            f"{1 - mid / floor[0]:.0%} below it: a fleet-wide cause (the driver, NCCL, the "
            "fabric's configuration) or a wrong threshold; no node is condemned on it alone"
        ),
    )


def _what(key: tuple[bool, str, int], o: GroupOutcome) -> str:
    return o.op + (" inside each node" if key[0] else " across nodes")


def _unheld(
    key: tuple[bool, str, int], o: GroupOutcome, fleet: Fleet, peers: Sequence[float]
) -> Finding:
    mid = median(peers)
    model = fleet.gpu_model or "an unnamed GPU model"
    at = f" at {key[2]} ranks" if key[2] else ""
    return Finding(
        kind="gate" if key[0] else "internode",
        off=False,
        figure_gb_per_s=mid,
        threshold_gb_per_s=None,
        source="",
        below=0,
        nodes=0,
        evidence=(
            f"the fleet: no reference figure for {model}'s {_what(key, o)}{at} and no flag: "
            f"its {len(peers)} groups (median {figure(mid)} GB/s) are judged against each "
            "other only, so a fleet off as a whole would not show; --min-busbw sets an "
            "absolute threshold"
        ),
    )


def judge_groups(
    fleet: Fleet,
    outcomes: Sequence[GroupOutcome],
    thresholds: Thresholds,
    *,
    only: Collection[ScanGroup] | None = None,
    census: Census | None = None,
) -> dict[ScanGroup, Judged]:
    """Every outcome (or those of the groups `only` names) passed or failed, and why, against
    the fleet as all the outcomes show it. The fleet's medians come from the stages that
    measure every node (bisection and confirmation pick suspects, whose figures would drag the
    median down); an absolute threshold the fleet as a whole misses is a finding (`findings`),
    not a threshold, and a group under it that passes says so (`Judged.excused`). `census`:
    one kept over `outcomes` as they grew (the policy's), read on from where it was."""
    chosen = range(len(outcomes)) if only is None else _only(outcomes, set(only))
    census, populations = _judging(fleet, outcomes, chosen, thresholds, census)
    gates = any(outcomes[at].group.stage is Stage.GATE for at in chosen)
    copies = gpu_copy_limit(outcomes) if gates else None
    limits = {slot: _limit(p, thresholds) for slot, p in populations.items()}

    judged: dict[ScanGroup, Judged] = {}
    for at in chosen:
        o = outcomes[at]
        slot = _slot(census, at, o, thresholds)
        p, (limit, source) = populations[slot], limits[slot]
        value = census.rates[at]
        failure, why = _verdict(o, value, limit, copies, thresholds)
        excused = ""
        if failure is None and p.waived and value is not None and value < p.waived[0]:
            excused = (
                f"{measure(o)} {figure(value)} GB/s below {figure(p.waived[0])} "
                f"({p.waived[1]}), a threshold the fleet misses as a whole"
            )
        judged[o.group] = Judged(
            outcome=o,
            failure=failure,
            fleet_gb_per_s=p.robust.median if p.robust else None,
            threshold_gb_per_s=limit,
            why=why,
            figure_gb_per_s=value,
            source=source,
            excused=excused,
            reference=p.reference,
            unheld=p.unheld,
        )
    return judged


def _limit(p: _Population, thresholds: Thresholds) -> tuple[float | None, str]:
    """The threshold a population's groups are held to, and where it comes from: the higher
    of its robust limit and its floor."""
    limits = []
    if p.robust is not None:
        limits.append(
            (
                p.robust.limit(thresholds),
                f"the fleet's median {figure(p.robust.median)} GB/s of "
                f"{p.robust.count} {p.robust.of_what}, less {1 - thresholds.min_ratio:.0%} or "
                f"{thresholds.sigmas:g} robust sigmas",
            )
        )
    if p.floor is not None:
        limits.append(p.floor)
    return max(limits, default=(None, ""))


def _only(outcomes: Sequence[GroupOutcome], only: set[ScanGroup]) -> list[int]:
    """The places of the outcomes of the groups `only` names, in order: read from the end,
    where the policy's last wave is, until each is found (a scan's history is thousands
    long)."""
    found: list[int] = []
    seen: set[ScanGroup] = set()
    for at in range(len(outcomes) - 1, -1, -1):
        if (group := outcomes[at].group) in only:
            found.append(at)
            seen.add(group)
            if len(seen) == len(only):
                break
    return found[::-1]


def _verdict(
    o: GroupOutcome,
    value: float | None,
    limit: float | None,
    copies: Robust | None,
    thresholds: Thresholds,
) -> tuple[Failure | None, str]:
    if o.result is Result.MISSING:
        return Failure.MISSING, o.reason or "no row came back"
    if o.result is Result.FAILED:
        return Failure.FAILED, o.reason or "failed"
    if o.group.stage is Stage.GATE:
        flagged = [
            f"gpu {r.gpu}: {', '.join(r.flags)}" if r.gpu is not None else ", ".join(r.flags)
            for r in o.readings
            if r.flags
        ]
        if flagged:
            return Failure.FAILED, "; ".join(flagged)
        if copies is not None:
            low = copies.limit(thresholds)
            slow = [r for r in o.readings if r.copy_gb_per_s is not None and r.copy_gb_per_s < low]
            if slow:
                return Failure.SLOW, "; ".join(
                    f"gpu {r.gpu} copies {r.copy_gb_per_s:.1f} GB/s, fleet {copies.median:.1f}"
                    for r in slow
                )
    if value is None:
        # a group of one GPU has no busbw to judge; elsewhere a figure is missing
        if o.group.stage is Stage.GATE or len(o.group.gpus) == 1:
            return None, ""
        return Failure.MISSING, "no busbw figure"
    if limit is not None and value < limit:
        return Failure.SLOW, f"{measure(o)} {figure(value)} GB/s below {figure(limit)}"
    return None, ""


def unit(o: GroupOutcome) -> str:
    """What `rate` gives of a group, in words: busbw, or the rate through each GPU's NIC."""
    if _per_nic(o):
        return "through each GPU's NIC"
    return "busbw"


def measure(o: GroupOutcome) -> str:
    return f"{o.op} {unit(o)}"
