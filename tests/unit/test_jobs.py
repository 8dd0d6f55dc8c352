"""The schedules and the cluster config: Ray's cluster schema, systemd's own verifier, the
Kubernetes API schemas (kubernetes-validate, strict), and the ray job submit script."""

from __future__ import annotations

import configparser
import copy
import json
import os
import re
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
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "jobs"
SYSTEMD = JOBS / "systemd"
K8S_VERSION = "1.31.0"
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
    nightly = yaml.safe_load((JOBS / "nightly.yaml").read_text())
    assert types[workers]["min_workers"] == nightly["nodes"]
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


def test_the_systemd_timer_runs_the_nightly_service_persistently_and_never_overlapping() -> None:
    service, timer = _unit("sweeper-nightly.service"), _unit("sweeper-nightly.timer")
    assert service["Service"]["Type"] == "oneshot"  # active until done: the timer waits
    command = service["Service"]["ExecStart"].split()
    assert command[1:4] == ["nightly", "--profile", "/etc/sweeper/nightly.yaml"]
    assert command[0].endswith("/bin/sweeper")
    assert timer["Timer"]["Unit"] == "sweeper-nightly.service"
    assert timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"
    assert "RAY_AUTH_MODE" not in (SYSTEMD / "sweeper-nightly.service").read_text()


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="needs systemd-analyze")
def test_systemd_analyze_verifies_the_units(tmp_path: Path) -> None:
    """systemd checks every section and key; the ExecStart binary, a venv on a real host, is
    pointed at this one's sweeper so that its existence check passes here."""
    sweeper = Path(sys.executable).parent / "sweeper"
    for unit in SYSTEMD.iterdir():
        text = unit.read_text().replace("/opt/sweeper/.venv/bin/sweeper", str(sweeper))
        (tmp_path / unit.name).write_text(text)
    calendar = _unit("sweeper-nightly.timer")["Timer"]["OnCalendar"]
    checks = (
        ["systemd-analyze", "verify", "--man=no", *sorted(map(str, tmp_path.iterdir()))],
        ["systemd-analyze", "calendar", calendar],
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


def test_the_rayjob_runs_sweeper_nightly_on_gpu_workers_with_a_dated_submission_id() -> None:
    template = _generated("sweeper-nightly-rayjob").read_text()
    job = yaml.safe_load(template.replace("SUBMISSION_DATE", "20261122-0200"))
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    name = job["metadata"]["name"]
    assert DNS_LABEL.match(name)
    assert name == job["spec"]["jobId"] == "sweeper-nightly-20261122-0200"
    spec = job["spec"]
    assert spec["entrypoint"].startswith("sweeper nightly --profile /etc/sweeper/nightly.yaml")
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
    assert "--output /var/lib/sweeper/results" in spec["entrypoint"]


@pytest.mark.skipif(not shutil.which("flock"), reason="needs flock (util-linux)")
@pytest.mark.parametrize("exit_code", [0, 1])
def test_the_submit_script_submits_sweeper_nightly_with_a_dated_submission_id(
    tmp_path: Path, exit_code: int
) -> None:
    """`ray` here is a stand-in that records its arguments: the script is what is tested."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "ray").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/argv"\nexit {exit_code}\n'
    )
    (bin_ / "ray").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "SWEEPER_DATA": "/data"}
    result = subprocess.run(
        [str(JOBS / "submit-nightly.sh")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == exit_code, result.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:2] == ["job", "submit"]
    submission_id = argv[argv.index("--submission-id") + 1]
    assert re.fullmatch(r"sweeper-nightly-\d{8}T\d{6}Z", submission_id)
    assert argv[argv.index("--working-dir") + 1] == "jobs"
    entrypoint = argv[argv.index("--") + 1 :]
    assert entrypoint == [
        *("sweeper", "nightly", "--profile", "nightly.yaml"),
        *("--output", "/data/results", "--reports-dir", "/data/reports"),
    ]
