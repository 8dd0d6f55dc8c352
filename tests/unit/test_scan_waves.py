"""A scan's finished waves, kept when each ends (`results.scan_waves`, `scan.waves`), come
back as the same outcomes for a resumed scan to replay, only where the policy gives the same
wave again; an unreadable file is skipped with a warning, and its waves run again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sweeper.errors import CorruptResults, ResultsUnwritable
from sweeper.results import scan_waves
from sweeper.scan.fleet import GroupOutcome, MemberReading, Result, ScanGroup, ScanWave, Stage
from sweeper.scan.waves import plain, replayed

SCREEN = ScanGroup(wave=3, stage=Stage.SCREEN, nodes=("a", "b", "c"), partners=("c",))
PAIR = ScanGroup(wave=3, stage=Stage.SCREEN, nodes=("d", "e"))
WAVE = ScanWave(index=3, stage=Stage.SCREEN, groups=(SCREEN, PAIR))
OUTCOMES = (
    GroupOutcome(
        group=SCREEN,
        result=Result.OK,
        busbw_gb_per_s=41.5,
        latency_us=12.0,
        size_bytes=1 << 30,
        op="all_to_all",
        readings=(MemberReading(node="a", gpu=2, flags=("xid 79",), sm_clock_mhz=1980.0),),
    ),
    GroupOutcome(
        group=PAIR, result=Result.FAILED, reason="hung", unanswered=("e",), op="all_to_all"
    ),
)


def test_a_finished_wave_read_back_is_the_same_outcomes_and_seconds(tmp_path: Path) -> None:
    scan_waves.save(tmp_path, "r1", [plain(WAVE, OUTCOMES, 2.5)])
    (saved,) = scan_waves.load(tmp_path, "r1")
    again = replayed(saved, WAVE)
    assert again is not None
    assert again.outcomes == OUTCOMES
    assert again.seconds == 2.5


def test_a_saved_wave_is_not_replayed_for_another_wave() -> None:
    saved = plain(WAVE, OUTCOMES, 1.0)
    other = ScanWave(index=3, stage=Stage.SCREEN, groups=(PAIR,))
    assert replayed(saved, other) is None
    later = ScanWave(index=4, stage=Stage.SCREEN, groups=WAVE.groups)
    assert replayed(saved, later) is None
    assert replayed({**saved, "outcomes": [{"group": {}}]}, WAVE) is None


def test_an_unreadable_waves_file_is_skipped_with_a_warning(tmp_path: Path) -> None:
    assert scan_waves.load(tmp_path, "r1") == []  # no wave finished
    scan_waves.path(tmp_path, "r1").parent.mkdir()
    scan_waves.path(tmp_path, "r1").write_text('["not a wave"]\n')
    with pytest.warns(CorruptResults, match="not a list of waves"):
        assert scan_waves.load(tmp_path, "r1") == []
    scan_waves.path(tmp_path, "r1").write_text('{"index": 0}\n{"ind\n{"index": 2}\n')
    with pytest.warns(CorruptResults, match="line 2"):
        assert scan_waves.load(tmp_path, "r1") == []


def test_waves_are_appended_a_line_each_and_a_torn_last_line_is_left_out(
    tmp_path: Path,
) -> None:
    """A wave's line appended as it ends, not the file rewritten (over 100 GB written in a
    scan of 1024 nodes' every pair); a driver killed mid-write leaves its last line torn."""
    waves = [json.loads(json.dumps(plain(WAVE, OUTCOMES, float(i)))) for i in range(3)]
    for wave in waves:
        scan_waves.append(tmp_path, "r1", wave)
    where = scan_waves.path(tmp_path, "r1")
    assert where.read_text().count("\n") == 3
    assert scan_waves.load(tmp_path, "r1") == waves
    with where.open("a") as file:
        file.write('{"index": 3, "stage": "scr')
    assert scan_waves.load(tmp_path, "r1") == waves
    scan_waves.save(tmp_path, "r1", waves[:1])  # a resumed scan's policy went another way
    assert scan_waves.load(tmp_path, "r1") == waves[:1]


def test_a_fifo_where_the_waves_go_is_refused_at_once_not_waited_on(tmp_path: Path) -> None:
    scan_waves.append(tmp_path, "r1", plain(WAVE, OUTCOMES, 1.0))
    where = scan_waves.path(tmp_path, "r1")
    where.unlink()
    os.mkfifo(where)
    with pytest.raises(ResultsUnwritable, match="cannot write results"):
        scan_waves.append(tmp_path, "r1", plain(WAVE, OUTCOMES, 2.0))
