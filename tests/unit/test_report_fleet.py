"""The report's fleet section on simulated scans written as runs (tests/scan_data.py): the
node x node map (its cells, codes, domains and size at 1024 nodes), the verdict table, the
timeline, and where the section appears."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from markupsafe import escape

from sweeper.report import build, figures, page
from sweeper.report.blocks import Figure, Table, Text
from sweeper.report.sections import cells, collectives, fleet, run
from sweeper.report.view import RunView
from sweeper.results import records, scans
from sweeper.results.load import run_rows
from sweeper.scan.document import Scanned
from sweeper.scan.fleet import Result
from sweeper.scan.verdict import Health, Subject, named
from tests.scan_data import ADAPTIVE, scanned, write_scan


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
    # the dead node's GPUs go with it; the slow GPU of a node that went on without it stays
    assert {line[1].text for line in lines} == {"node", "gpu", "link"}
    # its node, tested across nodes without its slow GPU, is judged there: nothing unconfirmed
    assert "unconfirmed" not in tables
    assert not [v for v in scan.verdicts if v.health is Health.UNCONFIRMED]
    counts = [b.text for b in section.blocks if isinstance(b, Text) and b.text.startswith("Heal")]
    assert counts == [
        # 19 links: the pair a slow link explains has the rest of its group re-tested (f6574fa)
        "Healthy: 14 of 16 nodes, 29 of 32 GPUs, and 90 of the 91 links the scan judged."
    ]


def test_the_section_opens_with_the_hosts_to_drain_and_why_before_the_map(
    scan: Scanned, view: RunView, written: Path
) -> None:
    section = fleet.fleet(view)
    assert section is not None
    kinds = [type(b).__name__ for b in section.blocks]
    # its fleet finding (no reference for 2 H100s' all_reduce), then the verdicts, the map
    assert kinds[:4] == ["Table", "Facts", "Text", "Table"]
    assert kinds.index("Table") < kinds.index("Figure")
    hosts = {n.id: n.host for n in scan.fleet.nodes}
    drained = sorted({hosts[n] for v in named(scan.verdicts) if v.condemned for n in v.nodes})
    assert section.blocks[2].text == f"Drain {len(drained)} host(s): {', '.join(drained)}."
    # before it, the run's inventory: a fleet of more than 64 nodes by kind, not a row a GPU,
    # then every GPU of the nodes to drain
    record = records.load(written, scan.run_id)
    assert record is not None
    many = replace(record, nodes=record.nodes * 5)
    kinds, condemned = run._inventory(many, [], view.drained)
    assert isinstance(kinds, Table)
    assert isinstance(condemned, Table)
    assert [line[0].text for line in kinds.rows] == ["80"]  # 16 alike nodes, five times
    assert kinds.rows[0][3].text == f"2 x {record.nodes[0].gpus[0].name}"
    assert {line[1].text for line in condemned.rows} == set(drained)
    assert len(condemned.rows) == 5 * 2 * len(drained)  # each GPU of each, five times over


def test_the_timeline_shows_the_stages_in_the_order_they_ran_and_each_wave_end_to_end(
    scan: Scanned, view: RunView
) -> None:
    section = fleet.fleet(view)
    assert section is not None
    (stages,) = [b for b in section.blocks if isinstance(b, Table) and b.caption.startswith("st")]
    order = [line[0].text for line in stages.rows]
    assert order == ["gate", "isolate", "screen", "bisect", "confirm", "pairs"]
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
    # each wave's time on hover in the unit it reads in (440 ms, where it read 0.4 s)
    said = sorted(c[1] for trace in timeline.data for c in trace.customdata)
    assert said == sorted(figures.duration(1e6 * w.seconds) for w in scan.waves)


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


def test_a_large_fleets_map_is_blocks_of_neighbours_each_the_worst_of_its_pairs_in_one_domain(
    scan: Scanned, view: RunView
) -> None:
    shown = fleet.fleet_map(_summary(view), view.rows)
    assert fleet.in_blocks(shown, most=16) is shown  # a map of 16 nodes or fewer as it is
    coarse = fleet.in_blocks(shown, most=7)
    n = len(coarse.names)
    assert n <= 7
    assert coarse.codes.shape == coarse.busbw_gb_per_s.shape == (n, n)
    # each block is neighbours of one domain: the domains' edges are blocks' edges
    spans = [(label.split(" ... ")[0].split(":")[0], label) for label in coarse.labels]
    first = [shown.names.index(name) for name, _ in spans]
    assert [shown.domains[0][1], *(f for _, f, _ in shown.domains[1:])] == [
        first[at] for _, at, _ in coarse.domains
    ]
    ends = [*first[1:], 16]
    for i, (a, b) in enumerate(zip(first, ends, strict=True)):
        verdicts = shown.verdicts[a:b]
        counts = {c: verdicts.count(c) for c in fleet.CODES if c in verdicts}
        assert coarse.verdicts[i] == ", ".join(f"{k} {c}" for c, k in counts.items())
        for j, (c, d) in enumerate(zip(first, ends, strict=True)):
            assert coarse.codes[i, j] == shown.codes[a:b, c:d].max()
            figures_held = shown.busbw_gb_per_s[a:b, c:d]
            if np.isfinite(figures_held).any():
                assert coarse.busbw_gb_per_s[i, j] == np.nanmax(figures_held)
    # every verdict a ring named is in its block's ring, the worst result shown
    lines = [{line for r in m.rings for line in r.text.split("\n")} for m in (shown, coarse)]
    assert lines[0] == lines[1]
    assert {r.result for r in coarse.rings} == {r.result for r in shown.rings}
    assert coarse.block == max(b - a for a, b in zip(first, ends, strict=True)) > 1


def test_a_large_fleets_topology_is_a_table_a_shape_naming_the_nodes_to_drain(
    scan: Scanned, view: RunView
) -> None:
    assert view.record is not None
    hosts = {n.id: n.host for n in scan.fleet.nodes}
    drained = sorted(hosts[n] for n in view.drained)
    assert len(drained) >= 2
    assert len(_tables(run.topology(view))) == 16  # a table a node, up to 64 nodes
    many = replace(view, record=replace(view.record, nodes=view.record.nodes * 5))
    (shape,) = _tables(run.topology(many))
    assert shape.caption.startswith("80 nodes: n0 ")
    every = [f"n{p} {node.host}" for p, node in enumerate(many.record.nodes)]  # type: ignore[union-attr]
    to_drain = [name for name in every if name.split()[1] in drained]
    assert shape.caption.endswith(f"; to drain: {', '.join(to_drain)}")
    assert [line[0].text for line in shape.rows] == ["GPU0", "GPU1"]


def _tables(section: Any) -> list[Table]:
    return [b for b in section.blocks if isinstance(b, Table)]


def test_an_operation_of_many_groups_draws_a_line_a_shape_with_bars_to_its_least_and_greatest(
    view: RunView,
) -> None:
    rows = view.ok_collectives
    assert rows["group_id"].nunique() > collectives.MOST_GROUP_LINES
    section = collectives.operations(view)
    assert section is not None
    (shown,) = [b.figure for b in section.blocks if isinstance(b, Figure)]
    lines = [t for t in shown.data if t.showlegend]
    shapes = rows.groupby(["tier", "world_size"])["group_id"].nunique()
    assert len(lines) == len(shapes)
    for trace in lines:
        tier, ranks, _ = trace.name.split(":")[0].split()
        groups = shapes[tier, int(ranks)]
        assert trace.name.endswith(f": median of {groups} groups") == (groups > 1)
        part = rows[(rows["tier"] == tier) & (rows["world_size"] == int(ranks))]
        by_size = part.groupby("size_bytes")["busbw_gb_per_s"]
        assert list(trace.y) == pytest.approx(list(by_size.median()), nan_ok=True)
        high, low = trace.y + trace.error_y.array, trace.y - trace.error_y.arrayminus
        assert list(high) == pytest.approx(list(by_size.max()), nan_ok=True)
        assert list(low) == pytest.approx(list(by_size.min()), nan_ok=True)


def test_a_256_node_scans_page_summarizes_the_fleet_and_names_every_condemned_verdict(
    tmp_path: Path,
) -> None:
    scan = scanned(256, 8, strategy=ADAPTIVE)
    write_scan(tmp_path / "results", scan)
    shown = build.write(tmp_path / "results", scan.run_id, tmp_path / "fleet.html").read_text()
    # plotly.js inlined, and summaries that do not grow with the fleet: 0.17 MB beside it at
    # 256 nodes and 0.22 MB at 1024, where a row, table or line a node or group came to
    # 1.7 and 10.3 MB (a 1024-node page of 15.1 MB)
    assert len(shown.encode()) - len(build.packed_plotly_js()) < 0.5e6
    fleet_part = shown[shown.index('<section id="fleet">') :]
    hosts = {n.id: n.host for n in scan.fleet.nodes}
    condemned = [v for v in named(scan.verdicts) if v.condemned]
    drained = sorted({hosts[n] for v in condemned for n in v.nodes})
    assert len(condemned) >= 4
    # the section opens with what to drain, then each condemned verdict and its evidence
    opening = f">Drain {len(drained)} host(s): {', '.join(drained)}.</p>"
    assert fleet_part.index(opening) < fleet_part.index("<table>")
    for v in condemned:
        assert f'<td class="code">{escape(v.name)}</td>' in fleet_part
        assert escape(v.evidence) in fleet_part  # as the page's template writes text
    assert re.search(r"256 nodes in \d+ blocks of up to 2 neighbours a side", fleet_part)


def test_the_section_opens_with_the_fleet_findings_their_figure_threshold_and_source(
    scan: Scanned, view: RunView, written: Path
) -> None:
    finding = {
        "kind": "internode",
        "off": True,
        "figure_gb_per_s": 30.0,
        "threshold_gb_per_s": 36.0,
        "source": "80% of the reference 45 GB/s (H100 internode any size all_to_all)",
        "below": 12,
        "nodes": 16,
        "evidence": "the fleet: 12 of 16 nodes below 36 GB/s ...",
    }
    rows = run_rows(written, scan.run_id)
    record = records.load(written, scan.run_id)
    found = RunView.of(rows, record, None, {**_summary(view), "findings": [finding]})
    section = fleet.fleet(found)
    assert section is not None
    first = section.blocks[0]
    assert isinstance(first, Table)
    assert first.columns[:5] == ("fleet", "where", "median GB/s", "threshold GB/s", "source")
    (line,) = first.rows
    assert [c.text for c in line[:2]] == ["off", "internode"]
    assert line[4].text == finding["source"]
    assert line[5].text == "12 of 16"
    plain = fleet.fleet(RunView.of(rows, record, None, {**_summary(view), "findings": []}))
    assert plain is not None
    assert type(plain.blocks[0]).__name__ == "Facts"  # no finding: no table for it


def _fleet_of(nodes: int, tmp_path: Path) -> tuple[Scanned, Any]:
    """A simulated scan of `nodes` healthy nodes of 2 GPUs written as a run, and its section."""
    scan = scanned(nodes, 2, faults=(), strategy=ADAPTIVE)
    results = tmp_path / "results"
    write_scan(results, scan)
    rows, record = run_rows(results, scan.run_id), records.load(results, scan.run_id)
    return scan, fleet.fleet(RunView.of(rows, record, None, scans.load(results, scan.run_id)))


@pytest.mark.parametrize("nodes", [1, 3])
def test_a_fleet_of_fewer_than_four_nodes_gets_a_table_of_its_nodes_and_pairs_not_a_map(
    nodes: int, tmp_path: Path
) -> None:
    """A lone node's map was one cell; three nodes hold three pairs, which a table says."""
    scan, section = _fleet_of(nodes, tmp_path)
    assert section is not None
    titles = [b.figure.layout.title.text for b in section.blocks if isinstance(b, Figure)]
    assert titles == ([] if nodes == 1 else ["waves in time"])  # one wave: its row says it
    (table,) = [b for b in section.blocks if isinstance(b, Table) and b.caption.startswith("each")]
    hosts = sorted(n.host for n in scan.fleet.nodes)
    pairs = [f"{a} + {b}" for i, a in enumerate(hosts) for b in hosts[i + 1 :]]
    assert [line[0].text for line in table.rows] == [*hosts, *pairs]
    assert {line[1].text for line in table.rows} == {"healthy"}
    gates = {o.group.nodes: o.busbw_gb_per_s for o in scan.outcomes if o.group.stage == "gate"}
    by_host = {n.host: n.id for n in scan.fleet.nodes}
    for line in table.rows[:nodes]:
        assert line[2].text == cells.fmt(gates[(by_host[line[0].text],)], cells.SIG)
    assert "has a table" in section.intro
    assert "zoom" not in section.intro  # the map's hover and zoom are not there to read of


def test_a_fleet_of_four_nodes_has_its_map(tmp_path: Path) -> None:
    _, section = _fleet_of(fleet.FEWEST_FOR_MAP, tmp_path)
    assert section is not None
    titles = [b.figure.layout.title.text for b in section.blocks if isinstance(b, Figure)]
    assert titles == ["Nodes measured together, by the worse verdict", "waves in time"]


def test_a_shapes_line_marks_the_size_a_groups_max_size_auto_bound_fell_on(
    view: RunView,
) -> None:
    """Of many groups a line is a shape's median, where the probed point's mark was lost."""
    rows = view.rows
    group = rows["group_id"].iloc[0]
    largest = rows[rows["group_id"] == group]["size_bytes"].max()
    probed = rows.assign(
        probe_s=(rows["group_id"] == group).map({True: 0.4, False: None}),
        max_size_bytes=largest,
    )
    section = collectives.operations(replace(RunView.of(probed, view.record), scan=view.scan))
    assert section is not None
    (shown,) = [b.figure for b in section.blocks if isinstance(b, Figure)]
    marks = [t for t in shown.data if t.name == figures.BOUND_NAME]
    assert [list(t.x) for t in marks] == [[largest]] * 2  # both panels, on the median's line
