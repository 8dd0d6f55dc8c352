"""What `sweeper run` shows while it works: a rich progress bar with ETA on a terminal, one
plain line per point otherwise, or JSON lines (`--format json`) for machines."""

from __future__ import annotations

import io
import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict
from datetime import datetime
from functools import partial
from typing import Any, TextIO, cast

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from sweeper.analysis import OpSummary, label, probe_seconds, summarize, tier_name
from sweeper.driver.measurement import ResultRow
from sweeper.driver.observer import Finished, Started
from sweeper.driver.sweep import Survey
from sweeper.planning.sizes import format_size
from sweeper.results.writer import columns
from sweeper.scan.fleet import Wave
from sweeper.wire import Status


def _opt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _groups(run: Started) -> str:
    if len(run.groups) <= 3:
        return ", ".join(f"{tier_name(g.tier, g.variant)} x{g.world_size}" for g in run.groups)
    counts = Counter(tier_name(g.tier, g.variant) for g in run.groups)
    return f"{len(run.groups)} groups (" + ", ".join(f"{t} {n}" for t, n in counts.items()) + ")"


def _intro(run: Started) -> str:
    groups = _groups(run)
    low, high = run.sizes
    top = format_size(high) if high else "the largest that fits (auto)"
    return (
        f"sweeper {run.run_id}: {run.backend} on {groups}; {len(run.ops)} operations "
        f"({', '.join(run.ops)}) x {', '.join(run.dtypes)}, {format_size(low)} to "
        f"{top}: about {run.n_points} points -> {run.output}/"
    )


def _line(row: ResultRow) -> str:
    """A point as nccl-tests prints one, after its group, plus its status."""
    name = f"{row.group_id} {label(row.op, row.algorithm)}"
    if row.src_rank is not None and row.algorithm != "bi":
        name += f" {row.src_rank}->{row.dst_rank}"  # which way, by rank
    elif row.concurrent and len(row.gpu_uuids) == 1:
        name += f" {row.gpu_uuids[0][:12]}"  # one GPU's row of copies made at once
    if row.status != Status.OK:
        return f"{name:>40} {row.dtype:>9} {row.size_bytes:>12}  {row.status}: {row.error}"
    return (
        f"{name:>40} {row.dtype:>9} {row.size_bytes:>12} {row.time_us:>11.2f} us "
        f"{row.algbw_gb_per_s:>8.2f} {row.busbw_gb_per_s:>8.2f} GB/s  "
        f"wrong {_opt(row.n_wrong, 'd')}  {row.engine} {row.launch}"
    )


def _summaries(run: Finished) -> tuple[list[OpSummary], float]:
    """The closing table's rows and the time spent probing, from the analysis' summaries."""
    return summarize(run.rows), probe_seconds(run.rows)


TEXT_COLUMNS = ("tier", "operation", "engine", "launch")  # the summary table's; the rest numbers


def summary_table(run: Finished, summaries: Sequence[OpSummary]) -> Table:
    """Peak busbw and smallest latency per operation, the sweep's closing table."""
    # readable at 80 columns: one space between columns, and the numbers never wrap or
    # shorten (no_wrap: the text columns give up the width, folded, never cut to "…")
    table = Table(
        title=f"{run.run_id}: {len(run.rows)} points in {run.elapsed_s:.0f} s",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),  # the box's blank divider is the one space between columns
    )
    columns = (
        "tier",
        "ranks",
        "operation",
        "engine",
        "launch",
        "points",
        "failed",
        "skipped",
        "peak busbw\nGB/s",  # "peak busbw" on one line: what a reader looks for
        "at",
        "min time\nus",
        "at",
    )
    for column in columns:
        text = column in TEXT_COLUMNS
        table.add_column(
            column,
            justify="left" if text else "right",
            no_wrap=not text,
            overflow="fold",
        )
    for s in summaries:
        table.add_row(
            s.tier,
            str(s.world_size),
            s.label,
            s.engine,
            s.launch,
            str(s.points),
            str(s.failed),
            str(s.skipped),
            _opt(s.peak_busbw_gb_per_s, ".2f"),
            format_size(s.peak_size_bytes) if s.peak_size_bytes else "-",
            _opt(s.min_time_us, ".1f"),
            format_size(s.min_time_size_bytes) if s.min_time_size_bytes else "-",
        )
    return table


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
        self.console = Console(file=lossy, highlight=False)
        self.points = points
        self.live = self.console.is_terminal and points
        if not self.console.is_terminal:  # a log or a pipe: wide enough for the closing table
            self.console.width = max(self.console.width, 140)
        self.progress: Progress | None = None
        self.task: Any = None

    def started(self, run: Started) -> None:
        self.console.print(_intro(run), soft_wrap=True)
        if run.note is not None:
            self.console.print(run.note, soft_wrap=True)
        if self.live:
            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task("sweeping", total=run.n_points)

    def point(self, row: ResultRow) -> None:
        if not self.points:
            return
        if self.progress is not None:
            what = f"{label(row.op, row.algorithm)} {format_size(row.size_bytes)}"
            self.progress.update(self.task, advance=1, description=f"{what:<40}")
            if row.status != Status.OK:
                self.progress.console.print(_line(row), soft_wrap=True, markup=False)
        else:
            self.console.print(_line(row), soft_wrap=True, markup=False)

    def wave(self, wave: Wave) -> None:
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
        self.console.print(summary_table(run, summaries))
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

    def wave(self, wave: Wave) -> None:
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
            else (f"no NVML ({node.reason})")
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
