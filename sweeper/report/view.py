"""One run as the report's sections read it, worked out once per report: which rows each
point counts by, the GPUs' names and health, the links a group's traffic crosses.

Where a point was timed both ways (`--launch graph,eager`), or through both engines, its
preferred row (`analysis.preferred`: graph before eager, nccl before torch) is picked here,
once for the whole run, and every section that shows times or bandwidths reads it; the
launch cost section reads every row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweeper.analysis import label, preferred, tier_name, why
from sweeper.analysis.p2p import pair_rows
from sweeper.analysis.summary import missing
from sweeper.results.records import RunRecord
from sweeper.scan.document import verdicts as read_verdicts
from sweeper.scan.reference import Reference, reference
from sweeper.scan.verdict import Subject
from sweeper.topology import GPU_LINKS, Gpu, Node, gpu_link_peak
from sweeper.wire import Kind, Status, Tier

# Operations over a group, swept over sizes: not the pair matrices (p2p, copy) nor
# experiments (MoE), which have sections of theirs.
_COLLECTIVE_KINDS = (Kind.COLLECTIVE, Kind.COMPOSITE)


@dataclass(frozen=True, kw_only=True, slots=True)
class LinkPeak:
    """The link a tier and group size crosses, and its one-direction peak: that of the
    slowest GPU of its groups (NVLink: all its links together; PCIe: generation x width),
    None where NVML did not give every GPU's."""

    name: str
    peak_gb_per_s: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunView:
    rows: pd.DataFrame  # every row of the run, in the order measured
    record: RunRecord | None
    base: pd.DataFrame | None  # a baseline run's rows, to compare with
    preferred: pd.DataFrame  # each point's rows in its preferred launch mode, any status
    collectives: pd.DataFrame  # operations over a group swept over sizes: every row
    preferred_collectives: pd.DataFrame  # the same in their preferred launch mode
    ok_collectives: pd.DataFrame  # of those, the points that ran: what the figures show
    nodes: tuple[Node, ...]  # as the run record saw them; none without one
    gpu_names: Mapping[str, str]  # UUID: 'n0 GPU3', else the start of the UUID
    health: why.GpuHealth  # every GPU's readings and the evidence of those that differ
    link_peaks: Mapping[tuple[str, int], LinkPeak]  # (tier with its variant, group size)
    rank_labels: Mapping[int, str]  # a pair's rank: 'n0 GPU3', else 'rank 5'
    scan: Mapping[str, Any] | None  # a fleet scan's summary (results.scans); None: no scan
    nightly: Mapping[str, Any] | None  # a nightly run's judgment (results.summaries)
    drained: frozenset[str]  # node ids a scan's condemned verdicts name, but a group's
    # (tier with its variant, group size, operation): the reference figure, where one is known
    references: Mapping[tuple[str, int, str], Reference]

    @classmethod
    def of(
        cls,
        rows: pd.DataFrame,
        record: RunRecord | None,
        base: pd.DataFrame | None = None,
        scan: Mapping[str, Any] | None = None,
        nightly: Mapping[str, Any] | None = None,
    ) -> RunView:
        nodes = record.nodes if record else ()
        points = preferred(rows)
        collectives = _collective(rows)
        preferred_collectives = _collective(points)
        return cls(
            rows=rows,
            record=record,
            base=base,
            preferred=points,
            collectives=collectives,
            preferred_collectives=preferred_collectives,
            ok_collectives=preferred_collectives[preferred_collectives["status"] == Status.OK],
            nodes=nodes,
            gpu_names=_gpu_names(rows, nodes),
            health=why.GpuHealth.of(rows),
            link_peaks=_link_peaks(collectives, nodes),
            rank_labels=_rank_labels(pair_rows(rows), nodes),
            scan=scan,
            nightly=nightly,
            drained=drained(scan),
            references=_references(points),
        )


def members(cells: Iterable[Sequence[str] | None]) -> set[str]:
    """Everything a list column (hosts, gpu_uuids) names, over its rows."""
    return {str(member) for cell in cells for member in (cell if cell is not None else ())}


def drained(scan: Mapping[str, Any] | None) -> frozenset[str]:
    """The nodes to drain: those every condemned verdict of a scan names (a node, its GPU or
    NVLink, a link's two ends), but a group's, which names a configuration to fix."""
    if scan is None:
        return frozenset()
    return frozenset(
        node
        for v in read_verdicts(scan)
        if v.condemned and v.subject is not Subject.GROUP
        for node in v.nodes
    )


def _collective(rows: pd.DataFrame) -> pd.DataFrame:
    found: pd.DataFrame = rows[rows["kind"].isin(_COLLECTIVE_KINDS)]
    return found


def _positions(nodes: Sequence[Node]) -> dict[str, str]:
    """'n0 GPU3' for each GPU of the nodes, by UUID."""
    return {
        gpu.uuid: f"n{position} GPU{gpu.index}"
        for position, node in enumerate(nodes)
        for gpu in node.gpus
    }


def _gpu_names(rows: pd.DataFrame, nodes: Sequence[Node]) -> dict[str, str]:
    names = _positions(nodes)
    for uuids in rows["gpu_uuids"]:
        for uuid in uuids if uuids is not None else ():
            names.setdefault(str(uuid), str(uuid)[:12])
    return names


def _link_peaks(rows: pd.DataFrame, nodes: Sequence[Node]) -> dict[tuple[str, int], LinkPeak]:
    by_uuid: dict[str, Gpu] = {gpu.uuid: gpu for node in nodes for gpu in node.gpus}
    out: dict[tuple[str, int], LinkPeak] = {}
    keys = ["tier", "variant", "world_size"]
    for _, part in rows.groupby(keys, sort=False):
        tier, variant, world_size = (part[key].iloc[0] for key in keys)
        if str(tier) not in GPU_LINKS:
            continue
        gpus = [by_uuid.get(u) for u in members(part["gpu_uuids"])]
        name, peak = GPU_LINKS[Tier(str(tier))][0], gpu_link_peak(str(tier), gpus)
        out[(tier_name(str(tier), str(variant)), int(world_size))] = LinkPeak(
            name=name, peak_gb_per_s=peak
        )
    return out


def _rank_labels(rows: pd.DataFrame, nodes: Sequence[Node]) -> dict[int, str]:
    where = _positions(nodes)
    out: dict[int, str] = {}
    for rank_column, uuid_column in (("src_rank", "src_gpu_uuid"), ("dst_rank", "dst_gpu_uuid")):
        for rank, uuid in zip(rows[rank_column], rows[uuid_column], strict=True):
            if not missing(rank):
                out.setdefault(int(rank), where.get(str(uuid), f"rank {int(rank)}"))
    return out


def _nccl_algo(algo: object, env: Iterable[tuple[str, str]] | None) -> str | None:
    """NCCL's algorithm for a row: as NCCL printed it, else as the row's variant pinned it
    (one NCCL_ALGO); None where neither says."""
    if not missing(algo):
        return str(algo)
    pinned = dict(env if env is not None else ()).get("NCCL_ALGO", "")
    return pinned if pinned and "," not in pinned else None


def _references(rows: pd.DataFrame) -> dict[tuple[str, int, str], Reference]:
    """The reference figure (scan.reference) of each tier, group size and operation the rows
    hold, for their GPU model and NCCL's algorithm where every row of it says the same."""
    out: dict[tuple[str, int, str], Reference] = {}
    keys = ["tier", "variant", "world_size", "op", "algorithm"]
    for values, part in rows.groupby(keys, sort=False):
        tier, variant, ranks, op, algorithm = (str(value) for value in values)
        models = set(part["gpu_model"].dropna())
        algos = {_nccl_algo(a, e) for a, e in zip(part["nccl_algo"], part["nccl_env"], strict=True)}
        if len(models) != 1 or tier not in Tier.values():
            continue
        nccl_algo = algos.pop() if len(algos) == 1 else None
        ref = reference(
            models.pop(), Tier(tier), int(ranks), op, algorithm=algorithm, nccl_algo=nccl_algo
        )
        if ref is not None:
            out[(tier_name(tier, variant), int(ranks), label(op, algorithm))] = ref
    return out
