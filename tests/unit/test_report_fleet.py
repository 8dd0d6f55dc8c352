"""The report's fleet section on simulated scans written as runs (tests/scan_data.py): the
node x node map (its cells, codes, domains and size at 1024 nodes), the verdict table, the
timeline, and where the section appears."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.report import build, figures, page
from sweeper.report.blocks import Figure, Table, Text
from sweeper.report.sections import fleet, run
from sweeper.report.view import RunView
from sweeper.results import records, scans
from sweeper.results.load import run_rows
from sweeper.scan.document import Scanned, document
from sweeper.scan.fleet import Result
from sweeper.scan.judge import Health, Subject, named
from tests.scan_data import ADAPTIVE, scan_rows, scanned, write_scan


@pytest.fixture(scope="module")
def scan() -> Scanned:
    """16 nodes of 2 GPUs, adaptive: a slow node, a slow link, a dead node and a slow GPU."""
    return scanned(16, 2, strategy=ADAPTIVE)


@pytest.fixture(scope="module")
def written(scan: Scanned, tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("fleet") / "results"
    write_scan(results, scan)
    return results


@pytest.fixture(scope="module")
def view(scan: Scanned, written: Path) -> RunView:
    rows = run_rows(written, scan.run_id)
    record = records.load(written, scan.run_id)
    return RunView.of(rows, record, None, scans.load(written, scan.run_id))


def _summary(view: RunView) -> dict[str, Any]:
    assert view.scan is not None
    return dict(view.scan)


def _places(scan: Scanned, shown: fleet.FleetMap) -> dict[str, int]:
    """Each node id's place on the map, from its label (its host, then its verdict)."""
    by_host = {n.host: n.id for n in scan.fleet.nodes}
    return {by_host[label.split()[0]]: p for p, label in enumerate(shown.labels)}


def _code(health: Health) -> int:
    return fleet.CODES.index(str(health))


def test_the_map_is_every_pair_of_nodes_in_one_byte_codes_each_nodes_verdict_on_its_diagonal(
    scan: Scanned, view: RunView
) -> None:
    shown = fleet.fleet_map(_summary(view), view.rows)
    assert shown.codes.shape == shown.busbw_gb_per_s.shape == (16, 16)
    assert shown.codes.dtype == np.int8
    assert shown.placed
    assert (shown.codes == shown.codes.T).all()
    place = _places(scan, shown)
    for v in scan.verdicts:
        if v.subject is Subject.NODE:
            at = place[v.nodes[0]]
            assert shown.codes[at, at] == _code(v.health)
            assert shown.labels[at].endswith(f" {v.health}")


def test_a_cell_is_tested_where_a_group_with_rows_held_both_nodes_or_the_judge_named_their_link(
    scan: Scanned, view: RunView
) -> None:
    shown = fleet.fleet_map(_summary(view), view.rows)
    place = _places(scan, shown)
    held = {
        (place[a], place[b])
        for o in scan.outcomes
        if o.result is not Result.MISSING
        for a in o.group.nodes
        for b in o.group.nodes
    }
    links = [v for v in scan.verdicts if v.subject is Subject.LINK]
    held |= {(place[a], place[b]) for v in links for a, b in (v.nodes, v.nodes[::-1])}
    held |= {(p, p) for p in place.values()}
    tested = {(int(a), int(b)) for a, b in zip(*np.nonzero(shown.codes), strict=True)}
    assert tested == held


def test_a_slow_node_colours_the_pairs_it_was_in_and_a_slow_link_only_its_own_cells(
    scan: Scanned, view: RunView
) -> None:
    shown = fleet.fleet_map(_summary(view), view.rows)
    place = _places(scan, shown)
    slow = _code(Health.SLOW)
    (node,) = [
        v.nodes[0] for v in scan.verdicts if v.subject is Subject.NODE and v.health is Health.SLOW
    ]
    row = shown.codes[place[node]]
    assert (row[row > 0] == slow).all()
    assert (row > 0).sum() > 3
    (link,) = [v.nodes for v in scan.verdicts if v.subject is Subject.LINK and v.condemned]
    a, b = place[link[0]], place[link[1]]
    assert shown.codes[a, b] == shown.codes[b, a] == slow
    others = [p for p in range(16) if p not in (a, b, place[node])]
    assert (shown.codes[a, others] <= _code(Health.HEALTHY)).all()
    rings = {(r.row, r.column): r for r in shown.rings}
    assert rings[a, b].result == "slow"
    assert rings[a, b].text.startswith("-".join(link))
    assert rings[place[node], place[node]].result == "slow"


def test_a_cells_figure_is_the_best_of_the_groups_that_held_both_and_a_nodes_its_gate(
    scan: Scanned, view: RunView
) -> None:
    shown = fleet.fleet_map(_summary(view), view.rows)
    place = _places(scan, shown)
    best: dict[tuple[int, int], float] = {}
    for o in scan.outcomes:
        for a in o.group.nodes:
            for b in o.group.nodes:
                if o.busbw_gb_per_s is None or (a == b and len(o.group.nodes) > 1):
                    continue
                cell = place[a], place[b]
                best[cell] = max(best.get(cell, 0.0), o.busbw_gb_per_s)
    known = np.isfinite(shown.busbw_gb_per_s)
    assert {(int(a), int(b)) for a, b in zip(*np.nonzero(known), strict=True)} == set(best)
    for (a, b), figure in best.items():
        assert shown.busbw_gb_per_s[a, b] == pytest.approx(figure, rel=1e-9)


def test_nodes_are_grouped_by_their_screen_group_or_the_domain_label_the_scan_used(
    scan: Scanned, view: RunView
) -> None:
    shown = fleet.fleet_map(_summary(view), view.rows)
    names = [name for name, _, _ in shown.domains]
    assert names[:4] == [f"screen group {k}" for k in range(1, 5)]
    assert names[-1] == fleet.NO_DOMAIN  # the dead node and the one its gate left out
    assert sum(size for _, _, size in shown.domains) == 16
    assert [first for _, first, _ in shown.domains] == list(
        np.cumsum([0] + [size for _, _, size in shown.domains[:-1]])
    )
    racks = {n.id: f"rack{i % 3}" for i, n in enumerate(scan.fleet.nodes)}
    summary = _summary(view)
    summary["nodes"] = [{**n, "domain": racks[n["id"]]} for n in summary["nodes"]]
    by_rack = fleet.fleet_map(summary, view.rows)
    assert by_rack.domains == (("rack0", 0, 6), ("rack1", 6, 5), ("rack2", 11, 5))
    place = _places(scan, by_rack)
    assert all(racks[n] == f"rack{0 if p < 6 else 1 if p < 11 else 2}" for n, p in place.items())


def test_where_hosts_repeat_the_map_shows_the_verdicts_alone_and_names_nodes_by_id(
    scan: Scanned, view: RunView
) -> None:
    summary = _summary(view)
    summary["nodes"] = [{**n, "host": "box"} for n in summary["nodes"]]
    rows = view.rows.assign(hosts=[["box"] * len(h) for h in view.rows["hosts"]])
    shown = fleet.fleet_map(summary, rows)
    assert not shown.placed
    assert [label.split()[0] for label in shown.labels] == sorted(n.id for n in scan.fleet.nodes)
    off = shown.codes[~np.eye(16, dtype=bool)]
    links = [v for v in scan.verdicts if v.subject is Subject.LINK]
    assert np.count_nonzero(off) == 2 * len(links)


def test_a_scan_with_no_rows_left_still_maps_each_nodes_verdict(
    scan: Scanned, view: RunView
) -> None:
    shown = fleet.fleet_map(_summary(view), view.rows.iloc[:0])
    assert shown.domains == (("fleet", 0, 16),)
    nodes = [v for v in scan.verdicts if v.subject is Subject.NODE]
    assert sorted(np.diag(shown.codes)) == sorted(_code(v.health) for v in nodes)
    assert np.isnan(shown.busbw_gb_per_s).all()


def test_the_verdict_table_lists_exactly_the_condemned_with_their_evidence_and_counts_the_healthy(
    scan: Scanned, view: RunView
) -> None:
    section = fleet.fleet(view)
    assert section is not None
    tables = {b.caption.split(":")[0]: b for b in section.blocks if isinstance(b, Table)}
    condemned = [v for v in named(scan.verdicts) if v.condemned]
    lines = tables["what to drain, and why"].rows
    assert [line[2].text for line in lines] == [v.name for v in condemned]
    assert [line[-1].text for line in lines] == [v.evidence for v in condemned]
    assert {line[0].text for line in lines} <= {"slow", "failed", "unreachable"}
    # the dead node's GPUs go with it; the slow GPU of a node its gate left out stays
    assert {line[1].text for line in lines} == {"node", "gpu", "link"}
    unconfirmed = [line[2].text for line in tables["unconfirmed"].rows]
    assert unconfirmed == [v.name for v in scan.verdicts if v.health is Health.UNCONFIRMED]
    counts = [b.text for b in section.blocks if isinstance(b, Text) and b.text.startswith("Heal")]
    assert counts == [
        # 19 links: the pair a slow link explains has the rest of its group re-tested (f6574fa)
        "Healthy: 13 of 16 nodes, 28 of 32 GPUs, and 18 of the 19 links the scan judged."
    ]


def test_the_section_opens_with_the_hosts_to_drain_and_why_before_the_map(
    scan: Scanned, view: RunView, written: Path
) -> None:
    section = fleet.fleet(view)
    assert section is not None
    kinds = [type(b).__name__ for b in section.blocks]
    assert kinds[:3] == ["Facts", "Text", "Table"]
    assert kinds.index("Table") < kinds.index("Figure")  # the verdicts, then the map
    hosts = {n.id: n.host for n in scan.fleet.nodes}
    drained = sorted({hosts[n] for v in named(scan.verdicts) if v.condemned for n in v.nodes})
    assert section.blocks[1].text == f"Drain {len(drained)} host(s): {', '.join(drained)}."
    # before it, the run's inventory: a fleet of more than 64 nodes by kind, not a row a GPU
    record = records.load(written, scan.run_id)
    assert record is not None
    many = replace(record, nodes=record.nodes * 5)
    inventory = run._inventory(many, [])
    assert isinstance(inventory, Table)
    assert [line[0].text for line in inventory.rows] == ["80"]  # 16 alike nodes, five times
    assert inventory.rows[0][3].text == f"2 x {record.nodes[0].gpus[0].name}"


def test_the_timeline_shows_the_stages_in_the_order_they_ran_and_each_wave_end_to_end(
    scan: Scanned, view: RunView
) -> None:
    section = fleet.fleet(view)
    assert section is not None
    (stages,) = [b for b in section.blocks if isinstance(b, Table) and b.caption.startswith("st")]
    order = [line[0].text for line in stages.rows]
    assert order == ["gate", "isolate", "screen", "bisect", "confirm"]
    assert order == list(dict.fromkeys(str(w.stage) for w in scan.waves))
    timeline = [b.figure for b in section.blocks if isinstance(b, Figure)][-1]
    assert [trace.name for trace in timeline.data] == order
    starts = sorted(s for trace in timeline.data for s in trace.base)
    ends = sorted(
        s + d for trace in timeline.data for s, d in zip(trace.base, trace.x, strict=True)
    )
    assert starts[0] == 0.0
    assert starts[1:] == pytest.approx(ends[:-1])
    assert ends[-1] == pytest.approx(sum(w.seconds for w in scan.waves), abs=1e-2)


def test_the_section_follows_the_run_header_of_a_scan_and_no_other_run_has_one(
    scan: Scanned, view: RunView
) -> None:
    assert [s.id for s in page.sections(view)][:2] == ["run", "fleet"]
    assert fleet.fleet(replace(view, scan=None)) is None
    assert "fleet" not in [s.id for s in page.sections(replace(view, scan=None))]


def test_host_names_and_evidence_from_the_cluster_are_text_on_the_page(view: RunView) -> None:
    hostile = "<img src=x onerror=alert(1)>"
    summary = _summary(view)
    summary["nodes"] = [{**n, "host": f"{hostile}{n['host']}"} for n in summary["nodes"]]
    summary["verdicts"] = [{**v, "evidence": hostile + v["evidence"]} for v in summary["verdicts"]]
    rows = view.rows.assign(hosts=[[hostile + h for h in hosts] for hosts in view.rows["hosts"]])
    shown = build.render(rows, view.record, scan=summary)
    assert hostile not in shown
    assert html.escape(hostile) in shown  # in the tables
    drawn = re.findall(r'class="figure-data">(.*?)</script>', shown, re.S)
    labelled = html.escape(hostile, quote=False).replace("&", "\\u0026")  # as plotly shows it
    assert any(labelled in figure for figure in drawn)  # on the map


def test_a_1024_node_maps_figure_stays_near_4_mb_of_json() -> None:
    scan = scanned(1024, 8, strategy=ADAPTIVE)
    rows = pd.DataFrame(list(scan_rows(scan)))
    shown = fleet.fleet_map(json.loads(json.dumps(document(scan))), rows)
    assert shown.codes.shape == (1024, 1024)
    # the affine screen's first wave: 37 groups of at most 28 nodes, and the nodes left out
    assert len(shown.domains) == 38
    made = figures.fleet_map(
        shown.labels, shown.domains, shown.codes, shown.busbw_gb_per_s, shown.rings, fleet.CODES
    )
    assert len(made.to_json()) < 4.5e6
