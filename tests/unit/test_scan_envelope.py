"""benchmarks/scan_envelope.py's pure parts: the grid it runs and the detection limit it
prints (the smallest slowdown from which every larger one of the grid is found)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))  # scripts, not a package

import scan_envelope
from scan_envelope import SLOWDOWNS, Cell, Pooled, Scanned, cells, limits

from sweeper.scan.simulate import RACK_NODES


def pooled(name: str, slowdown: float, named: int, planted: int = 100) -> Pooled:
    scan = Scanned(
        planted=planted,
        named=named,
        condemned=named,
        true_positives=named,
        unconfirmed_nodes=0,
        minutes=2.0,
    )
    return Pooled(Cell("severity", name, slowdown=slowdown), (scan,), 1.0)


def test_the_detection_limit_is_where_every_larger_slowdown_is_found_and_a_miss_says_where() -> (
    None
):
    found = {0.1: 40, 0.15: 100, 0.2: 98, 0.3: 100, 0.5: 100}  # 15% found, 20% not
    table = limits([pooled("slow-node", s, found[s]) for s in SLOWDOWNS])
    (row,) = [line for line in table if line.startswith("| slow-node |")]
    assert row == "| slow-node | 30% | 1.000 | 30% | 20% | 0.980 |"
    never = limits([pooled("slow-gpu", s, 0) for s in SLOWDOWNS])
    assert "| slow-gpu | none up to 50% | - | none up to 50% | 50% | 0.000 |" in never
    # found from 15%, but with as many healthy subjects condemned below 30%
    loose = [pooled("slow-nic", s, 100) for s in SLOWDOWNS]
    loose[1] = Pooled(loose[1].cell, (replace(loose[1].scans[0], condemned=300),), 1.0)
    (row,) = [line for line in limits(loose) if line.startswith("| slow-nic |")]
    assert row == "| slow-nic | 10% | 1.000 | 20% | - | - |"


def test_the_grid_holds_every_axis_the_issue_names() -> None:
    axes = ["severity", "density", "dense", "flaky", "hub", "capped", "fleet", "noise", "hangs"]
    axes.append("mix")
    grid = list(cells(axes))
    severity = {(c.name, c.slowdown) for c in grid if c.axis == "severity"}
    assert len(severity) == len(scan_envelope.SLOW) * len(SLOWDOWNS)
    assert {c.nodes for c in grid if c.axis == "fleet"} == {2, 3, 7, 49, 100, 1024, 4096}
    assert {round(1 / (c.fails or 1)) for c in grid if c.axis == "flaky"} == {2, 5, 10}
    assert {c.hub for c in grid if c.axis == "hub"} == {2, 3}
    capped = {(c.nodes, c.slowdown) for c in grid if c.axis == "capped"}
    # and past 1024 nodes, where a scan runs a window of the rounds (policy.window)
    assert capped == {(n, s) for n in (49, 100) for s in SLOWDOWNS} | {(4096, 0.2)}
    racks = [c for c in grid if c.rack]
    assert {(c.labelled, c.slowdown) for c in racks} == {
        (labelled, s) for labelled in (True, False) for s in scan_envelope.DENSITY_SLOWDOWNS
    }
    assert all(len(c.faults) == RACK_NODES for c in racks)
    assert {len(c.faults) for c in grid if c.axis == "density" and not c.rack} == {
        1,
        10,
        26,
        51,
        102,
    }
    dense = {(c.nodes, len(c.faults)) for c in grid if c.axis == "dense"}
    assert dense == {(100, 20), (100, 33), (256, 51), (256, 85), (1024, 205), (1024, 341)}
    assert {c.noise for c in grid} == {"bandwidth", "every size"}
    assert {len(c.faults) for c in grid if c.axis == "mix"} == {0, 10, 40}
    assert {(c.shift, c.floor) for c in grid if c.name == "fleet off"} == {
        (0.7, False),
        (1.0, True),
    }
