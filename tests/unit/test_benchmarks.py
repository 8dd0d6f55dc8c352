"""The GPU benchmarks' pure parts, on CPU: the bare loop's graph unit, fidelity's comparison
and gate, actor_cost.py's split of it, and nccl_tests.py's reading of nccl-tests' JSON and its
matching to sweeper's rows (on documents written as nccl-tests 2.19.6's src/util.cu writes
them)."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))  # scripts, not a package

import actor_cost
import bare
import fidelity
import nccl_tests
import pinning

from sweeper.fabric.multicast import MULTICAST_OFF
from sweeper.ops.registry import REGISTRY
from sweeper.planning.dtypes import DTYPES
from sweeper.rank.timing import graph_unit

DATA = Path(__file__).parents[1] / "data" / "nccl_tests"
MIB = 2**20


def _run(name: str) -> nccl_tests.Run:
    return nccl_tests.parse_run(json.loads((DATA / name).read_text()))


def test_bare_graphs_split_a_row_as_sweeper_does_with_iters() -> None:
    for iters in range(1, 10_001):
        unit = graph_unit(iters)
        row_iters = math.ceil(iters / unit) * unit  # what the row records
        assert bare.graph_unit(iters) == unit
        assert bare.graph_unit(row_iters) == unit
        assert row_iters % unit == 0


def test_bare_loop_has_every_core_operation() -> None:
    assert set(bare.FACTORS) == {c.name for c in REGISTRY.values() if c.core and c.kind != "copy"}


def _compared(**given: Any) -> fidelity.Compared:
    values: dict[str, Any] = {
        "name": "all_reduce",
        "size_bytes": 8,
        "launch": "eager",
        "iters": 100,
        "warmup_iters": 10,
        "moves_data": True,
        "sweeper_factor": 1.5,
        "bare_factor": 1.5,
        "sweeper_repeats_us": ((10.0,),),
        "bare_repeats_us": ((10.0,),),
    }
    return fidelity.Compared(**{**values, **given})


def _once(sweeper_us: float, bare_us: float = 10.0) -> dict[str, Any]:
    """One repeat of one block on each side."""
    return {"sweeper_repeats_us": ((sweeper_us,),), "bare_repeats_us": ((bare_us,),)}


def test_fidelity_ratio_is_the_median_of_each_repeats_pair() -> None:
    # Each repeat's median block; the two sides' slow spells fall in the same repeats.
    point = _compared(
        sweeper_repeats_us=((11.0, 13.0, 12.0), (39.0, 40.0, 41.0), (24.0, 25.0, 26.0)),
        bare_repeats_us=((10.0, 30.0, 10.0), (38.0, 38.0, 40.0), (25.0, 24.0, 25.0)),
    )
    assert [s / b for s, b in point.pairs] == pytest.approx([1.2, 40 / 38, 1.0])
    assert point.time_ratio == pytest.approx(40 / 38)
    assert point.sweeper_time_us == 25.0
    assert point.bare_time_us == 25.0
    assert point.bw_ratio == pytest.approx(38 / 40)


def test_fidelity_shows_the_fastest_blocks_ratio_without_gating_it() -> None:
    # The bare loop caught one fast spell: a lone block that decides the fastest-block ratio.
    point = _compared(
        sweeper_repeats_us=((44.0, 45.0, 46.0), (44.0, 45.0, 47.0)),
        bare_repeats_us=((33.0, 44.0, 45.0), (44.0, 45.0, 46.0)),
    )
    assert point.fastest_ratio == pytest.approx(44 / 33)
    assert point.time_ratio == pytest.approx(1.0, abs=0.02)
    assert not fidelity.Gate().problems(point)


def test_fidelity_bandwidth_ratio_uses_both_factors_and_algbw_on_one_rank() -> None:
    wrong_factor = _compared(sweeper_factor=0.75, bare_factor=1.5)
    assert wrong_factor.bw_ratio == pytest.approx(0.5)
    one_rank = _compared(sweeper_factor=0.0, bare_factor=0.0, **_once(20.0))
    assert one_rank.bw_ratio == pytest.approx(0.5)


def test_gate_fails_slow_eager_calls_at_any_size_but_not_graph_replays() -> None:
    gate = fidelity.Gate()
    slow = _once(11.2)
    assert gate.problems(_compared(**slow))
    assert gate.problems(_compared(size_bytes=64 * MIB, **slow))
    assert not gate.problems(_compared(launch="graph", **slow))
    assert not gate.problems(_compared(**_once(10.9)))


def test_gate_fails_low_bandwidth_from_the_floor_in_either_mode() -> None:
    gate = fidelity.Gate()
    low = _once(10.4)  # ratio 0.96
    for launch in ("graph", "eager"):
        assert gate.problems(_compared(size_bytes=256 * MIB, launch=launch, **low))
        assert not gate.problems(_compared(size_bytes=128 * MIB, launch=launch, **low))
    assert not gate.problems(_compared(size_bytes=256 * MIB, **_once(10.2)))


def test_gate_skips_bandwidth_of_in_place_operations_on_one_rank() -> None:
    slow = _once(20.0)
    nothing_moved = _compared(size_bytes=512 * MIB, launch="graph", moves_data=False, **slow)
    assert not fidelity.Gate().problems(nothing_moved)


def test_gate_fails_on_sweeper_failures_and_passes_a_clean_run() -> None:
    gate = fidelity.Gate()
    assert gate.failures([_compared()], []) == []
    assert gate.failures([_compared()], ["gather 8B graph: sweeper oom: ..."]) == [
        "gather 8B graph: sweeper oom: ..."
    ]
    reasons = gate.failures([_compared(**_once(12.0))], [])
    assert reasons == ["all_reduce 8B eager: time ratio 1.200 > 1.1"]


def test_median_interval_holds_the_median_95_times_in_100_however_skewed_the_pairs() -> None:
    rng = random.Random(13)
    for n in (6, 12, 24):
        held = 0
        for _ in range(4000):  # a long tail on one side, as slow spells give: median ln 2
            low, high = fidelity.median_interval([rng.expovariate(1.0) for _ in range(n)])
            held += low <= math.log(2) <= high
        assert 0.95 <= held / 4000 < 0.99, n  # at least 95%, and narrower than the whole range


def test_median_interval_is_the_sign_tests_order_statistics() -> None:
    assert fidelity.median_interval(range(12, 0, -1)) == (3, 10)
    assert fidelity.median_interval(range(1, 101)) == (40, 61)
    assert fidelity.median_interval([2.0, 1.0, 3.0]) == (1.0, 3.0)  # too few: the whole range


def _spread(*ratios: float) -> dict[str, Any]:
    """One block a side per repeat: the bare loop at 10 us, sweeper at each ratio."""
    return {
        "sweeper_repeats_us": tuple((10.0 * r,) for r in ratios),
        "bare_repeats_us": tuple((10.0,) for _ in ratios),
    }


def test_a_point_is_unclear_while_its_interval_holds_the_bound() -> None:
    gate = fidelity.Gate()
    noisy = _spread(0.8, 0.9, 0.95, 1.0, 1.0, 1.02, 1.05, 1.08, 1.2, 1.3, 1.5, 1.9)
    assert _compared(**noisy).time_interval == pytest.approx((0.95, 1.3))
    assert gate.unclear(_compared(**noisy))
    assert not gate.problems(_compared(**noisy))  # its median, 1.035, passes until decided
    assert not gate.unclear(_compared(**_spread(*[0.97, 0.98, 0.99, 1.0, 1.01, 1.02] * 2)))
    assert not gate.unclear(_compared(**_spread(*[1.2, 1.25, 1.3, 1.35, 1.4, 1.5] * 2)))
    assert not gate.unclear(_compared(launch="graph", **noisy))  # graph times are not gated


def test_unclear_points_are_timed_again_over_their_operations_and_span_of_sizes() -> None:
    gate = fidelity.Gate()
    noisy = _spread(0.8, 0.9, 0.95, 1.0, 1.0, 1.02, 1.05, 1.08, 1.2, 1.3, 1.5, 1.9)
    points = [
        _compared(name="send_recv", size_bytes=64, **noisy),
        _compared(name="all_reduce", size_bytes=16 * MIB, **noisy),
        _compared(name="all_reduce", size_bytes=8),
        _compared(name="gather", size_bytes=MIB, launch="graph", **noisy),
    ]
    again = fidelity.Unclear.of(points, gate, ["all_reduce", "gather", "send_recv"])
    assert again == fidelity.Unclear(
        keys=frozenset({("send_recv", 64, "eager"), ("all_reduce", 16 * MIB, "eager")}),
        ops=("all_reduce", "send_recv"),
        sizes=(64, 16 * MIB),
    )
    assert fidelity.Unclear.of(points[2:], gate, ["all_reduce", "gather"]) is None
    assert fidelity.Unclear.of(points, gate, ["gather"]) is None  # not asked for this time


def test_joined_commands_give_each_point_every_pair_and_the_first_commands_row() -> None:
    first = [_compared(iters=100, **_once(12.0)), _compared(size_bytes=64, **_once(10.0))]
    later = [_compared(iters=300, **_once(10.0)), _compared(name="gather", **_once(9.0))]
    joined = fidelity.join(first, later)
    assert [(p.name, p.size_bytes) for p in joined] == [
        ("all_reduce", 8),
        ("all_reduce", 64),
        ("gather", 8),
    ]
    assert joined[0].iters == 100
    assert joined[0].sweeper_repeats_us == ((12.0,), (10.0,))
    assert joined[0].bare_repeats_us == ((10.0,), (10.0,))
    assert fidelity.join([], later) == later


def test_a_fidelity_json_reads_back_into_its_points() -> None:
    points = [_compared(**_spread(1.0, 1.2)), _compared(launch="graph", moves_data=False)]
    figures = json.loads(json.dumps({"points": [p.figures() for p in points]}))
    assert fidelity.read_points(figures) == points


@dataclass(frozen=True)
class _Done:
    """What fidelity.py's command did: its exit status and its output."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_fidelity(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., _Done]:
    """fidelity.py's command in this process, which has imported it already (a process of its
    own spends seconds importing torch again): with --repeats 0 it starts nothing."""
    for name in MULTICAST_OFF:  # main() sets them for its bare loop; put back after the test
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> _Done:
        monkeypatch.setattr(sys, "argv", [fidelity.__file__, *args])
        capsys.readouterr()
        try:
            code = fidelity.main()
        except SystemExit as exc:  # argparse's error
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return _Done(code, out, err)

    return run


def _stored(path: Path, world: int, *points: fidelity.Compared) -> str:
    figures = {"world_size": world, "dtype": "bfloat16", "points": [p.figures() for p in points]}
    path.write_text(json.dumps(figures))
    return str(path)


def test_stored_pairs_are_gated_again_joined_without_a_gpu(
    tmp_path: Path, run_fidelity: Callable[..., _Done]
) -> None:
    # One command's 12 pairs put the point over the bound; with a second command's 20 they
    # do not: the gate reads the joined median.
    over = _stored(tmp_path / "a.json", 1, _compared(**_spread(*[1.05] * 5, *[1.15] * 7)))
    more = _stored(tmp_path / "b.json", 1, _compared(**_spread(*[1.0] * 20)))
    again = ["--repeats", "0", "--confirm", "0", "--with", over]
    alone = run_fidelity(*again, "--out", str(tmp_path / "alone"))
    assert alone.returncode == 1, alone.stderr
    assert "FAIL all_reduce 8B eager: time ratio 1.150 > 1.1" in alone.stdout
    joined = run_fidelity(*again, "--with", more, "--out", str(tmp_path / "joined"))
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout.splitlines()[2].split()[6] == "32"  # the point's pairs
    written = json.loads((tmp_path / "joined" / "fidelity.json").read_text())
    assert written["with"] == [over, more]
    assert len(written["points"][0]["sweeper_repeats_us"]) == 32


def test_stored_pairs_of_another_world_are_refused_and_nothing_is_written(
    tmp_path: Path, run_fidelity: Callable[..., _Done]
) -> None:
    two = _stored(tmp_path / "two.json", 2, _compared())
    done = run_fidelity(
        "--repeats", "0", "--with", two, "--world", "1", "--out", str(tmp_path / "o")
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith("2 ranks of bfloat16, not 1 of bfloat16")
    assert not (tmp_path / "o").exists()


class _Bare:
    """The bare loop's side of a turn: the points it was asked to time, a block each."""

    def __init__(self) -> None:
        self.asked: list[fidelity.BarePoint] = []

    def seconds(self, point: fidelity.BarePoint) -> list[float]:
        self.asked.append(point)
        return [20e-6]


class _Quiet:
    def started(self, run: Any) -> None: ...

    def point(self, row: Any) -> None: ...

    def finished(self, run: Any) -> None: ...


def test_a_confirming_run_times_only_the_unclear_points_on_the_bare_loop() -> None:
    bare = _Bare()
    only = {("all_reduce", 64, "eager")}
    observer = fidelity.Interleaved(bare, _Quiet(), only)  # type: ignore[arg-type]
    rows = [
        {
            **_row(),
            "op": "all_reduce",
            "algorithm": "native",
            "size_bytes": size,
            "launch": "eager",
            "status": "ok",
            "time_us_blocks": [size / 4],
        }
        for size in (8, 64)
    ]
    rows.append({**rows[1], "size_bytes": 512, "status": "timeout", "error": "no reply"})
    for row in rows:
        observer.take(row)
    assert [p.count for p in bare.asked] == [4]  # the 64 B point only
    timed = fidelity.Timed()
    timed.add(observer, rows)
    assert timed.sweeper_us == {("all_reduce", 64, "eager"): [[16.0]]}
    assert timed.bare_us == {("all_reduce", 64, "eager"): [[20.0]]}
    assert timed.failed == ["all_reduce 512B eager: sweeper timeout: no reply"]


def _row(**given: Any) -> dict[str, Any]:
    values = {
        "iters": 200,
        "warmup_iters": 50,
        "world_size": 2,
        "in_place": True,
        "busbw_factor": 1.0,
        "count_elems": 4,
        "dtype": "bfloat16",
        "time_us_blocks": [10.0, 11.0, 12.0],
    }
    return {**values, **given}


def test_compare_takes_each_point_from_its_row_and_both_sides_repeats() -> None:
    key = ("all_reduce", 8, "graph")
    one_rank = ("all_reduce", 512 * MIB, "graph")
    rows = {key: _row(), one_rank: _row(world_size=1, busbw_factor=0.0)}
    points = fidelity.compare(
        rows,
        {key: [[3.0, 2.0, 2.5], [4.0]], one_rank: [[40.0]]},
        {key: [[2.5], [2.0]], one_rank: [[41.0]]},
    )
    assert [(p.name, p.size_bytes, p.launch) for p in points] == [key, one_rank]
    assert points[0].sweeper_repeats_us == ((3.0, 2.0, 2.5), (4.0,))
    assert points[0].time_ratio == pytest.approx((1.0 + 2.0) / 2)
    assert points[0].bare_factor == 1.0
    assert points[0].moves_data
    assert not points[1].moves_data
    assert fidelity.compare(rows, {key: [[3.0]]}, {}) == []  # the bare loop did not run it


def test_bare_points_repeat_the_rows_iterations_warm_up_and_blocks() -> None:
    point = fidelity.bare_point(("gather", 8, "graph"), _row(count_elems=4))
    assert point == fidelity.BarePoint("gather", 4, "bfloat16", "graph", 200, 50, 3)


def test_fidelity_table_marks_the_points_that_fail() -> None:
    gate = fidelity.Gate()
    lines = fidelity.table([_compared(), _compared(**_once(12.0))], gate)
    assert len(lines) == 3
    assert not lines[1].endswith("fails")
    assert lines[2].endswith("<- fails")


def test_actor_cost_splits_fidelitys_ratio_into_the_process_and_the_step() -> None:
    us = 1e-6
    point = actor_cost.Point(
        "send_recv",
        8,
        100,
        {
            ("bare", "plain"): [10 * us, 20 * us, 10 * us],
            ("bare", "actor"): [11 * us, 24 * us, 10 * us],
            ("bare", "child"): [10 * us, 20 * us, 10 * us],
            ("sweeper", "child"): [11 * us, 24 * us, 12 * us],
        },
    )
    assert point.ratio("process") == pytest.approx(1.1)  # median of 1.1, 1.2, 1.0: by repeat
    assert point.ratio("child") == pytest.approx(1.0)  # median of 1.0, 1.0, 1.0
    assert point.ratio("step") == pytest.approx(1.2)  # median of 1.1, 1.2, 1.2
    assert point.ratio("both") == pytest.approx(1.2)  # the child as fast as the plain one
    assert point.us("bare", "actor") == pytest.approx(11)
    assert point.figures()["bare_child_us"] == pytest.approx(10)


def test_actor_cost_table_sums_each_operation_up_over_its_sizes() -> None:
    def point(name: str, size: int, process: float) -> actor_cost.Point:
        times = {timing: [1.0] for timing in actor_cost.TIMINGS}
        slower = {("bare", "actor"): [process], ("sweeper", "child"): [1 / process]}
        return actor_cost.Point(name, size, 10, {**times, **slower})

    points = [point("gather", 8, 1.0), point("gather", 64, 1.21), point("all_reduce", 8, 0.9)]
    lines = actor_cost.table(points)
    assert len(lines) == 1 + len(points) + 2 + 2
    gather = next(line for line in lines[4:] if line.startswith("gather "))
    # process 1.1 (geometric mean of 1 and 1.21), child 1, step and both 1/1.1
    assert gather.split()[1:] == ["1.100", "1.000", "0.909", "0.909"]
    assert actor_cost.sizes(8, 64 * 1024, 8) == [8, 64, 512, 4096, 32768]


def test_nccl_tests_json_reads_into_records_by_requested_size() -> None:
    run = _run("all_gather_perf-G10.json")
    assert run.settings == (2, "bfloat16", 20, 5, 10)
    assert (run.launch, run.nccl_version) == ("graph", 22809)
    assert [r.requested_bytes for r in run.records] == [8, 32, 128]
    assert [r.size_bytes for r in run.records] == [0, 32, 128]  # 8 B: chunks of 0 elements
    assert run.records[1].out_of_place == nccl_tests.Figure(5.872104, 0.005449, 0.002725)
    assert run.records[1].in_place.time_us == 5.86132


def _slower(run: nccl_tests.Run, by: float) -> nccl_tests.Run:
    """The run with every time `by` times longer."""

    def figure(f: nccl_tests.Figure) -> nccl_tests.Figure:
        return replace(f, time_us=f.time_us * by)

    return replace(
        run,
        records=tuple(
            replace(r, out_of_place=figure(r.out_of_place), in_place=figure(r.in_place))
            for r in run.records
        ),
    )


def test_repeated_nccl_tests_runs_keep_each_sizes_run_of_median_time() -> None:
    run = _run("all_gather_perf-G10.json")
    fast, slow = _slower(run, 0.5), _slower(run, 3.0)
    mixed = replace(slow, records=(fast.records[0], *slow.records[1:]))
    median = nccl_tests.median_run([mixed, run, fast])
    assert median.records[0] == fast.records[0]  # fast, run, fast: two of three are fast
    assert median.records[1:] == run.records[1:]  # slow, run, fast
    assert nccl_tests.median_run([fast, slow]).records == fast.records  # even: the lower
    other = replace(run, iters=run.iters + 1)
    with pytest.raises(ValueError, match="different points"):
        nccl_tests.median_run([run, other])


def test_repeated_sweeper_runs_keep_each_points_row_of_median_time() -> None:
    def row(size: int, time_us: float, status: str = "ok", **given: Any) -> dict[str, Any]:
        point = {"op": "all_reduce", "algorithm": "native", "engine": "torch", "launch": "eager"}
        return {**point, "dtype": "bfloat16", "size_bytes": size} | {
            "status": status,
            "time_us": time_us,
            **given,
        }

    repeats = [
        [row(8, 9.0), row(64, 0.0, "timeout"), row(8, 1.0, engine="nccl")],
        [row(8, 5.0), row(64, 0.0, "timeout")],
        [row(8, 7.0), row(64, 3.0)],
    ]
    chosen = {(r["engine"], r["size_bytes"]): r for r in nccl_tests.median_rows(repeats)}
    assert set(chosen) == {("torch", 8), ("torch", 64), ("nccl", 8)}
    assert chosen[("torch", 8)]["time_us"] == 7.0
    assert chosen[("torch", 64)]["time_us"] == 3.0  # the one repeat that measured it
    assert chosen[("nccl", 8)]["time_us"] == 1.0
    never = nccl_tests.median_rows([[row(8, 0.0, "oom")], [row(8, 0.0, "timeout")]])
    assert [r["status"] for r in never] == ["oom"]


def test_pinned_commands_run_on_the_given_cores_only() -> None:
    core = pinning.rank_cores(1)
    argv = ["/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"]
    done = subprocess.run(pinning.pinned(argv, core), capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["Cpus_allowed_list:", str(core.pop())]


@pytest.mark.parametrize(
    ("parent", "parent_placed"),
    [
        (["ray::RankActor.execute", "-c"], True),  # an actor that starts its rank's process
        (["python", "-c"], False),  # its node's rank template, which forks it (placed: never)
    ],
)
def test_pinner_keeps_a_ranks_calling_thread_on_its_cores_and_everything_else_off(
    parent: list[str], parent_placed: bool
) -> None:
    # A process named as Ray names a rank actor, or as a rank template is named, which starts
    # the rank's own process: a main thread that makes the calls, and a second thread besides.
    rank_script = (
        "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); "
        "print('ready', flush=True); time.sleep(60)"
    )
    # named so, its interpreter cannot tell its own path: it is given
    actor_script = f"import subprocess; subprocess.run([{sys.executable!r}, '-c', {rank_script!r}])"
    cores = pinning.rank_cores(1)
    pinner = pinning.Pinner(cores, every_s=0.01)
    argv = [*parent, actor_script, *([] if parent_placed else ["sweeper.rank.template"])]
    unplaced = os.sched_getaffinity(0)
    with subprocess.Popen(
        argv, executable=sys.executable, stdout=subprocess.PIPE, text=True
    ) as actor:
        children = Path(f"/proc/{actor.pid}/task/{actor.pid}/children")
        try:
            assert actor.stdout is not None
            assert actor.stdout.readline() == "ready\n"
            (rank,) = (int(pid) for pid in children.read_text().split())
            threads = {
                pid: sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir())
                for pid in (actor.pid, rank)
            }
            pinner.start()
            # what it places; a sweep sees the parent before its child, so by then it has
            # passed the parent too
            placed = {(p, t) for p, ts in threads.items() if parent_placed or p == rank for t in ts}
            for _ in range(3000):  # it looks every 10 ms; 30 s is far more than it needs
                if placed <= pinner.placed:
                    break
                time.sleep(0.01)
            affinity = {tid: os.sched_getaffinity(tid) for tids in threads.values() for tid in tids}
        finally:
            pinner.close()
            for pid in (int(pid) for pid in children.read_text().split()):
                os.kill(pid, signal.SIGKILL)
            actor.kill()
    pinner.check()
    parent_threads = threads[actor.pid]
    assert affinity == {
        tid: cores
        if tid == rank
        else unplaced
        if tid in parent_threads and not parent_placed
        else pinner.rest
        for tids in threads.values()
        for tid in tids
    }
    assert [len(tids) for tids in threads.values()] == [1, 2]


def test_a_process_watched_after_it_was_placed_is_placed_again_as_one_that_calls() -> None:
    # a rank actor's process, which a benchmark then measures itself (actor_cost.py's actor)
    argv = ["ray::Rank.time", "-c", "print('ready', flush=True); import time; time.sleep(60)"]
    cores = pinning.rank_cores(1)
    pinner = pinning.Pinner(cores, every_s=0.01).start()
    with subprocess.Popen(
        argv, executable=sys.executable, stdout=subprocess.PIPE, text=True
    ) as actor:
        try:
            assert actor.stdout is not None
            assert actor.stdout.readline() == "ready\n"
            placed = []
            for watched in (False, True):
                if watched:
                    pinner.watch([actor.pid])
                for _ in range(3000):
                    if (actor.pid, actor.pid) in pinner.placed:
                        break
                    time.sleep(0.01)
                placed.append(os.sched_getaffinity(actor.pid))
        finally:
            pinner.close()
            actor.kill()
    assert placed == [pinner.rest, cores]


def test_pinner_refuses_a_run_whose_ranks_it_never_saw() -> None:
    pinner = pinning.Pinner(pinning.rank_cores(1))
    pinner.close()
    with pytest.raises(RuntimeError, match="unpinned"):
        pinner.check()


def test_nccl_tests_json_of_another_format_is_refused() -> None:
    document = json.loads((DATA / "broadcast_perf-G0.json").read_text())
    assert nccl_tests.parse_run(document).launch == "eager"
    with pytest.raises(ValueError, match="version 4"):
        nccl_tests.parse_run({**document, "version": 4})
    config = {k: v for k, v in document["config"].items() if k != "step_factor"}
    with pytest.raises(ValueError, match="-f"):
        nccl_tests.parse_run({**document, "config": {**config, "step_bytes": 8}})


def test_nccl_tests_binaries_perform_sweepers_core_operations() -> None:
    core = {c.name for c in REGISTRY.values() if c.core and c.kind != "copy"}
    assert core - set(nccl_tests.BINARIES) == {"reduce_scatter+all_gather", "reduce+broadcast"}
    assert all(REGISTRY[name].op == name for name in nccl_tests.BINARIES)  # how rows are named


def test_nccl_tests_names_every_sweeper_dtype() -> None:
    # nccl-tests' names: src/common.cu, test_typenames
    known = {"int8", "uint8", "int32", "int64", "half", "float", "double", "bfloat16"}
    assert set(nccl_tests.NCCL_TESTS_DTYPES) == set(DTYPES)
    assert set(nccl_tests.NCCL_TESTS_DTYPES.values()) <= known | {"f8e4m3", "f8e5m2"}


def _sweeper_row(launch: str, count: int, in_place: bool, status: str = "ok") -> dict[str, Any]:
    row = {"launch": launch, "count_elems": count, "size_bytes": 2 * count}
    row |= {"in_place": in_place, "status": status}
    if status == "ok":
        row |= {"time_us": 7.0, "algbw_gb_per_s": 2.0, "busbw_gb_per_s": 1.0}
    return row


def test_matching_pairs_rows_with_the_record_of_their_placement_and_launch() -> None:
    runs = {
        ("all_gather", "graph"): _run("all_gather_perf-G10.json"),
        ("broadcast", "eager"): _run("broadcast_perf-G0.json"),
    }
    rows = [
        ("all_gather", _sweeper_row("graph", 4, in_place=False)),  # 8 B: 2 ranks x 2 elements
        ("all_gather", _sweeper_row("graph", 64, in_place=False)),
        ("all_gather", _sweeper_row("eager", 64, in_place=False)),  # no eager run
        ("broadcast", _sweeper_row("eager", 16, in_place=True)),
        ("broadcast", _sweeper_row("graph", 16, in_place=True, status="oom")),
    ]
    itemsize = DTYPES["bfloat16"].itemsize
    lines = nccl_tests.match(rows, runs, lambda name, size: REGISTRY[name].count(size, itemsize, 2))
    tiny, big, eager, broadcast, failed = lines
    assert tiny.nccl_tests == runs[("all_gather", "graph")].records[0].out_of_place
    assert (tiny.size_bytes, tiny.nccl_tests_size_bytes) == (8, 0)
    assert big.nccl_tests == runs[("all_gather", "graph")].records[2].out_of_place
    assert eager.nccl_tests is None
    assert eager.time_ratio is None
    assert broadcast.nccl_tests == runs[("broadcast", "eager")].records[1].in_place
    assert broadcast.time_ratio == pytest.approx(7.0 / 12.07113)
    assert failed.sweeper is None
    assert failed.nccl_tests is None
    text = nccl_tests.text_table(lines)
    assert len(text) == 6
    assert "oom" in text[5]
    assert len(nccl_tests.markdown_table(lines)) == 7


def _line(size_bytes: int, nccl: nccl_tests.Figure) -> nccl_tests.Line:
    mine = nccl_tests.Figure(10.0, 4.0, 2.0)
    return nccl_tests.Line(
        "all_reduce", "torch", "graph", size_bytes, True, "ok", mine, nccl, size_bytes
    )


def test_time_ratios_up_to_64k_and_bandwidth_ratios_from_256m() -> None:
    theirs = nccl_tests.Figure(8.0, 5.0, 2.5)
    assert _line(64 * 2**10, theirs).time_ratio == pytest.approx(1.25)
    assert _line(64 * 2**10, theirs).bw_ratio is None
    assert _line(MIB, theirs).time_ratio is None
    assert _line(MIB, theirs).bw_ratio is None
    assert _line(256 * MIB, theirs).bw_ratio == pytest.approx(0.8)
    one_rank = nccl_tests.Figure(8.0, 5.0, 0.0)
    assert _line(256 * MIB, one_rank).bw_ratio == pytest.approx(0.8)  # algbw


def test_nccl_tests_command_asks_for_sweepers_points() -> None:
    args = argparse.Namespace(
        min_size=8,
        max_size=2**30,
        step_factor=4,
        dtype="bfloat16",
        iters=500,
        warmup=5,
        threads=False,
        register_buffers=False,
    )
    eager = nccl_tests.command(Path("/b/sendrecv_perf"), args, 2, "eager", Path("/o/x.json"))
    assert " ".join(eager) == (
        "/b/sendrecv_perf -b 8 -e 1073741824 -f 4 -g 2 -d bfloat16 -n 500 -w 5 -a 3 -G 0 "
        "-J /o/x.json"
    )
    graph = nccl_tests.command(Path("/b/sendrecv_perf"), args, 2, "graph", Path("/o/x.json"))
    assert " ".join(graph[11:]) == "-n 100 -w 5 -a 3 -G 5 -J /o/x.json"
    # a thread per GPU, as one process per GPU would have it
    args.threads = True
    threads = nccl_tests.command(Path("/b/sendrecv_perf"), args, 2, "eager", Path("/o/x.json"))
    assert " ".join(threads[7:11]) == "-t 2 -g 1"
    # registered buffers on both sides: nccl-tests -R 1 beside sweeper's --register-buffers
    args.register_buffers = True
    registered = nccl_tests.command(Path("/b/sendrecv_perf"), args, 2, "eager", Path("/o/x.json"))
    assert registered[-2:] == ["-R", "1"]


def test_a_size_nccl_tests_rounded_to_nothing_has_no_time_ratio() -> None:
    # at 8 B on two ranks, all_gather's chunk is 4 B: nccl-tests aligns it down to 0 bytes
    figure = nccl_tests.Figure(0.5, 0.0, 0.0)
    line = nccl_tests.Line(
        name="all_gather",
        engine="nccl",
        launch="eager",
        size_bytes=8,
        in_place=False,
        status="ok",
        sweeper=nccl_tests.Figure(11.0, 0.0, 0.0),
        nccl_tests=figure,
        nccl_tests_size_bytes=0,
    )
    assert line.time_ratio is None
    assert replace(line, nccl_tests_size_bytes=16).time_ratio == 22.0


def test_nccl_tests_graphs_replay_as_sweepers_do() -> None:
    # sweeper's graphs hold graph_unit(iters) iterations and are launched until they cover iters
    assert nccl_tests.replays("graph", 500) == (100, 5)
    assert nccl_tests.replays("graph", 150) == (75, 2)
    assert nccl_tests.replays("graph", 20) == (20, 1)
    assert nccl_tests.replays("eager", 500) == (500, 0)


def test_child_environment_keeps_multicast_off_and_finds_nccl_first() -> None:
    environ = {"LD_LIBRARY_PATH": "/usr/lib", "HOME": "/h", "NCCL_NVLS_ENABLE": "2"}
    env = nccl_tests.child_env(environ, [Path("/n/lib")])
    assert env["LD_LIBRARY_PATH"] == "/n/lib:/usr/lib"
    assert env["HOME"] == "/h"
    assert {k: env[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    assert nccl_tests.child_env({}, [])["LD_LIBRARY_PATH"] == ""


def test_nccl_home_gives_the_linker_the_wheels_versioned_library(tmp_path: Path) -> None:
    package = tmp_path / "site" / "nvidia" / "nccl"
    (package / "include").mkdir(parents=True)
    (package / "lib").mkdir()
    (package / "lib" / "libnccl.so.2").write_bytes(b"")
    for _ in range(2):  # a second build reuses the build directory
        home = nccl_tests.nccl_home(package, tmp_path / "build")
    assert (home / "lib" / "libnccl.so").resolve() == (package / "lib" / "libnccl.so.2").resolve()
    assert (home / "include").resolve() == (package / "include").resolve()


def test_nccl_version_codes_read_as_releases() -> None:
    assert nccl_tests.nccl_version(22809) == "2.28.9"
