"""A fleet scan's page (`sweeper scan`; a run with a scan summary, `results.scans`): the fleet
findings, then what to drain and why (the hosts of every condemned verdict, then each verdict
with its evidence), a node x node map of what was measured together and how it did, and the
scan's stages and waves in time.

The map's colours are the judge's verdicts, its cells the rows': a pair of nodes is tested
where a judged group held both. docs/ARCHITECTURE.md, "Inside the rooms", says how the map
stays small at 1024 nodes."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Facts, Figure, Section, Table, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView
from sweeper.scan.document import verdicts as read_verdicts
from sweeper.scan.fleet import Stage
from sweeper.scan.verdict import CONDEMNED, Health, Subject, Verdict, named
from sweeper.wire import Kind, Status

UNTESTED = "untested"
# A cell's result, by code: a higher code is worse, and a cell shows the worst it holds
_WORSE = (
    Health.HEALTHY,
    Health.UNCONFIRMED,
    Health.MISCONFIGURED,
    Health.FLAKY,
    Health.SLOW,
    Health.FAILED,
    Health.UNREACHABLE,
)
CODES = (UNTESTED, *(str(h) for h in _WORSE))
NO_DOMAIN = "not screened"
# A map of more nodes than this shows blocks of neighbouring nodes: at 1024 nodes a cell a
# pair of nodes came to 4 MB of the page, and each was under a pixel of the figure.
MOST_A_SIDE = 160
# A fleet of fewer nodes holds at most three pairs: a table of its nodes and pairs says what a
# map of a few cells would (a lone node's map was one cell)
FEWEST_FOR_MAP = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetMap:
    names: tuple[str, ...]  # the nodes in map order: host (node id where hosts repeat)
    verdicts: tuple[str, ...]  # each one's verdict
    labels: tuple[str, ...]  # name and verdict
    domains: tuple[tuple[str, int, int], ...]  # each domain's name, first position and size
    codes: np.ndarray  # int8 [n, n]: CODES index of each pair's result
    busbw_gb_per_s: np.ndarray  # [n, n]: the best figure of a group holding both; NaN: none
    rings: tuple[figures.Ring, ...]  # what the verdicts name: a node (or its GPU), a link
    placed: bool  # every judged group's members were told apart by their hosts
    block: int = 1  # the most nodes a place holds: more than one where `in_blocks` made it


def _code(health: Health) -> int:
    return CODES.index(str(health))


def _groups(rows: pd.DataFrame, position: Mapping[str, int]) -> tuple[pd.DataFrame, bool]:
    """Each judged group of the scan's rows (its wave and hosts): stage, wave, its nodes'
    fleet positions and its best busbw at its judged operation's largest size (NaN where it
    failed); whether every group's hosts were known, each naming one node."""
    scan = rows[rows["stage"].notna()]
    members = scan["hosts"].map(lambda hosts: tuple(sorted(set(hosts))))
    gid = pd.Series(pd.MultiIndex.from_arrays([scan["wave"], members]).factorize()[0], scan.index)
    judged = scan[scan["kind"] == Kind.COLLECTIVE]
    largest = judged["size_bytes"] == judged.groupby(gid)["size_bytes"].transform("max")
    ok = judged[largest & (judged["status"] == Status.OK)]
    first = ~gid.duplicated()
    groups = pd.DataFrame(
        {
            "stage": scan["stage"][first].to_numpy(),
            "wave": scan["wave"][first].to_numpy(),
            "nodes": [tuple(position.get(h, -1) for h in m) for m in members[first]],
            "busbw_gb_per_s": ok.groupby(gid)["busbw_gb_per_s"].max().reindex(range(first.sum())),
        }
    )
    known = np.array([-1 not in nodes for nodes in groups["nodes"]], dtype=bool)
    return groups.loc[known].reset_index(drop=True), bool(known.all())


def _domains(nodes: Sequence[Mapping[str, Any]], groups: pd.DataFrame) -> list[str]:
    """Each node's domain on the map: the label the scan's domains came from, else its group
    in the first screen wave where those hold more than two nodes, else one for all."""
    if any(n.get("domain") for n in nodes):
        return [str(n.get("domain") or NO_DOMAIN) for n in nodes]
    screen = groups[groups["stage"] == Stage.SCREEN]
    screen = screen[screen["wave"] == screen["wave"].min()]
    if screen.empty or screen["nodes"].map(len).max() <= 2:
        return ["fleet"] * len(nodes)
    out = [NO_DOMAIN] * len(nodes)
    for k, members in enumerate(screen["nodes"], start=1):
        for i in members:
            out[i] = f"screen group {k}"
    return out


def _tested(n: int, groups: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which pairs a group held, and the best figure of those groups; a node with itself: its
    groups of one node (the gate)."""
    members = groups[["nodes", "busbw_gb_per_s"]].explode("nodes").reset_index()
    pairs = members.merge(members[["index", "nodes"]], on="index", suffixes=("", "_other"))
    a, b = pairs["nodes"].to_numpy(dtype=np.intp), pairs["nodes_other"].to_numpy(dtype=np.intp)
    tested = np.zeros((n, n), dtype=bool)
    tested[a, b] = True
    best = np.full((n, n), -np.inf)
    np.maximum.at(best, (a, b), pairs["busbw_gb_per_s"].fillna(-np.inf).to_numpy(float))
    own = np.full(n, -np.inf)
    alone = groups[groups["nodes"].map(len) == 1]
    np.maximum.at(
        own,
        alone["nodes"].map(lambda nodes: nodes[0]).to_numpy(dtype=np.intp),
        alone["busbw_gb_per_s"].fillna(-np.inf).to_numpy(float),
    )
    np.fill_diagonal(best, own)
    return tested, np.where(np.isfinite(best), best, np.nan)


def fleet_map(summary: Mapping[str, Any], rows: pd.DataFrame) -> FleetMap:
    nodes = summary["nodes"]
    verdicts = read_verdicts(summary)
    index = {str(n["id"]): i for i, n in enumerate(nodes)}
    # the rows name a group's nodes by host: a host of one node names it, the others none
    hosts = Counter(str(n["host"]) for n in nodes)
    alone = {str(n["host"]): i for i, n in enumerate(nodes) if hosts[str(n["host"])] == 1}
    names = [str(n["host"]) if str(n["host"]) in alone else str(n["id"]) for n in nodes]
    groups, placed = _groups(rows, alone)
    tested, best = _tested(len(nodes), groups)
    own = np.zeros(len(nodes), dtype=np.int8)
    for v in verdicts:
        if v.subject is Subject.NODE:
            own[index[v.nodes[0]]] = _code(v.health)
    codes = np.where(tested, np.maximum.outer(own, own), 0).astype(np.int8)
    np.fill_diagonal(codes, own)
    for v in verdicts:
        ends = [index[n] for n in v.nodes]
        if v.subject is Subject.LINK:
            codes[ends[0], ends[1]] = codes[ends[1], ends[0]] = _code(v.health)
        elif v.subject is Subject.GROUP:
            block = np.ix_(ends, ends)
            codes[block] = np.maximum(codes[block], _code(v.health))
    domains = _domains(nodes, groups)
    first = {d: i for i, d in reversed(list(enumerate(domains)))}
    order = sorted(range(len(nodes)), key=lambda i: (domains[i] == NO_DOMAIN, first[domains[i]], i))
    place = {i: p for p, i in enumerate(order)}
    spans: dict[str, list[int]] = {}
    for p, i in enumerate(order):
        spans.setdefault(domains[i], []).append(p)
    health = {index[v.nodes[0]]: str(v.health) for v in verdicts if v.subject is Subject.NODE}
    said = [health.get(i, UNTESTED) for i in order]
    return FleetMap(
        names=tuple(names[i] for i in order),
        verdicts=tuple(said),
        labels=tuple(f"{names[i]} {verdict}" for i, verdict in zip(order, said, strict=True)),
        domains=tuple((d, places[0], len(places)) for d, places in spans.items()),
        codes=codes[np.ix_(order, order)],
        busbw_gb_per_s=best[np.ix_(order, order)],
        rings=tuple(_rings(verdicts, {n: place[i] for n, i in index.items()})),
        placed=placed,
    )


def _rings(verdicts: Sequence[Verdict], at: Mapping[str, int]) -> list[figures.Ring]:
    """A ring for each verdict that names something, a node's (or its GPU's) on the diagonal,
    a link's at both its cells; one cell's verdicts in one ring."""
    found: dict[tuple[int, int], list[Verdict]] = {}
    for v in named(verdicts):
        if v.subject is Subject.GROUP:
            continue
        a, b = at[v.nodes[0]], at[v.nodes[-1]]
        for cell in dict.fromkeys([(a, b), (b, a)]):
            found.setdefault(cell, []).append(v)
    return [
        figures.Ring(
            row=row,
            column=column,
            result=CODES[max(_code(v.health) for v in held)],
            text="\n".join(v.evidence for v in held),
        )
        for (row, column), held in found.items()
    ]


def in_blocks(shown: FleetMap, most: int = MOST_A_SIDE) -> FleetMap:
    """The map of more than `most` nodes as one of blocks of neighbouring nodes, at most
    `most` a side (`_spans`): a cell is the worst result of its pairs and the best figure of
    a group that held two of its nodes, a ring every verdict of its cells, and a block is
    named by its first node and its last, with its nodes counted by verdict."""
    if len(shown.names) <= most:
        return shown
    spans, domains = _spans(shown.domains, len(shown.names), most)
    starts = np.array([first for first, _ in spans], dtype=np.intp)
    codes = np.maximum.reduceat(np.maximum.reduceat(shown.codes, starts, 0), starts, 1)
    best = np.fmax.reduceat(np.fmax.reduceat(shown.busbw_gb_per_s, starts, 0), starts, 1)
    names, said = [], []
    for first, size in spans:
        ends = (shown.names[first], shown.names[first + size - 1])
        names.append(ends[0] if size == 1 else " ... ".join(ends))
        counts = Counter(shown.verdicts[first : first + size])
        said.append(", ".join(f"{counts[c]} {c}" for c in CODES if counts[c]))
    at = np.repeat(np.arange(len(spans)), [size for _, size in spans])
    merged: dict[tuple[int, int], list[figures.Ring]] = {}
    for ring in shown.rings:
        merged.setdefault((int(at[ring.row]), int(at[ring.column])), []).append(ring)
    return FleetMap(
        names=tuple(names),
        verdicts=tuple(said),
        labels=tuple(f"{name}: {counts}" for name, counts in zip(names, said, strict=True)),
        domains=domains,
        codes=codes.astype(np.int8),
        busbw_gb_per_s=best,
        rings=tuple(
            figures.Ring(
                row=row,
                column=column,
                result=CODES[max(CODES.index(r.result) for r in held)],
                text="\n".join(dict.fromkeys(r.text for r in held)),
            )
            for (row, column), held in merged.items()
        ),
        placed=shown.placed,
        block=max(size for _, size in spans),
    )


def _spans(
    domains: Sequence[tuple[str, int, int]], n: int, most: int
) -> tuple[list[tuple[int, int]], tuple[tuple[str, int, int], ...]]:
    """Blocks of n places (first, size), at most `most`: each domain cut into blocks of the
    smallest size that makes no more, its last block the rest; and the domains in blocks.
    Where the domains alone are as many, the blocks cross their edges, in one domain."""
    if len(domains) >= most:
        size = math.ceil(n / most)
        spans = [(s, min(size, n - s)) for s in range(0, n, size)]
        return spans, (("fleet", 0, len(spans)),)
    size = math.ceil(n / most)
    while sum(math.ceil(length / size) for _, _, length in domains) > most:
        size += 1
    spans, out = [], []
    for name, first, length in domains:
        out.append((name, len(spans), math.ceil(length / size)))
        spans += [(first + s, min(size, length - s)) for s in range(0, length, size)]
    return spans, tuple(out)


# The section


def fleet(view: RunView) -> Section | None:
    summary = view.scan
    if summary is None:
        return None
    verdicts = read_verdicts(summary)
    shown = in_blocks(fleet_map(summary, view.rows))
    # the fleet as a whole first, then what to drain and why: an operator reads the
    # findings and the verdicts before the map
    blocks: list[Block] = [
        *_findings(summary),
        *_facts(summary),
        *_verdict_tables(verdicts, summary, view.drained),
    ]
    few = len(shown.names) < FEWEST_FOR_MAP
    blocks += [_pairs_table(shown)] if few else _map(shown, len(summary["nodes"]))
    if not shown.placed:
        blocks.append(
            Text(
                "The rows name nodes by host, and some hosts hold several nodes of the scan: "
                f"the {'table' if few else 'map'} shows each node's verdict and its links' only.",
                "muted",
            )
        )
    blocks += _timeline(summary)
    return Section("fleet", "Fleet scan", tuple(blocks), _TABLE_INTRO if few else _MAP_INTRO)


_MAP_INTRO = (
    "Every node, GPU and link the scan judged. The map: nodes by domain on both axes; a cell "
    "is two nodes a judged group held, coloured by the worse of their verdicts (their link's "
    "where the judge gave one), a node with itself by its own verdict; ringed: what the "
    "verdicts name. Hover: the two nodes and the best busbw of a group holding both (0: "
    "none). Drag to zoom, double-click to zoom out."
)
_TABLE_INTRO = (
    f"Every node, GPU and link the scan judged. A fleet of fewer than {FEWEST_FOR_MAP} nodes "
    "has a table where a larger one has a map: each node alone (its gate) and each pair of "
    "nodes, with the worse of their verdicts (their link's where the judge gave one) and the "
    "best busbw of a group that held them."
)


def _map(shown: FleetMap, nodes: int) -> list[Block]:
    """The node x node map, and how its blocks read where it has them."""
    figure = Figure(
        figures.fleet_map(
            shown.labels, shown.domains, shown.codes, shown.busbw_gb_per_s, shown.rings, CODES
        )
    )
    if shown.block == 1:
        return [figure]
    blocks = Text(
        f"{nodes} nodes in {len(shown.names)} blocks of up to {shown.block} neighbours a side: "
        "a cell is the worst result of the pairs of its two blocks and the best figure of a "
        "group that held two of their nodes; a block's name counts its nodes by verdict. Every "
        "verdict that condemns: the tables above.",
        "muted",
    )
    return [figure, blocks]


def _pairs_table(shown: FleetMap) -> Table:
    """The map of a few nodes as a table: each node alone, then each pair, in map order."""
    n = len(shown.names)
    cells_at = [(i, i) for i in range(n)] + [(i, j) for i in range(n) for j in range(i + 1, n)]
    lines = []
    for i, j in cells_at:
        result = CODES[int(shown.codes[i, j])]
        css = (
            "bad"
            if result in {str(h) for h in CONDEMNED}
            else "muted"
            if result == UNTESTED
            else ""
        )
        nodes = shown.names[i] if i == j else f"{shown.names[i]} + {shown.names[j]}"
        lines.append(
            (Cell(nodes), Cell(result, css), cells.num(shown.busbw_gb_per_s[i, j], cells.SIG))
        )
    caption = "each node alone and each pair of nodes: the worse verdict, the best figure"
    return Table(("nodes", "result", "best busbw GB/s"), tuple(lines), caption)


def _findings(summary: Mapping[str, Any]) -> list[Block]:
    """The fleet findings (the fleet as a subject), each with its figure, its threshold and
    where that comes from; none where the summary has none (or predates them)."""
    found = summary.get("findings") or []
    if not found:
        return []
    rows = tuple(
        (
            Cell("off" if f["off"] else "not held", "bad" if f["off"] else ""),
            Cell(str(f["kind"])),
            cells.num(f["figure_gb_per_s"], cells.SIG),
            cells.num(f["threshold_gb_per_s"], cells.SIG),
            Cell(f["source"] or "-"),
            Cell(f"{f['below']} of {f['nodes']}" if f["off"] else "-"),
            Cell(f["evidence"], "why"),
        )
        for f in found
    )
    columns = ("fleet", "where", "median GB/s", "threshold GB/s", "source", "nodes below")
    caption = (
        "The fleet as a whole: a threshold its nodes miss together condemns none of them "
        "on its own; one with no reference cannot show a fleet-wide shift."
    )
    return [Table((*columns, "evidence"), rows, caption)]


def _facts(summary: Mapping[str, Any]) -> list[Block]:
    waves = sum(w["seconds"] for w in summary["waves"])
    strategy = str(summary["strategy"])
    if strategy.startswith("random"):
        strategy += f" (seed {summary['seed']})"
    health = ", ".join(f"{count} {name}" for name, count in summary["health"].items())
    facts = (
        ("strategy", strategy),
        ("nodes", f"{len(summary['nodes'])}: {health}"),
        ("groups", f"{summary['groups']} in {len(summary['waves'])} waves"),
        ("took", f"{summary['seconds']:.0f} s, {waves:.0f} s of it in waves"),
    )
    return [Facts(facts)]


def _line(v: Verdict, hosts: Mapping[str, str]) -> tuple[Cell, ...]:
    return (
        Cell(str(v.health), "bad" if v.condemned else ""),
        Cell(str(v.subject)),
        Cell(v.name, "code"),
        Cell(", ".join(hosts.get(n, n) for n in v.nodes)),
        Cell(str(v.stage) if v.stage else "-"),
        cells.num(v.busbw_gb_per_s, cells.SIG),
        cells.num(v.fleet_gb_per_s, cells.SIG),
        Cell(v.evidence, "why"),
    )


def _verdict_tables(
    verdicts: Sequence[Verdict], summary: Mapping[str, Any], drained: frozenset[str]
) -> list[Block]:
    """The hosts to drain (`view.drained`), the condemned (a condemned node's GPUs go with
    it), the suspects the scan did not separate, and how many of each kind are healthy."""
    hosts = {str(n["id"]): str(n["host"]) for n in summary["nodes"]}
    columns = ("verdict", "what", "name", "hosts", "stage", "busbw GB/s", "fleet's", "evidence")
    shown = named(verdicts)
    out: list[Block] = []
    condemned = [v for v in shown if v.condemned]
    if condemned:
        to_drain = sorted({hosts.get(n, n) for n in drained})
        what = f"Drain {len(to_drain)} host(s): {', '.join(to_drain)}." if to_drain else ""
        fixed = [v for v in condemned if v.subject is Subject.GROUP]
        if fixed:
            what += f" Fix the configuration {len(fixed)} verdict(s) below name, on their nodes."
        out.append(Text(what.strip()))
        lines = tuple(_line(v, hosts) for v in condemned)
        out.append(
            Table(
                columns,
                lines,
                "what to drain, and why: slow, failed, unreachable, flaky, misconfigured",
            )
        )
    else:
        out.append(Text("Nothing to drain: no node, GPU or link condemned."))
    unconfirmed = [v for v in shown if not v.condemned]
    if unconfirmed:
        lines = tuple(_line(v, hosts) for v in unconfirmed)
        out.append(Table(columns, lines, "unconfirmed: suspects the scan did not separate"))
    healthy = Counter(v.subject for v in verdicts if v.health is Health.HEALTHY)
    total = Counter(v.subject for v in verdicts)
    out.append(
        Text(
            f"Healthy: {healthy[Subject.NODE]} of {total[Subject.NODE]} nodes, "
            f"{healthy[Subject.GPU]} of {total[Subject.GPU]} GPUs, and {healthy[Subject.LINK]} "
            f"of the {total[Subject.LINK]} links the scan judged."
        )
    )
    return out


def _timeline(summary: Mapping[str, Any]) -> list[Block]:
    """The stages in the order they ran, and each wave from its start to its end (of more
    than one wave: one wave's bar says what its row does)."""
    waves = pd.DataFrame(
        summary["waves"], columns=["index", "stage", "groups", "largest", "seconds"]
    )
    if waves.empty:
        return []
    waves = waves.assign(start=waves["seconds"].cumsum() - waves["seconds"])
    total = float(waves["seconds"].sum())
    lines = tuple(
        (
            Cell(str(s["stage"])),
            cells.num(s["waves"], "d"),
            cells.num(s["groups"], "d"),
            cells.num(s["seconds"], cells.SIG),
            cells.num(100 * s["seconds"] / total if total else 0, ".0f"),
        )
        for s in summary["stages"]
    )
    columns = ("stage", "waves", "groups", "seconds", "% of waves' time")
    stages = Table(columns, lines, "stages, in the order they ran")
    return [stages, Figure(figures.scan_timeline(waves))] if len(waves) > 1 else [stages]
