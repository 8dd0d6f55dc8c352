"""Reading the results back: the files sweeper wrote (`files`), as a pyarrow dataset, as a
DataFrame of upgraded rows (`load`), and one row per run (`runs`).

Readers take only the folders and names sweeper writes: run records and anything else are
ignored, and a corrupt file of its own is skipped with a warning. A journal a killed driver
left is recovered into its Parquet batch first, so every reader sees what was kept. Every
file is read through the canonical schema and `upgrade`d from the version it was written
with, so a reader sees every row as today's writer makes it.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from sweeper.errors import BadInput, CorruptResults, SweeperWarning
from sweeper.results.files import BATCH, PARTITION_DIR, open_regular, run_name
from sweeper.results.journal import live_runs, recover_all
from sweeper.results.schema import DATASET_SCHEMA, PARTITION, RUN_COLUMNS, SCHEMA
from sweeper.results.upgrade import KIND_SOURCES, UNVERSIONED, canonical, upgrade, version
from sweeper.wire import Backend, Kind, Launch, Name, Status, Tier

LATEST = "latest"
# Columns whose values are a closed set: a row naming none of its members is not sweeper's
# (a planted or damaged file). `engine` is open: a newer sweeper's engine is read, last.
_ENUMS: dict[str, type[Name]] = {
    "backend": Backend,
    "tier": Tier,
    "kind": Kind,
    "launch": Launch,
    "status": Status,
}
_FILE = "__filename"  # the dataset's own column: which file a row came from


def _foreign(schema: pa.Schema) -> str | None:
    """Why a Parquet file is not one of sweeper's, or None: its columns are the canonical
    schema's (older files have fewer: columns are never removed or renamed), run_id one."""
    unknown = [name for name in schema.names if name not in SCHEMA.names]
    if unknown:
        return f"not sweeper's rows (column {unknown[0]!r})"
    if "run_id" not in schema.names:
        return "not sweeper's rows (no run_id)"
    for field in schema:
        expected = SCHEMA.field(field.name).type
        if not field.type.equals(expected):
            return f"not sweeper's rows (column {field.name!r} is {field.type}, not {expected})"
    return None


def _fingerprint(metadata: pq.FileMetaData) -> str:
    """The same for two copies of one batch: its footer (row counts, every column chunk's
    size and statistics; the measured_at of two batches differ)."""
    return repr(metadata.to_dict())


def files(root: str | os.PathLike[str]) -> list[str]:
    """The files sweeper wrote under `root`: its partition folders and its file names only,
    so a README, a stray folder or another tool's file beside them changes nothing. A file
    of sweeper's name that is not a regular file (a FIFO, a device, a link, a folder), whose
    Parquet footer cannot be read (a disk that filled, a copy cut short), whose columns are
    not sweeper's (another tool's), or that is a copy of a batch already taken, is skipped
    with a CorruptResults warning that names it; so is one a newer sweeper wrote (its rows
    may mean what this one cannot tell)."""
    found = []
    seen: dict[str, Path] = {}
    for folder in sorted(Path(root).iterdir()):
        if not (folder.is_dir() and PARTITION_DIR.fullmatch(folder.name)):
            continue
        for path in sorted(folder.iterdir()):
            if not BATCH.fullmatch(path.name):
                continue
            try:
                with open_regular(path) as file:  # a FIFO would hang the read
                    metadata = pq.read_metadata(file)
                schema = metadata.schema.to_arrow_schema()
                version(schema, path)  # a newer sweeper's file: neither read nor foreign
                reason = _foreign(schema)
            except (OSError, pa.ArrowException, BadInput) as exc:
                reason = _why(exc).removeprefix(f"{path}: ")
            if reason is None:
                first = seen.setdefault(_fingerprint(metadata), path)
                reason = None if first == path else f"a copy of {first}"
            if reason is not None:
                _skip(str(path), reason)
                continue
            found.append(str(path))
    return found


def _why(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _skip(path: str, reason: str) -> None:
    warnings.warn(f"skipped {path}: {reason}", CorruptResults, stacklevel=4)


def _known(table: pa.Table) -> pa.Table:
    """`table` (read with `_FILE`) without the rows of any file in which a row names a value
    that no member of its column's enum is (`_ENUMS`), each such file skipped with one
    warning. Nulls are known: `upgrade` fills what older files lack."""
    first: dict[str, str] = {}
    for column, enum in _ENUMS.items():
        if column not in table.column_names:
            continue
        values = table[column]
        named = pc.or_kleene(
            pc.is_null(values), pc.is_in(values, value_set=pa.array(enum.values()))
        )
        bad = pc.invert(named)
        for file, value in zip(
            table[_FILE].filter(bad).to_pylist(), values.filter(bad).to_pylist(), strict=True
        ):
            first.setdefault(
                file,
                f"not sweeper's rows ({column} {value!r} is none of {', '.join(enum.values())})",
            )
    if not first:
        return table
    for file, reason in sorted(first.items()):
        _skip(file, reason)
    return table.filter(pc.invert(pc.is_in(table[_FILE], value_set=pa.array(list(first)))))


def _scan(
    source: ds.Dataset,
    fragments: list[ds.Fragment],
    columns: list[str],
    filter_: ds.Expression | None,
) -> pa.Table:
    """These fragments' rows, read together (threaded); where one cannot be read (a data page
    damaged past its footer), each alone, skipping those that fail with one warning each."""

    def scan(part: list[ds.Fragment]) -> pa.Table:
        subset = ds.FileSystemDataset(part, source.schema, source.format, source.filesystem)
        return subset.to_table(columns=columns, filter=filter_)

    with contextlib.suppress(OSError, pa.ArrowException):
        return scan(fragments)
    tables = []
    for fragment in fragments:
        try:
            tables.append(scan([fragment]))
        except (OSError, pa.ArrowException) as exc:
            _skip(fragment.path, _why(exc))
    return pa.concat_tables(tables) if tables else scan([])


def dataset(root: str | os.PathLike[str]) -> ds.Dataset:
    """The results directory as a pyarrow dataset with the canonical schema (its `files`),
    as written: `read` upgrades what it reads."""
    return ds.dataset(
        files(root),
        format="parquet",
        schema=DATASET_SCHEMA,
        partitioning=ds.partitioning(PARTITION, flavor="hive"),
        partition_base_dir=str(root),
    )


def read(
    root: str | os.PathLike[str], columns: Sequence[str], filter_: ds.Expression | None = None
) -> pa.Table:
    """These columns of the rows under `root` (that match `filter_`), each file's upgraded
    from its schema version; FileNotFoundError where there is no such directory."""
    if not Path(root).is_dir():
        raise FileNotFoundError(f"no results directory at {root}")
    recover_all(Path(root))  # a killed run's rows count, as a database replays its log on open
    source = dataset(root)
    # kind is implied by other columns in rows from before it: read them with it; the
    # closed sets' columns are read to tell a planted file's rows (`_known`)
    extra = [c for c in KIND_SOURCES if c not in columns] if "kind" in columns else []
    read = list(dict.fromkeys([*columns, *extra, *_ENUMS, _FILE]))
    # files of one version in a row are read together (threaded), in their order
    parts = [
        upgrade(_known(_scan(source, list(fragments), read, filter_)), since).select(list(columns))
        for since, fragments in groupby(
            source.get_fragments(), key=lambda f: version(f.physical_schema, f.path)
        )
    ]
    if not parts:
        return DATASET_SCHEMA.empty_table().select(list(columns))
    return pa.concat_tables(parts)


def _pandas_type(arrow: pa.DataType) -> Any:
    if pa.types.is_integer(arrow):
        return pd.Int64Dtype() if arrow.bit_width == 64 else pd.Int32Dtype()
    if pa.types.is_boolean(arrow):
        return pd.BooleanDtype()
    if pa.types.is_string(arrow):
        return pd.StringDtype()
    return None


def _pandas(table: pa.Table) -> pd.DataFrame:
    """Rows as a DataFrame with the canonical dtypes: integers and booleans are pandas'
    nullable types (a failed point has no time, a CPU row no GPU), strings are `string`,
    timestamps UTC, lists and the NCCL map Python objects."""
    rows: pd.DataFrame = table.to_pandas(types_mapper=_pandas_type)
    return rows


def frame(rows: pd.DataFrame | Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows made in memory as `load` would give them back: upgraded, with the canonical
    dtypes. Mappings (as the writer takes them) give every column of the schema; a DataFrame
    keeps its columns (each of the schema's, as `load` gives them) and loses its index."""
    if not isinstance(rows, pd.DataFrame):
        return _pandas(canonical(rows))
    schema = pa.schema([DATASET_SCHEMA.field(column) for column in rows.columns])
    table = pa.Table.from_pandas(rows, schema=schema, preserve_index=False)
    return _pandas(upgrade(table, UNVERSIONED))


def load(
    root: str | os.PathLike[str],
    run_id: str | Iterable[str] | None = None,
    columns: Sequence[str] | None = None,
    filters: ds.Expression | Sequence[Any] | None = None,
) -> pd.DataFrame:
    """Every row under `root` (or one run's, or several runs') as a DataFrame with the
    canonical dtypes (`frame`'s); `columns`: only these (BadInput for one the rows lack);
    `filters`: only the rows they match, pyarrow's (an expression, or the tuples
    `pyarrow.parquet.read_table` takes), judged on the rows as upgraded to today's schema."""
    unknown = [c for c in columns or () if c not in DATASET_SCHEMA.names]
    if unknown:
        raise BadInput(f"no column {', '.join(map(repr, unknown))} in the rows")
    filter_ = None
    if isinstance(run_id, str):
        filter_ = ds.field("run_id") == run_id
    elif run_id is not None:
        filter_ = ds.field("run_id").isin(list(run_id))
    # a filter reads every column: what it names may be one an older file's upgrade makes
    wanted = list(columns) if columns and filters is None else DATASET_SCHEMA.names
    table = read(root, wanted, filter_)
    if filters is not None:
        table = _matching(table, filters).select(list(columns or DATASET_SCHEMA.names))
    rows = _pandas(table)
    asked = None if run_id is None else {run_id} if isinstance(run_id, str) else set(run_id)
    if "run_id" in rows:  # a live run before its first batch is running, not absent
        for live in sorted(live_runs(root) - set(rows["run_id"].dropna())):
            if asked is None or live in asked:
                warnings.warn(
                    f"run {live} is running: none of its rows are in a batch in {root} yet",
                    SweeperWarning,
                    stacklevel=2,
                )
    return rows


def _matching(table: pa.Table, filters: ds.Expression | Sequence[Any]) -> pa.Table:
    """The rows `filters` match; BadInput, in Arrow's words, for one it cannot judge."""
    try:
        where = filters if isinstance(filters, ds.Expression) else pq.filters_to_expression(filters)
        return table.filter(where)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise BadInput(f"filters {filters!r}: {said}") from exc


# What `per_run` reads of each row.
RUN_ROWS = (*RUN_COLUMNS, "status")


def runs(root: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per run under `root`, oldest first (`per_run`); only those columns of a large
    dataset are read."""
    return per_run(read(root, RUN_ROWS))


def per_run(table: pa.Table) -> pd.DataFrame:
    """One row per run of `table` (its RUN_ROWS), oldest first: the RUN_COLUMNS, its points,
    and how many of them failed (a skipped point could not run there, and did not fail).
    Grouped in Arrow."""
    done = pa.array([Status.OK.value, Status.SKIPPED.value])
    failed = pc.invert(pc.fill_null(pc.is_in(table["status"], value_set=done), False))
    table = table.append_column("failed", pc.cast(failed, pa.int64()))
    grouped = table.group_by(list(RUN_COLUMNS), use_threads=False).aggregate(
        [("status", "count", pc.CountOptions(mode="all")), ("failed", "sum")]
    )
    grouped = grouped.rename_columns([*RUN_COLUMNS, "points", "failed"])
    ordered: pd.DataFrame = _pandas(grouped).sort_values(
        ["run_started_at", "run_id"], ignore_index=True
    )
    return ordered


def run_ids(root: Path) -> list[str]:
    """The runs of a results directory, oldest first (by start time)."""
    if not Path(root).is_dir():
        raise BadInput(f"no results directory at {root}", hint="give it with --results DIR")
    table = read(root, ["run_id", "run_started_at"])
    if not table.num_rows:
        return []
    started = table.to_pandas().drop_duplicates("run_id")
    return [str(r) for r in started.sort_values(["run_started_at", "run_id"])["run_id"]]


def resolve(root: Path, run_id: str) -> str:
    """The run id that `run_id` names: itself when the directory has it, or the newest run
    for `latest`; BadInput otherwise."""
    known = run_ids(root)
    if run_id != LATEST:
        run_name(run_id)
    if run_id == LATEST:
        if not known:
            raise BadInput(f"no runs in {root}")
        return known[-1]
    if run_id not in known and run_id in live_runs(root):  # before its first batch
        raise BadInput(
            f"run {run_id} is running: none of its rows are in a batch in {root} yet",
            hint="sweeper history counts them; once it ends, its rows are all there",
        )
    if run_id not in known:
        recent = ", ".join(known[-3:]) or "none"
        raise BadInput(f"no run {run_id!r} in {root}", hint=f"latest runs there: {recent}")
    return run_id


def run_rows(root: Path, run_id: str) -> pd.DataFrame:
    """One run's rows, in the order they were measured."""
    rows = load(root, run_id=run_id)
    ordered: pd.DataFrame = rows.sort_values("measured_at", kind="stable").reset_index(drop=True)
    return ordered
