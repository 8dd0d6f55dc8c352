"""A fleet scan (`sweeper scan`; a run with a scan summary, `results.scans`): first what to
drain and why (the hosts of every condemned verdict, then each verdict with its evidence),
then a node x node map of what was measured together and how it did, and the scan's stages
and waves in time.

The map's colours are the judge's (the summary's verdicts), its cells the rows': a pair of
nodes is tested where a judged group held both. The rows name a group's members by host, so
where hosts repeat (several Ray nodes on one machine) the map shows the verdicts alone. At
1024 nodes its figure is a heatmap of one-byte codes and two-byte figures (plotly writes
them as typed arrays), not a million hover strings.
"""

from __future__ import annotations

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
from sweeper.scan.judge import Health, Subject, Verdict, named
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


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetMap:
    labels: tuple[str, ...]  # the nodes in map order: host (node id where hosts repeat), verdict
    domains: tuple[tuple[str, int, int], ...]  # each domain's name, first position and size
    codes: np.ndarray  # int8 [n, n]: CODES index of each pair's result
    busbw_gb_per_s: np.ndarray  # [n, n]: the best figure of a group holding both; NaN: none
    rings: tuple[figures.Ring, ...]  # what the verdicts name: a node (or its GPU), a link
    placed: bool  # every judged group's members were told apart by their hosts


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
    return FleetMap(
        labels=tuple(f"{names[i]} {health.get(i, UNTESTED)}" for i in order),
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


# The section


def fleet(view: RunView) -> Section | None:
    summary = view.scan
    if summary is None:
        return None
    verdicts = read_verdicts(summary)
    shown = fleet_map(summary, view.rows)
    # what to drain and why first: at 1024 nodes the map and the run's inventory come to
    # megabytes, and an operator reads the verdicts before them
    blocks: list[Block] = [*_facts(summary), *_verdict_tables(verdicts, summary)]
    blocks.append(
        Figure(
            figures.fleet_map(
                shown.labels, shown.domains, shown.codes, shown.busbw_gb_per_s, shown.rings, CODES
            )
        )
    )
    if not shown.placed:
        blocks.append(
            Text(
                "The rows name nodes by host, and some hosts hold several nodes of the scan: "
                "the map shows each node's verdict and its links' only.",
                "muted",
            )
        )
    blocks += _timeline(summary)
    return Section(
        "fleet",
        "Fleet scan",
        tuple(blocks),
        "Every node, GPU and link the scan judged. The map: nodes by domain on both axes; a "
        "cell is two nodes a judged group held, coloured by the worse of their verdicts (their "
        "link's where the judge gave one), a node with itself by its own verdict; ringed: what "
        "the verdicts name. Hover: the two nodes and the best busbw of a group holding both "
        "(0: none). Drag to zoom, double-click to zoom out.",
    )


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


def _verdict_tables(verdicts: Sequence[Verdict], summary: Mapping[str, Any]) -> list[Block]:
    """The condemned (a condemned node's GPUs go with it), the suspects the scan did not
    separate, and how many of each kind are healthy."""
    hosts = {str(n["id"]): str(n["host"]) for n in summary["nodes"]}
    columns = ("verdict", "what", "name", "hosts", "stage", "busbw GB/s", "fleet's", "evidence")
    shown = named(verdicts)
    out: list[Block] = []
    condemned = [v for v in shown if v.condemned]
    if condemned:
        drained = sorted(
            {hosts.get(n, n) for v in condemned if v.subject is not Subject.GROUP for n in v.nodes}
        )
        what = f"Drain {len(drained)} host(s): {', '.join(drained)}." if drained else ""
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
    """The stages in the order they ran, and each wave from its start to its end."""
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
            cells.num(s["seconds"], ".1f"),
            cells.num(100 * s["seconds"] / total if total else 0, ".0f"),
        )
        for s in summary["stages"]
    )
    columns = ("stage", "waves", "groups", "seconds", "% of waves' time")
    return [
        Table(columns, lines, "stages, in the order they ran"),
        Figure(figures.scan_timeline(waves)),
    ]
