"""A pair of nodes whose path caps its rate (goodput-limited, not cut) slows no all_to_all of
the screen's size, so the adaptive scan tests every pair alone where the fleet's rounds of
pairs fit its budget (issue 52)."""

from __future__ import annotations

from sweeper.scan.fleet import Stage
from sweeper.scan.noise import recorded
from sweeper.scan.policy import PAIR_ROUNDS, Strategy
from sweeper.scan.simulate import BANDWIDTH_BYTES, Costs, Fault, Planted, fleet_of, run
from sweeper.scan.verdict import Health, Subject


def test_a_pair_capped_at_80_percent_is_named_as_the_link_and_its_ends_are_healthy() -> None:
    fleet = fleet_of(100, 8)
    capped = Planted(fault=Fault.CAPPED_LINK, nodes=("n0007", "n0063"), rate=0.8)
    sim = run(
        fleet,
        (capped,),
        strategy=Strategy.parse("adaptive"),
        costs=Costs(noise=recorded(BANDWIDTH_BYTES)),
    )
    # each of the screen's groups of 10 asks a ninth of the path: under its cap
    screen = [o for o in sim.outcomes if o.group.stage is Stage.SCREEN]
    assert any({"n0007", "n0063"} <= set(o.group.nodes) for o in screen)
    verdicts = {(v.subject, v.nodes): v for v in sim.verdicts}
    link = verdicts[Subject.LINK, ("n0007", "n0063")]
    assert link.health is Health.SLOW
    assert verdicts[Subject.NODE, ("n0007",)].health is Health.HEALTHY
    assert verdicts[Subject.NODE, ("n0063",)].health is Health.HEALTHY
    assert sim.score.condemned == 1
    # every pair once in the circle method's 99 rounds of disjoint pairs
    pairs = [o.group.nodes for o in sim.outcomes if o.group.stage is Stage.PAIRS]
    assert len(pairs) == len(set(pairs)) == 100 * 99 // 2


def test_a_fleet_whose_rounds_of_pairs_do_not_fit_runs_none() -> None:
    fleet = fleet_of(PAIR_ROUNDS + 2, 1)
    sim = run(fleet, (), strategy=Strategy.parse("adaptive"))
    assert "pairs" not in sim.stages()
