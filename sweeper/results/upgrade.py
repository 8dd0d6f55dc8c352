"""The one place that knows rows older sweepers wrote: `upgrade` brings a table of any schema
version to the current one, so readers and analyses see every row as today's writer makes it.

A file's version is in its Arrow metadata (`schema.VERSION_KEY`); a file without one is
version 1, as is a row a caller hands over without the columns version 2 requires (test data,
rows another tool made): whatever a row does not say is read as it was before it could. A file
of a newer version than this sweeper's is refused, as asv refuses results of a newer API: its
rows may mean what this code cannot tell, and a journal of one recovered here would lose them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sweeper.errors import BadInput
from sweeper.results.schema import SCHEMA, SCHEMA_VERSION, VERSION_KEY
from sweeper.wire import DEFAULT_VARIANT, UNKNOWN_TRANSPORT, Backend, Engine, Kind, Launch

UNVERSIONED = 1
# What rows from before a column existed were: eager calls through torch.distributed, of the
# default variant (there were no launch modes, engines or variants yet).
_DEFAULTS = {"launch": Launch.EAGER.value, "engine": Engine.TORCH.value, "variant": DEFAULT_VARIANT}
# The columns `kind` is implied by, for rows written before it existed.
KIND_SOURCES = ("op", "algorithm", "params")


def version(schema: pa.Schema, source: object) -> int:
    """The schema version file (or journal) `source` was written with; BadInput where a newer
    sweeper wrote it, or its version is no number."""
    found = (schema.metadata or {}).get(VERSION_KEY)
    try:
        written = int(found[:8]) if found else UNVERSIONED  # a planted 5000 digits: no number
    except ValueError:
        raise BadInput(f"{source}: its results schema version is no number") from None
    if written > SCHEMA_VERSION:
        raise BadInput(
            f"{source}: written by a newer sweeper (results schema version {written}; "
            f"this one reads up to {SCHEMA_VERSION})",
            hint="upgrade sweeper to read it",
        )
    return written


def _kinds(table: pa.Table) -> pa.ChunkedArray:
    """The `kind` column, with rows written before it existed given the kind their other
    columns imply, by the conventions of that time: op p2p or copy; `params` set for an
    experiment; a `+` in a composite's algorithm (`reduce_scatter+all_gather`)."""
    op, algorithm = table["op"], table["algorithm"]
    implied = pc.if_else(
        pc.fill_null(pc.equal(op, "copy"), False),
        "copy",
        pc.if_else(
            pc.fill_null(pc.equal(op, "p2p"), False),
            "p2p",
            pc.if_else(
                pc.is_valid(table["params"]),
                "experiment",
                pc.if_else(
                    pc.fill_null(pc.match_substring(algorithm, "+"), False),
                    "composite",
                    "collective",
                ),
            ),
        ),
    )
    filled: pa.ChunkedArray = pc.coalesce(table["kind"], implied)
    return filled


def _to_2(table: pa.Table) -> pa.Table:
    """kind, launch, engine and variant filled where a row has none (or its file no column).
    `kind` needs KIND_SOURCES: a table read without them keeps its kind as read."""
    names = table.column_names
    for column, default in _DEFAULTS.items():
        if column in names:
            filled = pc.fill_null(table[column], default)
            table = table.set_column(names.index(column), column, filled)
    if "kind" in names and all(source in names for source in KIND_SOURCES):
        table = table.set_column(names.index("kind"), "kind", _kinds(table))
    return table


# What a row needs to say for its transport to be known to be unknown (version 3).
TRANSPORT_SOURCES = ("transport", "backend", "kind", "world_size", "time_us")


def _to_3(table: pa.Table) -> pa.Table:
    """`transport` is `unknown` on a row that ran through NCCL (nccl ranks, a group of more
    than one GPU, not a copy) before sweeper read it from NCCL; every other row keeps null.
    A table read without TRANSPORT_SOURCES keeps its transport as read."""
    names = table.column_names
    if not all(source in names for source in TRANSPORT_SOURCES):
        return table
    through_nccl = pc.and_(
        pc.and_(
            pc.equal(table["backend"], Backend.NCCL.value),
            pc.not_equal(table["kind"], Kind.COPY.value),
        ),
        pc.and_(pc.greater(table["world_size"], 1), pc.is_valid(table["time_us"])),
    )
    unknown = pc.if_else(
        pc.fill_null(through_nccl, False), UNKNOWN_TRANSPORT, pa.scalar(None, pa.string())
    )
    filled = pc.coalesce(table["transport"], unknown)
    return table.set_column(names.index("transport"), "transport", filled)


# Each step brings a table of the version before `to` up to it; the last is SCHEMA_VERSION.
STEPS: tuple[tuple[int, Callable[[pa.Table], pa.Table]], ...] = ((2, _to_2), (3, _to_3))


def upgrade(table: pa.Table, since: int) -> pa.Table:
    """`table`, of schema version `since` (any subset of the schema's columns), as the
    current version has it."""
    for to, step in STEPS:
        if since < to:
            table = step(table)
    return table


def complete(table: pa.Table) -> pa.Table:
    """`table` with every column of the schema, in its order (one it lacks: all null), as
    an older sweeper's journal becomes a batch of today's."""
    columns = {
        f.name: table[f.name] if f.name in table.column_names else pa.nulls(len(table), f.type)
        for f in SCHEMA
    }
    return pa.table(columns, schema=SCHEMA)


def canonical(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows as a caller hands them over (a mapping each; columns left out are null) in the
    canonical schema, upgraded: a row that does not say its launch mode was eager, ..."""
    return upgrade(pa.Table.from_pylist(list(rows), schema=SCHEMA), UNVERSIONED)
