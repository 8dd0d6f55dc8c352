"""Appends a run's rows durably: each point's rows journaled as they come (`journal`), and
compacted into a Parquet batch every 256 rows or 30 s, after which the journal is removed.
A batch is written atomically (`files.atomic_write`), so a reader never sees half a file.

A row comes typed (a frozen record whose fields are the schema's columns) and becomes a
mapping of columns here, in `columns`, and nowhere else; rows read back from disk, and
tests' rows, come as mappings already.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import Field, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from sweeper.errors import ResultsUnwritable
from sweeper.results.files import next_batch, partition, write_batch
from sweeper.results.journal import Journal, RunLock, journal_path, recover
from sweeper.results.schema import COLUMNS
from sweeper.results.upgrade import canonical


class TypedRow(Protocol):
    """A row as a record (the driver's `ResultRow`): each field a column, or a record of
    columns (the run's shared ones), or a mapping of columns (the GPUs' readings)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]


def columns(row: TypedRow | Mapping[str, Any]) -> Mapping[str, Any]:
    """The row as the schema's columns, in its fields' order, records and mappings spread in
    place and tuples as lists (Arrow's list columns)."""
    if isinstance(row, Mapping):
        return row
    out: dict[str, Any] = {}
    for f in fields(row):
        value = getattr(row, f.name)
        if is_dataclass(value) and not isinstance(value, type):
            out.update(columns(value))
        elif isinstance(value, Mapping):
            out.update((name, _cell(cell)) for name, cell in value.items())
        else:
            out[f.name] = _cell(value)
    return out


def _cell(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class _Batch:
    """The batch being filled: swapped whole, so a signal that stops the driver between two
    statements never leaves a count and its rows out of step."""

    index: int
    rows: tuple[Mapping[str, Any], ...] = ()
    written: int = 0  # rows of the run already in Parquet batches


class ResultWriter:
    """Appends rows of one run: each point's rows journaled as they come, and a Parquet batch
    every `batch_rows` rows or `batch_s` seconds. A run id that already has batches (a
    resumed run) continues after them, its leftover journal recovered first; a run whose
    journal a live driver holds is BadInput. Raises ResultsUnwritable when the disk refuses
    a write (full, read-only)."""

    def __init__(
        self, root: Path, run_id: str, date: str, batch_rows: int = 256, batch_s: float = 30.0
    ) -> None:
        self.root = Path(root)
        self.directory = partition(self.root, date)
        self.run_id = run_id
        self.date = date
        self.batch_rows = batch_rows
        self.batch_s = batch_s
        self._lock = RunLock(self.root, run_id)
        recover(self.root, run_id)
        self._batch = _Batch(next_batch(self.directory, run_id))
        self._journal: Journal | None = None
        self._last_flush = time.monotonic()

    @property
    def rows(self) -> tuple[Mapping[str, Any], ...]:
        """Rows journaled, not yet in a Parquet batch."""
        return self._batch.rows

    @property
    def written(self) -> int:
        """Rows this writer put in Parquet batches."""
        return self._batch.written

    def append(self, row: TypedRow | Mapping[str, Any]) -> None:
        self.extend([row])

    def extend(self, typed: Sequence[TypedRow | Mapping[str, Any]]) -> None:
        """Journal the rows of one point (one fsync), then keep them for the next batch."""
        rows = [columns(row) for row in typed]
        for row in rows:
            unknown = set(row) - set(COLUMNS)
            if unknown:
                raise KeyError(f"not in the schema: {sorted(unknown)}")
        batch = self._batch
        # a new journal (the batch's first point, or after a failed write) holds the whole batch
        journaled = rows if self._journal is not None else (*batch.rows, *rows)
        try:
            if self._journal is None:
                self._journal = Journal(
                    journal_path(self.root, self.run_id), self.date, batch.index
                )
            self._journal.write(canonical(journaled))
        except OSError as exc:
            self._release(remove=False)  # torn: it takes no more writes; `recover` reads it
            raise ResultsUnwritable.of(self.root, exc) from None
        self._batch = _Batch(batch.index, (*batch.rows, *rows), batch.written)
        if len(self.rows) >= self.batch_rows or time.monotonic() - self._last_flush >= self.batch_s:
            self.flush()

    def flush(self) -> None:
        """The journaled rows as the next Parquet batch, and the journal gone. Safe to call
        again after it was interrupted: the batch is rewritten with the same rows."""
        self._last_flush = time.monotonic()
        batch = self._batch
        if not batch.rows:
            return
        try:
            write_batch(self.directory, self.run_id, batch.index, canonical(batch.rows))
        except OSError as exc:
            self._release(remove=False)  # its rows stay in it, for `recover`, unlocked
            raise ResultsUnwritable.of(self.root, exc) from None
        self._release(remove=True)
        self._batch = _Batch(batch.index + 1, (), batch.written + len(batch.rows))

    def close(self) -> None:
        """The run is no longer written: its lock goes. Rows not yet in a batch (a failed
        flush) stay in their journal for `recover`."""
        try:
            self._release(remove=False)
        finally:
            self._lock.release()

    def _release(self, remove: bool) -> None:
        if self._journal is not None:
            self._journal.close(remove)
            self._journal = None
