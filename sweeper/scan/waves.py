"""A scan's finished waves as plain data and back: a wave's outcomes, in its groups' order,
and its seconds, which the driver keeps when the wave ends (`results.scan_waves`) and a
resumed scan replays where the policy gives the same wave again. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sweeper.scan.fleet import GroupOutcome, MemberReading, Result, ScanGroup, ScanWave, Stage
from sweeper.scan.simulate import WaveRun


@dataclass(frozen=True, kw_only=True, slots=True)
class Replayed:
    """A finished wave, read back: its outcomes and how long it took."""

    outcomes: tuple[GroupOutcome, ...]
    seconds: float


def plain(wave: ScanWave, outcomes: Sequence[GroupOutcome], seconds: float) -> dict[str, Any]:
    """A finished wave, as JSON."""
    return {
        "index": wave.index,
        "stage": str(wave.stage),
        "seconds": seconds,
        "outcomes": [asdict(o) for o in outcomes],
    }


def renamed(saved: Any, ids: Mapping[str, str]) -> Any:
    """Saved waves with each node id `ids` names replaced by its new one, wherever it is."""
    if isinstance(saved, str):
        return ids.get(saved, saved)
    if isinstance(saved, Mapping):
        return {key: renamed(value, ids) for key, value in saved.items()}
    if isinstance(saved, list | tuple):
        return type(saved)(renamed(value, ids) for value in saved)
    return saved


def replayed(saved: Mapping[str, Any], wave: ScanWave) -> Replayed | None:
    """The saved wave's outcomes where it is `wave` (the same index and groups, in order);
    None where it is not, or not a wave this sweeper wrote."""
    try:
        outcomes = tuple(_outcome(o) for o in saved["outcomes"])
        seconds = float(saved["seconds"])
    except (KeyError, TypeError, ValueError):
        return None
    if saved.get("index") != wave.index or tuple(o.group for o in outcomes) != wave.groups:
        return None
    return Replayed(outcomes=outcomes, seconds=seconds)


def timed(wave: ScanWave, seconds: float) -> WaveRun:
    """A wave as it ran, for the scan's summary."""
    largest = max((len(g.nodes) for g in wave.groups), default=0)
    return WaveRun(
        index=wave.index,
        stage=wave.stage,
        groups=len(wave.groups),
        largest=largest,
        seconds=seconds,
    )


def _tuples(fields: Mapping[str, Any]) -> dict[str, Any]:
    """JSON's lists as the records' tuples (a group's subsets: a tuple of tuples)."""
    return {k: _tuple(v) if isinstance(v, list) else v for k, v in fields.items()}


def _tuple(items: list[Any]) -> tuple[Any, ...]:
    return tuple(_tuple(v) if isinstance(v, list) else v for v in items)


def _outcome(fields: Mapping[str, Any]) -> GroupOutcome:
    group = _tuples(fields["group"])
    return GroupOutcome(
        **{
            **_tuples(fields),
            "group": ScanGroup(**{**group, "stage": Stage(group["stage"])}),
            "result": Result(fields["result"]),
            "readings": tuple(MemberReading(**_tuples(r)) for r in fields["readings"]),
        }
    )
