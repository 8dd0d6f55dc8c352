"""A scan notes a node whose groups' communicators start over twice as slowly as its peers'
(scan.judge.slow_starts), from the rows' comm_start_s (scan.rows.outcome)."""

from __future__ import annotations

import math

from sweeper.scan.fleet import GroupOutcome, Result, ScanGroup, Stage
from sweeper.scan.judge import slow_starts
from sweeper.scan.rows import outcome
from tests.unit.test_scan_rows import ASKED, EXPECTED, PAIR, _row


def _pair(wave: int, nodes: tuple[str, str], start_s: float) -> GroupOutcome:
    group = ScanGroup(wave=wave, stage=Stage.SCREEN, nodes=nodes)
    return GroupOutcome(group=group, result=Result.OK, busbw_gb_per_s=40.0, start_s=start_s)


def test_a_groups_start_is_its_slowest_rows_and_none_where_no_row_says() -> None:
    rows = [_row(size=8, comm_start_s=0.4), _row(comm_start_s=1.1), _row(comm_start_s=math.nan)]
    assert outcome(PAIR, rows, EXPECTED, ASKED).start_s == 1.1
    assert outcome(PAIR, [_row(size=8), _row()], EXPECTED, ASKED).start_s is None


def test_a_node_starting_over_twice_its_peers_is_noted_and_its_partners_are_not() -> None:
    # n3's pairs took 2.5 s to start, every other pair 1.0-1.2 s (median 1.1)
    outcomes = [
        _pair(1, ("n0", "n1"), 1.0),
        _pair(1, ("n2", "n3"), 2.5),
        _pair(2, ("n0", "n2"), 1.1),
        _pair(2, ("n1", "n3"), 2.5),
        _pair(3, ("n0", "n3"), 2.5),
        _pair(3, ("n1", "n2"), 1.2),
    ]
    notes = slow_starts(outcomes)
    assert list(notes) == ["n3"]
    (said,) = notes["n3"]
    assert said == (
        "slow start: its groups of 2 node(s) took 2.50 s to start their communicators, "
        "over 2x its peers' 1.10 s"
    )


def test_starts_within_twice_their_peers_or_unknown_are_not_noted() -> None:
    close = [_pair(1, ("n0", "n1"), 1.0), _pair(1, ("n2", "n3"), 1.9)]
    assert slow_starts(close) == {}
    unknown = [GroupOutcome(group=PAIR, result=Result.OK)]
    assert slow_starts(unknown) == {}
