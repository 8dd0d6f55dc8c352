"""Peer to peer: a matrix per kind of transfer between every ordered pair of GPUs (p2p
sends, copy-engine copies), the pairs weak for their tier with why, and fan-outs."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis import label, pair_matrices, pair_table, why
from sweeper.analysis.p2p import METRICS, PairMatrix, pair_rows
from sweeper.analysis.summary import missing
from sweeper.report import figures
from sweeper.report.blocks import Block, Cell, Figure, Section, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView
from sweeper.scan.reference import share


def _matrix_title(matrix: PairMatrix) -> str:
    how = "concurrently" if matrix.concurrent else "one pair at a time"
    what = "bandwidth (GB/s)" if matrix.metric == "bandwidth" else "latency (us)"
    size = figures.size_label(matrix.size_bytes)
    return f"{matrix.op} {matrix.algorithm}, {how}: {what} at {size}"


def p2p(view: RunView) -> Section | None:
    shown = pair_rows(view.preferred)
    if shown.empty:
        return None
    rows = pair_rows(view.rows)
    transfers = shown["op"].astype(str) + " " + shown["algorithm"].astype(str)
    blocks: list[Block] = [cells.launch_line(shown["launch"], transfers)]
    for matrix in pair_matrices(rows):
        labels = [view.rank_labels.get(int(rank), f"rank {rank}") for rank in matrix.values.index]
        blocks.append(Figure(figures.heatmap(matrix, labels, _matrix_title(matrix)), half=True))
    outliers = _weak_pairs(view, rows)
    columns = (
        *("transfer", "metric", "pair", "tier", "concurrent", "value", "tier median"),
        *("% of reference", "why"),
    )
    if outliers:
        blocks.append(
            cells.table(columns, outliers, "outliers: more than 3 MADs worse than their tier")
        )
    else:
        blocks.append(Text("No pair is more than 3 MADs worse than the median of its tier."))
    for fan in why.fanouts(rows, view.nodes):
        size = figures.size_label(fan.size_bytes)
        blocks.append(Text(why.fanout_sentence(fan, view.gpu_names, size), "why"))
    return Section(
        "p2p",
        "Peer to peer",
        tuple(blocks),
        "Every ordered pair of GPUs: bandwidth at the largest size and latency at the smallest, "
        "for each kind of transfer. Outliers (ringed in red) are more than 3 MADs worse than "
        "the median of their tier.",
    )


def _weak_pairs(view: RunView, rows: pd.DataFrame) -> list[tuple[Cell, ...]]:
    """A line for each pair more than 3 MADs worse than the median of its tier, with why."""
    names, nodes = view.rank_labels, view.nodes
    outliers: list[tuple[Cell, ...]] = []
    uuid_of = {
        int(rank): str(uuid)
        for column in ("src", "dst")
        for rank, uuid in zip(rows[f"{column}_rank"], rows[f"{column}_gpu_uuid"], strict=True)
        if not missing(rank) and not missing(uuid)
    }
    for (op, algorithm), part in rows.groupby(["op", "algorithm"], sort=True):
        for metric in METRICS:
            table = pair_table(part, str(op), str(algorithm), metric)
            median = table.groupby(["tier", "concurrent"])["value"].transform("median")
            routes = [
                why.route_label(nodes, uuid_of.get(int(a), ""), uuid_of.get(int(b), ""))
                for a, b in zip(table["src_rank"], table["dst_rank"], strict=True)
            ]
            for index in table.index[table["outlier"]]:
                pair = table.loc[index]
                same_tier = table["tier"] == pair["tier"]
                line = why.pair_line(
                    nodes,
                    uuid_of.get(int(pair["src_rank"]), ""),
                    uuid_of.get(int(pair["dst_rank"]), ""),
                    [r for r, same in zip(routes, same_tier, strict=True) if same],
                    view.health.evidence,
                    view.gpu_names,
                )
                ref = view.references.get((str(pair["tier"]), 2, label(str(op), str(algorithm))))
                of_ref = share(pair["value"], ref) if metric == "bandwidth" else None
                outliers.append(
                    (
                        Cell(f"{op} {algorithm}"),
                        Cell(metric),
                        Cell(f"{names[int(pair['src_rank'])]} -> {names[int(pair['dst_rank'])]}"),
                        Cell(str(pair["tier"])),
                        Cell("yes" if pair["concurrent"] else "no"),
                        cells.num(pair["value"], cells.SIG, "bad"),
                        cells.num(median[index], cells.SIG),
                        Cell(
                            cells.fmt(None if of_ref is None else 100 * of_ref, ".0f"),
                            "num",
                            ref.source if ref and of_ref is not None else "",
                        ),
                        Cell(line, "wrap why"),
                    )
                )
    return outliers
