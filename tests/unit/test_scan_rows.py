"""A group's rows fold into its scan outcome: the judged figures, each GPU's copies and NVML
evidence, and missing or failed points that never pass."""

from __future__ import annotations

from typing import Any

from sweeper.scan.fleet import Result, ScanGroup, Stage
from sweeper.scan.rows import Asked, outcome

ASKED = Asked(latency_bytes=8, bandwidth_bytes=1 << 20)
EXPECTED = {("all_reduce", 8), ("all_reduce", 1 << 20)}
PAIR = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=("a", "b"))
GATE = ScanGroup(wave=0, stage=Stage.GATE, nodes=("a",))


def _row(op: str = "all_reduce", size: int = 1 << 20, **columns: Any) -> dict[str, Any]:
    return {
        "op": op,
        "kind": "collective",
        "size_bytes": size,
        "status": "ok",
        "error": None,
        "world_size": 2,
        "busbw_gb_per_s": 40.0,
        "algbw_gb_per_s": 40.0,
        "time_us": 30.0 if size == 8 else 500.0,
        "gpu_uuids": ["GPU-a0", "GPU-b0"],
        **columns,
    }


def test_a_group_that_ran_gives_busbw_at_the_bandwidth_size_and_latency_at_the_smallest() -> None:
    rows = [_row(size=8, busbw_gb_per_s=0.1), _row(), _row(busbw_gb_per_s=38.0, launch="graph")]
    got = outcome(PAIR, rows, EXPECTED, ASKED)
    assert got.result is Result.OK
    assert got.busbw_gb_per_s == 40.0  # the best engine or launch mode
    assert got.latency_us == 30.0
    assert got.size_bytes == 1 << 20


def test_a_point_without_a_row_is_missing_and_a_failed_one_fails_the_group() -> None:
    assert outcome(PAIR, [], EXPECTED, ASKED).result is Result.MISSING
    assert outcome(PAIR, [_row()], EXPECTED, ASKED).result is Result.MISSING
    failed = outcome(
        PAIR, [_row(size=8), _row(status="timeout", error="point took over 60 s")], EXPECTED, ASKED
    )
    assert failed.result is Result.FAILED
    assert failed.reason == f"all_reduce at {1 << 20} B: point took over 60 s"
    assert failed.busbw_gb_per_s is None


def test_a_gate_of_one_rank_has_no_busbw_and_a_skipped_copy_is_no_failure() -> None:
    rows = [_row(size=8, world_size=1), _row(world_size=1, busbw_gb_per_s=0.0)]
    rows.append(_row("h2d", 256 << 20, kind="copy", status="skipped", error="needs a GPU"))
    got = outcome(GATE, rows, EXPECTED, ASKED)
    assert got.result is Result.OK
    assert got.busbw_gb_per_s is None


def test_the_gate_reads_each_gpus_slower_copy_and_its_nvml_evidence() -> None:
    copies = [
        _row(op, 256 << 20, kind="copy", algbw_gb_per_s=rate, gpu_uuids=[uuid])
        for op, rate, uuid in (("h2d", 50.0, "GPU-a0"), ("d2h", 45.0, "GPU-a0"))
    ]
    copies += [_row("h2d", 256 << 20, kind="copy", algbw_gb_per_s=52.0, gpu_uuids=["GPU-a1"])]
    island = _row(
        gpu_uuids=["GPU-a0", "GPU-a1"],
        xid_codes=[[], [79]],
        ecc_uncorrected_delta=[0, 2],
        pcie_gen=[5, 4],
        pcie_max_gen=[5, 5],
        pcie_width=[16, 16],
        pcie_max_width=[16, 16],
        throttle_reasons=[["gpu_idle"], ["hw_slowdown"]],
    )
    gpus = {"GPU-a0": ("a", 0), "GPU-a1": ("a", 1)}
    got = outcome(GATE, [_row(size=8), island, *copies], EXPECTED, ASKED, gpus)
    first, second = got.readings
    assert (first.gpu, first.copy_gb_per_s, first.flags) == (0, 45.0, ())
    assert (second.gpu, second.copy_gb_per_s) == (1, 52.0)
    assert second.flags == (
        "2 uncorrected ECC errors",
        "xid 79",
        "PCIe Gen4 x16 of Gen5 x16",
        "hw_slowdown",
    )


def test_a_gpus_clock_and_power_cap_under_load_come_with_its_readings() -> None:
    uuids = {"GPU-a0": ("a", 0), "GPU-a1": ("a", 1)}
    telemetry = {
        "gpu_uuids": ["GPU-a0", "GPU-a1"],
        "sm_clock_mhz": [1980, 1680],
        "power_w": [400.0, 698.0],
        "power_limit_w": [700.0, 700.0],
        "throttle_reasons": [[], []],
    }
    rows = [_row(size=8, **{**telemetry, "sm_clock_mhz": [1000, 1000]}), _row(**telemetry)]
    got = outcome(GATE, rows, EXPECTED, ASKED, uuids)
    assert got.op == "all_reduce"
    clocks = {r.gpu: (r.sm_clock_mhz, r.at_power_cap) for r in got.readings}
    assert clocks == {0: (1980.0, False), 1: (1680.0, True)}  # the loaded point's


def test_a_gpu_whose_nvlink_replays_or_thermal_slowdown_the_gate_read_is_named_with_it() -> None:
    from sweeper.scan.fleet import Fleet, FleetNode
    from sweeper.scan.judge import judge
    from sweeper.scan.thresholds import Thresholds
    from sweeper.scan.verdict import Health, Subject
    from sweeper.telemetry import columns
    from tests.nvml_replay import recorded

    names = ("h200-healthy.json", "h200-nvlink-replays.json", "h200-thermal-slowdown.json")
    uuids = [f"GPU-a{g}" for g in range(len(names))]
    readings = columns([recorded(name) for name in names])
    rows = [_row(size=8), _row(gpu_uuids=uuids, world_size=3, **readings)]
    gpus = {uuid: ("a", g) for g, uuid in enumerate(uuids)}
    got = outcome(GATE, rows, EXPECTED, ASKED, gpus)
    flags = {r.gpu: r.flags for r in got.readings}
    assert flags == {
        0: (),
        1: ("41 NVLink replays over one point", "1 NVLink recoveries over one point"),
        2: ("sw_thermal_slowdown at 91 C",),
    }
    assert {r.gpu: r.notes for r in got.readings}[1] == ("3 NVLink CRC errors over one point",)
    fleet = Fleet(nodes=(FleetNode(id="a", host="h", gpus=3),))
    verdicts = {v.gpu: v for v in judge(fleet, [got], Thresholds()) if v.subject is Subject.GPU}
    assert not verdicts[0].condemned  # only in a gate its peers failed: unconfirmed
    assert verdicts[1].health is verdicts[2].health is Health.FAILED
    assert "41 NVLink replays" in verdicts[1].evidence
    assert "noted, not held against it: 3 NVLink CRC errors" in verdicts[1].evidence
    assert "sw_thermal_slowdown at 91 C" in verdicts[2].evidence


def test_nvlink_crc_errors_alone_are_noted_beside_a_healthy_gpu_not_held_against_it() -> None:
    """Healthy H200s at 97-100% of the reference count 1-2 CRC errors a gate point
    (nvidia-h200-x2 and -x4, 2026-11-27); a scan that failed a GPU on them drained a working
    GPU, and named a GPU slowed by a second process for them instead of its slow pairs."""
    from sweeper.scan.fleet import Fleet, FleetNode
    from sweeper.scan.judge import judge
    from sweeper.scan.thresholds import Thresholds
    from sweeper.scan.verdict import Subject

    uuids = ["GPU-a0", "GPU-a1"]
    counters = {"nvlink_crc_delta": [0, 2], "nvlink_replay_delta": [0, 0]}
    rows = [_row(size=8, **counters), _row(gpu_uuids=uuids, **counters)]
    got = outcome(GATE, rows, EXPECTED, ASKED, {u: ("a", g) for g, u in enumerate(uuids)})
    assert [(r.gpu, r.flags, r.notes) for r in got.readings] == [
        (1, (), ("2 NVLink CRC errors over one point",))
    ]
    fleet = Fleet(nodes=(FleetNode(id="a", host="h", gpus=2),))
    gpus = {v.gpu: v for v in judge(fleet, [got], Thresholds()) if v.subject is Subject.GPU}
    assert not gpus[0].condemned
    assert not gpus[1].condemned
    assert "noted, not held against it: 2 NVLink CRC errors over one point" in gpus[1].evidence


def test_a_groups_rows_flagged_by_the_tier_contract_make_it_misconfigured() -> None:
    flag = "nvlink group through SHM: check NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, peer access"
    rows = [_row(size=8, transport_flag=flag), _row(transport_flag=flag)]
    assert outcome(PAIR, rows, EXPECTED, ASKED).misconfigured == flag
    assert outcome(PAIR, [_row(size=8), _row()], EXPECTED, ASKED).misconfigured == ""
