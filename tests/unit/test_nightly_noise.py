"""Nightly judgement over synthetic histories with the measured noise (benchmarks/nights.py):
one node's bandwidth steps down 10% on one night, another node's noise is doubled. Judged as
each night came, over fixed seeds; benchmarks/nightly_noise.py measures the same over 200."""

from __future__ import annotations

import pytest

from benchmarks.nights import NOISY, STEPPING, judged, nights
from sweeper.analysis.regression import PEAK_BUSBW, Policy
from sweeper.planning.profile import NightlySettings

POLICY = Policy.of(NightlySettings())
SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_only_the_step_regresses_dated_to_its_night_and_the_noisy_node_is_fail_slow(
    seed: int,
) -> None:
    history = nights(seed)
    every = judged(history, POLICY)
    assert len(history.runs) >= 10
    stepped = history.runs[history.step_night]
    for tonight, findings in enumerate(every, start=POLICY.min_history):
        regressions = findings[findings["status"] == "regression"]
        if tonight < history.step_night:
            assert regressions.empty, (tonight, regressions)
            continue
        assert (regressions["group_id"] == STEPPING).all(), (tonight, regressions)
        assert (regressions["metric"] == PEAK_BUSBW.name).all()
        assert (regressions["step_began"] == stepped).all()
        assert (regressions["trend"] == "step").all()
    # the night after the step (the policy's persistence is 2), or the next, it alarms
    after = every[history.step_night + 2 - POLICY.min_history]
    step = after[(after["group_id"] == STEPPING) & (after["metric"] == PEAK_BUSBW.name)]
    assert step["status"].tolist() == ["regression"]
    assert step["step_change"].iloc[0] == pytest.approx(-0.10, abs=0.02)
    last = every[-1]
    assert set(last.loc[last["fail_slow"], "group_id"]) == {NOISY}


def test_histories_without_a_step_name_no_step_and_seldom_a_fail_slow_node() -> None:
    """No step, no noisy node: no regression, no step, and a node of ordinary noise flagged
    fail-slow on at most 5% of the nights it could be. Each node here has two series; the
    noise of a node with more (operations, dtypes) is known better."""
    flagged = judged_nodes = 0
    for seed in range(4):
        for findings in judged(nights(seed, noisy=1.0, step_night=99), POLICY):
            assert (findings["status"] != "regression").all()
            assert findings["step_began"].isna().all()
            nodes = findings.drop_duplicates("group_id")
            judged_nodes += int(nodes["noise_ratio"].notna().sum())
            flagged += int(nodes["fail_slow"].sum())
    assert judged_nodes == 4 * 8 * 5  # nights 10 to 14 know the noise well enough
    assert flagged <= 0.05 * judged_nodes
