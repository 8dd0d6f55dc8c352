"""pynvml's calls answered from recorded NVML data (tests/data/telemetry): the boundary the
telemetry code reads through, replayed on a machine without NVIDIA's library."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sweeper.telemetry import Reading, Watch


class NVMLError(Exception):
    """What pynvml raises (NotSupported, Timeout, ...)."""


class Replay:
    """pynvml for one GPU: `calls` maps "name(args after the handle)" to NVML's answer;
    anything else answers NotSupported. `xid_events`: what its event set delivers (None:
    the driver delivers no events)."""

    NVMLError = NVMLError

    def __init__(self, calls: Mapping[str, Any], xid_events: Sequence[int] | None = None) -> None:
        self.calls = calls
        self.pending = None if xid_events is None else list(xid_events)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def answer(_handle: Any = None, *args: Any) -> Any:
            key = f"{name}({', '.join(str(a) for a in args)})"
            if key not in self.calls:
                raise NVMLError(f"NotSupported: {key}")
            value = self.calls[key]
            if isinstance(value, list) and value and isinstance(value[0], dict):
                return [SimpleNamespace(**v) for v in value]  # NVML's structs: processes
            return value

        return answer

    def advance(self, calls: Mapping[str, Any], xid_events: Sequence[int] | None) -> None:
        """The GPU later: it answers from `calls`, and its event set holds `xid_events`."""
        self.calls = calls
        if self.pending is not None and xid_events is not None:
            self.pending += xid_events

    def nvmlEventSetCreate(self) -> object:
        if self.pending is None:
            raise NVMLError("NotSupported")
        return object()

    def nvmlDeviceRegisterEvents(self, _handle: Any, _types: int, _events: object) -> None:
        pass

    def nvmlEventSetWait(self, _events: object, _timeout_ms: int) -> SimpleNamespace:
        if not self.pending:
            raise NVMLError("Timeout")
        return SimpleNamespace(eventData=self.pending.pop(0))

    def nvmlEventSetFree(self, _events: object) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass


DATA = Path(__file__).parent / "data" / "telemetry"


def recorded(name: str) -> Reading:
    """A rank's reading over one point, by the real telemetry code from a recorded file of
    tests/data/telemetry: the GPU before, the GPU after, the XIDs raised in between, read by
    the process `reader_pid` names (where the file names one). The point reads the NVLink
    counters too, as a scan's point does."""
    record: dict[str, Any] = json.loads((DATA / name).read_text())
    before, after = record["samples"]
    replay = Replay(before, None if record["xid_events"] is None else [])
    watch = Watch(replay, "handle", pid=record.get("reader_pid"))
    started = watch.start()
    replay.advance(after, record["xid_events"])
    return watch.since(started, nvlink_every_s=0.0)
