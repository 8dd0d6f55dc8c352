"""What `sweeper run` shows while it works: a rich progress bar with ETA on a terminal, one
plain line per point otherwise, or JSON lines (`--format json`) for machines."""

from __future__ import annotations

import io
import json
import os
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict
from datetime import datetime
from functools import partial
from typing import Any, TextIO, cast

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Table
from rich.text import Text

from sweeper.analysis import OpSummary, label, probe_seconds, summarize, tier_name
from sweeper.analysis.summary import figure
from sweeper.driver.measurement import ResultRow
from sweeper.driver.observer import Finished, Started
from sweeper.driver.sweep import Survey
from sweeper.planning.estimate import duration
from sweeper.planning.sizes import format_size
from sweeper.results.writer import columns
from sweeper.scan.fleet import ScanWave
from sweeper.wire import Status


def _opt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def counted(count: int, noun: str) -> str:
    """`1 operation`, `2 operations`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _groups(run: Started) -> str:
    if len(run.groups) <= 3:
        return ", ".join(f"{tier_name(g.tier, g.variant)} x{g.world_size}" for g in run.groups)
    counts = Counter(tier_name(g.tier, g.variant) for g in run.groups)
    return f"{len(run.groups)} groups (" + ", ".join(f"{t} {n}" for t, n in counts.items()) + ")"


# Operations the run's first lines name; more are counted (the closing table names each)
_NAMED_OPS = 4
_WIDTH = 80  # the terminal the first lines are made to read in


def _intro(run: Started) -> str:
    """The run's first lines, each to read at 80 columns: where it runs and writes, then
    what it measures (where one line named all 18 operations and wrapped over five)."""
    low, high = run.sizes
    top = format_size(high) if high else "the largest that fits (auto)"
    took = "" if run.estimated_s is None else f" in about {duration(run.estimated_s)}"
    ops = counted(len(run.ops), "operation")
    if len(run.ops) <= _NAMED_OPS:
        ops += f" ({', '.join(run.ops)})"
    what = f"{ops} x {', '.join(run.dtypes)}, {format_size(low)} to {top}"
    much = f"about {run.n_points} points{took}"
    said = f"{what}: {much}" if len(what) + 2 + len(much) <= _WIDTH else f"{what}\n{much}"
    return f"sweeper {run.run_id}: {run.backend} on {_groups(run)} -> {run.output}/\n{said}"


def _name(row: ResultRow) -> str:
    """A point's group and operation, and which way it went where that varies by point."""
    name = f"{row.group_id} {label(row.op, row.algorithm)}"
    if row.src_rank is not None and row.algorithm != "bi":
        name += f" {row.src_rank}->{row.dst_rank}"  # which way, by rank
    elif row.concurrent and len(row.gpu_uuids) == 1:
        name += f" {row.gpu_uuids[0][:12]}"  # one GPU's row of copies made at once
    return name


def _line(row: ResultRow) -> str:
    """A point as nccl-tests prints one, after its group, plus its status: one line of about
    120 columns, for a terminal that wide."""
    name = _name(row)
    if row.status != Status.OK:
        return f"{name:>40} {row.dtype:>9} {row.size_bytes:>12}  {row.status}: {row.error}"
    return (
        f"{name:>40} {row.dtype:>9} {row.size_bytes:>12} {row.time_us:>11.2f} us "
        f"{row.algbw_gb_per_s:>8.2f} {row.busbw_gb_per_s:>8.2f} GB/s  "
        f"wrong {_opt(row.n_wrong, 'd')}  {row.engine} {row.launch}"
    )


def _figures(row: ResultRow, width: int) -> str:
    """A point's figures and status without its name, in under 80 columns (its error folded
    at `width`, hanging beneath it), for the lines beneath its name on a narrower terminal."""
    head = f"  {row.dtype:>8} {row.size_bytes:>11}"
    if row.status != Status.OK:
        return textwrap.fill(
            f"{head}  {row.status}: {row.error}",
            width,
            subsequent_indent=" " * 4,
            break_long_words=False,
            break_on_hyphens=False,
        )
    return (
        f"{head} {row.time_us:>10.2f} us {row.algbw_gb_per_s:>7.2f} "
        f"{row.busbw_gb_per_s:>7.2f} GB/s wrong {_opt(row.n_wrong, 'd')} {row.engine} {row.launch}"
    )


def _summaries(run: Finished) -> tuple[list[OpSummary], float]:
    """The closing table's rows and the time spent probing, from the analysis' summaries."""
    return summarize(run.rows), probe_seconds(run.rows)


TEXT_COLUMNS = ("tier", "operation", "engine", "launch")  # the summary table's; the rest numbers


# The summary's columns that every row may share, said once in its title then: their fields
SHARED = {"tier": "tier", "ranks": "world_size", "engine": "engine", "launch": "launch"}


def summary_table(run: Finished, summaries: Sequence[OpSummary]) -> Table:
    """Peak busbw and smallest latency per operation, the sweep's closing table: the
    operations that ran (one that could not run here is the line before it), and only the
    columns that tell them apart (a tier, rank count, engine or launch mode every row shares
    is said in the title, a failed or skipped count that is 0 everywhere is left out), so
    that it reads at 80 columns without an operation's name folded."""
    ran = [s for s in summaries if s.skipped < s.points]
    shared = {
        name: values.pop()
        for name, field in SHARED.items()
        if len(values := {getattr(s, field) for s in ran}) == 1
    }
    if "tier" in shared and "ranks" in shared:  # cpu x2, as the run's first line says it
        shared["tier"] = f"{shared['tier']} x{shared['ranks']}"
    else:
        shared.pop("ranks", None)  # a count with no tier beside it: its column
    said = ", ".join(str(value) for name, value in shared.items() if name != "ranks")
    title = f"{run.run_id}: {counted(len(run.rows), 'point')} in {run.elapsed_s:.0f} s"
    title += f" ({said})" if said else ""
    table = Table(
        title=title,
        min_width=len(title),  # a narrow table's title on one line, where the width allows
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),  # the box's blank divider is the one space between columns
    )
    cells: dict[str, Callable[[OpSummary], str]] = {
        "tier": lambda s: s.tier,
        "ranks": lambda s: str(s.world_size),
        "operation": lambda s: s.label,
        "engine": lambda s: s.engine,
        "launch": lambda s: s.launch,
        "points": lambda s: str(s.points),
        "failed": lambda s: str(s.failed),
        "skipped": lambda s: str(s.skipped),
        # "peak busbw" on one line: what a reader looks for
        "peak busbw\nGB/s": lambda s: figure(s.peak_busbw_gb_per_s),
        "at": lambda s: format_size(s.peak_size_bytes) if s.peak_size_bytes else "-",
        "min time\nus": lambda s: figure(s.min_time_us),
        "at ": lambda s: format_size(s.min_time_size_bytes) if s.min_time_size_bytes else "-",
    }
    left_out = set(shared) | {
        n for n in ("failed", "skipped") if not any(getattr(s, n) for s in ran)
    }
    shown = [name for name in cells if name not in left_out]
    for name in shown:
        text = name in TEXT_COLUMNS
        # the numbers never wrap or shorten; the text columns fold, never cut to "…"
        table.add_column(
            name.strip(), justify="left" if text else "right", no_wrap=not text, overflow="fold"
        )
    for s in ran:
        table.add_row(*(cells[name](s) for name in shown))
    return table


def not_run_here(skipped: dict[str, list[str]]) -> str | None:
    """The one line for what could not run on this machine: its operations, and why."""
    if not skipped:
        return None
    return "not run here: " + "; ".join(
        f"{', '.join(ops)} - {reason}" for reason, ops in skipped.items()
    )


# The time --max-size auto's probes took is said where it was this share of the run or more
PROBE_WORTH_SAYING = 0.05


class _Remaining(ProgressColumn):
    """Time left at the whole run's pace so far, not the last seconds' (rich's own column):
    a sweep's points grow with their size, so the last few seconds' pace swings the estimate
    from seconds to minutes as each operation's large sizes come and go. Where the run was
    estimated (the cost model's `estimated_s`), the time left starts as that estimate less
    the time gone and moves to the pace's figure as the points are done, in proportion: the
    first points, the small and quick ones, would make the pace promise too little. Between
    points it counts down from the estimate the last point gave, where the pace would make it
    grow."""

    def __init__(self, estimated_s: float | None = None) -> None:
        super().__init__()
        self.estimated_s = estimated_s
        self.estimated: tuple[float, float, float] | None = None  # points done, at, time left

    def render(self, task: Task) -> Text:
        if task.total is None or task.elapsed is None:
            return Text("-:--:--", style="progress.remaining")
        if not task.completed and self.estimated_s is None:
            return Text("-:--:--", style="progress.remaining")
        if self.estimated is None or self.estimated[0] != task.completed:
            done = task.completed / task.total if task.total else 1.0
            left = task.elapsed / task.completed * (task.total - task.completed) if done else 0.0
            if self.estimated_s is not None:
                prior = max(self.estimated_s - task.elapsed, 0.0)
                left = (1 - done) * prior + done * left
            self.estimated = (task.completed, task.elapsed, left)
        _, at, left = self.estimated
        left -= task.elapsed - at
        minutes, seconds = divmod(round(max(left, 0.0)), 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"{hours}:{minutes:02d}:{seconds:02d}", style="progress.remaining")


class _Lossy(io.TextIOBase):
    """Where a sweep's lines go (stdout). A reader that went away (`| head`), or a stdout that
    refuses them, costs the lines, never the sweep: they are a copy of what the results keep,
    and a run booked for hours is not thrown away because a pipe closed (SIGINT and SIGTERM
    still stop it). Said once, on stderr."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lost = False

    def write(self, text: str) -> int:
        self._tried(partial(self.out.write, text))
        return len(text)

    def flush(self) -> None:
        self._tried(self.out.flush)

    def isatty(self) -> bool:
        return self.out.isatty()

    def fileno(self) -> int:
        return self.out.fileno()

    def _tried(self, call: Callable[[], object]) -> None:
        if self.lost:
            return
        try:
            call()
        except OSError as exc:
            self.lost = True
            with suppress(OSError, ValueError):  # what is left in the buffer goes nowhere
                os.dup2(os.open(os.devnull, os.O_WRONLY), self.out.fileno())
            print(
                f"sweeper: warning: cannot write to stdout ({exc.strerror or exc}); the run "
                "goes on, its rows kept in the results",
                file=sys.stderr,
            )


class HumanConsole:
    """A progress bar with ETA over points on a terminal; a line per point elsewhere."""

    owns_stdout = False  # what else prints goes where it would

    def __init__(self, out: TextIO | None = None, points: bool = True) -> None:
        """`points`: False shows no point as it runs (sweeper.run(progress=False), in a
        notebook): the run's first line and its summary only."""
        lossy = cast(TextIO, _Lossy(out or sys.stdout))  # a text stream, not typeshed's IO
        # as wide as the terminal of any standard stream, or $COLUMNS; else 80
        self.console = Console(file=lossy, highlight=False)
        self.points = points
        self.live = self.console.is_terminal and points
        self.named: str | None = None  # the name above the last point's figures, if any
        self.progress: Progress | None = None
        self.task: Any = None
        self.skipped: dict[str, list[str]] = {}  # why -> the operations that could not run here

    def started(self, run: Started) -> None:
        self.console.print(_intro(run), soft_wrap=True)
        if run.note is not None:
            self.console.print(run.note, soft_wrap=True)
        if self.live:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                _Remaining(run.estimated_s),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task("sweeping", total=run.n_points)

    def point(self, row: ResultRow) -> None:
        said = row.status not in (Status.OK, Status.SKIPPED)  # a failure, as it comes
        if row.status == Status.SKIPPED:  # said once, as the run ends
            ops = self.skipped.setdefault(row.error or "not run here", [])
            if row.op not in ops:
                ops.append(row.op)
        if not self.points:
            return
        if self.progress is not None:
            what = f"{label(row.op, row.algorithm)} {format_size(row.size_bytes)}"
            self.progress.update(self.task, advance=1, description=f"{what:<40}")
            if said:
                self.progress.console.print(self._shown(row), soft_wrap=True, markup=False)
        elif row.status != Status.SKIPPED:
            self.console.print(self._shown(row), soft_wrap=True, markup=False)

    def _shown(self, row: ResultRow) -> str:
        """A point's line where the terminal is wide enough for it; else its figures, beneath
        its name where the point before had another."""
        width = self.console.width
        if len(line := _line(row)) <= width:
            self.named = None
            return line
        name = _name(row)
        said, self.named = self.named, name
        figures = _figures(row, width)
        return figures if said == name else f"{name}\n{figures}"

    def wave(self, wave: ScanWave) -> None:
        """A scan's wave, one line as it starts."""
        largest = max((len(g.nodes) for g in wave.groups), default=0)
        self.console.print(
            f"wave {wave.index:>3} {wave.stage:<12} {len(wave.groups):>5} groups of up to "
            f"{largest} nodes",
            soft_wrap=True,
        )

    def finished(self, run: Finished) -> None:
        self.close()
        summaries, probe = _summaries(run)
        if (line := not_run_here(self.skipped)) is not None:
            self.console.print(line, markup=False)  # folded at the width, by words
        self.console.print(summary_table(run, summaries))
        probe = probe if probe >= PROBE_WORTH_SAYING * run.elapsed_s else 0.0
        if probe:
            share = 100 * probe / max(run.elapsed_s, 1e-9)
            self.console.print(
                f"probing for --max-size auto: {probe:.1f} s ({share:.1f}% of the run)"
            )
        self.console.print(f"results: {run.output}/ (run_id {run.run_id})", soft_wrap=True)
        if run.report:
            self.console.print(f"report: {run.report}", soft_wrap=True)

    def close(self) -> None:
        """The progress bar gone and the cursor back, however the sweep ended."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


class JsonConsole:
    """One JSON object per line: a `started` event, a `point` per row, a `finished` summary."""

    owns_stdout = True  # its lines are a document: nothing else may print among them

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = _Lossy(out or sys.stdout)

    def _emit(self, event: str, **fields: Any) -> None:
        self.out.write(json.dumps({"event": event, **fields}, default=_default) + "\n")
        self.out.flush()

    def started(self, run: Started) -> None:
        fields = {k: v for k, v in asdict(run).items() if k != "groups"}
        tiers = Counter(tier_name(g.tier, g.variant) for g in run.groups)
        self._emit("started", **fields, n_groups=len(run.groups), groups_per_tier=tiers)

    def point(self, row: ResultRow) -> None:
        self._emit("point", **{k: v for k, v in columns(row).items() if k != "samples_us"})

    def wave(self, wave: ScanWave) -> None:
        """Nothing: a scan's JSON is its verdicts' document, once they are in."""

    def document(self, doc: dict[str, Any]) -> None:
        """A scan's verdicts' document, once they are in."""
        self.out.write(json.dumps(doc, indent=1, default=_default) + "\n")
        self.out.flush()

    def finished(self, run: Finished) -> None:
        summaries, probe = _summaries(run)
        self._emit(
            "finished",
            run_id=run.run_id,
            points=len(run.rows),
            failed=run.failed,
            elapsed_s=run.elapsed_s,
            output=str(run.output),
            report=str(run.report) if run.report else None,
            probe_s=probe,
            summary=[asdict(s) for s in summaries],
        )

    def close(self) -> None:
        """Nothing to restore: every line is already written."""


def _gib(size_bytes: int) -> str:
    return f"{size_bytes / 2**30:.1f} GiB"


def print_topology(survey: Survey, out: TextIO | None = None, most: int = 200) -> None:
    """Nodes and GPUs, each node's link matrix as nvidia-smi topo -m prints it, and the groups."""
    console = Console(file=out or sys.stdout, highlight=False, width=140)
    for position, node in enumerate(survey.nodes):
        what = (
            f"{len(node.gpus)} GPUs, driver {node.driver_version}"
            if node.nvml
            else f"no GPU: {node.reason}"
        )
        console.print(
            f"node n{position}: {node.host} (Ray node {node.node_id[:12]}), {what}, "
            f"{node.cpus} CPUs",
            soft_wrap=True,
        )
        for gpu in node.gpus:
            numa = "-" if gpu.numa_node is None else gpu.numa_node
            pcie = f"{gpu.pcie_gb_per_s:.0f}" if gpu.pcie_gb_per_s else "-"
            console.print(
                f"  GPU{gpu.index}  {gpu.name}  {gpu.pci_bus_id}  {_gib(gpu.memory_total_bytes)}"
                f"  NUMA {numa}  NVLink {gpu.nvlink_gb_per_s:.0f} GB/s  PCIe {pcie} GB/s",
                soft_wrap=True,
            )
        if node.gpus:
            matrix = Table(box=None, pad_edge=False)
            matrix.add_column("")
            for gpu in node.gpus:
                matrix.add_column(f"GPU{gpu.index}", justify="center")
            for gpu, row in zip(node.gpus, node.links, strict=True):
                matrix.add_row(f"  GPU{gpu.index}", *row)
            console.print(matrix)
    tiers = Counter(tier_name(g.tier, g.variant) for g in survey.groups)
    console.print(
        f"groups ({survey.backend}): {len(survey.groups)}"
        + "".join(f", {t} {n}" for t, n in tiers.items())
    )
    for group in survey.groups[:most]:
        console.print(
            f"  {survey.placement.group_id(group):<48} {group.world_size:>5} ranks", soft_wrap=True
        )
    if len(survey.groups) > most:
        console.print(f"  ... and {len(survey.groups) - most} more")


def topology_json(survey: Survey) -> dict[str, Any]:
    return {
        "backend": survey.backend,
        "nodes": [asdict(node) for node in survey.nodes],
        "groups": [
            {"group_id": survey.placement.group_id(g), **g._asdict(), "world_size": g.world_size}
            for g in survey.groups
        ],
    }


def print_json(value: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(value, default=_default, indent=1) + "\n")
