"""What `sweeper scan --simulate` shows: a simulation (`scan.simulate`) as lines or as one
JSON record, and its verdicts kept as a scan's summary under a results directory."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sweeper.results import scans
from sweeper.results.files import new_run_id, require_directory
from sweeper.scan.document import Scanned, document
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Simulation, fleet_of
from sweeper.scan.verdict import named


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
        f"{sim.nodes} nodes x {sim.gpus_per_node} GPUs, {sim.strategy}, seed {sim.seed}: "
        f"{len(sim.waves)} waves, {sim.groups} groups, {sim.seconds / 60:.1f} min "
        f"(actor start {sim.start_s:.0f} s)"
    )
    for w in sim.waves:
        print(
            f"  wave {w.index:>3} {w.stage:<12} {w.groups:>6} groups of up to {w.largest:>3} "
            f"nodes {w.seconds:6.1f} s"
        )
    planted = ", ".join(f"{p.fault} {'-'.join(p.nodes)}" for p in sim.planted)
    print(f"planted: {planted or 'nothing'}")
    for f in sim.findings:  # the fleet as a whole, before any verdict
        print(f"  {f.line}")
    for v in named(sim.verdicts):
        print(f"  {v.health:<12} {v.evidence}")
    print(f"precision {sim.score.precision:.2f}, recall {sim.score.recall:.2f}")
    if kept:
        print(f"summary: {kept}")


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
