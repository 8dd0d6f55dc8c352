"""Regression detection on synthetic nightly histories written as real Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis import nightly
from sweeper.analysis.regression import COLUMNS, Policy, detect, run_metrics
from sweeper.planning.profile import NightlySettings
from sweeper.results.load import load
from tests import report_data
from tests.synthetic import History, Series, every_series

DROP = 1 / 0.9  # time x this: bus bandwidth 10% lower, latency 11% higher


def settings(**values: object) -> NightlySettings:
    return NightlySettings.model_validate(values)


POLICY = Policy.of(settings())
# Every group and operation in one dtype (80 series): each series is judged alone, and the 240
# of three dtypes made these tests seconds each, the judging and its Parquet
SERIES = every_series(dtypes=1)


def alarms(history: History, **values: object) -> pd.DataFrame:
    verdict = nightly.judge(history.root, history.run_ids[-1], Policy.of(settings(**values)))
    return verdict.findings


def dropped_on(nights: set[int], which: set[Series] | None = None) -> object:
    def slowdown(night: int, series: Series) -> float:
        return DROP if night in nights and (which is None or series in which) else 1.0

    return slowdown


def test_noise_only_nights_alarm_on_fewer_than_one_percent_of_series(tmp_path: Path) -> None:
    """14 nights of 1% noise, judged as each night came (every night with enough history):
    the share of series x metrics that ever alarmed, over three seeds' histories (480 series
    x metrics in all)."""
    alarmed: set[tuple[object, ...]] = set()
    total = judged = 0
    for seed in range(3):
        root = tmp_path / str(seed)
        history = History(root, SERIES, noise=0.01, seed=seed)
        history.nights(14)
        metrics = run_metrics(load(root, columns=COLUMNS), POLICY.bandwidth_min_size_bytes)
        for tonight in range(POLICY.min_history + 1, 15):
            findings = detect(metrics, history.run_ids[:tonight], POLICY)
            judged += 1
            regressions = findings[findings["status"] == "regression"]
            series = regressions[["group_id", "op", "algorithm", "dtype", "metric"]]
            alarmed |= {(seed, *key) for key in series.itertuples(index=False)}
        total += len(history.series) * 2
    assert judged == 3 * 9
    assert total == 480
    assert len(alarmed) / total < 0.01, sorted(alarmed)


def test_a_ten_percent_drop_that_persists_two_nights_always_alarms(tmp_path: Path) -> None:
    history = History(tmp_path, SERIES, noise=0.01)
    history.nights(14)
    history.nights(2, dropped_on({14, 15}))
    findings = alarms(history)
    assert len(findings) == len(history.series) * 2
    assert (findings["status"] == "regression").all()
    busbw = findings[findings["metric"] == "peak_busbw_gb_per_s"]
    assert busbw["change"].between(-0.14, -0.06).all()
    assert (busbw["z"] < -3.5).all()


def test_a_series_is_worse_exactly_where_tonight_passes_its_threshold(tmp_path: Path) -> None:
    """The threshold is the figure the checks decide by: tonight beyond it is worse, within
    it is not; it lies between the baseline and a worse night's value."""
    history = History(tmp_path, SERIES, noise=0.01)
    history.nights(14)
    history.night(dropped_on({14}, set(SERIES[::2])))
    findings = alarms(history)
    bandwidth = findings["unit"] == "GB/s"
    beyond = (findings["value"] <= findings["threshold"]).where(
        bandwidth, findings["value"] >= findings["threshold"]
    )
    worse = findings["status"] == "worse"
    assert worse.sum() >= len(SERIES)  # the dropped half, both metrics
    assert (beyond == worse).all()
    between = (findings["threshold"] - findings["baseline"]) / findings["baseline"]
    assert (between[bandwidth & worse] < 0).all()
    assert (between[~bandwidth & worse] > 0).all()


def test_a_single_night_blip_does_not_alarm(tmp_path: Path) -> None:
    history = History(tmp_path, SERIES, noise=0.01)
    history.nights(14)
    history.night(dropped_on({14}))
    findings = alarms(history)
    assert not (findings["status"] == "regression").any()
    assert (findings["status"] == "worse").all()  # seen, and named, but not an alarm


def test_a_blip_followed_by_a_normal_night_does_not_alarm(tmp_path: Path) -> None:
    history = History(tmp_path, SERIES, noise=0.01)
    history.nights(14)
    history.night(dropped_on({14}))
    history.night()
    findings = alarms(history)
    assert not findings["status"].isin(["regression", "worse"]).any()


def test_only_the_slowed_series_alarm(tmp_path: Path) -> None:
    slowed = {SERIES[3], SERIES[50]}
    history = History(tmp_path, SERIES, noise=0.01)
    history.nights(10)
    history.nights(2, dropped_on({10, 11}, slowed))
    findings = alarms(history).assign(series=lambda f: f.apply(nightly.series_name, axis=1))
    assert set(findings.loc[findings["status"] == "regression", "series"]) == {
        s.name for s in slowed
    }


def test_each_direction_of_a_pair_is_a_series_of_its_own(tmp_path: Path) -> None:
    """p2p and p2p:reverse share group, op and algorithm: only the pair tells them apart."""
    pair = ("nvlink", "default", "nvlink:n0g0,1", 2, "p2p", "uni", "bfloat16")
    forward, backward = Series(*pair, src_rank=0, dst_rank=1), Series(*pair, 1, 0)
    history = History(tmp_path, [forward, backward], noise=0.01)
    history.nights(8)
    history.nights(2, dropped_on({8, 9}, {backward}))
    findings = alarms(history)
    assert len(findings) == 4
    regressions = findings[findings["status"] == "regression"]
    assert set(regressions.apply(nightly.series_name, axis=1)) == {
        "nvlink:n0g0,1 p2p (uni) bfloat16 1->0"
    }


def test_each_launch_mode_of_a_run_timed_both_ways_is_a_series_of_its_own(tmp_path: Path) -> None:
    """Only the eager series slowed (say, a torch upgrade lengthened the launch path): it
    alarms, and the graph series of the same points does not. Eager series are named as
    before launch modes; graph series say so."""
    point = ("nvlink", "default", "nvlink:n0g0,1", 2, "all_reduce", "native", "bfloat16")
    eager, graph = Series(*point, launch="eager"), Series(*point, launch="graph")
    history = History(tmp_path, [graph, eager], noise=0.01)
    history.nights(8)
    history.nights(2, dropped_on({8, 9}, {eager}))
    findings = alarms(history)
    assert len(findings) == 4
    assert set(findings["launch"]) == {"graph", "eager"}
    named = findings.assign(series=findings.apply(nightly.series_name, axis=1))
    assert set(named.loc[named["status"] == "regression", "series"]) == {eager.name}
    assert set(named.loc[named["launch"] == "graph", "series"]) == {
        "nvlink:n0g0,1 all_reduce bfloat16 graph"
    }
    assert set(named.loc[named["launch"] == "graph", "status"]) == {"ok"}


def test_graph_nights_are_not_judged_against_eager_nights(tmp_path: Path) -> None:
    """Nights from before launch modes (no launch: eager), then nights with CUDA graphs, 40%
    faster at small sizes: a new series, not an improvement of the old one."""
    point = ("nvlink", "default", "nvlink:n0g0,1", 2, "all_reduce", "native", "bfloat16")
    history = History(tmp_path, [Series(*point)], noise=0.01)
    history.nights(8)
    history.series = [Series(*point, launch="graph")]
    history.nights(2, lambda night, series: 0.6)
    findings = alarms(history)
    assert set(findings["launch"]) == {"graph"}
    assert (findings["status"] == "new").all()
    assert (findings["baseline_runs"] == 0).all()  # the eager nights are not its baseline


def test_every_pair_matrix_entry_and_moe_routing_of_a_gpu_run_is_a_series(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "gpu")
    metrics = run_metrics(load(tmp_path, columns=COLUMNS), 256 * 2**20)
    times = metrics[metrics["metric"] == "smallest_size_time_us"]
    pairs = 12 * 3  # ordered pairs of 4 GPUs x (p2p uni, p2p bi, copy)
    moe = 2 * 2  # (dispatch, combine) x two routings
    assert len(times) == len(report_data.MODELS) + pairs + moe
    assert (times["size_bytes"] == 8).sum() == len(report_data.MODELS) + pairs
    peaks = metrics[metrics["metric"] == "peak_busbw_gb_per_s"]
    assert peaks["size_bytes"].min() >= 256 * 2**20
    assert len(peaks) == len(report_data.MODELS) + pairs + 2  # the 1024-token sizes are small
    assert set(peaks.loc[peaks["op"] == "all_to_all_v", "params"]) == {
        "experts=256,hidden=7168,seed=0,tokens=4096,top_k=8,zipf=1.1"
    }


def test_persistence_one_alarms_on_a_single_bad_night(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1), noise=0.01)
    history.nights(8)
    history.night(dropped_on({8}))
    assert (alarms(history, persistence=1)["status"] == "regression").all()


def test_a_drop_below_the_relative_floor_does_not_alarm(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1), noise=0.001)
    history.nights(8)
    history.nights(2, lambda night, series: 1.02 if night >= 8 else 1.0)
    assert not (alarms(history)["status"] == "regression").any()  # 2%: below the 3% floor
    assert (alarms(history, min_change=0.01)["status"] == "regression").all()


def test_a_series_with_a_short_history_is_new_and_never_alarms(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1), noise=0.01)
    history.nights(3)
    history.nights(2, lambda night, series: 2.0)
    findings = alarms(history)
    assert (findings["status"] == "new").all()
    assert (findings["baseline_runs"] == 3).all()


@pytest.mark.parametrize(("earlier", "status"), [(5, "regression"), (4, "new")])
def test_a_series_is_judged_from_min_history_earlier_runs_on(
    tmp_path: Path, earlier: int, status: str
) -> None:
    """min_history 5 counts the runs before tonight's, the previous slow night's included."""
    history = History(tmp_path, every_series(groups=1), noise=0.01)
    history.nights(earlier - 1)
    history.nights(2, lambda night, series: 2.0)
    findings = alarms(history, min_history=5)
    assert (findings["status"] == status).all()
    assert (findings["baseline_runs"] == earlier - 1).all()


def test_a_persistence_longer_than_the_history_leaves_the_series_new(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1), noise=0.01)
    history.night()
    history.nights(2, lambda night, series: 2.0)
    findings = alarms(history, min_history=2, persistence=3)
    assert (findings["status"] == "new").all()
    assert (findings["baseline_runs"] == 0).all()


def test_a_faster_night_is_better_not_an_alarm(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1), noise=0.01)
    history.nights(8)
    history.nights(2, lambda night, series: 0.8 if night >= 8 else 1.0)
    assert (alarms(history)["status"] == "better").all()


def test_peak_busbw_is_taken_over_sizes_at_or_above_the_floor(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1, ops=1, dtypes=1), noise=0.0)
    history.night()
    rows = load(tmp_path, columns=COLUMNS)
    metrics = run_metrics(rows, 256 * 2**20).set_index("metric")
    assert metrics.loc["peak_busbw_gb_per_s", "size_bytes"] == 2**30
    assert metrics.loc["smallest_size_time_us", "size_bytes"] == 8
    assert metrics.loc["smallest_size_time_us", "value"] == pytest.approx(10.0, rel=1e-3)
    assert run_metrics(rows, 2**31)["metric"].tolist() == ["smallest_size_time_us"]


def test_history_is_the_nightly_runs_of_the_same_cluster_and_gpu_model(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1, ops=2, dtypes=1), noise=0.01)
    history.nights(6)
    other_cluster = history.night(cluster_name="elsewhere")
    other_gpu = history.night(gpu_model="NVIDIA A100-SXM4-80GB")
    ad_hoc = history.night(run_kind="run")
    history.night()
    verdict = nightly.judge(tmp_path, history.run_ids[-1], POLICY)
    assert verdict.history == tuple(history.run_ids[:6])
    assert not {other_cluster, other_gpu, ad_hoc} & set(verdict.history)
    assert verdict.fingerprint == nightly.Fingerprint("synthetic", "nccl", "NVIDIA H200")


def test_a_driver_upgrade_that_slows_the_collectives_alarms_and_is_named(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1, ops=2, dtypes=1), noise=0.01)
    history.nights(8)
    history.versions = {"driver_version": "580.10"}
    history.nights(2, dropped_on({8, 9}))
    verdict = nightly.judge(tmp_path, history.run_ids[-1], POLICY)
    assert (verdict.findings["status"] == "regression").all()
    first = nightly.judge(tmp_path, history.run_ids[-2], POLICY)
    assert first.changed_versions() == {"driver_version": ("570.86", "580.10")}
    assert verdict.changed_versions() == {}  # the previous run already had it


def test_the_summary_is_json_with_every_series_and_the_rules(tmp_path: Path) -> None:
    history = History(tmp_path, every_series(groups=1, ops=2, dtypes=1), noise=0.0)
    history.nights(8)
    history.nights(2, dropped_on({8, 9}))
    verdict = nightly.judge(tmp_path, history.run_ids[-1], POLICY)
    path = nightly.write_summary(verdict, tmp_path / "reports")
    assert path == tmp_path / "reports" / f"{history.run_ids[-1]}.summary.json"
    summary = json.loads(path.read_text())  # strict JSON: no NaN or Infinity
    assert summary["regressions"] == 4
    assert summary["history"] == history.run_ids[:-1]
    assert summary["policy"]["checks"] == [
        {"rule": "RobustZ", "z": 3.5},
        {"rule": "RelativeFloor", "fraction": 0.03},
    ]
    series = {(s["series"], s["metric"]): s for s in summary["series"]}
    one = series[("nvlink:n0g0,1,2,3,4,5,6,7 all_reduce bfloat16", "peak_busbw_gb_per_s")]
    assert one["status"] == "regression"
    assert one["z"] is None  # noise-free baseline: sigma 0, z infinite, written as null
    assert one["change"] == pytest.approx(-0.1, abs=1e-6)
    assert not list((tmp_path / "reports").glob(".*"))
