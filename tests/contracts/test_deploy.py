"""The deploy files carry the fabric: the cluster launcher's GPU nodes and the RayJobs' GPU
workers get their RDMA devices, IPC_LOCK and a /dev/shm sized for NCCL; the EFA RayJob is the
InfiniBand one but for its image and network; kustomize builds either; every image is pinned;
and none of them sets NCCL's multicast variables, which the machine's environment decides."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.contracts.test_jobs import JOBS, K8S_VERSION, ROOT

KUBERNETES = JOBS / "kubernetes"
# each RayJob and the device plugin resource that puts its fabric's devices in the workers
FABRICS = {
    "rayjob.yaml": "rdma/rdma_shared_device_a",  # NVIDIA Network Operator: InfiniBand, RoCE
    "rayjob-efa.yaml": "vpc.amazonaws.com/efa",  # AWS's EFA device plugin
}
# the multicast variables and the one value each may have in a file here: off
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DEPLOY_FILES = (
    ROOT / "Dockerfile",
    ROOT / "cluster.yaml",
    *sorted(JOBS.rglob("*.yaml")),
    *sorted(JOBS.rglob("*.sh")),
)


def _rayjob(name: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(
        (KUBERNETES / name).read_text().replace("SUBMISSION_DATE", "20261127-0200")
    )
    return job


def _worker(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The GPU workers' pod template and their one container."""
    (group,) = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    template: dict[str, Any] = group["template"]
    (container,) = template["spec"]["containers"]
    return template, container


def test_the_cluster_launchers_gpu_nodes_bring_every_efa_interface_into_the_container() -> None:
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    gpu = next(t for t in config["available_node_types"].values() if "GPU" in t["resources"])
    node = gpu["node_config"]
    interfaces = node["NetworkInterfaces"]
    cards = [ni["NetworkCardIndex"] for ni in interfaces]
    assert cards == list(range(32))  # p5.48xlarge: one EFA per network card, all of them
    assert interfaces[0]["InterfaceType"] == "efa"  # card 0 carries the node's IP traffic too
    assert {ni["InterfaceType"] for ni in interfaces[1:]} == {"efa-only"}
    assert all(ni["SubnetId"] and ni["Groups"] for ni in interfaces)
    assert node["Placement"]["GroupName"]  # EFA needs one cluster placement group
    # Ray's default AMI carries CUDA 11.2's driver; the image needs 580 or newer
    assert node["ImageId"].startswith("resolve:ssm:/aws/service/deeplearning/ami/")
    options = " ".join(config["docker"]["run_options"])
    (shm,) = re.findall(r"--shm-size=(\d+)g", options)
    assert int(shm) >= 8


RDMA_OPTIONS = ("--device=/dev/infiniband", "--cap-add=IPC_LOCK", "--ulimit memlock=-1:-1")


def test_the_cluster_launcher_gives_rdma_to_the_workers_and_not_to_the_cpu_head() -> None:
    """Ray gives a worker run_options and worker_run_options, the head run_options and
    head_run_options: the CPU head has no /dev/infiniband, where docker run would fail."""
    docker = yaml.safe_load((ROOT / "cluster.yaml").read_text())["docker"]
    head = " ".join([*docker["run_options"], *docker.get("head_run_options", [])])
    worker = " ".join([*docker["run_options"], *docker.get("worker_run_options", [])])
    for option in RDMA_OPTIONS:
        assert option in worker
        assert option not in head


@pytest.mark.parametrize(("name", "resource"), FABRICS.items())
def test_each_rayjob_brings_its_fabric_ipc_lock_and_a_sized_dev_shm_to_the_gpu_workers(
    name: str, resource: str
) -> None:
    job = _rayjob(name)
    template, container = _worker(job)
    pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "w"}}
    kubernetes_validate.validate({**pod_template, "template": template}, K8S_VERSION, True)
    resources = container["resources"]
    assert resources["requests"] == resources["limits"]
    assert int(resources["limits"][resource]) >= 1
    assert int(resources["limits"]["nvidia.com/gpu"]) >= 1
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    shm = volumes[mounts["/dev/shm"]]["emptyDir"]
    assert shm["medium"] == "Memory"
    assert shm["sizeLimit"].endswith("Gi")
    assert int(shm["sizeLimit"].removesuffix("Gi")) >= 8


def _without_fabric(job: dict[str, Any]) -> dict[str, Any]:
    """The RayJob less what tells one fabric from another: its images and the workers'
    network resource."""
    cluster = job["spec"]["rayClusterSpec"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        for container in group["template"]["spec"]["containers"]:
            container.pop("image")
    _, worker = _worker(job)
    for quantities in worker["resources"].values():
        for resource in FABRICS.values():
            quantities.pop(resource, None)
    return job


def test_the_efa_rayjob_is_the_rayjob_but_for_its_image_and_network() -> None:
    ib, efa = (_rayjob(name) for name in FABRICS)
    assert _without_fabric(efa) == _without_fabric(ib)


def _kustomized(jobs: Path) -> dict[tuple[str, str], dict[str, Any]]:
    built = subprocess.run(
        ["kubectl", "kustomize", str(jobs)], capture_output=True, text=True, check=True
    )
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(built.stdout)}


@pytest.mark.skipif(not shutil.which("kubectl"), reason="needs kubectl (its kustomize)")
def test_kustomize_builds_the_nightly_with_either_rayjob_as_the_kustomization_says(
    tmp_path: Path,
) -> None:
    """`kubectl apply -k jobs/` as it is, and with the line jobs/kustomization.yaml gives for
    EFA in place of its RayJob's: every object valid, the ConfigMap the CronJob reads holding
    that RayJob under the name the CronJob reads."""
    kustomization = (JOBS / "kustomization.yaml").read_text()
    (efa_line,) = re.findall(r"^#\s+(files: \[rayjob\.yaml=\S+\])$", kustomization, re.M)
    copy = tmp_path / "jobs"
    shutil.copytree(JOBS, copy)
    (copy / "kustomization.yaml").write_text(
        kustomization.replace("files: [kubernetes/rayjob.yaml]", efa_line, 1)
    )
    for jobs, rayjob in ((JOBS, "rayjob.yaml"), (copy, "rayjob-efa.yaml")):
        objects = _kustomized(jobs)
        for manifest in objects.values():
            kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
        data = objects[("ConfigMap", "sweeper-nightly-rayjob")]["data"]
        assert data == {"rayjob.yaml": (KUBERNETES / rayjob).read_text()}


def _images(node: object) -> Iterator[str]:
    """Every `image` a YAML document names, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from _images(value)
    elif isinstance(node, list):
        for item in node:
            yield from _images(item)


def test_every_image_the_deploy_files_run_is_pinned_and_the_cronjobs_kubectl_is_maintained() -> (
    None
):
    documents = [
        doc
        for path in (ROOT / "cluster.yaml", *sorted(KUBERNETES.glob("*.yaml")))
        for doc in yaml.safe_load_all(path.read_text())
    ]
    images = {image for doc in documents for image in _images(doc)}
    dockerfile = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^FROM (\S+/\S+)", dockerfile, re.M)  # the one stage from a registry
    images.add(base.replace("${RAY_VERSION}", "2.60.0"))
    for image in images:
        tag = image.rsplit("/", 1)[-1].partition(":")[2]  # a registry's port is no tag
        assert "@sha256:" in image or (tag != "latest" and re.search(r"\d", tag)), image
    (kubectl,) = {image for image in images if "kubectl" in image}
    # bitnami/kubectl left its registry in 2025: Kubernetes' own image, a release's tag
    assert re.fullmatch(r"registry\.k8s\.io/kubectl:v\d+\.\d+\.\d+", kubectl)


def _assignments(text: str, name: str) -> list[str]:
    """The values a file gives a variable: NAME=value (shell, Dockerfile ENV, docker -e),
    NAME: value (YAML maps), and {name: NAME, value: ...} (Kubernetes env)."""
    quoted = r"[\"']?(\w+)"
    patterns = (
        rf"\b{name}\s*[=:]\s*{quoted}",
        rf"\b{name}\s+{quoted}",  # ENV NAME value
        rf"name:\s*{name}\s*[,\n]\s*value:\s*{quoted}",
    )
    return [value for pattern in patterns for value in re.findall(pattern, text)]


def test_no_deploy_file_sets_nvlink_multicast_and_the_docs_only_ever_turn_it_off() -> None:
    """The image, the cluster launcher and the jobs leave NCCL's choices to the machine's
    environment and /etc/nccl.conf; docs/DEPLOY.md shows shared machines turning multicast
    off there, never on."""
    for path in DEPLOY_FILES:
        text = re.sub(r"^\s*#.*$", "", path.read_text(), flags=re.M)  # what they set, not say
        for name in MULTICAST_OFF:
            assert not _assignments(text, name), (path, name)
    docs = (ROOT / "docs" / "DEPLOY.md").read_text()
    for name, off in MULTICAST_OFF.items():
        values = _assignments(docs, name)
        assert values, name  # the page says how to keep it off
        assert set(values) == {off}, (name, values)
