"""A node of one GPU judged by what one GPU does alone: its d2d and host copies against its
model's reference, and a job sharing the GPU named through its slower d2d and NVML's list of
processes, from one H200's recorded rows (tests/data/results) and NVML (tests/data/telemetry)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from sweeper.commands.scan import print_verdicts
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
from sweeper.scan.policy import excluded, gate_group, isolate_waves, to_isolate
from sweeper.scan.rows import Asked, outcome
from sweeper.scan.thresholds import Thresholds
from sweeper.scan.verdict import Health, Verdict
from tests.nvml_replay import recorded

DATA = Path(__file__).parents[1] / "data"
RUN = DATA / "results" / "h200-x1-default-2026-12-02"
COPY = 256 << 20
ONE = Fleet(nodes=(FleetNode(id="vm", host="vm", gpus=1),), gpu_model="NVIDIA H200")
ASKED = Asked(op="all_reduce", latency_bytes=8, bandwidth_bytes=1 << 30)


def _gate_rows() -> list[dict[str, Any]]:
    """The recorded run's rows a one-GPU gate asks for: all_reduce at 8 B and 1 GiB (skipped
    on one rank), d2d and pinned h2d and d2h at 256 MiB."""
    rows = [r for f in sorted(RUN.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    judged = [r for r in rows if r["op"] == "all_reduce" and r["algorithm"] == "native"]
    judged = [r for r in judged if r["size_bytes"] in (8, 1 << 30)]
    own = [
        r
        for r in rows
        if r["op"] in ("d2d", "h2d", "d2h")
        and r["algorithm"] in ("device", "pinned")
        and r["size_bytes"] == COPY
    ]
    return judged + own


def _verdicts(outcomes: list[GroupOutcome], fleet: Fleet = ONE) -> dict[str, Verdict]:
    return {v.name: v for v in judge(fleet, outcomes, Thresholds())}


def _gate(rows: list[dict[str, Any]]) -> GroupOutcome:
    expected = {(r["op"], r["size_bytes"]) for r in rows}
    uuid = rows[0]["gpu_uuids"][0]
    return outcome(gate_group("vm"), rows, expected, ASKED, {uuid: ("vm", 0)})


def test_a_lone_h200_gives_its_copies_against_its_reference() -> None:
    got = _gate(_gate_rows())
    assert got.result is Result.OK
    (reading,) = got.readings
    assert reading.d2d_gb_per_s == pytest.approx(3810.4, abs=0.1)
    assert reading.copy_gb_per_s == pytest.approx(55.17, abs=0.01)
    gpu = _verdicts([got])["vm/gpu0"]
    assert gpu.health is Health.HEALTHY
    assert (gpu.busbw_gb_per_s, gpu.reference_gb_per_s) == (pytest.approx(3810.4, 0.001), 3810)
    assert gpu.threshold_gb_per_s == pytest.approx(0.8 * 3810)
    assert gpu.reference_source.startswith("H200 gpu x1 d2d: measured here: ")
    assert gpu.evidence == (
        "vm/gpu0: the only GPU of its node, no collective to time: host copies 55.2 GB/s, 100% "
        "of the reference 55.2 (H200 gpu x1 h2d); d2d 3810 GB/s; 100% of the reference 3810 "
        "GB/s (H200 gpu x1 d2d)"
    )


def _shared(d2d: float) -> GroupOutcome:
    """The gate's outcome with the H200's d2d at `d2d` and the process NVML listed beside the
    rank (`h200-x1-shared.json`) in its gate's copies."""
    others = recorded("h200-x1-shared.json").other_processes
    rows = [{**r, "other_processes": [others]} if r["kind"] == "copy" else r for r in _gate_rows()]
    rows = [{**r, "busbw_gb_per_s": d2d} if r["op"] == "d2d" else r for r in rows]
    return _gate(rows)


def test_a_lone_gpu_a_second_process_keeps_busy_is_slow_with_that_process_as_evidence() -> None:
    """Beside bf16 matrix products the H200's d2d was 2052 GB/s (4243 alone) and NVML listed
    the other process (docs/measurements/h200-x1-2026-12-02.md)."""
    verdicts = _verdicts([_shared(2052.2)])
    gpu = verdicts["vm/gpu0"]
    assert gpu.health is Health.SLOW
    assert gpu.condemned
    assert gpu.busbw_gb_per_s == pytest.approx(2052.2)
    assert gpu.evidence == (
        "vm/gpu0: d2d below 80% of the reference: 1 other compute process on it (NVML), a job "
        "sharing this GPU; host copies 55.2 GB/s, 100% of the reference 55.2 (H200 gpu x1 "
        f"h2d); d2d 2052 GB/s; 54% of the reference 3810 GB/s ({gpu.reference_source})"
    )
    assert gpu.reference_source.startswith("H200 gpu x1 d2d: measured here: python3 -m sweeper")
    node = verdicts["vm"]
    assert node.health is Health.UNCONFIRMED
    assert "its gpu0 d2d below 80% of the reference" in node.evidence


def test_a_process_beside_a_gpu_whose_copies_hold_is_noted_not_held_against_it() -> None:
    gpu = _verdicts([_shared(3810.4)])["vm/gpu0"]
    assert gpu.health is Health.HEALTHY
    assert gpu.evidence.startswith(
        "vm/gpu0: the only GPU of its node, no collective to time: 1 other compute process on "
        "it (NVML), its copies at their reference regardless: host copies 55.2 GB/s"
    )


def test_without_a_reference_a_shared_gpu_says_it_cannot_tell_and_an_idle_one_why() -> None:
    """A model the table has no copy figure for: nothing to hold its copies to."""
    plain = replace(ONE, gpu_model="NVIDIA A100-SXM4-80GB")
    shared = _verdicts([_shared(2052.2)], plain)["vm/gpu0"]
    assert shared.health is Health.UNCONFIRMED
    assert shared.evidence == (
        "vm/gpu0: 1 other compute process on it (NVML), and no reference d2d for its model to "
        "tell whether that slows it: host copies 55.2 GB/s; d2d 2052 GB/s"
    )
    idle = _verdicts([_gate(_gate_rows())], plain)["vm/gpu0"]
    assert idle.health is Health.HEALTHY
    assert idle.reference_gb_per_s is None
    assert idle.evidence.endswith(
        ": host copies 55.2 GB/s; d2d 3810 GB/s; no reference for its model, so a job sharing "
        "it could not be told"
    )


def test_host_copies_below_their_reference_make_a_lone_gpu_slow() -> None:
    """A link that trained at full width yet moves 40 GB/s: no fleet to compare it with, so
    the reference (55.2 GB/s at PCIe Gen5 x16) holds it."""
    reading = MemberReading(node="vm", gpu=0, copy_gb_per_s=40.0, d2d_gb_per_s=3810.0)
    got = GroupOutcome(group=gate_group("vm"), result=Result.OK, readings=(reading,))
    gpu = _verdicts([got])["vm/gpu0"]
    assert gpu.health is Health.SLOW
    assert gpu.evidence.startswith("vm/gpu0: host copies below 80% of the reference: ")


@pytest.mark.parametrize(("scan", "health"), [("idle", Health.HEALTHY), ("busy", Health.SLOW)])
def test_the_recorded_one_gpu_scans_name_the_gpu_only_beside_the_busy_process(
    scan: str, health: Health
) -> None:
    """The rows of the H200's two scans (tests/data/scans/README.md) judged again: alone, its
    d2d at 111% of the reference; beside the matrix products, at 54%, the process named."""
    fleet, got = _recorded_scan(scan)
    gpu = _verdicts([got], fleet)[f"{fleet.nodes[0].id}/gpu0"]
    assert gpu.health is health
    assert gpu.reference_share == pytest.approx(1.11 if scan == "idle" else 0.54, abs=0.005)
    assert ("1 other compute process on it (NVML)" in gpu.evidence) is (scan == "busy")


def _recorded_scan(scan: str) -> tuple[Fleet, GroupOutcome]:
    """One of the H200's two recorded scans (tests/data/scans/README.md): its node of one GPU
    and its gate's outcome, from its rows."""
    where = DATA / "scans" / "h200-x1-2026-12-02" / scan
    rows = [r for f in sorted(where.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    node = rows[0]["hosts"][0]
    fleet = Fleet(nodes=(FleetNode(id=node, host=node, gpus=1),), gpu_model=rows[0]["gpu_model"])
    expected = {(r["op"], r["size_bytes"]) for r in rows}
    gpus = {rows[0]["gpu_uuids"][0]: (node, 0)}
    return fleet, outcome(gate_group(node), rows, expected, ASKED, gpus)


def test_the_console_gives_a_lone_healthy_gpus_figures_beside_its_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The idle H200's scan printed its node `healthy`, "passed its gate (the only node)", with
    no figure: its GPU's verdict, which holds them, was in the JSON only."""
    fleet, got = _recorded_scan("idle")
    print_verdicts(judge(fleet, [got], Thresholds()))
    table = capsys.readouterr().out
    assert f"{fleet.nodes[0].id}/gpu0  healthy" in table
    assert "111% of the reference" in table
    assert table.splitlines()[-1] == "nodes: 1 healthy"


def _alone_again(d2d: float) -> GroupOutcome:
    """The GPU's copies alone after its gate (wave 1), its d2d at `d2d`, the process still
    listed."""
    rows = [r for r in _gate_rows() if r["kind"] == "copy"]
    rows = [{**r, "other_processes": [1]} for r in rows]
    rows = [{**r, "busbw_gb_per_s": d2d} if r["op"] == "d2d" else r for r in rows]
    group = ScanGroup(wave=1, stage=Stage.ISOLATE, nodes=("vm",), gpus=(0,))
    expected = {(r["op"], r["size_bytes"]) for r in rows}
    return outcome(group, rows, expected, replace(ASKED, op="send_recv"), {_uuid(): ("vm", 0)})


def _uuid() -> str:
    return str(_gate_rows()[0]["gpu_uuids"][0])


def test_a_lone_gpu_slow_at_its_gate_copies_alone_again_before_it_is_condemned() -> None:
    """One slow point condemns nothing: the policy runs the GPU's copies alone again; slow at
    both, it is slow, saying so; at its reference alone, healthy with the gate's as a note."""
    busy = _shared(2052.2)
    assert to_isolate(ONE, [busy], Thresholds()) == ["vm"]
    assert to_isolate(ONE, [_gate(_gate_rows())], Thresholds()) == []
    (wave,) = isolate_waves(ONE, ["vm"], 1)
    assert [g.gpus for g in wave.groups] == [(0,)]
    again = _verdicts([busy, _alone_again(2061.0)])["vm/gpu0"]
    assert again.health is Health.SLOW
    assert again.evidence.startswith(
        "vm/gpu0: at its gate and alone again in wave 1: d2d below 80% of the reference"
    )
    assert excluded(ONE, [busy, _alone_again(2061.0)], Thresholds())["vm"].startswith(
        "alone: slow gpu0 (at its gate and alone again in wave 1: d2d below 80%"
    )
    once = _verdicts([busy, _alone_again(4228.0)])["vm/gpu0"]
    assert once.health is Health.HEALTHY
    assert once.busbw_gb_per_s == 4228.0
    (note,) = once.notes
    assert note.startswith("transient: at its gate d2d below 80% of the reference: ")
    assert note.endswith("d2d 2052 GB/s; alone again in wave 1, not")
    assert "vm" not in excluded(ONE, [busy, _alone_again(4228.0)], Thresholds())


def test_a_cpu_rank_alone_on_its_node_is_told_of_no_copies_it_never_made() -> None:
    """gloo ranks read no copies and no NVML: nothing to say of a GPU's copies or reference."""
    got = GroupOutcome(group=gate_group("vm"), result=Result.OK, readings=())
    gpu = _verdicts([got], replace(ONE, gpu_model=None))["vm/gpu0"]
    assert gpu.health is Health.HEALTHY
    assert gpu.evidence == "vm/gpu0: the only GPU of its node, no collective to time"
