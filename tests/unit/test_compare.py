"""Comparing two runs point by point: changes, the noise two runs show, and the verdicts."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import RegressionRule, point_changes
from sweeper.analysis.changes import CHANGE_COLUMNS, SIZE_CLASSES, size_class
from sweeper.results.load import load
from sweeper.results.writer import ResultWriter
from tests import report_data
from tests.synthetic import point_row

RESULTS = Path(__file__).parents[1] / "data/results"
RECORDED = RESULTS / "h200-x4-identical-2026-11-27"
H100 = "h100-x4-identical-2026-11-28"


def timed(size: int, time_us: float, spread: float = 0.002, **extra: object) -> dict[str, object]:
    """An ok point whose three blocks lie `spread` either side of its time."""
    blocks = [time_us * (1 - spread), time_us, time_us * (1 + spread)]
    return point_row(size, time_us, time_us_blocks=blocks, **extra)


def _run(root: Path, run_id: str, rows: list[dict[str, object]]) -> pd.DataFrame:
    writer = ResultWriter(root, run_id, "2026-11-22")
    for row in rows:
        writer.append({"run_id": run_id, **row})
    writer.flush()
    return load(root, run_id=run_id)


def _recorded() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = load(RECORDED)
    first, second = sorted(rows["run_id"].unique())
    return rows[rows["run_id"] == first], rows[rows["run_id"] == second]


def test_two_identical_h200_runs_flag_no_point_either_way() -> None:
    """The recorded pair (4 H200, back to back): per-iteration samples called 14 of its 77
    points regressions or improvements; by their blocks and the floors, none is."""
    first, second = _recorded()
    for base, new in ((first, second), (second, first)):
        changes = point_changes(base, new)
        assert (changes["present"] == "both").sum() == 77
        assert not changes["regression"].any()
        assert not changes["improvement"].any()
        assert set(changes["verdict"]) <= {"unchanged", "unclear"}


def _slower_from_1_mib(run: pd.DataFrame) -> pd.DataFrame:
    """The run with every time from 1 MiB 10% longer, its blocks included."""
    large = run["size_bytes"] >= 2**20
    slower = run.copy()
    slower.loc[large, "time_us"] *= 1.1
    slower.loc[large, "busbw_gb_per_s"] /= 1.1
    slower["time_us_blocks"] = [
        [t * 1.1 for t in blocks] if big else blocks
        for big, blocks in zip(large, slower["time_us_blocks"], strict=True)
    ]
    return slower


def _identical_runs(path: Path, runs: int) -> list[pd.DataFrame]:
    """The first `runs` runs of a recorded directory, by run id (the runs of one command)."""
    return [group for _, group in sorted(load(path).groupby("run_id"))][:runs]


@pytest.mark.parametrize(
    ("recorded", "runs"),
    [
        ("h200-x4-identical-2026-11-27", 2),
        ("h200-x2-identical-2026-11-27", 3),
        ("h100-x4-identical-2026-11-28", 3),
    ],
)
def test_a_10_percent_slowdown_from_1_mib_on_recorded_gpu_noise_is_seen(
    recorded: str, runs: int
) -> None:
    """Every ordered pair of a machine's identical runs, the second with every time from
    1 MiB 10% longer: at least 95% of those points regressions, the rest unclear or
    unchanged, none below 1 MiB. send_recv's own points move by up to 16% between identical
    runs (one size now and then), so by its point's noise alone it was seen at 77-92% of them;
    its size class moving as a whole is what shows it."""
    found = judged = 0
    for base, new in itertools.permutations(_identical_runs(RESULTS / recorded, runs), 2):
        changes = point_changes(base, _slower_from_1_mib(new))
        large = changes[changes["size_bytes"] >= 2**20]
        found += int(large["regression"].sum())
        judged += len(large)
        assert set(large.loc[~large["regression"], "verdict"]) <= {"unclear", "unchanged"}
        assert not changes["improvement"].any()
        assert not changes.loc[changes["size_bytes"] < 2**20, "regression"].any()
    assert found >= 0.95 * judged, (found, judged)


def test_three_identical_runs_on_four_h100_flag_no_point_any_way_round() -> None:
    for base, new in itertools.permutations(_identical_runs(RESULTS / H100, 3), 2):
        changes = point_changes(base, new)
        assert len(changes) == 77
        assert set(changes["verdict"]) <= {"unchanged", "unclear"}, changes[
            ["op", "size_bytes", "busbw_change", "noise", "class_change", "class_noise"]
        ]


def test_sixteen_nccl_channels_on_four_h100_are_a_regression_where_they_cost() -> None:
    """The fourth recorded run on 4 H100 had NCCL_MAX_NCHANNELS=16 (24 by default): from
    1 MiB all_reduce and all_gather lost 5-19%, about the 10% a fleet must see, and send_recv
    to 64 MiB 23-48%; send_recv at 128 and 256 MiB did not move. Against each identical run,
    at least 95% of the points that moved are regressions, and no point that did not is."""
    *identical, narrowed = (group for _, group in sorted(load(RESULTS / H100).groupby("run_id")))
    found = moved = 0
    for base in identical:
        changes = point_changes(base, narrowed)
        large = changes[changes["size_bytes"] >= 2**20]
        kept = (large["op"] == "send_recv") & (large["size_bytes"] >= 2**27)
        found += int(large.loc[~kept, "regression"].sum())
        moved += int((~kept).sum())
        assert not large.loc[kept, "regression"].any()
        assert not changes["improvement"].any()
    assert moved == 75
    assert found >= 0.95 * moved, (found, moved)


def test_a_size_class_that_moved_as_a_whole_is_a_regression_at_each_point_that_moved(
    tmp_path: Path,
) -> None:
    """Five sizes of one class, tight blocks, a cause that slows them all by 10% while the
    run was dealt one size as fast as before and another 10% slower still: their scatter
    makes each point's own noise 16%, so by it alone only the slowest is a regression; the
    class's median moved by 9% with no error, so each point that moved is, and the one that
    did not is not. One size 9% slower alone moves no class."""
    sizes = [2**20, 2**21, 2**22, 2**23, 2**24]
    base = _run(tmp_path, "base", [timed(s, 100.0) for s in sizes])
    times = [110.0, 110.0, 100.0, 110.0, 120.0]
    new = _run(tmp_path, "new", [timed(s, t) for s, t in zip(sizes, times, strict=True)])
    changes = point_changes(base, new).set_index("size_bytes")
    assert changes["class_change"].iloc[0] == pytest.approx(-1 / 11)
    assert (changes["noise"] > 0.15).all()
    assert changes["regression"].tolist() == [True, True, False, True, True]
    alone = _run(tmp_path, "alone", [timed(s, 109.0 if s == 2**21 else 100.0) for s in sizes])
    one = point_changes(base, alone).set_index("size_bytes")
    assert not one["regression"].any()
    assert one["class_change"].iloc[0] == pytest.approx(0.0)


CHANNELS = Path(__file__).parents[1] / "data/results/h200-x4-channels-2026-11-27"


def test_fewer_nccl_channels_on_h200_is_a_regression_wherever_it_costs_more_than_the_floor() -> (
    None
):
    """Three runs on 4 H200, the third with NCCL_MAX_NCHANNELS=2: A and B flag nothing either
    way; against C every all_reduce and all_gather point from 64 KiB is a regression, though
    the loss grows with size (16-20% at 64 KiB, 73% at 512 KiB, 87% at 256 MiB), which the
    class's spread around its median took for noise (all eight came out unclear)."""
    runs = load(CHANNELS)
    a, b, c = (group for _, group in sorted(runs.groupby("run_id")))
    for base, new in ((a, b), (b, a)):
        assert set(point_changes(base, new)["verdict"]) <= {"unchanged", "unclear"}
    changes = point_changes(a, c)
    assert not changes["improvement"].any()
    from_64k = changes[(changes["size_bytes"] >= 2**16) & (changes["op"] != "send_recv")]
    assert len(from_64k) == 26
    assert from_64k["regression"].all(), from_64k[["op", "size_bytes", "busbw_change", "noise"]]
    assert changes.loc[changes["size_bytes"] >= 2**20, "regression"].all()


def test_a_slower_point_is_a_regression_and_a_faster_one_an_improvement(tmp_path: Path) -> None:
    # three series (dtypes) of one large point each: no scatter
    dtypes = ("float32", "bfloat16", "float16")
    base = _run(tmp_path, "base", [timed(2**22, 100.0, dtype=d) for d in dtypes])
    new = _run(
        tmp_path,
        "new",
        [timed(2**22, t, dtype=d) for t, d in zip((125.0, 101.0, 80.0), dtypes, strict=True)],
    )
    changes = point_changes(base, new).set_index("dtype").loc[list(dtypes)]
    assert tuple(point_changes(base, new).columns) == CHANGE_COLUMNS
    assert changes.loc["float32", "busbw_change"] == pytest.approx(100 / 125 - 1)
    assert changes.loc["float32", "time_change"] == pytest.approx(0.25)
    assert changes["verdict"].tolist() == ["regression", "unchanged", "improvement"]
    assert changes["regression"].tolist() == [True, False, False]
    assert changes["improvement"].tolist() == [False, False, True]
    assert (changes["present"] == "both").all()


def test_a_verdict_reads_the_same_either_way_round(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [timed(2**22, 100.0)])
    new = _run(tmp_path, "new", [timed(2**22, 200.0)])
    assert point_changes(base, new)["verdict"].tolist() == ["regression"]
    assert point_changes(new, base)["verdict"].tolist() == ["improvement"]


@pytest.mark.parametrize(
    ("size", "verdict"),
    [(1024, "unclear"), (256 * 2**10, "unclear"), (4 * 2**20, "regression")],
)
def test_a_change_below_its_size_classes_floor_is_unclear(
    tmp_path: Path, size: int, verdict: str
) -> None:
    """8% slower with blocks 0.2% apart: small and medium messages move more than that
    between identical runs, large ones do not."""
    base = _run(tmp_path, "base", [timed(size, 100.0)])
    new = _run(tmp_path, "new", [timed(size, 108.0)])
    assert point_changes(base, new)["verdict"].tolist() == [verdict]


def test_floors_grow_as_sizes_shrink() -> None:
    assert [c.floor for c in SIZE_CLASSES] == sorted((c.floor for c in SIZE_CLASSES), reverse=True)
    assert size_class(2**20 - 1).name == "medium"
    assert size_class(2**20).name == "large"


def test_a_change_within_what_the_blocks_spread_is_unclear(tmp_path: Path) -> None:
    """20% slower, but each run's blocks spread 10%: k = 3 of their combined spread is more
    than the change; tight blocks make the same change a regression."""
    base = _run(tmp_path, "base", [timed(2**22, 100.0, spread=0.05)])
    new = _run(tmp_path, "new", [timed(2**22, 120.0, spread=0.05)])
    changes = point_changes(base, new)
    assert changes["verdict"].tolist() == ["unclear"]
    assert changes["noise"].iloc[0] > 0.2
    assert point_changes(base, new, RegressionRule(k=1))["verdict"].tolist() == ["regression"]


def test_blocks_that_overlap_are_unclear_whatever_the_change(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [point_row(2**22, 100.0, time_us_blocks=[100.0, 100, 130])])
    new = _run(tmp_path, "new", [point_row(2**22, 120.0, time_us_blocks=[120.0, 120, 120])])
    assert point_changes(base, new, RegressionRule(k=0))["verdict"].tolist() == ["unclear"]


def test_a_point_without_three_blocks_a_side_is_unclear(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [point_row(2**22, 100.0, time_us_blocks=[99.0, 101.0])])
    new = _run(tmp_path, "new", [point_row(2**22, 150.0)])
    changes = point_changes(base, new)
    assert changes["verdict"].tolist() == ["unclear"]
    assert np.isnan(changes["base_spread"].iloc[0])


def test_a_series_whose_sizes_move_apart_is_unclear_where_they_agree_a_regression(
    tmp_path: Path,
) -> None:
    """A busy host moves neighbouring sizes by unrelated amounts, a slower link moves them
    alike: the scatter of a series' changes in a size class is noise too."""
    sizes = [2**k for k in range(20, 25)]
    base = _run(tmp_path, "base", [timed(s, 100.0) for s in sizes])
    times = (90.0, 150.0, 100.0, 70.0, 120.0)
    busy = _run(tmp_path, "busy", [timed(s, t) for s, t in zip(sizes, times, strict=True)])
    slower = _run(tmp_path, "slow", [timed(s, 120.0) for s in sizes])
    assert set(point_changes(base, busy)["verdict"]) == {"unclear", "unchanged"}
    assert point_changes(base, busy)["scatter"].notna().all()
    assert set(point_changes(base, slower)["verdict"]) == {"regression"}


def test_a_change_one_size_alone_shows_is_unclear_and_one_its_neighbour_shares_is_not(
    tmp_path: Path,
) -> None:
    """Tight blocks and two sizes of a class, too few for a scatter: one of them 20% slower
    and the other as it was is what the state a run is dealt does to one size now and then,
    so unclear; both 20% slower is what a slower path does, so a regression at each."""
    sizes = [2**18, 2**19]
    base = _run(tmp_path, "base", [timed(s, 100.0) for s in sizes])
    one = _run(tmp_path, "one", [timed(2**18, 120.0), timed(2**19, 100.0)])
    both = _run(tmp_path, "both", [timed(s, 120.0) for s in sizes])
    alone = point_changes(base, one).set_index("size_bytes")
    assert alone.loc[2**18, "verdict"] == "unclear"
    assert alone["scatter"].isna().all()  # what left the old rule a regression there
    assert not alone["regression"].any()
    shared = point_changes(base, both).set_index("size_bytes")
    assert shared["regression"].all()


X2 = Path(__file__).parents[1] / "data/results/h200-x2-identical-2026-11-27"


def test_three_identical_runs_on_two_h200_flag_no_point_any_way_round() -> None:
    """all_reduce at 256 KiB came 12% faster in one of the three runs, beyond its class's
    floor and its blocks' spread, while the sizes beside it agreed within 1.6%: it was called
    an improvement one way and a regression the other, 4 of 162 point-comparisons."""
    runs = [group for _, group in sorted(load(X2).groupby("run_id"))]
    for base, new in itertools.permutations(runs, 2):
        changes = point_changes(base, new)
        assert len(changes) == 27
        assert set(changes["verdict"]) <= {"unchanged", "unclear"}, changes[
            ["op", "size_bytes", "busbw_change", "noise"]
        ]


def test_a_point_failing_only_now_regressed(tmp_path: Path) -> None:
    base = _run(
        tmp_path, "base", [timed(64, 10.0), timed(128, 10.0, status="oom"), timed(256, 9.0)]
    )
    failed = {**point_row(64, 10.0), "status": "oom", "time_us": None, "busbw_gb_per_s": None}
    new = _run(tmp_path, "new", [failed, timed(128, 10.0), {**failed, "size_bytes": 256}])
    base.loc[base["size_bytes"] == 256, "status"] = "oom"
    changes = point_changes(base, new).set_index("size_bytes")
    assert changes["verdict"].to_dict() == {64: "regression", 128: "improvement", 256: "unchanged"}
    assert changes.loc[64, "regression"]
    assert not changes.loc[64, "improvement"]
    assert changes.loc[128, "improvement"]
    assert not changes.loc[128, "regression"]


def test_points_of_one_run_only_are_kept_but_not_judged(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [timed(64, 10.0), timed(128, 10.0)])
    new = _run(tmp_path, "new", [timed(64, 10.0), timed(256, 99.0)])
    changes = point_changes(base, new).set_index("size_bytes")
    assert changes["present"].to_dict() == {64: "both", 128: "base", 256: "new"}
    assert changes["verdict"].isna().tolist() == [False, True, True]
    assert not changes["regression"].any()
    assert not changes["improvement"].any()


def test_pairs_and_parameters_are_part_of_a_point(tmp_path: Path) -> None:
    """Every ordered pair of a p2p matrix, and every MoE routing, is a point of its own;
    missing pair columns (collectives) still match each other."""
    report_data.write_run(tmp_path, "base")
    report_data.write_run(tmp_path, "new", slow=1.25)
    base, new = load(tmp_path, run_id="base"), load(tmp_path, run_id="new")
    changes = point_changes(base, new)
    assert len(changes) == len(new) == len(base)
    assert (changes["present"] == "both").all()
    ok = changes["new_status"] == "ok"
    assert changes.loc[ok, "busbw_change"].to_numpy() == pytest.approx(1 / 1.25 - 1)
    p2p = changes[changes["op"] == "p2p"]
    assert len(p2p) == len(p2p.drop_duplicates(["algorithm", "src_rank", "dst_rank", "size_bytes"]))
    moe = changes[changes["op"] == "all_to_all_v"]
    assert moe["params"].str.contains("tokens=4096").sum() == 2


def test_graph_rows_compare_with_graph_rows_and_eager_with_eager(tmp_path: Path) -> None:
    """A run timed both ways: the eager time regressed (the launch path), the graph time did
    not. Rows from before launch modes (no launch) compare with eager rows."""
    big = 2**22
    base = _run(
        tmp_path,
        "base",
        [timed(big, 10.0, launch="graph"), timed(big, 20.0, launch="eager"), timed(8, 9.0)],
    )
    new = _run(
        tmp_path,
        "new",
        [
            timed(big, 10.0, launch="graph"),
            timed(big, 30.0, launch="eager"),
            timed(8, 9.0, launch="eager"),
        ],
    )
    changes = point_changes(base, new).set_index(["size_bytes", "launch"])
    assert sorted(changes.index) == [(8, "eager"), (big, "eager"), (big, "graph")]
    assert (changes["present"] == "both").all()
    assert changes.loc[(big, "graph"), "time_change"] == pytest.approx(0.0)
    assert changes.loc[(big, "eager"), "time_change"] == pytest.approx(0.5)
    assert changes["regression"].to_dict() == {
        (big, "graph"): False,
        (big, "eager"): True,
        (8, "eager"): False,
    }


def test_a_point_timed_in_another_launch_mode_is_not_compared(tmp_path: Path) -> None:
    base = _run(tmp_path, "base", [timed(64, 20.0, launch="eager")])
    new = _run(tmp_path, "new", [timed(64, 10.0, launch="graph")])
    changes = point_changes(base, new).set_index("launch")
    assert changes["present"].to_dict() == {"eager": "base", "graph": "new"}
    assert not changes["improvement"].any()


def test_every_pair_of_recorded_runs_reads_alike_both_ways() -> None:
    first, second = _recorded()
    forward = point_changes(first, second).set_index(["op", "size_bytes"])["verdict"]
    backward = point_changes(second, first).set_index(["op", "size_bytes"])["verdict"]
    flip = {"regression": "improvement", "improvement": "regression"}
    for key, verdict in itertools.chain(forward.items()):
        assert backward[key] == flip.get(verdict, verdict)
