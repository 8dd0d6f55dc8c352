"""What a GPU said about itself around a point: clocks, power, temperature, throttling, the
compute processes on it besides the rank's own, and the errors it counted while the point ran
(ECC, NVLink replays / CRC / recoveries, XIDs).

A rank opens a `Watch` on its GPU once (NVML, through nvidia-ml-py) and reads it before the
point's first timed block and after its last, never inside one. `sample` takes the pynvml
module (or anything that answers its calls) and a handle, so tests replay recorded answers.
A field NVML cannot read on this GPU (NotSupported, NoPermission, a driver without the call)
is None, never an error. No torch, no Ray here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sweeper.wire import Reading

# Values of nvml.h's enums, named here so that a replay of recorded answers needs no pynvml.
_CLOCK_SM, _CLOCK_MEM = 1, 2  # nvmlClockType_t
_TEMPERATURE_GPU = 0  # nvmlTemperatureSensors_t
_ECC_CORRECTED, _ECC_UNCORRECTED, _ECC_VOLATILE = 0, 1, 0  # error type, counter type
_NVLINK_MAX_LINKS = 18
_FEATURE_ENABLED = 1
# nvmlNvLinkErrorCounter_t: replays, recoveries, CRC errors of flits and of data
_NVLINK_REPLAY, _NVLINK_RECOVERY, _NVLINK_CRC_FLIT, _NVLINK_CRC_DATA = 0, 1, 2, 3
# NVLink's error counters are asked one link and counter at a time, a reading of 18 links
# three quarters of a small point's wall, and the driver's totals answer NotSupported
# (docs/measurements/h200-x4-2026-11-27.md). So a sweep reads them at most every
# `Timing.nvlink_every_s` (a scan, whose verdicts quote them, every point): a point that reads
# them carries what the GPU counted since its previous reading, one that does not null.
_EVENT_XID = 0x8  # nvmlEventTypeXidCriticalError
# nvmlClocksThrottleReason* (nvmlClocksEventReason* since driver 535): bit -> name
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


@dataclass(frozen=True)
class Sample:
    """One reading of a GPU: its state, and its ECC counters as totals so far. Not a
    `wire.Reading`: a point's reading is two samples apart (`over`), its counters the gains."""

    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: int | None
    throttle_reasons: tuple[str, ...] | None
    ecc_corrected: int | None  # volatile counts: since the driver loaded
    ecc_uncorrected: int | None
    pcie_gen: int | None  # the link as trained now (idle GPUs train down to save power)
    pcie_width: int | None
    pcie_max_gen: int | None  # the most the GPU and its slot allow: a link below it shows
    pcie_max_width: int | None
    other_processes: int | None  # compute processes on the GPU besides the reader's own


ELEMENT_TYPES: dict[str, str] = {f.name: f.metadata["arrow"] for f in fields(Reading)}
COLUMNS = tuple(ELEMENT_TYPES)


def _read(nvml: Any, call: Callable[..., Any], *args: Any) -> Any:
    """A call's answer, or None where this GPU or driver cannot give it."""
    try:
        return call(*args)
    except (nvml.NVMLError, AttributeError):  # AttributeError: an older pynvml lacks the call
        return None


def _reasons(mask: int | None) -> tuple[str, ...] | None:
    if mask is None:
        return None
    return tuple(name for bit, name in THROTTLE_REASONS.items() if mask & bit)


NvLinkErrors = tuple[int | None, int | None, int | None]  # replays, CRC errors, recoveries


def _nvlink_total(
    nvml: Any, handle: Any, links: Sequence[int], counters: Sequence[int]
) -> int | None:
    """A counter summed over the active links; None where no link has it (or none is active)."""
    values = [
        _read(nvml, nvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
        for link in links
        for counter in counters
    ]
    read = [int(v) for v in values if v is not None]
    return sum(read) if read else None


def nvlink_errors(nvml: Any, handle: Any) -> NvLinkErrors:
    """The GPU's NVLink error counters as totals so far, each summed over its active links."""
    links = [
        link
        for link in range(_NVLINK_MAX_LINKS)
        if _read(nvml, nvml.nvmlDeviceGetNvLinkState, handle, link) == _FEATURE_ENABLED
    ]
    return (
        _nvlink_total(nvml, handle, links, [_NVLINK_REPLAY]),
        _nvlink_total(nvml, handle, links, [_NVLINK_CRC_FLIT, _NVLINK_CRC_DATA]),
        _nvlink_total(nvml, handle, links, [_NVLINK_RECOVERY]),
    )


def _milliwatts(value: Any) -> float | None:
    return None if value is None else int(value) / 1e3


def _others(nvml: Any, handle: Any, pid: int | None) -> int | None:
    """The compute processes NVML lists on the GPU other than `pid` (None: no pid to tell
    them by, or NVML cannot list them)."""
    listed = _read(nvml, nvml.nvmlDeviceGetComputeRunningProcesses, handle)
    if pid is None or listed is None:
        return None
    return len([p for p in listed if p.pid != pid])


def sample(nvml: Any, handle: Any, pid: int | None = None) -> Sample:
    """The GPU of `handle` now, through `nvml` (the pynvml module, or a replay of it); `pid`:
    the reading process, whose own context on the GPU is not counted among its others."""
    ecc = nvml.nvmlDeviceGetTotalEccErrors
    throttle = _read(nvml, nvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle)
    return Sample(
        sm_clock_mhz=_read(nvml, nvml.nvmlDeviceGetClockInfo, handle, _CLOCK_SM),
        mem_clock_mhz=_read(nvml, nvml.nvmlDeviceGetClockInfo, handle, _CLOCK_MEM),
        power_w=_milliwatts(_read(nvml, nvml.nvmlDeviceGetPowerUsage, handle)),
        power_limit_w=_milliwatts(_read(nvml, nvml.nvmlDeviceGetEnforcedPowerLimit, handle)),
        temperature_c=_read(nvml, nvml.nvmlDeviceGetTemperature, handle, _TEMPERATURE_GPU),
        throttle_reasons=_reasons(throttle),
        ecc_corrected=_read(nvml, ecc, handle, _ECC_CORRECTED, _ECC_VOLATILE),
        ecc_uncorrected=_read(nvml, ecc, handle, _ECC_UNCORRECTED, _ECC_VOLATILE),
        pcie_gen=_read(nvml, nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        pcie_width=_read(nvml, nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        pcie_max_gen=_read(nvml, nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        pcie_max_width=_read(nvml, nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        other_processes=_others(nvml, handle, pid),
    )


def energy_mj(nvml: Any, handle: Any) -> int | None:
    """The GPU's total energy since the driver loaded, in mJ (Volta and later; None where the
    GPU has no such counter)."""
    value = _read(nvml, nvml.nvmlDeviceGetTotalEnergyConsumption, handle)
    return None if value is None else int(value)


def _delta(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before


def over(
    before: Sample,
    after: Sample,
    xid_codes: tuple[int, ...] | None,
    nvlink: NvLinkErrors,
) -> Reading:
    """A point's reading from the samples around it, the XIDs raised in between and the
    NVLink errors counted since the GPU's previous reading of them (None: not read)."""
    return Reading(
        sm_clock_mhz=after.sm_clock_mhz,
        mem_clock_mhz=after.mem_clock_mhz,
        power_w=after.power_w,
        power_limit_w=after.power_limit_w,
        temperature_c=after.temperature_c,
        throttle_reasons=after.throttle_reasons,
        ecc_corrected_delta=_delta(before.ecc_corrected, after.ecc_corrected),
        ecc_uncorrected_delta=_delta(before.ecc_uncorrected, after.ecc_uncorrected),
        nvlink_replay_delta=nvlink[0],
        nvlink_crc_delta=nvlink[1],
        nvlink_recovery_delta=nvlink[2],
        xid_codes=xid_codes,
        pcie_gen=after.pcie_gen,
        pcie_width=after.pcie_width,
        pcie_max_gen=after.pcie_max_gen,
        pcie_max_width=after.pcie_max_width,
        other_processes=after.other_processes,
    )


def columns(readings: Sequence[Reading | None]) -> dict[str, Any]:
    """The rows' telemetry columns: per column, each rank's value in group rank order; a
    column is None where no rank has a reading (CPU ranks, a point that failed)."""
    if all(r is None for r in readings):
        return dict.fromkeys(COLUMNS)
    return {
        name: tuple(None if r is None else getattr(r, name) for r in readings) for name in COLUMNS
    }


class Watch:
    """One GPU's NVML, open for a rank's life: samples, and an event set for its XIDs
    (None where the driver does not deliver them, as in many VMs and containers)."""

    def __init__(
        self,
        nvml: Any,
        handle: Any,
        clock: Callable[[], float] = time.monotonic,
        pid: int | None = None,
    ) -> None:
        self.nvml = nvml
        self.handle = handle
        self.clock = clock
        self.pid = pid  # the rank's process: its own context is not another process
        self.nvlink_read: tuple[float, NvLinkErrors] | None = None  # when, and what
        self.events: Any = _read(nvml, nvml.nvmlEventSetCreate)
        if self.events is not None:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, _EVENT_XID, self.events)
            except nvml.NVMLError:
                nvml.nvmlEventSetFree(self.events)
                self.events = None

    @classmethod
    def open(cls, gpu_uuid: str) -> Watch | None:
        """A watch on the GPU of that UUID, or None where NVML is not there."""
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()  # held for the rank's life: its process's exit releases it
        except pynvml.NVMLError:
            return None
        handle = _read(pynvml, pynvml.nvmlDeviceGetHandleByUUID, gpu_uuid)
        if handle is None:
            pynvml.nvmlShutdown()
            return None
        return cls(pynvml, handle, pid=os.getpid())

    def start(self) -> Sample:
        """Before a point: XIDs raised since the last one are not this point's; a sample (and
        the GPU's first NVLink reading, the base of the next)."""
        self.xids()
        if self.nvlink_read is None:
            self.nvlink_read = (self.clock(), nvlink_errors(self.nvml, self.handle))
        return sample(self.nvml, self.handle, self.pid)

    def energy_mj(self) -> int | None:
        """The GPU's energy counter now (mJ since the driver loaded), or None: it has none.
        Read around a point's timed blocks (`rank.execution`), never inside one."""
        return energy_mj(self.nvml, self.handle)

    def xids(self) -> tuple[int, ...] | None:
        """The XID codes raised since the last call (waiting for none), or None: unreadable."""
        if self.events is None:
            return None
        codes: list[int] = []
        while True:
            try:
                event = self.nvml.nvmlEventSetWait(self.events, 0)
            except self.nvml.NVMLError:  # Timeout: no more events
                return tuple(codes)
            codes.append(int(event.eventData))

    def since(self, before: Sample, nvlink_every_s: float) -> Reading:
        """After the point: a sample, the XIDs raised since `start`, and the NVLink errors
        counted since their last reading if that was at least `nvlink_every_s` ago."""
        nvlink = self._nvlink_gains(nvlink_every_s)
        return over(before, sample(self.nvml, self.handle, self.pid), self.xids(), nvlink)

    def _nvlink_gains(self, every_s: float) -> NvLinkErrors:
        """What the NVLink counters gained since their last reading, if that was at least
        `every_s` ago (then they are read now); else nothing is read (None)."""
        assert self.nvlink_read is not None, "since() before start()"
        then, before = self.nvlink_read
        now = self.clock()
        if now - then < every_s:
            return None, None, None
        after = nvlink_errors(self.nvml, self.handle)
        self.nvlink_read = (now, after)
        return (
            _delta(before[0], after[0]),
            _delta(before[1], after[1]),
            _delta(before[2], after[2]),
        )
