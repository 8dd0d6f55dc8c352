"""The container image: the Dockerfile parsed by BuildKit's own parser (the `dockerfile`
package), held to hadolint's rules that apply to it, its two targets (the default, and `efa`
with libfabric and aws-ofi-nccl), and named by the RayJobs and the cluster launcher at
sweeper's version."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path

import dockerfile
import yaml

import sweeper

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "jobs" / "kubernetes"
IMAGE = f"sweeper:{sweeper.__version__}"
EFA_IMAGE = f"{IMAGE}-efa"
# torch's CUDA build, as its wheel on PyPI pulls it (cuda-toolkit 13.0.2 for torch 2.11.0), and
# the oldest NVIDIA driver of that CUDA major version (CUDA 13.0's release notes: 580)
TORCH_CUDA = {"2.11.0": ("13.0", 580)}


def _commands() -> tuple[dockerfile.Command, ...]:
    return dockerfile.parse_file(str(ROOT / "Dockerfile"))


def _args(commands: tuple[dockerfile.Command, ...]) -> dict[str, str]:
    """ARG defaults, as `docker build` substitutes them without --build-arg."""
    return dict(
        value.split("=", 1) for c in commands if c.cmd == "ARG" for value in c.value if "=" in value
    )


def _expand(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], text)


def _runs(commands: tuple[dockerfile.Command, ...]) -> list[str]:
    return [" ".join(c.value) for c in commands if c.cmd == "RUN"]


def _stages(commands: tuple[dockerfile.Command, ...]) -> dict[str, list[dockerfile.Command]]:
    """Each build stage's commands by its name; the last stage, the default target, as ''."""
    stages: dict[str, list[dockerfile.Command]] = {}
    current: list[dockerfile.Command] = []
    for c in commands:
        if c.cmd == "FROM":
            current = stages.setdefault(c.value[2] if len(c.value) == 3 else "", [])
        current.append(c)
    return stages


def _env(commands: list[dockerfile.Command]) -> dict[str, str]:
    return {
        k: v.strip('"')
        for c in commands
        if c.cmd == "ENV"
        for k, v in zip(c.value[::2], c.value[1::2], strict=True)
    }


def _rayjob_images(name: str = "rayjob.yaml") -> tuple[str, set[str]]:
    rayjob = yaml.safe_load((KUBERNETES / name).read_text())
    cluster = rayjob["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    images = {c["image"] for pod in pods for c in pod["template"]["spec"]["containers"]}
    return cluster["rayVersion"], images


def test_the_image_builds_on_rays_cuda_image_of_the_clusters_ray_version() -> None:
    commands = _commands()
    args = _args(commands)
    base, *stages = (c.value for c in commands if c.cmd == "FROM")
    name, _, tag = _expand(base[0], args).partition(":")
    ray_version, _ = _rayjob_images()
    assert name == "rayproject/ray"
    assert tag.startswith(f"{ray_version}-py3")
    assert tag.endswith("-gpu")
    # the efa target and the default one (the last stage) both build on it, the default
    # without EFA's plugin, which on InfiniBand would take the place of NCCL's own transport
    assert [stage[0] for stage in stages] == [base[2], base[2]]
    assert [stage[2:] for stage in stages] == [("efa",), ()]


def test_the_image_pins_torch_nccl4py_and_the_efa_installer_and_keeps_no_cache() -> None:
    commands = _commands()
    args = _args(commands)
    runs = [_expand(run, args) for run in _runs(commands)]
    installs = [part for run in runs for part in run.split("&&") if "pip install" in part]
    assert installs
    assert all("--no-cache-dir" in part for part in installs)
    words = [word for part in installs for word in shlex.split(part)]
    required = [word for word in words if not word.startswith("-") and word != "python"]
    (package,) = (word for word in required if word.startswith("/home/ray/sweeper["))
    assert set(package.removeprefix("/home/ray/sweeper[").rstrip("]").split(",")) >= {
        "report",
        "nccl",
    }
    pinned = [word for word in required if word not in ("pip", "install", package)]
    assert {word.split("==")[0] for word in pinned} == {"torch", "nccl4py"}
    assert all(re.fullmatch(r"[\w-]+==\d+\.\d+\.\d+", word) for word in pinned), pinned
    (efa,) = (run for run in runs if "efa_installer.sh" in run)
    assert re.search(r"aws-efa-installer-\d+\.\d+\.\d+\.tar\.gz", efa)
    # a container has no kernel of its own: the host's EFA driver and limits stand
    assert {"--skip-kmod", "--skip-limit-conf"} <= set(efa.split())
    # a pipe hides a failed step unless pipefail is set (hadolint DL4006)
    assert not any("|" in run and "pipefail" not in run for run in runs)


def test_the_image_states_the_driver_its_torchs_cuda_needs_and_refuses_an_older_one() -> None:
    commands = _commands()
    cuda, driver = TORCH_CUDA[_args(commands)["TORCH_VERSION"]]
    assert _env(_stages(commands)["base"])["NVIDIA_REQUIRE_CUDA"] == f"cuda>={cuda}"
    text = (ROOT / "Dockerfile").read_text()
    assert f"CUDA {cuda} build" in text
    assert f"NVIDIA driver of {driver} or newer" in text
    for name in ("rayjob.yaml", "rayjob-efa.yaml"):
        assert f"NVIDIA driver of {driver} or newer" in (KUBERNETES / name).read_text()
    assert f"{driver} or newer" in (ROOT / "docs" / "DEPLOY.md").read_text()


def test_the_image_runs_as_rays_user_and_sets_no_nccl_torch_or_nvshmem_variable() -> None:
    """NCCL's own choices hold in the image: what the machine's environment and
    /etc/nccl.conf say, else NCCL's defaults (docs/DEPLOY.md)."""
    stages = _stages(_commands())
    for commands in stages.values():
        users = [c.value[0] for c in commands if c.cmd == "USER"]
        assert users[-1:] in ([], ["ray"]), users  # a stage from `base` keeps its user
        assert not [k for k in _env(commands) if k.startswith(("NCCL_", "TORCH_", "NVSHMEM_"))]
    assert [c.value[0] for c in stages["base"] if c.cmd == "USER"][-1] == "ray"
    (cmd,) = (c for c in stages["base"] if c.cmd == "CMD")
    assert cmd.json  # exec form: signals reach the process (hadolint DL3025)


def test_only_the_efa_target_puts_aws_ofi_nccl_and_libfabric_on_the_library_path() -> None:
    stages = _stages(_commands())
    efa = _env(stages["efa"])["LD_LIBRARY_PATH"].split(":")
    assert {"/opt/amazon/efa/lib", "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"} <= set(efa)
    assert "LD_LIBRARY_PATH" not in _env(stages["base"]) | _env(stages[""])


def test_every_file_the_image_copies_exists_and_is_not_ignored() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def ignored(path: str) -> bool:
        verdict = False  # the last matching line wins, as in Docker
        for pattern in patterns:
            negated = pattern.startswith("!")
            if fnmatch.fnmatch(path, pattern.removeprefix("!").rstrip("/")):
                verdict = not negated
        return verdict

    for copy in (c for c in _commands() if c.cmd == "COPY"):
        *sources, _ = copy.value
        for source in sources:
            assert (ROOT / source).exists(), source
            assert not ignored(source), source
    assert ignored(".git")
    assert ignored(".venv")
    assert ignored("results")


def test_the_rayjobs_and_the_cluster_launcher_run_sweepers_image_at_its_version() -> None:
    ray_version, images = _rayjob_images()
    assert images == {IMAGE}
    efa_ray_version, efa_images = _rayjob_images("rayjob-efa.yaml")
    assert efa_images == {EFA_IMAGE}
    assert efa_ray_version == ray_version
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert cluster["docker"]["image"] == EFA_IMAGE  # AWS: its GPU nodes' fabric is EFA
    assert _args(_commands())["RAY_VERSION"] == ray_version
