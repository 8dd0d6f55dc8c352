"""A run keeps each measurement once (`driver.run.RunState.keep`): a row read back from the
results has the key it was made with, the same point in another wave (a scan testing a
group again) is another row, and a resumed run writes none of the rows it already has (a
skipped series' rows, a copy or a scan's wave measured again). Without Ray: the run is
handed a connection that only says its cluster has no GPU."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sweeper.commands.plan_estimate import recorded_node
from sweeper.driver import busy
from sweeper.driver.measurement import ResultRow, RunColumns, of_point
from sweeper.driver.outcome import Outcome, PointResult
from sweeper.driver.run import Resume, RunState, row_key
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import Group, expected_placement
from sweeper.planning.profile import build_spec
from sweeper.results.load import load
from sweeper.results.writer import ResultWriter
from sweeper.wire import Backend, Block, Engine, Launch, Point, RankTimings, Status, Timed, Timing

WHEN = datetime(2026, 12, 2, 3, 0, tzinfo=timezone.utc)
RUN = RunColumns(
    run_id="20261202T030000Z-abcdef",
    run_started_at=WHEN,
    run_kind="scan",
    cluster_name="box",
    sweeper_version="0",
    ray_version="0",
    torch_version="0",
    nccl_version=None,
    cuda_version=None,
    driver_version=None,
    gpu_model=None,
    backend=Backend.GLOO,
)
NODE = recorded_node(Path(__file__).parents[1] / "data" / "topologies" / "cpu-no-nvml.json")
PLACED = expected_placement(Backend.GLOO, [NODE], [2])
GROUP = Group("cpu", "default", (0, 1))


def _rows(wave: int) -> list[ResultRow]:
    """An all_reduce of 1 KiB on two CPU ranks, measured in `wave`."""
    block = Block(seconds=1e-3, iters=10, samples=None)
    timed = Timed(engine=Engine.TORCH, launch=Launch.EAGER, blocks=(block,) * 3, warmup_iters=1)
    point = Point(
        group_id=PLACED.group_id(GROUP),
        op="all_reduce",
        dtype="float32",
        size_bytes=1024,
        count=256,
        timing=Timing(),
    )
    done = PointResult(
        group=GROUP,
        point=point,
        collective=REGISTRY["all_reduce"],
        outcome=Outcome(Status.OK, measured=(RankTimings(timed=(timed,)),) * 2),
        wave=wave,
        started_at=WHEN,
        ended_at=WHEN,
        max_size_bytes=None,
        probe_s=None,
        shares_node=False,
    )
    return [replace(row, stage="screen") for row in of_point(RUN, PLACED, done)]


def test_a_row_read_back_has_the_key_it_was_made_with_and_another_wave_is_another_row(
    tmp_path: Path,
) -> None:
    made = _rows(wave=3)
    writer = ResultWriter(tmp_path, RUN.run_id, "2026-12-02")
    writer.extend(made)
    writer.close()
    back: list[dict[str, Any]] = load(tmp_path, RUN.run_id).to_dict("records")  # type: ignore[assignment]
    assert {row_key(row) for row in back} == {row_key(row) for row in made}
    assert {row_key(row) for row in _rows(wave=4)}.isdisjoint(row_key(row) for row in made)


class _NoGpus:
    watch = None

    def gpus(self) -> int:
        return 0


class _Told:
    def __init__(self) -> None:
        self.rows: list[ResultRow] = []

    def point(self, row: ResultRow) -> None:
        self.rows.append(row)


def test_a_resumed_run_keeps_only_the_rows_it_does_not_have(tmp_path: Path) -> None:
    had = _rows(wave=3)
    resume = Resume(RUN.run_id, WHEN, {}, frozenset(map(row_key, had)), "scan", "sweeper scan")
    spec = build_spec(backend="gloo", results=tmp_path)
    told = _Told()
    run = RunState(spec, told, "scan", _NoGpus(), resume, command="scan")  # type: ignore[arg-type]
    run.begin()
    try:
        run.keep(_rows(wave=3))  # the wave the stop interrupted, measured again
        run.keep(_rows(wave=5))  # a wave it had not reached
    finally:
        assert run.writer is not None
        run.writer.close()
    assert [row.wave for row in run.rows] == [5] * len(had)
    assert told.rows == run.rows


def test_a_run_looks_at_others_threads_no_longer_once_it_begins(tmp_path: Path) -> None:
    """A scan never asks its watch (a sweep does, for its estimate): it looked on beside the
    scan's driver for 30 s."""
    spec = build_spec(backend="gloo", results=tmp_path)
    run = RunState(spec, _Told(), "scan", _NoGpus(), command="scan")  # type: ignore[arg-type]
    run.others = busy.CpuWatch().start()
    run.begin()
    try:
        assert not run.others._thread.is_alive()
    finally:
        assert run.writer is not None
        run.writer.close()
