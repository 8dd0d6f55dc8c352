"""The schedules (the nightly scan, the weekly sweep) and the cluster config: Ray's cluster
schema, systemd's own verifier, the Kubernetes API schemas (kubernetes-validate, strict), the
ray job submit script, and the Grafana dashboard against what `sweeper export` writes."""

from __future__ import annotations

import configparser
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import ray.autoscaler
import yaml
from prometheus_client.parser import text_string_to_metric_families
from ray.autoscaler._private.util import prepare_config, validate_config
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.commands.nightly_run import scan_settings
from sweeper.planning.profile import build_spec, load_profile
from sweeper.results import scans
from sweeper.scan.policy import Scheme
from sweeper.wire import REQUESTABLE_TIERS
from tests.scan_data import RECORDED_RUN, scan_summary

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "jobs"
SYSTEMD = JOBS / "systemd"
K8S_VERSION = "1.31.0"
RECORDED = ROOT / "tests" / "data" / "results" / "main-2026-11-25"
JOBS_RUN = ("nightly", "weekly")  # a systemd service and timer each
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def test_cluster_yaml_is_valid_against_rays_own_cluster_schema() -> None:
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)
    # as `ray up` does: fill in the provider's defaults, then Ray's own checks
    validate_config(prepare_config(copy.deepcopy(config)))
    types = config["available_node_types"]
    head = config["head_node_type"]
    (workers,) = (name for name in types if name != head)
    assert types[workers]["resources"]["GPU"] >= 1
    assert "GPU" not in types[head]["resources"]
    weekly = yaml.safe_load((JOBS / "weekly.yaml").read_text())  # the scan takes every node
    assert types[workers]["min_workers"] == weekly["nodes"]
    installs = " ".join(config["setup_commands"])
    assert "pip install" in installs
    assert "$HOME/sweeper[report]" in installs
    assert config["file_mounts"] == {"~/sweeper": "."}
    assert {".git", ".venv"} <= set(config["rsync_exclude"])


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[method-assign]  # systemd keys are case-sensitive
    parser.read_string((SYSTEMD / name).read_text())
    return parser


@pytest.mark.parametrize("job", JOBS_RUN)
def test_the_systemd_timer_runs_the_service_persistently_and_never_overlapping(job: str) -> None:
    service, timer = _unit(f"sweeper-{job}.service"), _unit(f"sweeper-{job}.timer")
    assert service["Service"]["Type"] == "oneshot"  # active until done: the timer waits
    command = service["Service"]["ExecStart"].split()
    assert command[1:4] == ["nightly", "--profile", f"/etc/sweeper/{job}.yaml"]
    assert command[0].endswith("/bin/sweeper")
    # after every run, a regression's too: ExecStopPost runs whatever ExecStart's exit
    export = service["Service"]["ExecStopPost"].split()
    assert export[0] == command[0]
    assert export[1:4] == ["export", "--results", "results"]  # the profile's output
    assert export[export.index("--prometheus") + 1].endswith("/sweeper.prom")
    assert timer["Timer"]["Unit"] == f"sweeper-{job}.service"
    assert timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"
    assert "RAY_AUTH_MODE" not in (SYSTEMD / f"sweeper-{job}.service").read_text()


def test_the_nightly_job_scans_the_fleet_and_the_weekly_one_sweeps_every_pair() -> None:
    """jobs/nightly.yaml is the adaptive scan after its gate, then regression detection;
    jobs/weekly.yaml sweeps every tier, pair and size, as the nightly did before the scan."""
    nightly, weekly = (load_profile(JOBS / f"{job}.yaml") for job in JOBS_RUN)
    assert nightly.scan is not None
    assert scan_settings(nightly.scan).strategy.kind is Scheme.ADAPTIVE
    assert weekly.scan is None
    swept = build_spec(weekly)
    assert (swept.pairs, swept.max_size, swept.tiers) == ("all", "auto", REQUESTABLE_TIERS)
    assert swept.copy_engine
    # the weekly sweep starts well clear of the nightly scan's night
    nights = [_unit(f"sweeper-{job}.timer")["Timer"]["OnCalendar"] for job in JOBS_RUN]
    assert nights[0].endswith("02:00:00")
    assert nights[1].startswith("Sat ")
    assert not nights[1].endswith("02:00:00")


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    """systemd checks every section and key; the ExecStart binary, a venv on a real host, is
    pointed at this one's sweeper so that its existence check passes here."""
    sweeper = Path(sys.executable).parent / "sweeper"
    for unit in SYSTEMD.iterdir():
        text = unit.read_text().replace("/opt/sweeper/.venv/bin/sweeper", str(sweeper))
        (tmp_path / unit.name).write_text(text)
    calendars = [_unit(f"sweeper-{job}.timer")["Timer"]["OnCalendar"] for job in JOBS_RUN]
    checks = (
        ["systemd-analyze", "verify", "--man=no", *sorted(map(str, tmp_path.iterdir()))],
        *(["systemd-analyze", "calendar", calendar] for calendar in calendars),
    )
    for check in checks:
        result = subprocess.run(check, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        assert not re.search("Unknown|Failed", result.stderr), result.stderr


def _documents(path: Path) -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(path.read_text())}


def _generated(name: str) -> Path:
    kustomization = yaml.safe_load((JOBS / "kustomization.yaml").read_text())
    (files,) = (g["files"] for g in kustomization["configMapGenerator"] if g["name"] == name)
    return JOBS / files[0]


def test_the_kubernetes_cronjob_creates_a_rayjob_and_forbids_overlap(tmp_path: Path) -> None:
    manifests = _documents(JOBS / "kubernetes" / "cronjob.yaml")
    for manifest in manifests.values():  # the API's own schemas, unknown fields refused
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
    cron = manifests["CronJob"]
    assert (cron["apiVersion"], cron["kind"]) == ("batch/v1", "CronJob")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert len(cron["spec"]["schedule"].split()) == 5
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == manifests["ServiceAccount"]["metadata"]["name"]
    (container,) = pod["containers"]
    (script,) = container["args"]
    assert "kubectl create -f -" in script
    assert "jobDeploymentStatus" in script  # it waits for the RayJob to finish
    syntax = subprocess.run(
        ["bash", "-n"], input=script, capture_output=True, text=True, check=False
    )
    assert syntax.returncode == 0, syntax.stderr
    (volume,) = pod["volumes"]
    (mount,) = container["volumeMounts"]
    assert f"{mount['mountPath']}/rayjob.yaml" in script
    assert _generated(volume["configMap"]["name"]).name == "rayjob.yaml"
    (rule,) = manifests["Role"]["rules"]
    assert (rule["apiGroups"], rule["resources"]) == (["ray.io"], ["rayjobs"])
    assert {"create", "get"} <= set(rule["verbs"])


def _nightly_then_export(
    argv: list[str], tmp_path: Path, nightly_exit: int
) -> tuple[int, list[list[str]]]:
    """Run a job's entrypoint with a stand-in `sweeper` whose nightly exits `nightly_exit`:
    the entrypoint's exit and the sweeper commands it ran, in order."""
    bin_, calls = tmp_path / "fake-bin", tmp_path / "calls"
    bin_.mkdir(exist_ok=True)
    calls.unlink(missing_ok=True)
    (bin_ / "sweeper").write_text(
        "#!/bin/sh\n"
        f'for arg in "$@"; do printf "%s\\0" "$arg" >> "{calls}"; done\n'
        f'printf "\\n\\0" >> "{calls}"\n'
        f'[ "$1" = nightly ] && exit {nightly_exit}\nexit 0\n'
    )
    (bin_ / "sweeper").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    ran = calls.read_text().split("\n\0") if calls.exists() else []
    return result.returncode, [call.split("\0")[:-1] for call in ran if call]


def _assert_exports_after_the_nightly_and_exits_as_it_did(
    argv: list[str], tmp_path: Path, results: str, prometheus: str
) -> list[str]:
    """The nightly command the entrypoint ran; its export, of `results` to `prometheus`,
    followed it whatever its exit."""
    for exit_code in (0, 1, 3):
        returned, ran = _nightly_then_export(argv, tmp_path, exit_code)
        assert returned == exit_code
        nightly, export = ran
        assert nightly[0] == "nightly"
        assert export == ["export", "--results", results, "--prometheus", prometheus]
    return nightly


def test_the_rayjob_runs_sweeper_nightly_on_gpu_workers_with_a_dated_submission_id(
    tmp_path: Path,
) -> None:
    template = _generated("sweeper-nightly-rayjob").read_text()
    job = yaml.safe_load(template.replace("SUBMISSION_DATE", "20261122-0200"))
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    name = job["metadata"]["name"]
    assert DNS_LABEL.match(name)
    assert name == job["spec"]["jobId"] == "sweeper-nightly-20261122-0200"
    spec = job["spec"]
    # as the RayJob's submitter passes it through a shell, and Ray's job supervisor again
    textfile = "/var/lib/prometheus/node-exporter"
    nightly = _assert_exports_after_the_nightly_and_exits_as_it_did(
        shlex.split(spec["entrypoint"]),
        tmp_path,
        "/var/lib/sweeper/results",
        f"{textfile}/sweeper.prom",
    )
    assert nightly[:3] == ["nightly", "--profile", "/etc/sweeper/nightly.yaml"]
    assert nightly[nightly.index("--results") + 1] == "/var/lib/sweeper/results"
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["submissionMode"] == "K8sJobMode"
    cluster = spec["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]
    (workers,) = cluster["workerGroupSpecs"]
    for template_ in (head, workers["template"]):
        pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name}}
        kubernetes_validate.validate({**pod_template, "template": template_}, K8S_VERSION, True)
    (worker,) = workers["template"]["spec"]["containers"]
    assert int(worker["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert workers["minReplicas"] == workers["replicas"] == workers["maxReplicas"]
    volumes = {v["name"]: v for v in head["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in head["spec"]["containers"][0]["volumeMounts"]}
    profile = volumes[mounts["/etc/sweeper"]]["configMap"]["name"]
    assert _generated(profile) == JOBS / "nightly.yaml"
    claim = volumes[mounts["/var/lib/sweeper"]]["persistentVolumeClaim"]["claimName"]
    data = _documents(JOBS / "kubernetes" / "cronjob.yaml")["PersistentVolumeClaim"]
    assert claim == data["metadata"]["name"]
    assert "--results /var/lib/sweeper/results" in spec["entrypoint"]
    # node_exporter's textfile directory on the head's node
    assert volumes[mounts[textfile]]["hostPath"]["path"] == textfile


@pytest.mark.skipif(not shutil.which("flock"), reason="needs flock (util-linux)")
@pytest.mark.parametrize("exit_code", [0, 1])
def test_the_submit_script_submits_sweeper_nightly_with_a_dated_submission_id(
    tmp_path: Path, exit_code: int
) -> None:
    """`ray` here is a stand-in that records its arguments: the script is what is tested."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "ray").write_text(
        f'#!/bin/sh\nprintf "%s\\0" "$@" > "{tmp_path}/argv"\nexit {exit_code}\n'
    )
    (bin_ / "ray").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_}:{os.environ['PATH']}",
        "SWEEPER_DATA": "/data",
        "SWEEPER_TEXTFILE_DIR": "/textfile",
    }
    result = subprocess.run(
        [str(JOBS / "submit-nightly.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == exit_code, result.stderr
    argv = (tmp_path / "argv").read_text().split("\0")[:-1]
    assert argv[:2] == ["job", "submit"]
    submission_id = argv[argv.index("--submission-id") + 1]
    assert re.fullmatch(r"sweeper-nightly-\d{8}T\d{6}Z", submission_id)
    assert argv[argv.index("--working-dir") + 1] == "jobs"
    # Ray's job supervisor runs the entrypoint in a shell, as shlex.join gives it
    entrypoint = shlex.split(shlex.join(argv[argv.index("--") + 1 :]))
    nightly = _assert_exports_after_the_nightly_and_exits_as_it_did(
        entrypoint, tmp_path, "/data/results", "/textfile/sweeper.prom"
    )
    assert nightly == [
        *("nightly", "--profile", "nightly.yaml"),
        *("--results", "/data/results", "--reports-dir", "/data/reports"),
    ]


def _exported(tmp_path: Path) -> tuple[set[str], set[str]]:
    """The metric names and label names `sweeper export` writes for a recorded run, with a
    scan's summary beside it for the verdicts."""
    results, out = tmp_path / "results", tmp_path / "sweeper.prom"
    shutil.copytree(RECORDED, results)
    scans.save(results, RECORDED_RUN, scan_summary())
    args = ["export", "--results", str(results), "--prometheus", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    samples = [s for f in text_string_to_metric_families(out.read_text()) for s in f.samples]
    return {s.name for s in samples}, {label for s in samples for label in s.labels}


def _queries(dashboard: dict[str, Any]) -> list[str]:
    targets = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    variables = [
        v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"
    ]
    return targets + variables


def _labels(query: str) -> set[str]:
    """The label names a PromQL query groups by, selects on, or lists the values of."""
    grouped = [name for by in re.findall(r"by \(([^)]*)\)", query) for name in by.split(",")]
    selected = [
        name for sel in re.findall(r"\{([^}]*)\}", query) for name in re.findall(r"(\w+)=", sel)
    ]
    listed = re.findall(r"label_values\([^,]+, *(\w+)\)", query)
    return {name.strip() for name in [*grouped, *selected, *listed]}


def test_the_grafana_dashboard_queries_only_what_sweeper_export_writes(tmp_path: Path) -> None:
    dashboard = json.loads((JOBS / "grafana" / "sweeper-dashboard.json").read_text())
    names, labels = _exported(tmp_path)
    queries = _queries(dashboard)
    # metric names: what is left once the label lists are taken out
    bare = [re.sub(r"by \([^)]*\)|\{[^}]*\}", "", query) for query in queries]
    queried = {name for query in bare for name in re.findall(r"\bsweeper_\w+", query)}
    assert queried <= names, queried - names
    assert "sweeper_busbw_bytes_per_second" in queried
    used = set().union(*map(_labels, queries))
    assert used <= labels, used - labels
    assert {"hostname", "tier", "op", "run_id", "verdict"} <= used
    assert {"sweeper_node_verdict", "sweeper_gpu_verdict", "sweeper_link_verdict"} <= queried
    # the node panel: one series per node over time, in bytes per second
    (busbw,) = (p for p in dashboard["panels"] if p["title"] == "Bus bandwidth per node")
    assert busbw["type"] == "timeseries"
    assert busbw["fieldConfig"]["defaults"]["unit"] == "Bps"
    assert busbw["targets"][0]["expr"].startswith("min by (hostname) ")
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    sources = {t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]}
    assert sources == {"${datasource}"}
