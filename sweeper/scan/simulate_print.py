"""What `sweeper scan --simulate` shows: a simulation (`scan.simulate`) as lines or as one
JSON record, and its verdicts kept as a scan's summary under a results directory; how a scan's
long lines (verdicts, evidence, commands) fold at the terminal's width."""

from __future__ import annotations

import json
import shlex
import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sweeper.results import scans
from sweeper.results.files import new_run_id, require_directory
from sweeper.scan.document import Scanned, document
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Simulation, WaveRun, fleet_of
from sweeper.scan.verdict import named


def width() -> int:
    """The terminal's columns ($COLUMNS first), 80 where stdout is no terminal."""
    return shutil.get_terminal_size((80, 24)).columns


def folded(line: str, indent: int = 4, columns: int | None = None) -> str:
    """`line` folded by words at `columns` (the terminal's), each line after the first indented
    by `indent` spaces (at most half the width): its words unchanged, none cut, so a URL or a
    long name longer than a line stands alone on one."""
    columns = columns or width()
    hang = " " * min(indent, columns // 2)
    return textwrap.fill(
        line,
        columns,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    )


def folded_command(lead: str, command: str, indent: int = 4, columns: int | None = None) -> str:
    """`lead` and a shell command (as shlex.join wrote it) folded at `columns` between its
    words, each line but the last ended by ` \\`: pasted into a shell, it is one command."""
    columns = columns or width()
    hang = " " * min(indent, columns // 2)
    lines, line = [], lead.rstrip()
    for word in map(shlex.quote, shlex.split(command)):
        if line.strip() and len(line) + 1 + len(word) + 2 > columns:
            lines.append(f"{line} \\")
            line = hang + word
        else:
            line = f"{line} {word}" if line.strip() else f"{line}{word}"
    return "\n".join([*lines, line])


def keep(sim: Simulation, output: Path | None) -> str | None:
    """The simulation's verdicts as a scan's summary under `output` (its path), where given."""
    if output is None:
        return None
    require_directory(output, f"--results {output}")
    scanned = Scanned(
        run_id=new_run_id(datetime.now(timezone.utc)),
        fleet=fleet_of(sim.nodes, sim.gpus_per_node),
        strategy=Strategy.parse(sim.strategy, seed=sim.seed),
        outcomes=sim.outcomes,
        verdicts=sim.verdicts,
        waves=sim.waves,
        rows=0,
        seconds=sim.seconds,
        findings=sim.findings,
    )
    return str(scans.save(output, scanned.run_id, document(scanned)))


def show(sim: Simulation, as_json: bool, kept: str | None) -> None:
    """The simulation, and where its summary was kept (`kept`), on stdout."""
    if as_json:
        print(json.dumps({**record(sim), "summary": kept}, indent=1, default=str))
        return
    print(
        folded(
            f"{sim.nodes} nodes x {sim.gpus_per_node} GPUs, {sim.strategy}, seed {sim.seed}: "
            f"{len(sim.waves)} waves, {sim.groups} groups, {sim.seconds / 60:.1f} min "
            f"(actor start {sim.start_s:.0f} s)"
        )
    )
    for stretch in stretches(sim.waves):
        w, seconds = stretch[0], sum(run.seconds for run in stretch)
        at = f"wave {w.index}" if len(stretch) == 1 else f"waves {w.index}-{stretch[-1].index}"
        print(
            f"  {at:<14} {w.stage:<12} {w.groups:>6} groups of up to {w.largest:>3} "
            f"nodes {seconds:6.1f} s"
        )
    planted = ", ".join(f"{p.fault} {'-'.join(p.nodes)}" for p in sim.planted)
    print(folded(f"planted: {planted or 'nothing'}"))
    for f in sim.findings:  # the fleet as a whole, before any verdict
        print(folded(f"  {f.line}", indent=4))
    for v in named(sim.verdicts):
        print(folded(f"  {v.health:<12} {v.evidence}", indent=15))  # under the evidence
    print(f"precision {sim.score.precision:.2f}, recall {sim.score.recall:.2f}")
    if kept:
        print(f"summary: {kept}")  # a path, unfolded: on a line of its own it is no shorter


def stretches(waves: Sequence[WaveRun]) -> list[list[WaveRun]]:
    """Waves in runs of one stage and shape (as many groups, as large, none hung), each run
    a line: 1024 nodes' 1023 waves of pairs are one."""
    out: list[list[WaveRun]] = []
    for w in waves:
        if out and _shape(out[-1][-1]) == _shape(w):
            out[-1].append(w)
        else:
            out.append([w])
    return out


def _shape(w: WaveRun) -> tuple[str, int, int, bool]:
    return str(w.stage), w.groups, w.largest, w.hung


def record(sim: Simulation) -> dict[str, Any]:
    """The simulation as `--format json` prints it."""
    return {
        "nodes": sim.nodes,
        "gpus_per_node": sim.gpus_per_node,
        "strategy": sim.strategy,
        "seed": sim.seed,
        "planted": [asdict(p) for p in sim.planted],
        "stages": sim.stages(),
        "waves": len(sim.waves),
        "groups": sim.groups,
        "minutes": round(sim.seconds / 60, 2),
        "precision": round(sim.score.precision, 3),
        "recall": round(sim.score.recall, 3),
        "healthy_condemned": list(sim.score.healthy_condemned),
        "findings": [asdict(f) for f in sim.findings],
        "verdicts": [
            {"name": v.name, "health": str(v.health), "evidence": v.evidence}
            for v in named(sim.verdicts)
        ],
    }
