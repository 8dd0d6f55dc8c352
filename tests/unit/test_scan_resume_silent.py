"""A point that timed out keeps, in its rows, which ranks did not answer (`unanswered`: group
ranks), so the nodes that hung are named the same from the rows the scan just made and from
rows read back (`scan.plan.silent_nodes`, which a scan's outcomes use), through the Parquet
writer and reader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from sweeper.commands.plan_estimate import recorded_node, replicated
from sweeper.driver.measurement import RunColumns, of_point
from sweeper.driver.outcome import Outcome, PointResult
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import Group, Member, Placement, expected_placement
from sweeper.results.load import read
from sweeper.results.schema import COLUMNS
from sweeper.results.writer import ResultWriter, columns
from sweeper.scan.fleet import Result, ScanGroup, Stage
from sweeper.scan.plan import silent_nodes
from sweeper.scan.rows import Asked, outcome
from sweeper.wire import Backend, Point, Status, Tier, Timing

DGX = Path(__file__).parents[1] / "data" / "topologies" / "dgx-h100-nvswitch.json"
WHEN = datetime(2026, 11, 28, 3, 0, tzinfo=timezone.utc)
RUN = RunColumns(
    run_id="x",
    run_started_at=WHEN,
    run_kind="scan",
    cluster_name="x",
    sweeper_version="x",
    ray_version="x",
    torch_version="x",
    nccl_version=None,
    cuda_version=None,
    driver_version=None,
    gpu_model=None,
    backend=Backend.GLOO,
)
NODES = replicated(recorded_node(DGX), 3)
IDS = [node.node_id for node in NODES]
# 3 nodes of 2 CPU ranks; the group is the last two nodes' four ranks
PLACED = expected_placement(Backend.GLOO, NODES, [2, 2, 2])
GROUP = Group(Tier.INTERNODE, "default", (2, 3, 4, 5))
ASKED = Asked(latency_bytes=8, bandwidth_bytes=1 << 20)
EXPECTED = {("all_reduce", 8), ("all_reduce", 1 << 20)}


def _rows(placement: Placement, group: Group, unanswered: tuple[int, ...]) -> list[dict[str, Any]]:
    """A scan group's rows: its first point timed out with `unanswered` (the run's rank
    numbers) silent, and so its second was not run (`timeout_ends_group`)."""
    error = f"point took over 5 s; rank {', '.join(map(str, unanswered))} did not answer"
    timed_out = Outcome(Status.TIMEOUT, error=error, unanswered=unanswered)
    not_run = Outcome(Status.ERROR, error="not run: a point of its group timed out before it")
    out = []
    for size, how in ((8, timed_out), (1 << 20, not_run)):
        point = Point(
            group_id=placement.group_id(group),
            op="all_reduce",
            dtype="float32",
            size_bytes=size,
            count=size // 4,
            timing=Timing(),
        )
        done = PointResult(
            group=group,
            point=point,
            collective=REGISTRY["all_reduce"],
            outcome=how,
            wave=1,
            started_at=WHEN,
            ended_at=WHEN,
            max_size_bytes=None,
            probe_s=None,
            shares_node=False,
        )
        made = of_point(RUN, placement, done)
        out += [dict(columns(replace(row, stage="screen"))) for row in made]
    return out


def _read_back(root: Path, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows through the writer's Parquet and back, as a reader of the results reads them."""
    writer = ResultWriter(root, "x", "2026-11-28")
    for row in rows:
        writer.append(row)
    writer.close()
    back: list[dict[str, Any]] = read(root, COLUMNS, ds.field("run_id") == "x").to_pylist()
    return back


def test_a_timed_out_points_rows_read_back_name_the_node_that_did_not_answer(
    tmp_path: Path,
) -> None:
    rows = _read_back(tmp_path, _rows(PLACED, GROUP, unanswered=(4, 5)))
    silent = silent_nodes(PLACED, [GROUP], rows)
    screen = ScanGroup(wave=1, stage=Stage.SCREEN, nodes=(IDS[1], IDS[2]))
    got = outcome(screen, rows, EXPECTED, ASKED, silent=silent)

    assert [row["unanswered"] for row in rows] == [[2, 3], None]  # group ranks 2, 3: ranks 4, 5
    assert silent == {IDS[2]}
    assert got.result is Result.FAILED
    assert got.unanswered == (IDS[2],)


def test_a_resumed_scan_whose_rank_numbers_moved_names_the_same_node() -> None:
    """A node lost before the resume renumbers the ranks; the group ranks a row keeps, in
    its group id's node order, still say which node hung."""
    rows = _rows(PLACED, GROUP, unanswered=(4, 5))
    first = tuple(m for m in PLACED.members if m.node > 0)
    renumbered = tuple(Member(rank, m.node, m.local) for rank, m in enumerate(first))
    resumed = replace(PLACED, members=renumbered)
    group = Group(Tier.INTERNODE, "default", (0, 1, 2, 3))
    assert resumed.group_id(group) == PLACED.group_id(GROUP)

    assert silent_nodes(resumed, [group], rows) == {IDS[2]}


def test_where_every_node_of_a_group_went_silent_none_is_named_but_a_nodes_own_group_is() -> None:
    assert silent_nodes(PLACED, [GROUP], _rows(PLACED, GROUP, unanswered=(2, 3, 4, 5))) == set()
    alone = Group(Tier.CPU, "default", (4, 5))
    assert silent_nodes(PLACED, [alone], _rows(PLACED, alone, unanswered=(4, 5))) == {IDS[2]}
