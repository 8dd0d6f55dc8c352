"""One run on the driver, whatever gives its waves: `execute` connects, hands the `RunState` to its
source (the sweep's schedule in `sweep`, the scan's policy in `scan`), which measures, and
keeps what was measured and the record's end whatever stops it. A `RunState` is its id, plan,
journal, record, the rows it keeps, and the lines a stop or a lost head leaves; a stopped
run goes on under its own id (`Resume`, `resumed`)."""

from __future__ import annotations

import shlex
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pandas as pd
import ray
from ray._private import ray_constants

from sweeper._version import __version__
from sweeper.driver import busy, cluster, stops
from sweeper.driver.connection import Connection, HeadLost, connect
from sweeper.driver.measurement import ResultRow, RunColumns
from sweeper.driver.observer import Observer
from sweeper.driver.replay import PointKey, Recorded
from sweeper.driver.stops import Stopped
from sweeper.errors import BadInput, InfrastructureError
from sweeper.ops.registry import load_plugins, names
from sweeper.planning import request
from sweeper.planning.profile import build_spec
from sweeper.planning.spec import ClusterSection, SweepSpec
from sweeper.results import records
from sweeper.results.files import NEW_RUN_ID, new_run_id, require_directory
from sweeper.results.journal import recover, refuse_live
from sweeper.results.load import files, load
from sweeper.results.schema import RUN_POINT
from sweeper.results.writer import ResultWriter
from sweeper.topology import Node
from sweeper.wire import Backend, Status

SCAN_KEY = "scan"  # a scan's record keeps its settings under this key of its options
# what may change between a run and its resumption: where it is, not what it measures
RESUME_MAY_SET = frozenset({"results", "address", "connect_timeout"})


def choose_backend(asked: Backend | None, gpus: int) -> Backend:
    if asked is None:
        return Backend.NCCL if gpus else Backend.GLOO
    if asked is Backend.NCCL and not gpus:
        raise InfrastructureError("--backend nccl: the Ray cluster has no GPUs")
    return asked


def connected_to(asked: ClusterSection) -> Connection:
    return connect(asked.address, asked.cpu_ranks, asked.connect_timeout)


@contextmanager
def _connected(asked: ClusterSection) -> Iterator[Connection]:
    """A connection that a signal cannot leave half made: a first one while Ray starts stops
    the run once it has, and the embedded Ray is shut down whatever stopped the run.

    Ray's crash handlers stay off in the driver: ray.shutdown takes them out with SIGTERM's,
    which leaves SIGTERM to kill the driver mid-cleanup. And ray.init gives SIGTERM a handler
    of its own while it runs, which exits (SystemExit); that is the stop it was meant to be."""
    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    connection: Connection | None = None
    try:
        with stops.held():
            connection = connected_to(asked)
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        ray.shutdown()
        stops.end_descendants()  # what ray.init had started and not yet recorded
        raise stops.taken(signal.SIGTERM) from None
    except Stopped:
        if connection is not None:
            connection.close()
        raise
    try:
        yield connection
    finally:
        connection.close()


RowKey = tuple[Any, ...]


def row_key(row: ResultRow | Mapping[str, Any]) -> RowKey:
    """What makes a row one measurement of its run (each engine and launch mode of a point,
    each direction of a copy, each GPU of copies made at once, each wave that measured it: a
    scan tests a group again): of a row made now, or of one read back."""
    value = row.get if isinstance(row, Mapping) else partial(getattr, row)

    return tuple(_plain(value(column)) for column in (*RUN_POINT, "wave"))


def _plain(value: Any) -> Any:
    """A null as None, whichever null it was read back as (NA, NaN)."""
    return None if value is None or (not isinstance(value, str) and pd.isna(value)) else value


@dataclass(frozen=True)
class Resume:
    """An interrupted or killed run, to go on with: its id and start, the points it has rows
    for (replayed by their series, not measured again), and those rows' keys."""

    run_id: str
    started_at: datetime
    recorded: Mapping[PointKey, Recorded]
    rows: frozenset[RowKey]
    run_kind: str  # the run's own (a nightly run resumed stays one)
    command: str  # the command line that started it


def stopped(output: Path, run_id: str, command: str = "run") -> records.RunRecord:
    """The record of a run to go on with (`sweeper COMMAND --resume`), its journal's rows
    recovered; BadInput where there is no such run under `output`, it is complete, another
    command's (a scan, a sweep), or a live driver is writing it."""
    if not NEW_RUN_ID.fullmatch(run_id):
        raise BadInput(f"--resume {run_id!r}: not a run id (such as 20261122T013412Z-33627a)")
    started = records.load(output, run_id)
    if started is None:
        raise BadInput(f"--resume {run_id}: no such run in {output}")
    if started.ended == "complete":
        nightly = shlex.split(started.command)[1:2] == ["nightly"]  # judged, or to judge
        judge = f"sweeper nightly --judge {run_id} --results {output}" if nightly else None
        raise BadInput(
            f"--resume {run_id}: the run is complete",
            hint=judge and f"a nightly run its driver never judged is judged with: {judge}",
        )
    own = "scan" if SCAN_KEY in started.options else "run"
    if own != command:
        what = "a scan" if own == "scan" else "a sweep"
        raise BadInput(f"--resume {run_id}: {what}; resume it with sweeper {own} --resume")
    refuse_live(output, run_id)
    recover(output, run_id)  # the rows a killed driver left in its journal
    return started


def where_stopped(
    output: Path, run_id: str, command: str = "run"
) -> tuple[records.RunRecord, Resume]:
    """The record of a run to go on with (`stopped`'s refusals) and where it stopped, from
    its rows read back (after the record's plugins: a plugin's rows name its operation)."""
    started = stopped(output, run_id, command)
    load_plugins(started.options.get("plugins") or ())
    frame = load(output, run_id) if files(output) else None
    rows: list[dict[str, Any]] = [] if frame is None else frame.to_dict("records")  # type: ignore[assignment]
    return started, resume_of(started, rows)


T = TypeVar("T")


def resumed(
    run_id: str,
    given: Mapping[str, Any],
    whose: str,
    read: Callable[[Path, str], tuple[dict[str, Any], T]],
) -> tuple[SweepSpec, T]:
    """The spec a run was started with, where it is now, and where it stopped, as `read`
    finds them in the results directory. `given`: the command's options (None where not
    given), of which only where the run is may change; else BadInput, which says that a
    resume runs with `whose` (such as the run's own options)."""
    extra = sorted(k for k, v in given.items() if v is not None and k not in RESUME_MAY_SET)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise BadInput(f"--resume runs with {whose}; drop {flags}")
    output = given["results"] or SweepSpec.model_fields["results"].default
    require_directory(output, f"--results {output}")  # a file there is no results directory
    options, where = read(output, run_id)
    now = {k: v for k, v in given.items() if k in RESUME_MAY_SET and v is not None}
    return build_spec(None, **{**options, **now, "results": output}), where


def recorded(rows: Iterable[Mapping[str, Any]]) -> dict[PointKey, Recorded]:
    """Each point these rows (read back) measured, as a resumed series replays it."""
    name_of = names()
    out: dict[PointKey, Recorded] = {}
    for row in rows:
        count = int(row["count_elems"])
        limit, busbw = row["max_size_bytes"], row["busbw_gb_per_s"]
        out[(row["group_id"], name_of[(row["op"], row["algorithm"])], row["dtype"], count)] = (
            Recorded(
                # an oom row is taken for a refused allocation: one at run time ends a probe
                # the same way, bar a bisection by allocation alone
                Status(row["status"]),
                row["status"] != Status.OOM,
                None if pd.isna(limit) else int(limit),
                None if pd.isna(busbw) else float(busbw),
            )
        )
    return out


def resume_of(started: records.RunRecord, rows: Sequence[Mapping[str, Any]]) -> Resume:
    """Where the run of this record stopped, from its rows read back."""
    if rows:
        begun = min(row["run_started_at"] for row in rows)
        begun = begun.to_pydatetime() if isinstance(begun, pd.Timestamp) else begun
    else:  # the id is the start, to the second
        begun = datetime.strptime(started.run_id[:16], "%Y%m%dT%H%M%SZ").replace(
            tzinfo=timezone.utc
        )
    keys = frozenset(row_key(row) for row in rows)
    kind = str(rows[0]["run_kind"]) if rows else _kind_of(started.command)
    return Resume(started.run_id, begun, recorded(rows), keys, kind, started.command)


def _kind_of(command: str) -> str:
    """A run's kind by the command that started it, where it left no row to say."""
    words = shlex.split(command)
    return words[1] if words[1:2] in (["nightly"], ["scan"]) else "run"


class Source(Protocol):
    """What gives a run its waves (the sweep's schedule, the scan's policy): `measure` opens
    the run's journal (`RunState.begin`), runs its waves on an `Executor` and hands each point's
    rows to `RunState.keep`."""

    def measure(self) -> None: ...


class RunState:
    """One run's state on the driver, from a connected cluster to its last row, whatever its
    source: its id and start (a resumed run's own), the plan, the rows and their journal, the
    run record before the first row and at the end, the line a signal or a lost head leaves.
    `command` resumes it (sweeper COMMAND --resume RUN); `options` join the plan's in its
    record (a scan's settings)."""

    def __init__(
        self,
        asked: SweepSpec,
        observer: Observer,
        run_kind: str,
        connection: Connection,
        resume: Resume | None = None,
        *,
        command: str = "run",
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.observer = observer
        self.run_kind = resume.run_kind if resume else run_kind
        self.connection = connection
        self.resume = resume
        self.command = command
        self.options = dict(options or {})
        self.started_at = resume.started_at if resume else datetime.now(timezone.utc)
        self.run_id = resume.run_id if resume else new_run_id(self.started_at)
        backend = choose_backend(asked.requested_backend, connection.gpus())
        self.plan = request.resolve(asked, backend)
        self.nodes: list[Node] = []  # the run's nodes, as its record keeps them
        self.rows: list[ResultRow] = []
        self.writer: ResultWriter | None = None
        self.ended: str | None = None  # what the run record says, once it says how it ended
        self.reported = False  # its report written
        self._shared: RunColumns | None = None
        self.others: busy.CpuWatch | None = None  # others' runnable threads from its connecting on
        if connection.watch is not None:
            connection.watch.epitaph = self.lost

    def record(self, ended: str | None = None) -> records.RunRecord:
        options = {**self.plan.options, **self.options}
        return records.RunRecord.of(self.run_id, options, tuple(self.nodes), ended)

    def begin(self) -> None:
        """The journal opened and the run recorded: before the first row, a killed run is
        told (and resumed) by a record with no end. Others' threads are looked at no longer:
        what a scan measures needs no thread of its driver reading /proc."""
        if self.others is not None:
            self.others.stop()
        output = self.plan.spec.results
        self.writer = ResultWriter(output, self.run_id, self.started_at.strftime("%Y-%m-%d"))
        records.save(output, self.record())

    def keep(self, rows: Sequence[ResultRow]) -> None:
        """One point's rows (a scan's: one wave's): on disk (journaled, one fsync) before
        anyone is told of them. Resuming, rows the run already has are not written again (a
        skipped series' rows, a copy or a scan's wave measured again)."""
        assert self.writer is not None
        if self.resume is not None:
            rows = [row for row in rows if row_key(row) not in self.resume.rows]
        self.writer.extend(rows)
        self.rows.extend(rows)
        for row in rows:
            self.observer.point(row)

    def lost(self, address: str) -> str:
        """The line of a run whose head was lost: what was kept, and how to go on."""
        if self.writer is None:
            return f"lost the Ray head at {address} before a run started; nothing was written"
        resume = stops.resume_command(self.run_id, self.plan.spec.results, self.command)
        return (
            f"lost the Ray head at {address} mid-run: {len(self.rows)} rows written, "
            f"resume with: {resume}"
        )

    def told(self, stop: Stopped) -> None:
        """A signal's Stopped learns what it stopped, for its line: nothing written yet, a run
        to resume, or a complete run (whose report, if it was asked for, is not written)."""
        if self.writer is None:
            return
        outputs = self.plan.spec
        stop.run_id, stop.output, stop.command = self.run_id, outputs.results, self.command
        stop.complete = self.ended == "complete"
        stop.unreported = stop.complete and outputs.report and bool(self.rows) and not self.reported

    def metadata(self, ranks: cluster.RankSet) -> RunColumns:
        """The columns every row of this run shares, gathered once: what it is, where, and the
        software its ranks run (asked of one of them)."""
        if self._shared is None:
            versions = ranks.versions()
            self._shared = RunColumns(
                run_id=self.run_id,
                run_started_at=self.started_at,
                run_kind=self.run_kind,
                cluster_name=self.plan.spec.cluster_name or self.connection.head_host(),
                sweeper_version=__version__,
                ray_version=ray.__version__,
                torch_version=versions.torch,
                nccl_version=versions.nccl,
                cuda_version=versions.cuda,
                driver_version=versions.driver,
                gpu_model=versions.gpu_model,
                backend=self.plan.backend,
            )
        return self._shared


S = TypeVar("S", bound=Source)


def execute(
    asked: SweepSpec,
    observer: Observer,
    source: Callable[[RunState], S],
    *,
    run_kind: str,
    resume: Resume | None = None,
    command: str = "run",
    options: Mapping[str, Any] | None = None,
) -> tuple[RunState, S, float]:
    """A run from connecting (to the cluster `asked`) to its record's end, whatever its
    source of waves: `source` gives them on the `RunState`, which `run_kind`, `resume`, `command`
    and `options` make. Whatever stops it (an error, a signal, a lost head), what was measured
    is kept and the record says how it ended; a signal's Stopped names the run and how to go
    on; a lost head is one line and exit 3. The run, its source, and the seconds from
    connecting to its end."""
    clock = time.monotonic()
    others = busy.CpuWatch().start()  # how busy others keep the CPUs (planning.costs.crowded)
    run: RunState | None = None
    try:
        with _connected(asked) as connection:
            run = RunState(
                asked, observer, run_kind, connection, resume, command=command, options=options
            )
            run.others = others
            stops.tell(run.told)  # what a signal stops, from now until the process ends
            try:
                made = source(run)
                made.measure()
            except BaseException:
                _end(run, "interrupted")
                raise
            _end(run, "complete")
    except Stopped as stop:
        if run is not None:  # one raised as such, not a signal's, learns its run here
            run.told(stop)
        raise
    except HeadLost as lost:
        if run is None:
            raise
        raise InfrastructureError(run.lost(lost.address)) from None
    return run, made, time.monotonic() - clock


def _end(run: RunState, ended: str) -> None:
    """What was measured is kept, and the run record says how the run ended, whatever stopped
    it. A first signal meanwhile is raised after it: the record then tells the truth."""
    if run.writer is None:
        return  # stopped before the first row could be written
    with stops.held():
        try:
            run.writer.flush()
        finally:
            try:
                records.save(run.plan.spec.results, run.record(ended))
                run.ended = ended
            finally:
                run.writer.close()
