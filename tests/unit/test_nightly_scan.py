"""`sweeper nightly` of a profile with a `scan:` section, without Ray: the scan's driver is
replaced by simulated scans (tests/scan_data.py) that write rows and a scan summary as the
driver does, so the nightly's own logic runs for real: the history of nightly scans, the
series that recur night after night, the summary and the exit code."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

import sweeper.driver.scan
from sweeper.analysis.regression import SCAN_COLUMNS, scan_group, scan_metrics
from sweeper.cli import app
from sweeper.planning.spec import SweepSpec
from sweeper.results import scans
from sweeper.results.writer import ResultWriter
from sweeper.scan.document import Scanned, document
from sweeper.scan.policy import Strategy
from sweeper.scan.settings import ScanSettings
from sweeper.scan.simulate import Fault
from sweeper.scan.thresholds import Thresholds
from tests.scan_data import scanned

NODES, GPUS = 8, 2
HEALTHY: tuple[Fault, ...] = ()
START = datetime(2026, 11, 1, 2, tzinfo=timezone.utc)
GATE_GB_PER_S, SCREEN_GB_PER_S, COPY_GB_PER_S = 300.0, 40.0, 25.0


@dataclass
class Fleet:
    """Simulated nightly scans of one fleet of NODES hosts: each night the nodes get new Ray
    ids and come in another order (so group ids differ), and `slow` hosts' gate figures are
    `factor` times their usual."""

    results: Path
    faults: tuple[Fault, ...] = HEALTHY
    slow: dict[str, float] = field(default_factory=dict)
    nights: int = 0
    run_ids: list[str] = field(default_factory=list)

    def scan(self, spec: SweepSpec, settings: ScanSettings, _: Any, run_kind: str) -> Scanned:
        assert settings.strategy.kind.value == "adaptive"
        started = START + timedelta(days=self.nights)
        run_id = f"{started:%Y%m%dT%H%M%SZ}-{self.nights:06x}"
        self.nights += 1
        self.run_ids.append(run_id)
        scan = scanned(NODES, GPUS, faults=self.faults, strategy=settings.strategy, run_id=run_id)
        writer = ResultWriter(spec.results, run_id, f"{started:%Y-%m-%d}")
        rows = list(self._rows(run_id, started, run_kind, [n.host for n in scan.fleet.nodes]))
        writer.extend(rows)
        writer.flush()
        writer.close()
        scan = replace(scan, rows=len(rows))  # as the driver counts what it wrote
        scans.save(spec.results, run_id, document(scan))
        return scan

    def _rows(
        self, run_id: str, started: datetime, run_kind: str, hosts: list[str]
    ) -> Iterator[dict[str, Any]]:
        order = random.Random(self.nights).sample(hosts, len(hosts))  # tonight's node order
        run = {
            "run_id": run_id,
            "run_started_at": started,
            "run_kind": run_kind,
            "cluster_name": "fleet",
            "backend": "nccl",
            "gpu_model": "H100",
            "dtype": "float32",
            "in_place": True,
            "launch": "graph",
            "engine": "torch",
            "variant": "default",
            "status": "ok",
        }
        for i, host in enumerate(order):
            factor = self.slow.get(host, 1.0)
            gate = {**run, "stage": "gate", "tier": "nvlink", "group_id": f"nvlink:n{i}g0,1"}
            gpus = [f"GPU-{host}-{g}" for g in range(GPUS)]
            for size, busbw in ((8, 0.001), (1 << 30, GATE_GB_PER_S * factor)):
                yield point(gate, size, busbw, hosts=[host] * GPUS, gpu_uuids=gpus)
            for g, uuid in enumerate(gpus):
                yield point(
                    {**gate, "tier": "gpu", "group_id": f"gpu:n{i}g0,1", "op": "h2d"},
                    256 << 20,
                    COPY_GB_PER_S,
                    hosts=[host],
                    gpu_uuids=[uuid],
                    world_size=1,
                    rank=i * GPUS + g,
                )
        for first in range(0, len(order), 4):
            block = order[first : first + 4]
            screen = {**run, "stage": "screen", "tier": "internode", "group_id": f"s{first}"}
            for size, busbw in ((8, 0.001), (1 << 30, SCREEN_GB_PER_S)):
                yield point(screen, size, busbw, hosts=[h for h in block for _ in range(GPUS)])
        bisect = {**run, "stage": "bisect", "tier": "internode", "group_id": "b"}
        yield point(bisect, 1 << 30, 1.0, hosts=order[: self.nights % 3 + 2])


def point(base: dict[str, Any], size: int, busbw: float, **extra: Any) -> dict[str, Any]:
    row = {"op": "all_reduce", "algorithm": "native", **base, **extra}
    row.setdefault("world_size", len(row["hosts"]))
    return {**row, "size_bytes": size, "busbw_gb_per_s": busbw, "time_us": size / busbw / 1e3}


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    made = Fleet(tmp_path / "results")
    made.results.mkdir()
    monkeypatch.setattr(sweeper.driver.scan, "scan_fleet", made.scan)
    return made


def profile(tmp_path: Path, results: Path) -> Path:
    path = tmp_path / "scan.yaml"
    path.write_text(
        f"results: {results}\nreport: false\n"
        "scan:\n  strategy: adaptive\n  min_ratio: 0.8\n"
        "nightly:\n  window: 5\n  min_history: 3\n"
    )
    return path


def night(tmp_path: Path, fleet: Fleet) -> tuple[int, dict[str, Any]]:
    """A nightly scan: its exit and its summary, as the JSON event and the file agree."""
    args = ["nightly", "--profile", str(profile(tmp_path, fleet.results)), "--format", "json"]
    result = CliRunner().invoke(app, args)
    event = json.loads(result.stdout.splitlines()[-1])
    saved = json.loads(Path(event.pop("summary")).read_text())
    assert event.pop("event") == "nightly"
    assert event == saved
    return result.exit_code, saved


def test_a_nightly_scan_that_condemns_a_node_exits_1_and_names_it_in_the_summary(
    tmp_path: Path, fleet: Fleet
) -> None:
    fleet.faults = (Fault.SLOW_NODE, Fault.DEAD_NODE)
    code, summary = night(tmp_path, fleet)
    assert code == 1
    assert summary["regressions"] == 0  # a first night: every series is new
    doc = scans.load(fleet.results, summary["run_id"])
    assert doc is not None
    condemned = {v["name"]: v for v in summary["condemned"]}
    assert set(condemned) == set(doc["condemned"])
    healths = {v["health"] for v in condemned.values() if v["subject"] == "node"}
    assert healths == {"slow", "unreachable"}
    keys = ("name", "subject", "health", "nodes", "hosts", "gpu", "evidence")
    for verdict in doc["verdicts"]:
        if verdict["name"] in condemned:
            shown = dict(condemned[verdict["name"]])
            assert shown.pop("retest").startswith(f"sweeper scan --nodes {verdict['hosts'][0]}")
            assert shown == {k: verdict[k] for k in keys}
    assert summary["scan"] == {
        "summary": str(scans.path(fleet.results, summary["run_id"])),
        "strategy": "adaptive",
        "seed": 0,
        "nodes": NODES,
        "health": doc["health"],
    }
    # and `sweeper history` lists the night as condemned, with how many
    listed = CliRunner().invoke(app, ["history", "--results", str(fleet.results)])
    assert listed.exit_code == 0, listed.output
    assert f"condemned ({len(condemned)})" in listed.stdout


def test_a_nightly_scan_that_condemns_nothing_exits_0_and_the_table_says_so(
    tmp_path: Path, fleet: Fleet
) -> None:
    code, summary = night(tmp_path, fleet)
    assert code == 0
    assert summary["condemned"] == []
    assert summary["scan"]["health"] == {"healthy": NODES}
    args = ["nightly", "--profile", str(profile(tmp_path, fleet.results))]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"scan: {NODES} nodes: {NODES} healthy" in result.stdout
    assert "condemned by the scan" not in result.stdout


def test_a_scans_series_are_its_hosts_night_after_night_and_a_slower_node_regresses(
    tmp_path: Path, fleet: Fleet
) -> None:
    """Nodes in another order each night, new group ids, and a bisection that differs: the
    series stay the same; a host's gate at half its figure two nights in a row is a
    regression named by its host, while the scan, judging one night, condemns nothing."""
    for _ in range(4):
        assert night(tmp_path, fleet)[0] == 0
    fleet.slow = {"host0003": 0.5}
    code, summary = night(tmp_path, fleet)
    assert code == 0  # worse tonight only: it must persist
    assert {s["series"] for s in summary["series"] if s["status"] == "worse"} == {
        "gate:host0003 all_reduce float32 graph"
    }
    code, summary = night(tmp_path, fleet)
    assert code == 1
    assert summary["condemned"] == []
    assert summary["history"] == fleet.run_ids[-6:-1]
    (regression,) = (s for s in summary["series"] if s["status"] == "regression")
    assert regression["series"] == "gate:host0003 all_reduce float32 graph"
    assert regression["metric"] == "peak_busbw_gb_per_s"
    assert regression["change"] == pytest.approx(-0.5)
    names = {s["series"] for s in summary["series"]}
    assert len(names) == NODES + NODES * GPUS + NODES // 4  # gates, GPUs' copies, screen groups
    assert not [name for name in names if name.startswith("bisect")]


def test_a_nightly_scan_is_compared_with_nightly_scans_only(tmp_path: Path, fleet: Fleet) -> None:
    """A nightly sweep (no scan summary beside it) of the same cluster is no part of a
    scan's history, nor a hand-run scan (run_kind scan)."""
    night(tmp_path, fleet)
    spec = SweepSpec(results=fleet.results)
    settings = ScanSettings(strategy=Strategy.parse("adaptive"), thresholds=Thresholds())
    by_hand = fleet.scan(spec, settings, None, "scan")
    swept = fleet.scan(spec, settings, None, "nightly")
    scans.path(fleet.results, swept.run_id).unlink()  # a nightly sweep has no scan summary
    _, summary = night(tmp_path, fleet)
    assert summary["history"] == fleet.run_ids[:1]
    assert by_hand.run_id not in summary["history"]


def test_scan_metrics_name_groups_by_hosts_and_gpus_and_leave_suspects_out() -> None:
    rows = pd.DataFrame(
        [
            {**{c: None for c in SCAN_COLUMNS}, **row, "run_id": "r"}
            for row in (
                point(
                    {"stage": "gate", "tier": "nvlink", "group_id": "nvlink:n3g0,1"},
                    8,
                    0.01,
                    hosts=["b", "b"],
                    gpu_uuids=["G0", "G1"],
                ),
                point(
                    {"stage": "gate", "tier": "nvlink", "group_id": "nvlink:n3g0,1"},
                    1 << 30,
                    300.0,
                    hosts=["b", "b"],
                    gpu_uuids=["G0", "G1"],
                ),
                point(
                    {"stage": "gate", "tier": "gpu", "group_id": "gpu:n3g0,1", "op": "h2d"},
                    256 << 20,
                    25.0,
                    hosts=["b"],
                    gpu_uuids=["G1"],
                    rank=7,
                ),
                point(
                    {"stage": "screen", "tier": "internode", "group_id": "x"},
                    1 << 30,
                    40.0,
                    hosts=["c", "a", "b"],
                ),
                point(
                    {"stage": "confirm", "tier": "internode", "group_id": "y"},
                    1 << 30,
                    4.0,
                    hosts=["a", "d"],
                ),
            )
        ]
    ).assign(status="ok", dtype="float32", variant="default", launch="eager", engine="torch")
    metrics = scan_metrics(rows)
    by = {(m["group_id"], m["metric"]): m for m in metrics.to_dict("records")}
    assert set(by) == {
        ("gate:b", "peak_busbw_gb_per_s"),
        ("gate:b", "smallest_size_time_us"),
        ("gate:b/G1", "peak_busbw_gb_per_s"),  # one size: its time says the same
        ("screen:a+b+c", "peak_busbw_gb_per_s"),
    }
    assert by["gate:b", "peak_busbw_gb_per_s"]["size_bytes"] == 1 << 30
    assert by["gate:b", "smallest_size_time_us"]["size_bytes"] == 8
    assert pd.isna(by["gate:b/G1", "peak_busbw_gb_per_s"]["rank"])


def test_a_scan_group_of_many_hosts_is_named_by_its_ends_count_and_digest() -> None:
    hosts = [f"h{i:03d}" for i in range(32)]
    name = scan_group("screen", list(reversed(hosts)))
    assert name.startswith("screen:h000..h031/32#")
    assert name == scan_group("screen", hosts)
    assert name != scan_group("screen", [*hosts[:-1], "h099"])
    assert scan_group("screen", ["b", "a"]) == "screen:a+b"


def test_a_nightly_scans_page_shows_its_judgment_and_shares_one_plotly_file(
    tmp_path: Path, fleet: Fleet
) -> None:
    fleet.faults = (Fault.SLOW_NODE,)
    profile(tmp_path, fleet.results)  # the scan and its rules, then the report asked for
    path = tmp_path / "scan.yaml"
    path.write_text(path.read_text().replace("report: false", "report: true"))
    args = ["nightly", "--profile", str(path), "--format", "json"]
    for _ in range(2):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, result.output
    event = json.loads(result.stdout.splitlines()[-1])
    reports = fleet.results.parent / "reports"
    page = Path(event["report"])
    assert page == reports / f"{event['run_id']}.html"
    (shared,) = reports.glob("plotly-*.min.js")
    shown = page.read_text()
    assert f'<script src="{shared.name}"></script>' in shown
    assert shown.index('<section id="nightly">') < shown.index('<section id="fleet">')
    assert "The scan condemned 1: the fleet scan names each." in shown
    assert page.stat().st_size < 200_000
