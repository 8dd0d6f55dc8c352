"""`sweeper scan` on a real multi-node Ray cluster on this machine (gloo ranks, one per node):
the policy's waves on the executor, the rows with their stage, and verdicts that name the
faults the simulation plants by default: a slow node, a slow link, a node that leaves.

One scan of seven nodes holds all three, so its actors start once, which costs more than all
its waves: when the node has left, the six others' ranks join a smaller world in the
processes they started in. The slowdowns are a test plugin's (`tests.plugins.faulty_fleet`):
200 ms a call at the bandwidth size, 64 KiB, over a hundred times a healthy all_reduce of it
on CPU ranks (each wave that holds one waits out its four calls a point). Not less: on a box
loaded by other work the fleet's median fell to 0.0075 GB/s (8.7 ms a call), its threshold a
tenth of that near 100 ms, and a node slowed by 100 ms came out healthy beside nine failing
groups that no culprit explained.
The screen's plane (q = 3: 4 waves of up to 3 groups of up to 3 nodes, every pair once) puts
the slow node in 4 groups and the link in 1: the fleet's median is a healthy figure, and a
group fails below a tenth of it. A slowed group is tens of times below it; a healthy one,
whose figure drops by up to five times from two ranks to three at this latency-bound size,
passes by a factor of two or more.

The six nodes left then serve the other scans, so no other module starts a cluster for them:
`sweeper nightly` of a profile with a `scan:` section (its exit, summary and Prometheus file),
a scan screened by rack (`--domain-label`) in which one node's ranks refuse to start,
`sweeper scan` of the nightly's settings stopped by SIGINT as its screen starts and then
resumed, and a scan of three healthy nodes named by their Ray ids.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
import ray
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from ray.cluster_utils import Cluster
from typer.testing import CliRunner, Result

import sweeper
from sweeper.cli import app
from sweeper.driver import cluster
from sweeper.driver.scan import scan_fleet
from sweeper.planning.profile import build_spec
from sweeper.planning.spec import SweepSpec
from sweeper.results import records, scan_waves, scans
from sweeper.results.schema import RUN_POINT
from sweeper.scan.document import Scanned, verdicts
from sweeper.scan.fleet import ScanWave, Stage
from sweeper.scan.policy import Strategy
from sweeper.scan.settings import ScanSettings
from sweeper.scan.thresholds import Thresholds
from sweeper.scan.verdict import Health, Subject, Verdict
from tests.conftest import cluster_nodes, registry_kept
from tests.integration.test_report_browser import assert_drawn, visit

pytestmark = pytest.mark.own_cluster

NODES = 7
RACK = "rack"  # a Ray node label: two racks, for a scan's --domain-label


class _Leaves:
    """Removes a node from the cluster as the scan's first internode wave starts, and waits
    until Ray has it dead."""

    def __init__(self, head: Cluster, node: Any) -> None:
        self.head, self.node, self.left = head, node, False

    def wave(self, wave: ScanWave) -> None:
        if self.left or wave.stage is Stage.GATE:
            return
        self.head.remove_node(self.node)
        self.left = True
        deadline = time.monotonic() + 60
        while any(n["NodeID"] == self.node.node_id and n["Alive"] for n in ray.nodes()):
            assert time.monotonic() < deadline, "Ray still has the removed node alive"
            time.sleep(0.2)


def _spec(out: Path, plugin: str, *, blocks: int) -> SweepSpec:
    """A scan's spec: one gloo rank a node, a point's call timed once in each of `blocks`
    blocks, with a test plugin."""
    return build_spec(
        backend="gloo",
        gpus_per_node=1,
        iters=1,
        warmup=1,
        blocks=blocks,
        timeout=60,
        results=out,
        plugins=[plugin],
    )


@dataclass(frozen=True)
class _Scan:
    order: list[str]  # the scan's nodes in its order: the plugin names them by place
    scanned: Scanned
    rows: pd.DataFrame
    summary: dict[str, Any] | None  # the run's scan summary, as written

    def verdicts(self, subject: Subject) -> dict[tuple[str, ...], Verdict]:
        return {v.nodes: v for v in self.scanned.verdicts if v.subject is subject}


@pytest.fixture(scope="module")
def scan(cluster_head: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Scan]:
    """Seven nodes of one CPU each, beside a head with none: one gloo rank a node. The last
    node in the scan's order leaves as the screen starts."""
    racks = [{"num_cpus": 1, "labels": {RACK: f"r{i % 2}"}} for i in range(NODES)]
    with cluster_nodes(cluster_head, *racks) as fleet, registry_kept():
        order = [slot.node_id for slot in cluster.choose_nodes("gloo", NODES, 1)]
        leaving = next(n for n in fleet.worker_nodes if n.node_id == order[-1])
        out = tmp_path_factory.mktemp("scan")
        spec = _spec(out, "tests.plugins.faulty_fleet", blocks=3)
        settings = ScanSettings(
            strategy=Strategy.parse("adaptive"),
            thresholds=Thresholds(sigmas=0, min_ratio=0.1),
            op="faulty",
            sizes=(8, 64 << 10),
        )
        leaves = _Leaves(fleet, leaving)
        scanned = scan_fleet(spec, settings, leaves)
        assert leaves.left
        yield _Scan(order, scanned, sweeper.load(out), scans.load(out, scanned.run_id))


def test_a_node_that_slows_every_group_it_is_in_is_named_slow_with_its_evidence(
    scan: _Scan,
) -> None:
    from tests.plugins.faulty_fleet import SLOW_NODE

    slow = scan.order[SLOW_NODE]
    verdict = scan.verdicts(Subject.NODE)[(slow,)]
    assert verdict.health is Health.SLOW
    assert verdict.stage in (Stage.BISECT, Stage.CONFIRM)
    assert len(verdict.partners) >= 2  # beside different known-good nodes
    assert verdict.busbw_gb_per_s is not None
    assert verdict.fleet_gb_per_s is not None
    assert verdict.busbw_gb_per_s < 0.1 * verdict.fleet_gb_per_s
    assert f"{slow}: all_reduce at 64 KiB" in verdict.evidence
    assert "groups with different partners" in verdict.evidence
    assert scan.summary is not None  # the run's summary names it, as the judge did
    assert slow in scan.summary["condemned"]
    assert verdicts(scan.summary) == list(scan.scanned.verdicts)


def test_a_link_slow_only_between_two_nodes_is_named_as_the_link_not_its_ends(
    scan: _Scan,
) -> None:
    from tests.plugins.faulty_fleet import SLOW_LINK

    link = tuple(scan.order[i] for i in SLOW_LINK)
    links = scan.verdicts(Subject.LINK)
    assert links.pop(link).health is Health.SLOW
    assert {v.health for v in links.values()} <= {Health.HEALTHY}
    nodes = scan.verdicts(Subject.NODE)
    assert {nodes[(end,)].health for end in link} == {Health.HEALTHY}


def test_a_node_that_leaves_mid_scan_is_unreachable_and_every_other_gets_its_verdict(
    scan: _Scan,
) -> None:
    from tests.plugins.faulty_fleet import SLOW_NODE

    gone, slow = scan.order[-1], scan.order[SLOW_NODE]
    nodes = {nodes[0]: v.health for nodes, v in scan.verdicts(Subject.NODE).items()}
    assert nodes == {
        n: Health.UNREACHABLE if n == gone else Health.SLOW if n == slow else Health.HEALTHY
        for n in scan.order
    }
    assert "left the cluster" in scan.verdicts(Subject.NODE)[(gone,)].evidence
    condemned = sorted(v.name for v in scan.scanned.verdicts if v.condemned)
    assert len(condemned) == 3  # the slow node, the link, the node that left


def test_the_ranks_of_the_nodes_left_keep_their_processes_when_a_node_leaves(
    scan: _Scan,
) -> None:
    # one rank a node, each started once: the six left measured the later waves in theirs
    assert scan.scanned.actors_started == NODES
    assert scan.summary is not None
    assert scan.summary["actors_started"] == NODES


def test_every_row_says_its_stage_and_the_scan_wave(scan: _Scan) -> None:
    rows = scan.rows
    assert set(rows["run_kind"]) == {"scan"}
    assert set(rows["stage"]) >= {Stage.GATE, Stage.SCREEN, Stage.BISECT, Stage.CONFIRM}
    waves = {o.group.wave: o.group.stage for o in scan.scanned.outcomes}
    ran = rows.drop_duplicates("wave").set_index("wave")["stage"].to_dict()
    assert ran == {w: stage for w, stage in waves.items() if w in ran}
    gate = rows[rows["stage"] == Stage.GATE]
    assert (gate["n_nodes"] == 1).all()
    assert (rows.loc[rows["stage"] != Stage.GATE, "n_nodes"] >= 2).all()


@dataclass(frozen=True)
class _Night:
    exit_code: int
    output: str
    summary: dict[str, Any]  # the nightly's summary JSON, as written
    exported: list[Sample]  # `sweeper export --prometheus` of the run, parsed back


@pytest.fixture(scope="module")
def night(scan: _Scan, tmp_path_factory: pytest.TempPathFactory) -> _Night:
    """`sweeper nightly` of a profile with a `scan:` section, on the same cluster after the
    scan: the six nodes left (the same node order, so the same slow node and slow link), one
    timed iteration a block, held to a tenth of the fleet's median as the first scan is. Its
    screen's plane puts the slow node in 4 of 12 groups and the slow link in one: the median
    is a healthy figure. (An absolute floor that so many groups miss is a fleet finding, which
    condemns no node.)"""
    root = tmp_path_factory.mktemp("night")
    profile = root / "scan.yaml"
    profile.write_text(
        "backend: gloo\ngpus_per_node: 1\niters: 1\nwarmup: 1\nblocks: 3\ntimeout: 60\n"
        f"results: {root / 'results'}\nplugins: [tests.plugins.faulty_fleet]\n"
        "scan:\n  op: faulty\n  sizes: [8, 64K]\n  sigmas: 0\n  min_ratio: 0.1\n"
    )
    runner = CliRunner()
    ran = runner.invoke(app, ["nightly", "--profile", str(profile), "--format", "json"])
    event = json.loads(ran.stdout.splitlines()[-1])
    prom = root / "sweeper.prom"
    export = ["export", "--results", str(root / "results"), "--prometheus", str(prom)]
    assert runner.invoke(app, export).exit_code == 0
    families = text_string_to_metric_families(prom.read_text())
    samples = [sample for family in families for sample in family.samples]
    summary = json.loads(Path(event["summary"]).read_text())
    return _Night(ran.exit_code, ran.output, summary, samples)


def test_a_nightly_scan_with_a_slow_node_exits_1_and_names_it_in_its_summary_and_metrics(
    scan: _Scan, night: _Night
) -> None:
    from tests.plugins.faulty_fleet import SLOW_LINK, SLOW_NODE

    assert night.exit_code == 1, night.output
    slow = scan.order[SLOW_NODE]
    condemned = {v["name"]: v for v in night.summary["condemned"]}
    assert condemned[slow]["health"] == "slow"
    assert f"{slow}: all_reduce at 64 KiB" in condemned[slow]["evidence"]
    assert condemned[slow]["retest"].startswith(f"sweeper scan --nodes {slow},")
    # nothing away from the planted faults (on six nodes the bisection's halves cannot all be
    # padded, so the slow link may be blamed on one of its ends)
    planted = {slow, *(scan.order[i] for i in SLOW_LINK)}
    assert {node for v in condemned.values() for node in v["nodes"]} <= planted
    assert night.summary["regressions"] == 0  # the first nightly scan: every series new
    assert night.summary["scan"]["nodes"] == NODES - 1
    (host,) = condemned[slow]["hosts"]
    verdicts = [s for s in night.exported if s.name == "sweeper_node_verdict" and s.value == 1]
    assert {"hostname": host, "verdict": "slow"} in [s.labels for s in verdicts]
    (info,) = (s for s in night.exported if s.name == "sweeper_run_info")
    assert info.labels["run_id"] == night.summary["run_id"]
    assert info.labels["run_kind"] == "nightly"


def test_a_nightly_scans_report_names_the_slow_node_in_its_fleet_section(
    chromium: Path, scan: _Scan, night: _Night
) -> None:
    from tests.plugins.faulty_fleet import SLOW_NODE

    page = Path(night.summary["report"]).resolve()
    seen = visit(chromium, page)
    # a nightly page loads the one plotly.js its reports directory shares, and nothing else
    (shared,) = page.parent.glob("plotly-*.min.js")
    assert seen.requests == [page.as_uri(), shared.as_uri()]
    assert_drawn(seen, ("run", "fleet"))
    assert list(seen.sections)[:3] == ["run", "nightly", "fleet"]  # its judgment, then the fleet
    slow = scan.order[SLOW_NODE]
    (named,) = (v for v in night.summary["condemned"] if v["name"] == slow)
    assert named["evidence"] in seen.text


class _Unwatched:
    def wave(self, wave: ScanWave) -> None:
        """Nothing happens to the fleet as a wave starts."""


@dataclass(frozen=True)
class _Refused:
    node: str  # the node whose ranks did not start
    scanned: Scanned
    racks: dict[str, str]  # each node's rack, as Ray labels it


@pytest.fixture(scope="module")
def refused(
    scan: _Scan, cluster_head: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> _Refused:
    """A second, short scan of the nodes still there after the first, screened by rack
    (--domain-label), while one node's ranks fail as they start (`tests.plugins.refuse_start`):
    Ray still has the node. It is one of the rack with the most nodes left, so each rack
    keeps two or more."""
    from ray._private import ray_constants

    from tests.plugins.refuse_start import marker

    racks = {node: labels[RACK] for node, labels in cluster.alive().items() if RACK in labels}
    by_rack = [[n for n in scan.order if racks.get(n) == rack] for rack in ("r0", "r1")]
    node = max(by_rack, key=len)[0]
    worker = next(n for n in cluster_head.worker_nodes if n.node_id == node)
    (raylet,) = worker.all_processes[ray_constants.PROCESS_TYPE_RAYLET]
    refusing = marker(raylet.process.pid)
    out = tmp_path_factory.mktemp("refused")
    spec = _spec(out, "tests.plugins.refuse_start", blocks=1)
    settings = ScanSettings(
        strategy=Strategy.parse("adaptive"),
        thresholds=Thresholds(sigmas=0, min_ratio=0.01),
        sizes=(8, 1024),
        domain_label=RACK,
        start_timeout_s=300,  # a loaded box starts five rank processes slowly; the refusal is quick
    )
    refusing.touch()
    try:
        with registry_kept():
            scanned = scan_fleet(spec, settings, _Unwatched())
    finally:
        refusing.unlink()
    return _Refused(node, scanned, racks)


def test_a_node_whose_ranks_do_not_start_is_unreachable_and_the_scan_goes_on(
    refused: _Refused,
) -> None:
    from tests.plugins.refuse_start import REFUSED

    nodes = {v.nodes[0]: v for v in refused.scanned.verdicts if v.subject is Subject.NODE}
    assert nodes.pop(refused.node).health is Health.UNREACHABLE
    assert {v.health for v in nodes.values()} == {Health.HEALTHY}
    assert len(nodes) == len(refused.racks) - 1  # every node Ray has but it
    evidence = next(v for v in refused.scanned.verdicts if v.nodes == (refused.node,)).evidence
    assert "its actors did not start" in evidence
    assert REFUSED in evidence


def test_the_ranks_that_started_join_without_the_node_whose_ranks_did_not(
    refused: _Refused,
) -> None:
    assert refused.scanned.actors_started == len(refused.racks)  # none started twice


def test_a_scan_by_domain_label_reads_each_nodes_label_and_screens_each_rack(
    refused: _Refused,
) -> None:
    fleet = refused.scanned.fleet
    assert {n.id: n.domain for n in fleet.nodes} == {n: refused.racks[n] for n in fleet.ids}
    screen = [o.group for o in refused.scanned.outcomes if o.group.stage is Stage.SCREEN]
    first = [g for g in screen if g.wave == min(g.wave for g in screen)]  # a group a rack
    gated = set(fleet.ids) - {refused.node}
    assert sorted(sorted(g.nodes) for g in first) == sorted(
        sorted(n for n in gated if refused.racks[n] == rack) for rack in ("r0", "r1")
    )


@pytest.fixture(scope="module")
def frozen(scan: _Scan, tmp_path_factory: pytest.TempPathFactory) -> Scanned:
    """A scan of the nodes left after the first, on which one node's rank freezes in every
    group across nodes and another's in its first only (`tests.plugins.frozen`): a point's
    deadline of 12 s, its communicator's timeout half that. The wave that holds them waits
    out that deadline (the scan's own floor, 30 s, is for GPUs' slow first calls); a healthy
    group's points here take milliseconds."""
    from tests.plugins.frozen import once

    out = tmp_path_factory.mktemp("frozen")
    spec = build_spec(
        backend="gloo",
        gpus_per_node=1,
        iters=1,
        warmup=1,
        blocks=1,
        timeout=12,
        results=out,
        plugins=["tests.plugins.frozen"],
    )
    settings = ScanSettings(
        strategy=Strategy.parse("adaptive"),
        thresholds=Thresholds(sigmas=0, min_ratio=0.01),
        op="freeze",
        sizes=(8, 1024),
    )
    once().touch()
    try:
        with registry_kept():
            return scan_fleet(spec, settings, _Unwatched())
    finally:
        once().unlink(missing_ok=True)


def test_a_node_frozen_once_and_one_frozen_always_are_each_named_and_their_partners_healthy(
    frozen: Scanned,
) -> None:
    from tests.plugins.frozen import FROZEN, FROZEN_ONCE

    ids = frozen.fleet.ids
    hung = {ids[FROZEN], ids[FROZEN_ONCE]}
    nodes = {v.nodes[0]: v for v in frozen.verdicts if v.subject is Subject.NODE}
    failed = [(o.group.nodes, o.unanswered, o.reason) for o in frozen.outcomes if o.reason]
    assert {n: v.health for n, v in nodes.items()} == {
        n: Health.FAILED if n in hung else Health.HEALTHY for n in ids
    }, failed  # on failure: which groups failed, and how
    for node in hung:
        assert "did not answer" in nodes[node].evidence
    assert [v.name for v in frozen.verdicts if v.condemned and v.subject is not Subject.NODE] == []
    # each group that held a frozen node timed out once, and they were in no later wave
    timed_out = [o for o in frozen.outcomes if o.unanswered]
    assert {n for o in timed_out for n in o.unanswered} == hung
    for o in timed_out:
        assert o.reason.count("took over") == 1
        later = [p.group for p in frozen.outcomes if p.group.wave > o.group.wave]
        assert not any(set(o.unanswered) & set(g.nodes) for g in later)


# `sweeper scan` of the nightly's settings (`night`), as options: the same six nodes in the
# same order, so the same waves and verdicts
NIGHT_SCAN = (
    *("--backend", "gloo", "--gpus-per-node", "1", "--iters", "1", "--warmup", "1"),
    *("--blocks", "3", "--timeout", "60", "--plugins", "tests.plugins.faulty_fleet"),
    *("--op", "faulty", "--sizes", "8,64K", "--sigmas", "0", "--min-ratio", "0.1"),
    *("--format", "json"),
)


def _interrupt_past_the_gate(out: Path, done: threading.Event) -> None:
    """SIGINT to this process (the driver) once the scan's journal holds a row of a stage
    after the gate: the gate's rows are kept, the next wave is under way."""
    while not done.is_set():
        for journal in (out / "_journal").glob("*.arrows"):
            try:
                stages = pa.ipc.open_stream(journal.read_bytes()).read_all().column("stage")
            except (OSError, pa.ArrowException):  # compacted meanwhile, or a write in flight
                continue
            if set(stages.to_pylist()) - {Stage.GATE} and not done.is_set():
                os.kill(os.getpid(), signal.SIGINT)
                return
        time.sleep(0.02)


@dataclass(frozen=True)
class _Stopped:
    out: Path
    run_id: str
    stopped: Result  # the scan SIGINT stopped
    kept: pd.DataFrame  # its rows, as the stop left them
    record: records.RunRecord  # its run record, as the stop left it
    summarized: bool  # whether the stop left a scan summary
    finished: list[dict[str, Any]]  # the waves it finished, as the stop left them
    resumed: Result  # `sweeper scan --resume` of it
    document: dict[str, Any]  # what the resumed scan printed: its summary


@pytest.fixture(scope="module")
def stopped(night: _Night, tmp_path_factory: pytest.TempPathFactory) -> _Stopped:
    """`sweeper scan` with the nightly's settings on the same six nodes, stopped by SIGINT as
    its first wave after the gate runs, then `sweeper scan --resume` of it."""
    out = tmp_path_factory.mktemp("stopped")
    runner, done = CliRunner(), threading.Event()
    watch = threading.Thread(target=_interrupt_past_the_gate, args=(out, done), daemon=True)
    watch.start()
    try:
        with registry_kept():
            ran = runner.invoke(app, ["scan", *NIGHT_SCAN, "--results", str(out)])
    finally:
        done.set()
        watch.join()
    (run_id,) = (p.name.removesuffix(".json") for p in (out / "_runs").glob("*[0-9a-f].json"))
    kept, record = sweeper.load(out), records.load(out, run_id)
    assert record is not None
    summarized = scans.path(out, run_id).exists()
    finished = scan_waves.load(out, run_id)
    resume = ["scan", "--resume", run_id, "--results", str(out), "--format", "json"]
    with registry_kept():
        resumed = runner.invoke(app, resume)
    document = json.loads(resumed.stdout)
    return _Stopped(out, run_id, ran, kept, record, summarized, finished, resumed, document)


def test_sigint_mid_scan_exits_130_keeping_its_rows_and_naming_the_resume(
    stopped: _Stopped,
) -> None:
    assert stopped.stopped.exit_code == 130, stopped.stopped.output
    out, run_id = stopped.out, stopped.run_id
    assert stopped.stopped.stderr.strip().splitlines()[-1] == (
        f"sweeper: stopped by SIGINT: run {run_id} interrupted, its rows kept in {out}; "
        f"resume with: sweeper scan --resume {run_id} --results {out}"
    )
    assert stopped.record.ended == "interrupted"
    assert Stage.GATE in set(stopped.kept["stage"])  # the gate's rows, on disk
    assert set(stopped.kept["run_id"]) == {run_id}
    assert not stopped.summarized  # no verdicts from half a scan


def test_a_resumed_scan_reaches_the_verdicts_of_the_same_scan_never_stopped(
    stopped: _Stopped, night: _Night
) -> None:
    assert stopped.resumed.exit_code == 1, stopped.resumed.output  # the slow node
    never_stopped = json.loads(Path(night.summary["scan"]["summary"]).read_text())
    health = {v["name"]: v["health"] for v in stopped.document["verdicts"]}
    assert health == {v["name"]: v["health"] for v in never_stopped["verdicts"]}
    assert stopped.document["run_id"] == stopped.run_id
    assert records.load(stopped.out, stopped.run_id).ended == "complete"  # type: ignore[union-attr]
    assert scans.load(stopped.out, stopped.run_id) == stopped.document
    # the points measured before the stop are not measured again: each once in the run
    rows = sweeper.load(stopped.out)
    assert set(rows["run_id"]) == {stopped.run_id}
    point = [*RUN_POINT, "wave"]
    assert not rows.duplicated(point).any()
    assert len(rows) > len(stopped.kept)


def test_a_stopped_scan_keeps_its_finished_waves_and_its_resume_replays_them(
    stopped: _Stopped,
) -> None:
    # the stop came once a wave after the gate had a row: the gate's waves had finished
    assert stopped.finished
    assert stopped.finished[0]["stage"] == Stage.GATE
    assert all(wave["outcomes"] for wave in stopped.finished)
    # the resumed scan replayed them as they were, and kept its own waves after them
    after = scan_waves.load(stopped.out, stopped.run_id)
    assert after[: len(stopped.finished)] == stopped.finished
    assert len(after) > len(stopped.finished)


def test_a_condemned_verdict_carries_the_command_that_re_tests_it(
    scan: _Scan, stopped: _Stopped
) -> None:
    from tests.plugins.faulty_fleet import SLOW_NODE

    slow = scan.order[SLOW_NODE]
    verdicts = {v["name"]: v for v in stopped.document["verdicts"]}
    again = verdicts[slow]["retest"].split()
    assert again[:3] == ["sweeper", "scan", "--nodes"]
    assert again[3].split(",") == [slow, *verdicts[slow]["partners"]]
    flags = " ".join(again[4:])
    for given in ("--plugins tests.plugins.faulty_fleet", "--op faulty", "--sizes 8,65536"):
        assert given in flags
    assert f"--results {stopped.out}" in flags
    assert "--min-ratio 0.1" in flags
    assert all("retest" not in v for v in verdicts.values() if v["health"] == "healthy")


@pytest.fixture(scope="module")
def healthy(scan: _Scan, tmp_path_factory: pytest.TempPathFactory) -> Result:
    """`sweeper scan --nodes` of three nodes by their Ray ids, on the plain all_reduce."""
    named = ",".join(n for n in scan.order[:3])
    out = tmp_path_factory.mktemp("healthy")
    args = ["scan", "--nodes", named, "--backend", "gloo", "--gpus-per-node", "1"]
    args += ["--iters", "1", "--warmup", "1", "--blocks", "1", "--sizes", "8,1K"]
    args += ["--sigmas", "0", "--min-ratio", "0.01", "--results", str(out), "--format", "json"]
    return CliRunner().invoke(app, args)


def test_a_scan_of_nodes_named_by_id_on_a_healthy_fleet_names_nothing(
    scan: _Scan, healthy: Result
) -> None:
    assert healthy.exit_code == 0, healthy.output
    document = json.loads(healthy.stdout)
    assert [n["id"] for n in document["nodes"]] == scan.order[:3]
    assert document["condemned"] == []
    # three nodes of CPU ranks, which have no reference: held to nothing but themselves,
    # they cannot be told apart, and each says so (issue 52)
    nodes = [v for v in document["verdicts"] if v["subject"] == "node"]
    assert {v["health"] for v in nodes} == {"unconfirmed"}
    assert all(": cannot tell: " in v["evidence"] for v in nodes)
    assert {v["health"] for v in document["verdicts"] if v["subject"] != "node"} <= {"healthy"}
