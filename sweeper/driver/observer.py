"""What a run tells whoever watches it (the terminal, a benchmark, a test): that a sweep
started and what it will measure, each row as it is kept, each wave of a scan as it starts,
and how a sweep finished."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sweeper.driver.measurement import ResultRow
from sweeper.planning.placement import Group
from sweeper.scan.fleet import ScanWave
from sweeper.wire import Backend, Status


@dataclass(frozen=True, kw_only=True)
class Started:
    run_id: str
    backend: Backend
    groups: tuple[Group, ...]
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    sizes: tuple[int, int | None]  # smallest and largest S asked for; None: auto
    n_points: int
    output: Path
    estimated_s: float | None = None  # the run's wall, as `sweeper plan` estimates it
    note: str | None = None  # a line about what this cluster cannot measure (one GPU)


@dataclass(frozen=True)
class Finished:
    run_id: str
    rows: tuple[ResultRow, ...]
    elapsed_s: float
    output: Path
    report: Path | None = None  # the HTML report, when one was written

    @property
    def failed(self) -> int:
        """Points that should have run and did not (a skipped point could not run there)."""
        return sum(row.status not in (Status.OK, Status.SKIPPED) for row in self.rows)


class Observer(Protocol):
    def started(self, run: Started) -> None: ...

    def point(self, row: ResultRow) -> None: ...

    def wave(self, wave: ScanWave) -> None:
        """A scan's wave is about to run (a sweep's waves are its groups: `started` has them)."""

    def finished(self, run: Finished) -> None: ...
