"""The judge on synthetic outcomes: a slow node is named and none of its partners, a slow link
as a link, a flapping node with its pass ratio, and missing data never passes."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from sweeper.scan import across_verdicts
from sweeper.scan.fleet import (
    Fleet,
    FleetNode,
    GroupOutcome,
    MemberReading,
    Result,
    ScanGroup,
    Stage,
)
from sweeper.scan.judge import judge
from sweeper.scan.policy import affine, gate_group
from sweeper.scan.reference import reference, share
from sweeper.scan.thresholds import Thresholds, findings, judge_groups
from sweeper.scan.verdict import Health, Subject, Verdict
from sweeper.wire import Tier

GiB = 1 << 30
FLEET = Fleet(nodes=tuple(FleetNode(id=f"n{i}", host=f"h{i}", gpus=4) for i in range(64)))
Rate = Callable[[tuple[str, str], int], GroupOutcome | float]


def gates(fleet: Fleet = FLEET, busbw: float = 360.0) -> list[GroupOutcome]:
    rng = random.Random(0)
    return [
        GroupOutcome(
            group=gate_group(node.id),
            result=Result.OK,
            busbw_gb_per_s=busbw * (1 + rng.gauss(0, 0.01)),
            readings=tuple(
                MemberReading(node=node.id, gpu=g, copy_gb_per_s=55 * (1 + rng.gauss(0, 0.01)))
                for g in range(node.gpus)
            ),
        )
        for node in fleet.nodes
    ]


def matchings(rounds: int, seed: int = 1) -> list[list[tuple[str, str]]]:
    rng = random.Random(seed)
    ids = list(FLEET.ids)
    out = []
    for _ in range(rounds):
        rng.shuffle(ids)
        out.append([(ids[i], ids[i + 1]) for i in range(0, len(ids), 2)])
    return out


def ring(ids: tuple[str, ...] = FLEET.ids) -> list[list[tuple[str, str]]]:
    edges = [(ids[i], ids[(i + 1) % len(ids)]) for i in range(len(ids))]
    return [edges[0::2], edges[1::2]]


def pairs(waves: list[list[tuple[str, str]]], rate: Rate) -> list[GroupOutcome]:
    """Each pair measured at 400 GB/s with 1% noise, times what `rate` says (or its outcome)."""
    rng = random.Random(2)
    out = []
    for w, wave in enumerate(waves, start=1):
        for pair in wave:
            group = ScanGroup(wave=w, stage=Stage.SCREEN, nodes=pair)
            got = rate(pair, w)
            if isinstance(got, GroupOutcome):
                out.append(GroupOutcome(group=group, result=got.result, reason=got.reason))
                continue
            busbw = 400 * got * (1 + rng.gauss(0, 0.01))
            out.append(
                GroupOutcome(group=group, result=Result.OK, busbw_gb_per_s=busbw, size_bytes=GiB)
            )
    return out


def verdicts_of(outcomes: list[GroupOutcome], fleet: Fleet = FLEET) -> dict[str, Verdict]:
    return {v.name: v for v in judge(fleet, outcomes, Thresholds())}


def test_one_slow_node_among_64_is_named_and_none_of_its_partners() -> None:
    waves = matchings(3)
    verdicts = verdicts_of(gates() + pairs(waves, lambda p, _: 0.55 if "n17" in p else 1.0))
    slow = verdicts["n17"]
    assert slow.health is Health.SLOW
    assert slow.tests == 3
    assert slow.passed == 0
    assert "n17: all_reduce at 1 GiB 22" in slow.evidence
    assert re.search(r"GB/s busbw against the fleet's (39\d|40\d) ", slow.evidence)
    assert "in 3 groups with different partners" in slow.evidence
    assert slow.busbw_gb_per_s is not None
    assert slow.threshold_gb_per_s is not None
    assert slow.busbw_gb_per_s < slow.threshold_gb_per_s
    partners = {n for wave in waves for p in wave if "n17" in p for n in p} - {"n17"}
    assert len(partners) == 3
    condemned = [v.name for v in verdicts.values() if v.condemned]
    assert condemned == ["n17"]
    assert all(verdicts[n].health is Health.HEALTHY for n in partners)


def test_a_slow_link_is_named_as_a_link_not_as_both_its_nodes() -> None:
    verdicts = verdicts_of(gates() + pairs(ring(), lambda p, _: 0.5 if p == ("n10", "n11") else 1))
    link = verdicts["n10-n11"]
    assert link.subject is Subject.LINK
    assert link.health is Health.SLOW
    assert "each end passed beside other nodes" in link.evidence
    assert verdicts["n10"].health is Health.HEALTHY
    assert verdicts["n11"].health is Health.HEALTHY
    assert [v.name for v in verdicts.values() if v.condemned] == ["n10-n11"]


def test_a_node_that_fails_one_group_in_two_is_flaky_with_its_pass_ratio_not_healthy() -> None:
    seen: dict[str, int] = {}

    def flap(pair: tuple[str, str], wave: int) -> GroupOutcome | float:
        if "n5" not in pair:
            return 1.0
        seen["n5"] = seen.get("n5", 0) + 1
        if seen["n5"] % 2:
            return GroupOutcome(group=gate_group("x"), result=Result.FAILED, reason="NCCL error")
        return 1.0

    verdicts = verdicts_of(gates() + pairs(matchings(6), flap))
    flapping = verdicts["n5"]
    assert flapping.health is Health.FLAKY
    assert flapping.pass_ratio == 0.5
    assert "passed 3 of 6" in flapping.evidence
    assert [v.name for v in verdicts.values() if v.condemned] == ["n5"]


def test_missing_data_is_never_healthy() -> None:
    fleet = Fleet(nodes=FLEET.nodes[:8])
    missing = GroupOutcome(group=gate_group("x"), result=Result.MISSING, reason="no row came back")

    def rate(pair: tuple[str, str], wave: int) -> GroupOutcome | float:
        return missing if "n3" in pair else 1.0

    outcomes = [o for o in gates(fleet) if o.group.nodes != ("n6",)]  # n6: no gate row at all
    outcomes += pairs(ring(tuple(n for n in fleet.ids if n != "n6")), rate)
    # a pair that ran but brought back no figure
    outcomes.append(
        GroupOutcome(
            group=ScanGroup(wave=9, stage=Stage.SCREEN, nodes=("n7", "n0")), result=Result.OK
        )
    )
    verdicts = verdicts_of(outcomes, fleet)
    assert verdicts["n3"].health is Health.UNREACHABLE
    assert verdicts["n6"].health is Health.UNREACHABLE
    assert "no gate result" in verdicts["n6"].evidence
    assert verdicts["n0-n7"].health is not Health.HEALTHY
    for name in ("n3", "n6"):
        assert verdicts[name].health is not Health.HEALTHY
    judged = judge_groups(fleet, outcomes, Thresholds())
    assert not any(j.passed for j in judged.values() if j.outcome.result is not Result.OK)
    assert not any(j.passed for j in judged.values() if j.outcome.busbw_gb_per_s is None)


def test_a_node_never_measured_across_nodes_is_unconfirmed() -> None:
    fleet = Fleet(nodes=FLEET.nodes[:3])
    outcomes = gates(fleet) + pairs([[("n0", "n1")]], lambda p, _: 1.0)
    verdicts = verdicts_of(outcomes, fleet)
    assert verdicts["n2"].health is Health.UNCONFIRMED
    assert "no internode group measured it" in verdicts["n2"].evidence


def test_the_gate_names_a_gpu_with_nvml_evidence_and_its_failed_gates_others_are_not_healthy() -> (
    None
):
    fleet = Fleet(nodes=FLEET.nodes[:4])
    outcomes = gates(fleet)
    bad = outcomes[2]
    flagged = (MemberReading(node="n2", gpu=3, copy_gb_per_s=55.0, flags=("xid 79",)),)
    outcomes[2] = GroupOutcome(
        group=bad.group,
        result=Result.OK,
        busbw_gb_per_s=bad.busbw_gb_per_s,
        readings=bad.readings[:3] + flagged,
    )
    verdicts = verdicts_of(outcomes + pairs(ring(fleet.ids), lambda p, _: 1.0), fleet)
    assert verdicts["n2/gpu3"].health is Health.FAILED
    assert "xid 79" in verdicts["n2/gpu3"].evidence
    # the others took part only in the failed gate: not tested on their own, not healthy
    assert verdicts["n2/gpu0"].health is Health.UNCONFIRMED
    assert "took part only in its node's failed gate" in verdicts["n2/gpu0"].evidence
    # the node went on to the stages across nodes without it (`inside.left_out`): its pairs
    # here passed, so it is healthy, the GPU left out said beside it
    assert verdicts["n2"].health is Health.HEALTHY
    assert verdicts["n2"].notes == ("its gpu3 (xid 79) left out of its groups across nodes",)


def test_a_node_whose_own_gpus_are_slow_together_fails_at_the_gate() -> None:
    outcomes = gates()
    slow = outcomes[9]
    outcomes[9] = GroupOutcome(
        group=slow.group, result=Result.OK, busbw_gb_per_s=150.0, readings=slow.readings
    )
    verdicts = verdicts_of(outcomes)
    assert verdicts["n9"].health is Health.SLOW
    assert verdicts["n9"].stage is Stage.GATE
    assert "busbw 150 GB/s below" in verdicts["n9"].evidence


@pytest.mark.parametrize(
    ("given", "expected", "source"),
    [
        ({Tier.INTERNODE: 450.0}, 450.0, "the flag's 450 GB/s for internode"),
        (
            {},
            0.8 * 368.0,
            "80% of the reference 368 GB/s (H100 internode any size all_reduce RING: ",
        ),
    ],
)
def test_an_absolute_floor_the_whole_fleet_misses_is_a_fleet_finding_and_condemns_no_group(
    given: dict[Tier, float], expected: float, source: str
) -> None:
    fleet = Fleet(nodes=FLEET.nodes[:16], gpu_model="NVIDIA H100 80GB HBM3")
    outcomes = pairs([[(f"n{i}", f"n{i + 8}") for i in range(8)]], lambda p, _: 0.7)
    thresholds = Thresholds(min_busbw_gb_per_s=given)
    judged = judge_groups(fleet, outcomes, thresholds)
    assert all(j.passed for j in judged.values())
    (finding,) = findings(fleet, outcomes, thresholds)
    assert finding.off
    assert finding.threshold_gb_per_s == expected
    assert source in finding.source
    assert (finding.below, finding.nodes) == (16, 16)
    assert "no node is condemned on it alone" in finding.evidence
    assert not [v for v in judge(fleet, gates(fleet) + outcomes, thresholds) if v.condemned]


def test_a_gpu_only_in_a_gate_a_fleet_finding_excused_is_not_healthy_on_it() -> None:
    """Issue 41's 4 H200 before its isolation ran: the one gate at 162 GB/s passes on the
    fleet's own figure, the reference's 289 waived by the fleet finding; that pass clears
    no GPU."""
    fleet = Fleet(nodes=(FleetNode(id="n0", host="h0", gpus=4),), gpu_model="NVIDIA H200")
    outcomes = gates(fleet, busbw=162.0)
    (gate,) = judge_groups(fleet, outcomes, Thresholds()).values()
    assert gate.passed
    assert "GB/s below 289 (80% of the reference 361 GB/s" in gate.excused
    verdicts = verdicts_of(outcomes, fleet)
    for g in range(4):
        gpu = verdicts[f"n0/gpu{g}"]
        assert gpu.health is Health.UNCONFIRMED
        assert "took part only in its node's gate, all_reduce busbw 16" in gpu.evidence


def test_a_floor_a_few_groups_miss_condemns_them_and_names_its_source() -> None:
    fleet = Fleet(nodes=FLEET.nodes[:32], gpu_model="NVIDIA H100 80GB HBM3")
    outcomes = pairs(
        [[(f"n{i}", f"n{i + 16}") for i in range(16)]], lambda p, _: 0.7 if "n3" in p else 1.0
    )
    judged = judge_groups(fleet, outcomes, Thresholds(min_busbw_gb_per_s={Tier.INTERNODE: 350.0}))
    failing = [j for j in judged.values() if not j.passed]
    assert [j.outcome.group.nodes for j in failing] == [("n3", "n19")]
    assert failing[0].source == "the flag's 350 GB/s for internode"
    assert not findings(fleet, outcomes, Thresholds(min_busbw_gb_per_s={Tier.INTERNODE: 350.0}))


def test_the_reference_table_knows_measured_and_published_figures_and_says_when_it_does_not() -> (
    None
):
    h200 = reference("NVIDIA H200", Tier.NVLINK, 2)
    assert h200 is not None
    assert h200.busbw_gb_per_s == 339.6
    assert "docs/measurements/h200-x2-2026-11-24.md" in h200.source
    internode = reference("H100", Tier.INTERNODE, 256)
    assert internode is not None
    assert "published" in internode.source
    assert reference("MI300X", Tier.INTERNODE, 16) is None
    assert reference(None, Tier.INTERNODE, 16) is None


def test_an_internode_ring_is_held_to_nccls_ceiling_per_400g_nic_not_the_wires_rate() -> None:
    """NCCL's maintainers give 48-49 GB/s per NIC of 400 Gb/s; 8 NICs a node, 46 each."""
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200"):
        ring = reference(gpu, Tier.INTERNODE, 16)
        assert ring is not None
        assert ring.busbw_gb_per_s == 8 * 46.0
        assert "nccl-tests/issues/267" in ring.source


def test_an_8_gpu_nvswitch_node_is_held_to_nvls_where_nccl_took_it_and_to_the_ring_else() -> None:
    """Unknown, NCCL's algorithm is taken for the ring: a fleet that keeps multicast off
    would otherwise miss NVLS's figure on every node."""
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        nvls = reference(gpu, Tier.NVLINK, 8, nccl_algo="NVLS")
        ring = reference(gpu, Tier.NVLINK, 8, nccl_algo="RING")
        unknown = reference(gpu, Tier.NVLINK, 8)
        assert nvls is not None
        assert ring is not None
        assert (nvls.busbw_gb_per_s, ring.busbw_gb_per_s) == (480.0, 370.0)
        assert unknown == ring
        assert nvls.name.endswith("nvlink x8 all_reduce NVLS")
    assert reference("NVIDIA H200", Tier.NVLINK, 8, nccl_algo="TREE") is None
    # B200's only figure is NVLS's: a node whose algorithm is unknown has none
    assert reference("NVIDIA B200", Tier.NVLINK, 8) is None
    assert reference("NVIDIA B200", Tier.NVLINK, 8, nccl_algo="nvls") is not None


@pytest.mark.parametrize(
    ("gpu", "tier", "ranks", "op", "algorithm", "busbw"),
    [
        ("NVIDIA H200", Tier.NVLINK, 4, "all_reduce", "native", 361.0),
        ("NVIDIA H200", Tier.NVLINK, 4, "all_gather", "native", 336.0),
        ("NVIDIA H200", Tier.NVLINK, 4, "send_recv", "ring", 363.0),
        ("NVIDIA H200", Tier.NVLINK, 2, "p2p", "uni", 365.0),
        ("NVIDIA H100 PCIe", Tier.NVLINK, 2, "all_reduce", "native", 116.0),
        ("NVIDIA GB200", Tier.NVLINK, 4, "all_reduce", "native", 679.6),
    ],
)
def test_each_sku_and_operation_has_its_own_cited_figure(
    gpu: str, tier: Tier, ranks: int, op: str, algorithm: str, busbw: float
) -> None:
    ref = reference(gpu, tier, ranks, op, algorithm=algorithm)
    assert ref is not None
    assert ref.busbw_gb_per_s == busbw
    assert re.search(r"https://|measured here: .+, nvidia-h200-x\d.*, 2026-", ref.citation)


def test_a_pcie_card_or_a_composite_never_takes_the_figure_of_another_form_or_call() -> None:
    """An H100 PCIe is not an H100 SXM, an H200 NVL not an H200 SXM, a GB200 not a B200, and
    an all_reduce built of other calls is not NCCL's."""
    assert reference("NVIDIA H100 PCIe", Tier.NVLINK, 8) is None
    assert reference("NVIDIA H200 NVL", Tier.NVLINK, 8) is None
    assert reference("NVIDIA GB200", Tier.INTERNODE, 8) is None
    composite = reference("NVIDIA H200", Tier.NVLINK, 4, algorithm="reduce_scatter+all_gather")
    assert composite is None


def test_a_busbw_is_given_as_its_share_of_its_reference() -> None:
    ref = reference("NVIDIA H200", Tier.NVLINK, 4)
    assert share(180.5, ref) == 0.5
    assert share(None, ref) is None
    assert share(180.5, None) is None


def test_a_node_that_leaves_mid_scan_is_unreachable_and_every_other_verdict_stands() -> None:
    gone = GroupOutcome(group=gate_group("x"), result=Result.MISSING, reason="no row came back")

    def leaves(pair: tuple[str, str], wave: int) -> GroupOutcome | float:
        return gone if "n20" in pair and wave > 1 else 1.0

    verdicts = verdicts_of(gates() + pairs(matchings(4), leaves))
    assert verdicts["n20"].health is Health.UNREACHABLE
    assert "no row came back from its last 3 groups" in verdicts["n20"].evidence
    assert [v.name for v in verdicts.values() if v.condemned] == ["n20"]


def measured(
    wave: int, tested: tuple[int, ...], got: float | Result = 1.0, pads: tuple[int, ...] = ()
) -> GroupOutcome:
    """A group of nodes `tested` and known-good `pads` (a bisect's or a confirmation's) at
    400 GB/s times `got`, or failed with an error."""
    partners = tuple(f"n{i}" for i in pads)
    nodes = tuple(f"n{i}" for i in tested) + partners
    group = ScanGroup(
        wave=wave, stage=Stage.BISECT if pads else Stage.SCREEN, nodes=nodes, partners=partners
    )
    if isinstance(got, Result):
        return GroupOutcome(group=group, result=got, reason="NCCL error: remote closed")
    return GroupOutcome(group=group, result=Result.OK, busbw_gb_per_s=400 * got, size_bytes=GiB)


def screen(slow: dict[int, float]) -> list[GroupOutcome]:
    """Groups of four nodes, each at the rate `slow` gives its first node (else 1)."""
    return [measured(1, tuple(range(i, i + 4)), slow.get(i, 1.0)) for i in range(0, 64, 4)]


def test_a_flapping_pad_is_not_cleared_by_a_slow_node_it_failed_beside() -> None:
    """n5 passed the screen and then failed one group in two: as a pad beside the slow n17
    (slow, which n17 explains), beside n17 again with an error, and in one of its two
    confirmations. A slow node explains slowness, not the error: n5 is not healthy."""
    outcomes = gates() + screen({16: 0.55})
    outcomes += [
        measured(2, (16, 17), 0.55, pads=(5, 8)),
        measured(2, (18, 19), pads=(9, 10)),
        measured(3, (17,), Result.FAILED, pads=(5, 11, 12)),
        measured(3, (16,), pads=(13, 14, 15)),
        measured(4, (17,), 0.55, pads=(20,)),
        measured(4, (5,), Result.FAILED, pads=(22,)),
        measured(5, (17,), 0.55, pads=(21,)),
        measured(5, (5,), pads=(23,)),
    ]
    verdicts = verdicts_of(outcomes)
    assert verdicts["n17"].health is Health.SLOW
    flapping = verdicts["n5"]
    assert flapping.health is Health.FLAKY
    assert flapping.pass_ratio == 2 / 5
    assert "passed 2 of 5 groups" in flapping.evidence
    assert [v.name for v in verdicts.values() if v.condemned] == ["n5", "n17"]


def test_a_pad_beside_two_slow_links_that_passed_with_other_partners_is_healthy() -> None:
    """n30 padded a half holding each end of the slow link n40-n41, and one holding n50-n51,
    and passed twice with other partners: the links explain its failures, not n30."""
    outcomes = gates() + screen({40: 0.5, 48: 0.5})
    outcomes += [
        measured(2, (40, 41), 0.5, pads=(30, 0)),
        measured(2, (42, 43), pads=(1, 2)),
        measured(2, (48, 49), pads=(3, 4)),
        measured(3, (50, 51), 0.5, pads=(30, 6)),
        measured(4, (30,), pads=(11,)),
        measured(4, (40,), pads=(7,)),
        measured(4, (41,), pads=(8,)),
        measured(4, (50,), pads=(9,)),
        measured(4, (51,), pads=(10,)),
        measured(5, (40, 41), 0.5),
        measured(5, (50, 51), 0.5),
    ]
    verdicts = verdicts_of(outcomes)
    assert verdicts["n30"].health is Health.HEALTHY
    assert re.search(
        r"passed its gate \(.*\) and 2 of 4 internode groups", verdicts["n30"].evidence
    )
    condemned = sorted(v.name for v in verdicts.values() if v.condemned)
    assert condemned == ["n40-n41", "n50-n51"]


def test_one_slow_node_of_six_keeps_the_floor_though_every_group_of_one_size_holds_it() -> None:
    """A six-node screen (three waves of pairs, one of two groups of three): both groups of
    three fail (one holds the slow node, the other a slow pair), so every node is below the
    floor in its group of three, but not in all of its groups: the floor is no fleet
    finding, and it condemns the slow node's groups."""
    fleet = Fleet(nodes=FLEET.nodes[:6])
    outcomes = []
    for wave, lines in enumerate(affine(fleet.ids), start=1):
        for line in lines:
            slow = "n2" in line or {"n4", "n5"} <= set(line)
            outcomes.append(
                GroupOutcome(
                    group=ScanGroup(wave=wave, stage=Stage.SCREEN, nodes=line),
                    result=Result.OK,
                    busbw_gb_per_s=4.0 if slow else 400.0,
                )
            )
    assert sorted(len(o.group.nodes) for o in outcomes) == [2] * 9 + [3] * 2
    thresholds = Thresholds(sigmas=0, min_ratio=0, min_busbw_gb_per_s={Tier.INTERNODE: 100.0})
    assert not findings(fleet, outcomes, thresholds)
    judged = judge_groups(fleet, outcomes, thresholds)
    failing = [j.outcome.group.nodes for j in judged.values() if not j.passed]
    assert len(failing) == 5
    assert all("n2" in nodes or {"n4", "n5"} <= set(nodes) for nodes in failing)


def test_a_healthy_nodes_verdict_carries_the_gate_figure_it_passed_and_its_threshold() -> None:
    lone = Fleet(nodes=(FleetNode(id="n0", host="h0", gpus=4),), gpu_model="H200")
    (alone,) = (v for v in verdicts_of(gates(lone), lone).values() if v.subject is Subject.NODE)
    assert alone.health is Health.HEALTHY
    assert alone.busbw_gb_per_s == pytest.approx(360, rel=0.05)
    assert alone.threshold_gb_per_s is not None
    assert alone.threshold_source
    assert f"all_reduce at 1 GiB {alone.busbw_gb_per_s:.0f} GB/s busbw" in alone.evidence
    assert f"threshold {alone.threshold_gb_per_s:.0f}: {alone.threshold_source}" in alone.evidence
    # beside others, its gate's figure too, before its internode groups'
    verdicts = verdicts_of(gates() + pairs(matchings(3), lambda p, _: 1.0))
    assert re.search(
        r"passed its gate \(all_reduce at 1 GiB \d+ GB/s busbw", verdicts["n5"].evidence
    )


def test_a_slow_gate_gives_its_share_of_the_reference_and_where_that_figure_comes_from() -> None:
    """Issue 41's 4 H200 with one GPU shared: all_reduce 166 GB/s, 46% of the 4-GPU H200
    reference; the healthy nodes' GPUs near all of it, naming the table entry alone."""
    fleet = Fleet(nodes=FLEET.nodes[:16], gpu_model="NVIDIA H200")
    outcomes = gates(fleet)
    outcomes[9] = GroupOutcome(
        group=outcomes[9].group, result=Result.OK, busbw_gb_per_s=166.0, readings=()
    )
    verdicts = verdicts_of(outcomes, fleet)
    slow = verdicts["n9"]
    assert slow.health is Health.SLOW
    assert slow.reference_gb_per_s == 361.0
    assert slow.reference_share == pytest.approx(166 / 361)
    assert slow.reference_source.startswith("H200 nvlink x4 all_reduce RING: measured here: ")
    assert slow.evidence.endswith(f"; 46% of the reference 361 GB/s ({slow.reference_source})")
    healthy = verdicts["n0/gpu0"]
    assert healthy.health is Health.HEALTHY
    assert re.search(
        r"; (99|100|101)% of the reference 361 GB/s \(H200 nvlink x4 all_reduce RING\)$",
        healthy.evidence,
    )
    # no GPU model: no reference, and nothing said of one
    plain = verdicts_of(gates(), FLEET)["n0/gpu0"]
    assert (plain.reference_gb_per_s, plain.reference_share, plain.reference_source) == (
        None,
        None,
        "",
    )
    assert "reference" not in plain.evidence


def test_a_verdict_whose_threshold_quotes_the_reference_gives_its_share_of_that_one() -> None:
    lone = Fleet(nodes=(FleetNode(id="n0", host="h0", gpus=4),), gpu_model="H200")
    (alone,) = (
        v for v in verdicts_of(gates(lone, busbw=300.0), lone).values() if v.subject is Subject.NODE
    )
    assert alone.health is Health.HEALTHY
    assert alone.reference_source in alone.threshold_source
    assert alone.evidence.count(alone.reference_source) == 1
    assert alone.reference_share == pytest.approx(300 / 361, rel=0.05)
    assert alone.evidence.endswith(f"; {alone.reference_share:.0%} of that reference")


def test_groups_whose_transport_broke_its_contract_are_misconfigured_not_a_slow_node() -> None:
    from dataclasses import replace

    flag = "internode group over TCP sockets (NET/Socket) where its nodes have RDMA devices"
    measured = pairs(matchings(3), lambda p, _: 0.55 if "n17" in p else 1.0)
    flagged = [replace(o, misconfigured=flag) if "n17" in o.group.nodes else o for o in measured]
    verdicts = judge(FLEET, gates() + flagged, Thresholds())
    (wrong,) = [v for v in verdicts if v.health is Health.MISCONFIGURED]
    assert wrong.subject is Subject.GROUP
    assert wrong.condemned
    assert wrong.tests == 3
    assert "n17" in wrong.nodes
    assert len(wrong.nodes) == 4
    assert flag in wrong.evidence
    for check in ("nvidia_peermem", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NET"):
        assert check in wrong.evidence
    nodes = {v.nodes[0]: v for v in verdicts if v.subject is Subject.NODE}
    assert not nodes["n17"].condemned  # measured only through the misconfigured groups
    assert [v.name for v in verdicts if v.condemned] == [wrong.name]


def affine_screen(fleet: Fleet, rate: dict[str, float]) -> list[GroupOutcome]:
    """The adaptive screen's all_to_all groups over `fleet`, each GPU moving 45 GB/s through
    its NIC times its group's slowest member's rate (a group runs at its slowest member's
    pace), as busbw counts it."""
    out = []
    for wave, lines in enumerate(affine(fleet.ids), start=1):
        for line in lines:
            group = ScanGroup(wave=wave, stage=Stage.SCREEN, nodes=line)
            ranks, nodes = group.ranks(fleet), len(line)
            through = 45.0 * min(rate.get(n, 1.0) for n in line)
            busbw = through * nodes / (nodes - 1) * (ranks - 1) / ranks
            out.append(
                GroupOutcome(
                    group=group,
                    result=Result.OK,
                    busbw_gb_per_s=busbw,
                    size_bytes=GiB,
                    op="all_to_all",
                )
            )
    return out


@pytest.mark.parametrize(
    "slow", [range(8, 16), (3, 9, 14, 22, 30, 37, 41, 50, 58, 61)], ids=["rack", "scattered"]
)
def test_slow_nodes_in_most_screen_groups_leave_the_threshold_where_it_was_and_are_named(
    slow: Sequence[int],
) -> None:
    """Slow nodes (a rack of 8 or 10 scattered, of 64) held by most of the screen's groups:
    the fleet's figure is its nodes' (each node's best group), which a minority cannot move,
    so the threshold is the healthy fleet's and every slow node is named, no other."""
    rate = {f"n{i}": 0.8 for i in slow}
    outcomes = affine_screen(FLEET, rate)
    held = sum(any(n in rate for n in o.group.nodes) for o in outcomes)
    assert held * 2 > len(outcomes)  # the groups' median is a slow group's
    healthy = judge_groups(FLEET, affine_screen(FLEET, {}), Thresholds())
    expected = {j.threshold_gb_per_s for j in healthy.values()}
    judged = judge_groups(FLEET, outcomes, Thresholds())
    assert {j.threshold_gb_per_s for j in judged.values()} == expected
    assert "nodes' best groups" in next(iter(judged.values())).source
    assert not [f for f in findings(FLEET, outcomes, Thresholds()) if f.off]
    verdicts = verdicts_of(gates() + outcomes)
    condemned = sorted(v.name for v in verdicts.values() if v.condemned)
    assert condemned == sorted(rate)
    assert all(verdicts[n].health is Health.SLOW for n in rate)


def test_a_third_of_the_fleet_under_the_floor_is_no_fleet_finding_and_each_is_named() -> None:
    """21 of 64 nodes (a rack: the screen's first two columns) at 36 GB/s through their NICs,
    under a floor of 40 the others pass: a minority, so no fleet finding waives the floor,
    and it fails every group that holds one of them, no other."""
    rate = {f"n{i}": 0.8 for i in range(21)}
    outcomes = affine_screen(FLEET, rate)
    thresholds = Thresholds(min_busbw_gb_per_s={Tier.INTERNODE: 40.0})
    assert not findings(FLEET, outcomes, thresholds)
    for group, j in judge_groups(FLEET, outcomes, thresholds).items():
        assert j.passed is not any(n in rate for n in group.nodes)
        assert j.source == "the flag's 40 GB/s for internode"


def test_a_gpu_whose_host_copies_were_slow_once_and_fine_alone_is_healthy_with_a_note() -> None:
    """n7's gpu2 copied at 30 GB/s at the gate (the fleet's 55) and at 55 alone in its
    isolation: one slow point, a transient note, neither the GPU nor its node condemned."""
    outcomes = gates()
    i = FLEET.ids.index("n7")
    readings = tuple(
        replace(r, copy_gb_per_s=30.0) if r.gpu == 2 else r for r in outcomes[i].readings
    )
    outcomes[i] = replace(outcomes[i], readings=readings)
    outcomes += [
        GroupOutcome(
            group=ScanGroup(wave=1, stage=Stage.ISOLATE, nodes=("n7",), gpus=(g,)),
            result=Result.OK,
            readings=(MemberReading(node="n7", gpu=g, copy_gb_per_s=55.0),),
            op="send_recv",
        )
        for g in range(4)
    ]
    verdicts = verdicts_of(outcomes + pairs(matchings(3), lambda p, _: 1.0))
    gpu = verdicts["n7/gpu2"]
    assert gpu.health is Health.HEALTHY
    assert gpu.notes == (
        "transient: host copies 30.0 GB/s at the gate, 55.0 alone (threshold 46.7)",
    )
    assert verdicts["n7"].health is Health.HEALTHY
    assert not [v.name for v in verdicts.values() if v.condemned]


def test_a_gpu_15_percent_slow_is_named_as_its_gpu_not_as_the_nvlinks_of_its_peers() -> None:
    """gpu3 of 8 runs its pairs at 84% and 86% of the others' 340 GB/s in turn: three of its
    seven pairs under 85% of the node's median, a minority; the median of its pairs is under
    90% of the others', and three low pairs that share it name it, not three NVLinks."""
    node = Fleet(nodes=(FleetNode(id="n0", host="h0", gpus=8),))
    outcomes = gates(node)
    k = 0
    for a in range(8):
        for b in range(a + 1, 8):
            rate = 1.0
            if 3 in (a, b):
                rate, k = (0.84 if k % 2 else 0.86), k + 1
            outcomes.append(
                GroupOutcome(
                    group=ScanGroup(wave=1, stage=Stage.ISOLATE, nodes=("n0",), gpus=(a, b)),
                    result=Result.OK,
                    busbw_gb_per_s=340.0 * rate,
                    size_bytes=GiB,
                    op="send_recv",
                )
            )
    verdicts = verdicts_of(outcomes, node)
    assert verdicts["n0/gpu3"].health is Health.SLOW
    assert "in 3 of its 7 pairs" in verdicts["n0/gpu3"].evidence
    assert not [v for v in verdicts.values() if v.subject is Subject.NVLINK]
    assert all(verdicts[f"n0/gpu{g}"].health is Health.HEALTHY for g in range(8) if g != 3)


def small_fleet(nodes: int, model: str | None, slow: str | None) -> dict[str, Verdict]:
    """A fleet of `nodes` H100 nodes (or of no model the reference knows), its gates and its
    screen, each group's GPUs at 45 GB/s through their NICs times its slowest member's rate
    (`slow` at half); the screen run twice, as the policy runs a failing group again."""
    fleet = Fleet(
        nodes=tuple(FleetNode(id=f"n{i}", host=f"h{i}", gpus=4) for i in range(nodes)),
        gpu_model=model,
    )
    screen = affine_screen(fleet, {slow: 0.5} if slow else {})
    again = [replace(o, group=replace(o.group, wave=o.group.wave + 10)) for o in screen]
    return verdicts_of(gates(fleet) + screen + again, fleet)


def test_at_two_nodes_a_slow_one_is_its_path_slow_against_the_reference_and_says_so() -> None:
    verdicts = small_fleet(2, "H100", "n1")
    link = verdicts["n0-n1"]
    assert link.health is Health.SLOW
    assert "a fleet of two cannot tell apart" in link.evidence
    assert "a fleet of 2 nodes is held to it, not to itself" in link.threshold_source
    assert "80% of the reference 45 GB/s" in link.threshold_source
    assert all(verdicts[n].health is Health.UNCONFIRMED for n in ("n0", "n1"))


def test_at_three_nodes_a_slow_one_is_named_against_the_reference() -> None:
    verdicts = small_fleet(3, "H100", "n1")
    assert [v.name for v in verdicts.values() if v.condemned] == ["n1"]
    assert "a fleet of 3 nodes is held to it" in verdicts["n1"].threshold_source


@pytest.mark.parametrize("nodes", [2, 3])
def test_a_small_fleet_with_no_reference_cannot_tell_and_says_so(nodes: int) -> None:
    for slow in (None, "n1"):
        verdicts = small_fleet(nodes, None, slow)
        for n in range(nodes):
            v = verdicts[f"n{n}"]
            assert v.health is Health.UNCONFIRMED
            assert v.evidence.startswith(f"n{n}: cannot tell: ")
        assert not [v for v in verdicts.values() if v.subject is Subject.LINK and not v.condemned]


def test_a_node_slow_near_the_threshold_that_passes_once_is_slow_and_its_pairs_no_links() -> None:
    """n7 runs at 84% of the fleet in every group but one, at 86% there (the threshold is
    85%), and at 84% in three pairs beside known-good partners: a slow node that passed once
    near the threshold, not a flaky one, and its pairs are its own, not three slow links."""
    outcomes = affine_screen(FLEET, {"n7": 0.84})
    first = next(i for i, o in enumerate(outcomes) if "n7" in o.group.nodes)
    busbw = outcomes[first].busbw_gb_per_s
    assert busbw is not None
    outcomes[first] = replace(outcomes[first], busbw_gb_per_s=busbw / 0.84 * 0.86)
    through = 45.0 * 0.84 * 2 / 1 * 7 / 8  # a pair of 4-GPU nodes, as busbw counts it
    for k, pad in enumerate(("n20", "n30", "n40")):
        group = ScanGroup(wave=20 + k, stage=Stage.CONFIRM, nodes=("n7", pad), partners=(pad,))
        outcomes.append(
            GroupOutcome(
                group=group,
                result=Result.OK,
                busbw_gb_per_s=through,
                size_bytes=GiB,
                op="all_to_all",
            )
        )
    verdicts = verdicts_of(gates() + outcomes)
    assert verdicts["n7"].health is Health.SLOW
    assert "it passed 1 of 15" in verdicts["n7"].evidence
    assert [v.name for v in verdicts.values() if v.condemned] == ["n7"]


def test_a_node_slow_near_the_threshold_that_passes_one_confirmation_is_still_slow() -> None:
    """n7 at 84% of the fleet passes two of its twelve screen groups (at 86%) and one of its
    three confirmations: one pass beside known-good partners does not clear a slow node (a
    hub of slow pairs passes all of them), and its two slow pairs are not links."""
    rate = {"n7": 0.84}
    outcomes = affine_screen(FLEET, rate)
    held = [i for i, o in enumerate(outcomes) if "n7" in o.group.nodes]
    for i in held[:2]:
        busbw = outcomes[i].busbw_gb_per_s
        assert busbw is not None
        outcomes[i] = replace(outcomes[i], busbw_gb_per_s=busbw / 0.84 * 0.86)
    pair = 45.0 * 2 * 7 / 8  # a pair of 4-GPU nodes' busbw at 45 GB/s through each NIC
    for k, (pad, got) in enumerate((("n20", 0.86), ("n30", 0.84), ("n40", 0.84))):
        group = ScanGroup(wave=20 + k, stage=Stage.CONFIRM, nodes=("n7", pad), partners=(pad,))
        outcomes.append(
            GroupOutcome(
                group=group,
                result=Result.OK,
                busbw_gb_per_s=pair * got,
                size_bytes=GiB,
                op="all_to_all",
            )
        )
    verdicts = verdicts_of(gates() + outcomes)
    assert verdicts["n7"].health is Health.SLOW
    assert "it passed 3 of 15" in verdicts["n7"].evidence
    assert [v.name for v in verdicts.values() if v.condemned] == ["n7"]


def test_a_node_of_one_gpu_is_judged_by_its_own_copies_not_all_reduce_with_peers() -> None:
    lone = Fleet(nodes=tuple(FleetNode(id=f"n{i}", host=f"h{i}", gpus=1) for i in range(4)))
    outcomes = [replace(o, busbw_gb_per_s=None) for o in gates(lone)]
    verdicts = verdicts_of(outcomes, lone)
    gpu = verdicts["n0/gpu0"]
    assert gpu.health is Health.HEALTHY
    assert "peers" not in gpu.evidence
    assert re.match(
        r"n0/gpu0: the only GPU of its node, no collective to time: host copies 5\d\.\d GB/s; "
        r"no reference for its model, so a job sharing it could not be told; host copies "
        r"against the fleet's median 5\d\.\d of 4 GPUs$",
        gpu.evidence,
    )


def test_a_pair_that_failed_once_and_passed_again_is_a_healthy_link_with_a_note() -> None:
    """A pair slow in wave 1 and fine when run again in wave 4: a chance failure, so its link
    is healthy, the failure noted. It had no verdict at all, so a scan whose pair failed by
    chance listed one link fewer than the same scan whose pair did not (a resumed scan on a
    loaded box against its nightly twin)."""
    waves = matchings(3)
    once = waves[0][0]
    outcomes = gates() + pairs([*waves, [once]], lambda p, w: 0.3 if (p, w) == (once, 1) else 1.0)
    a, b = sorted(once, key=FLEET.ids.index)
    link = verdicts_of(outcomes)[f"{a}-{b}"]
    assert (link.health, link.tests, link.passed) == (Health.HEALTHY, 2, 1)
    assert link.evidence == f"{a}-{b}: passed 1 of 2 as a pair"
    (note,) = link.notes
    assert note.startswith("transient: ")
    assert note.endswith("passed when run again in wave 4")
    assert not [v for v in verdicts_of(outcomes).values() if v.condemned]


def test_past_the_listed_pairs_only_a_pair_tested_again_is_a_healthy_link_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """1024 nodes' 523 776 pairs tested alone, each a healthy link verdict of ~870 bytes,
    made a scan's document some 450 MB, past what sweeper reads back of its own JSON. Past
    LISTED_PAIRS pairs only those whose record needed settling are listed."""
    waves = matchings(3)
    once = waves[0][0]
    outcomes = gates() + pairs([*waves, [once]], lambda p, w: 0.3 if (p, w) == (once, 1) else 1.0)
    named = [
        f"{x}-{y}" for w in [*waves, [once]] for x, y in (sorted(p, key=FLEET.ids.index) for p in w)
    ]
    links = {n: v for n, v in verdicts_of(outcomes).items() if v.subject is Subject.LINK}
    assert set(links) == set(named)  # each listed
    monkeypatch.setattr(across_verdicts, "LISTED_PAIRS", len(links) - 1)
    again = {n: v for n, v in verdicts_of(outcomes).items() if v.subject is Subject.LINK}
    a, b = sorted(once, key=FLEET.ids.index)
    assert f"{a}-{b}" in again
    assert set(again) == {n for n in named if named.count(n) > 1}
    assert {(v.health, v.tests) for v in again.values()} == {(Health.HEALTHY, 2)}
