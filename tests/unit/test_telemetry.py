"""GPU telemetry from recorded NVML answers: what a row says about its GPUs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sweeper import telemetry
from tests.nvml_replay import Replay, recorded

DATA = Path(__file__).parents[1] / "data" / "telemetry"


_point = recorded  # a rank's reading over one point: the GPU before, after, XIDs between


def test_a_power_capped_gpu_says_its_clocks_power_and_why() -> None:
    reading = _point("h200-power-capped.json")
    assert (reading.sm_clock_mhz, reading.mem_clock_mhz) == (1410, 3201)
    assert (reading.power_w, reading.power_limit_w) == (698.0, 700.0)
    assert reading.temperature_c == 67
    assert reading.throttle_reasons == ("sw_power_cap", "sync_boost")
    assert (reading.pcie_gen, reading.pcie_width) == (5, 16)
    assert (reading.pcie_max_gen, reading.pcie_max_width) == (5, 16)


def test_error_counters_are_what_the_point_added() -> None:
    reading = _point("h200-power-capped.json")
    assert (reading.ecc_corrected_delta, reading.ecc_uncorrected_delta) == (3, 0)
    assert reading.nvlink_replay_delta == 8  # link 3: 12 -> 20
    assert reading.nvlink_crc_delta == 2
    assert reading.nvlink_recovery_delta == 0
    assert reading.xid_codes == (63,)


class Counting(Replay):
    """A replay that notes every NVML call asked of it."""

    def __init__(self, calls: dict[str, Any]) -> None:
        super().__init__(calls, None)
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        self.asked.append(name)
        return super().__getattr__(name)


def _replays_gained(calls: dict[str, Any], link: int, replays: int) -> dict[str, Any]:
    key = f"nvmlDeviceGetNvLinkErrorCounter({link}, 0)"
    return {**calls, key: calls[key] + replays}


def test_nvlink_counters_are_read_every_few_seconds_and_no_error_is_lost() -> None:
    """Points 0.5 s apart, a replay on link 3 during each: the points between two readings
    carry null, the reading carries what the GPU counted since the last, the sum all of it."""
    calls = json.loads((DATA / "h200-power-capped.json").read_text())["samples"][0]
    now = [0.0]
    replay = Counting(calls)
    watch = telemetry.Watch(replay, "handle", clock=lambda: now[0])
    gains = []
    for _ in range(8):
        started = watch.start()
        replay.asked.clear()
        calls = _replays_gained(calls, 3, 1)
        replay.advance(calls, None)
        now[0] += 0.5
        gains.append(watch.since(started, nvlink_every_s=2.0).nvlink_replay_delta)
        if gains[-1] is None:
            assert "nvmlDeviceGetNvLinkErrorCounter" not in replay.asked
    assert gains == [None, None, None, 4, None, None, None, 4]
    assert sum(g for g in gains if g is not None) == 8


def test_what_a_gpu_cannot_report_is_null_not_an_error() -> None:
    reading = _point("rtx3060-geforce.json")
    assert (reading.sm_clock_mhz, reading.power_w, reading.temperature_c) == (1852, 168.45, 58)
    assert reading.throttle_reasons == ()
    assert (reading.pcie_gen, reading.pcie_width) == (4, 8)  # as trained under load: x8
    assert (reading.pcie_max_gen, reading.pcie_max_width) == (4, 16)  # of x16
    assert reading.power_limit_w is None
    assert reading.ecc_corrected_delta is None
    assert reading.nvlink_replay_delta is None  # no NVLink
    assert reading.xid_codes is None  # the driver delivers no events


def test_xids_raised_before_a_point_are_not_its_own() -> None:
    record = json.loads((DATA / "h200-power-capped.json").read_text())
    replay = Replay(record["samples"][0], [31])  # raised while the previous point ran
    watch = telemetry.Watch(replay, "handle")
    started = watch.start()
    assert watch.since(started, 0.0).xid_codes == ()


def test_columns_list_each_rank_in_group_order_and_are_null_without_a_gpu() -> None:
    power_capped, geforce = _point("h200-power-capped.json"), _point("rtx3060-geforce.json")
    columns = telemetry.columns([power_capped, geforce])
    assert columns["sm_clock_mhz"] == (1410, 1852)
    assert columns["power_limit_w"] == (700.0, None)
    assert columns["throttle_reasons"] == (("sw_power_cap", "sync_boost"), ())
    assert telemetry.columns([None, None]) == dict.fromkeys(telemetry.COLUMNS)


@pytest.mark.parametrize(
    ("mask", "names"), [(0, ()), (0x48, ("hw_slowdown", "hw_thermal_slowdown"))]
)
def test_throttle_reasons_are_named_from_nvmls_bits(mask: int, names: tuple[str, ...]) -> None:
    calls = {"nvmlDeviceGetCurrentClocksThrottleReasons()": mask}
    assert telemetry.sample(Replay(calls), "handle").throttle_reasons == names


def test_a_gpu_shared_with_another_process_counts_it_and_not_the_reader() -> None:
    """Recorded on the nvidia-h200 machine: alone, NVML lists only the reader's own context;
    beside a process of matrix products, that one too."""
    assert _point("h200-x1-alone.json").other_processes == 0
    shared = _point("h200-x1-shared.json")
    assert shared.other_processes == 1
    assert shared.throttle_reasons == ("sw_power_cap",)
    # a GPU read with no process to tell its own context by counts nothing
    assert _point("h200-healthy.json").other_processes is None
