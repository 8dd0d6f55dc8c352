"""`sweeper export --prometheus`: a run's figures as node_exporter textfiles, read back with
prometheus-client's own parser."""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.commands.plan_estimate import plan
from sweeper.planning.profile import build_spec, load_profile
from sweeper.results import prometheus, scans
from sweeper.results.load import frame
from sweeper.scan.verdict import Health
from tests.scan_data import RECORDED_RUN, scan_summary

RECORDED = Path(__file__).parents[1] / "data" / "results" / "main-2026-11-25"
STARTED = datetime(2026, 11, 25, 2, 0, tzinfo=timezone.utc)
SIZES = (8, 2**20, 2**30)
GB = 1e9


def _row(group: str, hosts: list[str], size: int, busbw: float, **extra: Any) -> dict[str, Any]:
    time_us = size / (busbw * 1e3) + 5.0
    return {
        "run_id": "20261125T020000Z-000001",
        "run_started_at": STARTED,
        "run_kind": "nightly",
        "cluster_name": "fleet",
        "backend": "nccl",
        "gpu_model": "NVIDIA H200",
        "sweeper_version": "0.1.0",
        "nccl_version": "2.28.9",
        "tier": group.split(":", maxsplit=1)[0],
        "variant": "default",
        "group_id": group,
        "world_size": len(hosts),
        "hosts": hosts,
        "kind": "collective",
        "op": "all_reduce",
        "algorithm": "native",
        "dtype": "bfloat16",
        "engine": "torch",
        "launch": "graph",
        "size_bytes": size,
        "time_us": time_us,
        "busbw_gb_per_s": busbw,
        "status": "ok",
        "measured_at": STARTED + timedelta(minutes=10),
        **extra,
    }


def _fleet() -> list[dict[str, Any]]:
    """Two nodes: each one's NVLink pairs (on a, one pair slower), their internode pair, and
    an all_reduce that ran out of memory at 2 GiB on a."""
    groups = {
        ("nvlink:n0g0,1", ("a", "a")): 400.0,
        ("nvlink:n0g2,3", ("a", "a")): 300.0,
        ("nvlink:n1g0,1", ("b", "b")): 410.0,
        ("internode:n0g0+n1g0", ("a", "b")): 45.0,
    }
    rows = [
        _row(group, list(hosts), size, busbw * (1 if size == SIZES[-1] else 0.5))
        for (group, hosts), busbw in groups.items()
        for size in SIZES
    ]
    oom = {"status": "oom", "time_us": None, "busbw_gb_per_s": None}
    return [*rows, _row("nvlink:n0g0,1", ["a", "a"], 2**31, 1.0, **oom)]


def _parsed(text: str) -> dict[str, list[Sample]]:
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def _written(tmp_path: Path, families: list[Any]) -> str:
    path = tmp_path / "sweeper.prom"
    prometheus.write(path, families)
    return path.read_text()


def test_busbw_at_the_largest_ok_size_and_latency_at_the_smallest_in_base_units(
    tmp_path: Path,
) -> None:
    families = _parsed(_written(tmp_path, prometheus.metrics(frame(_fleet()))))
    busbw = {(s.labels["hostname"], s.labels["tier"]): s for s in families[prometheus.BUSBW]}
    # the worst of a host's groups: a's slower NVLink pair, not its faster one
    assert busbw["a", "nvlink"].value == pytest.approx(300.0 * GB)
    assert busbw["b", "nvlink"].value == pytest.approx(410.0 * GB)
    # the out-of-memory point is not the largest size: the largest that ran ok is
    assert {s.labels["size_bytes"] for s in busbw.values()} == {str(2**30)}
    assert busbw["a", "nvlink"].labels == {
        "hostname": "a",
        "tier": "nvlink",
        "variant": "default",
        "op": "all_reduce",
        "algorithm": "native",
        "dtype": "bfloat16",
        "world_size": "2",
        "engine": "torch",
        "launch": "graph",
        "size_bytes": str(2**30),
    }
    latency = {(s.labels["hostname"], s.labels["tier"]): s for s in families[prometheus.LATENCY]}
    assert latency["a", "nvlink"].labels["size_bytes"] == "8"
    # the longest of a's pairs at 8 bytes: 5 us plus 8 bytes at half of 300 GB/s, in seconds
    assert latency["a", "nvlink"].value == pytest.approx((5.0 + 8 / 150e3) / 1e6)


def test_a_host_copy_at_one_size_has_a_bandwidth_and_no_latency(tmp_path: Path) -> None:
    """A scan's gate copies run at 256 MiB only: that size is their bandwidth's, no latency;
    a copy swept over sizes (a run's copy-engine matrix) keeps its smallest as latency."""
    copy = {"kind": "copy", "algorithm": "copy_engine", "tier": "gpu"}
    scanned = [_row("gpu:n0g0", ["a"], 256 << 20, 50.0, **copy, op=op) for op in ("h2d", "d2h")]
    swept = [_row("gpu:n1g0", ["b"], size, 50.0, **copy, op="d2d") for size in SIZES]
    rows = frame([*_fleet(), *scanned, *swept])
    families = _parsed(_written(tmp_path, prometheus.metrics(rows)))
    busbw = {(s.labels["hostname"], s.labels["op"]) for s in families[prometheus.BUSBW]}
    assert {("a", "h2d"), ("a", "d2h"), ("b", "d2d")} <= busbw
    latency = {(s.labels["hostname"], s.labels["op"]) for s in families[prometheus.LATENCY]}
    assert latency == {("a", "all_reduce"), ("b", "all_reduce"), ("b", "d2d")}


def test_a_group_spanning_hosts_counts_for_each_of_them(tmp_path: Path) -> None:
    families = _parsed(_written(tmp_path, prometheus.metrics(frame(_fleet()))))
    internode = [s for s in families[prometheus.BUSBW] if s.labels["tier"] == "internode"]
    assert sorted(s.labels["hostname"] for s in internode) == ["a", "b"]
    assert [s.value for s in internode] == pytest.approx([45.0 * GB] * 2)


def test_the_run_says_which_run_and_software_its_duration_and_end(tmp_path: Path) -> None:
    families = _parsed(_written(tmp_path, prometheus.metrics(frame(_fleet()))))
    (info,) = families["sweeper_run_info"]
    assert info.name == "sweeper_run_info"
    assert info.value == 1
    assert info.labels["run_id"] == "20261125T020000Z-000001"
    assert (info.labels["nccl_version"], info.labels["gpu_model"]) == ("2.28.9", "NVIDIA H200")
    assert "run_started_at" not in info.labels
    (duration,) = families[prometheus.DURATION]
    (end,) = families[prometheus.END]
    assert duration.value == 600.0
    assert end.value == (STARTED + timedelta(minutes=10)).timestamp()


def test_every_metric_is_in_base_units_with_the_sweeper_prefix(tmp_path: Path) -> None:
    text = _written(tmp_path, prometheus.metrics(frame(_fleet())))
    names = {s.name for samples in _parsed(text).values() for s in samples}
    assert names == set(prometheus.NAMES)
    assert all(name.startswith("sweeper_") for name in names)
    units = ("_bytes_per_second", "_seconds", "_info")
    assert all(name.endswith(units) for name in names)


def test_the_series_count_is_per_host_series_times_two_and_three_for_the_run(
    tmp_path: Path,
) -> None:
    """a: its NVLink pairs (one series, the worst) and the internode pair; b: the same."""
    text = _written(tmp_path, prometheus.metrics(frame(_fleet())))
    samples = [s for family in _parsed(text).values() for s in family]
    assert len(samples) == 2 * 2 * 2 + 3
    assert prometheus.series(prometheus.metrics(frame(_fleet()))) == len(samples)


def test_each_host_file_holds_its_own_series_and_the_runs(tmp_path: Path) -> None:
    per_host = prometheus.per_host(frame(_fleet()))
    assert sorted(per_host) == ["a", "b"]
    for host, families in per_host.items():
        parsed = _parsed(_written(tmp_path, families))
        measured = [*parsed[prometheus.BUSBW], *parsed[prometheus.LATENCY]]
        assert {s.labels["hostname"] for s in measured} == {host}
        assert len(measured) == 2 * 2
        assert len(parsed[prometheus.END]) == len(parsed["sweeper_run_info"]) == 1


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A results directory today's main wrote (a CPU run on host vm), copied: readers may
    recover journals in place."""
    return Path(shutil.copytree(RECORDED, tmp_path / "results"))


def test_sweeper_export_writes_the_latest_run_of_a_results_directory(
    recorded: Path, tmp_path: Path
) -> None:
    out, hosts = tmp_path / "sweeper.prom", tmp_path / "textfiles"
    hosts.mkdir()
    args = ["export", "--results", str(recorded), "--prometheus", str(out)]
    result = CliRunner().invoke(app, [*args, "--per-host", str(hosts)])
    assert result.exit_code == 0, result.output
    assert [p.name for p in hosts.iterdir()] == ["vm.prom"]
    assert (hosts / "vm.prom").read_text() == out.read_text()
    families = _parsed(out.read_text())
    (info,) = families["sweeper_run_info"]
    assert info.labels["run_id"] == RECORDED_RUN
    # all_gather, all_reduce and send_recv ran on the CPU; the copies were skipped there
    ops = sorted(s.labels["op"] for s in families[prometheus.BUSBW])
    assert ops == ["all_gather", "all_reduce", "send_recv"]
    assert {s.labels["size_bytes"] for s in families[prometheus.BUSBW]} == {"1024"}
    assert result.stdout.splitlines() == [
        f"prometheus: {out} (9 series)",
        f"prometheus: {hosts} (1 files, one per host: 9 series)",
    ]
    again = CliRunner().invoke(app, [*args[:-1], str(out), RECORDED_RUN])
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--prometheus", "{tmp}/missing/sweeper.prom"], "no directory"),
        (["--prometheus", "{tmp}"], "not a regular file"),
        (["--per-host", "{tmp}/missing"], "not a directory"),
        (["--prometheus", "{tmp}/sweeper.prom", "20990101T000000Z-ffffff"], "no run"),
        ([], "nothing to export"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    recorded: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    before = sorted(tmp_path.rglob("*"))
    given = [arg.format(tmp=tmp_path) for arg in args]
    result = CliRunner().invoke(app, ["export", "--results", str(recorded), *given])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("sweeper: error: ")
    assert says in line
    assert sorted(tmp_path.rglob("*")) == before


def test_a_results_directory_without_runs_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    out = tmp_path / "sweeper.prom"
    args = ["export", "--results", str(tmp_path / "results"), "--prometheus", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "no runs" in result.stderr
    assert not out.exists()


def test_a_host_file_that_is_not_a_regular_file_stops_every_write(
    recorded: Path, tmp_path: Path
) -> None:
    out, hosts = tmp_path / "sweeper.prom", tmp_path / "textfiles"
    (hosts / "vm.prom").mkdir(parents=True)
    args = ["--prometheus", str(out), "--per-host", str(hosts)]
    result = CliRunner().invoke(app, ["export", "--results", str(recorded), *args])
    assert result.exit_code == 2, result.output
    assert "is not a regular file" in result.stderr
    assert not out.exists()
    assert [p.name for p in hosts.iterdir()] == ["vm.prom"]


def test_the_documented_series_count_is_the_weekly_profiles() -> None:
    """docs/MONITORING.md's count for jobs/weekly.yaml on 1024 8-GPU nodes, from the plan: a
    node's keys do not grow with the node count (only internode world sizes change), most
    nodes measure only their bandwidth, and the few holding a curve's group more, so 64
    nodes give the common count and the most."""
    root = Path(__file__).parents[2]
    spec = build_spec(load_profile(root / "jobs" / "weekly.yaml"), nodes=64)
    found = plan(spec, root / "tests" / "data" / "topologies" / "dgx-h100-nvswitch.json")
    placement, schedule = found.placement, found.schedule
    keys: dict[int, set[tuple[object, ...]]] = {}
    for wave in schedule.waves:
        for group in wave.groups:
            measured = [s for s in schedule.series(group) if s.skipped is None]
            for node in {placement.members[rank].node for rank in group.ranks}:
                keys.setdefault(node, set()).update(
                    (group.tier, group.variant, group.world_size, s.op, s.dtype) for s in measured
                )
    assert spec.engine == ("torch",)  # one engine, one launch mode each
    counts = Counter(len(node_keys) for node_keys in keys.values())
    ((common, _),) = counts.most_common(1)
    most = max(counts)
    docs = " ".join((root / "docs" / "MONITORING.md").read_text().split())
    total = 1024 * most * 2 + 3
    assert f"most nodes have {common} keys" in docs
    assert f"at most 1024 x {most} x 2 + 3 = **{total:,} series**" in docs


def test_a_scans_verdicts_are_a_series_per_node_and_verdict_and_per_condemned_gpu_and_link(
    tmp_path: Path,
) -> None:
    summary = scan_summary()
    families = _parsed(_written(tmp_path, prometheus.metrics(frame(_fleet()), summary)))
    nodes = families[prometheus.NODE_VERDICT]
    assert len(nodes) == 16 * len(prometheus.VERDICTS)
    assert Health.values() == prometheus.VERDICTS
    got = {s.labels["hostname"]: s.labels["verdict"] for s in nodes if s.value == 1}
    hosts = {v["hosts"][0]: v["health"] for v in summary["verdicts"] if v["subject"] == "node"}
    assert got == hosts
    assert "slow" in got.values()
    named = [v for v in summary["verdicts"] if v["subject"] in ("gpu", "link")]
    condemned = [v for v in named if v["health"] != "healthy"]
    gpus, links = families[prometheus.GPU_VERDICT], families[prometheus.LINK_VERDICT]
    assert len(gpus) + len(links) == len(condemned) * len(prometheus.VERDICTS)
    assert len(links) == len(prometheus.VERDICTS)  # the planted slow link
    # the planted slow GPU only: its node's other GPU is proven beside GPUs of other nodes
    assert len(gpus) == len(prometheus.VERDICTS)
    (link,) = {(s.labels["hostname"], s.labels["peer_hostname"]) for s in links if s.value == 1}
    assert all(host.startswith("host") for host in link)
    for s in gpus:
        assert set(s.labels) == {"hostname", "gpu", "UUID", "pci_bus_id", "verdict"}
    # a run that was no scan writes none of them
    plain = _parsed(_written(tmp_path, prometheus.metrics(frame(_fleet()))))
    assert not set(plain) & set(prometheus.VERDICT_NAMES)


def test_each_host_file_holds_its_own_verdicts_and_a_link_is_in_each_ends(tmp_path: Path) -> None:
    summary = scan_summary()
    per_host = prometheus.per_host(frame(_fleet()), summary)
    assert len(per_host) == 2 + 16  # the rows' hosts a and b, and the scan's
    links: dict[tuple[str, str], set[str]] = {}
    for host, families in per_host.items():
        parsed = _parsed(_written(tmp_path, families))
        if host in ("a", "b"):
            assert prometheus.NODE_VERDICT not in parsed
            continue
        assert {s.labels["hostname"] for s in parsed[prometheus.NODE_VERDICT]} == {host}
        for s in parsed[prometheus.LINK_VERDICT]:
            links.setdefault((s.labels["hostname"], s.labels["peer_hostname"]), set()).add(host)
    assert len(links) == 1
    assert all(files == set(ends) for ends, files in links.items())


def test_sweeper_export_of_a_scan_writes_the_verdicts_of_its_summary(
    recorded: Path, tmp_path: Path
) -> None:
    scans.save(recorded, RECORDED_RUN, scan_summary())
    out = tmp_path / "sweeper.prom"
    args = ["export", "--results", str(recorded), "--prometheus", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    families = _parsed(out.read_text())
    assert len(families[prometheus.NODE_VERDICT]) == 16 * len(prometheus.VERDICTS)
    scan = (*prometheus.FINDING_NAMES, *prometheus.VERDICT_NAMES)  # the fleet, then verdicts
    verdicts = sum(len(families.get(name, [])) for name in scan)
    assert result.stdout == f"prometheus: {out} ({9 + verdicts} series)\n"
