"""The container image: the Dockerfile parsed by BuildKit's own parser (the `dockerfile`
package), held to hadolint's rules that apply to it, and named by the RayJob and the cluster
launcher at sweeper's version."""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path

import dockerfile
import yaml

import sweeper
from sweeper.driver.cluster import MULTICAST_OFF

ROOT = Path(__file__).resolve().parents[2]
IMAGE = f"sweeper:{sweeper.__version__}"


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


def _rayjob_images() -> tuple[str, set[str]]:
    rayjob = yaml.safe_load((ROOT / "jobs" / "kubernetes" / "rayjob.yaml").read_text())
    cluster = rayjob["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    images = {c["image"] for pod in pods for c in pod["template"]["spec"]["containers"]}
    return cluster["rayVersion"], images


def test_the_image_builds_on_rays_cuda_image_of_the_clusters_ray_version() -> None:
    commands = _commands()
    args = _args(commands)
    (base,) = (_expand(c.value[0], args) for c in commands if c.cmd == "FROM")
    name, _, tag = base.partition(":")
    ray_version, _ = _rayjob_images()
    assert name == "rayproject/ray"
    assert tag.startswith(f"{ray_version}-py3")
    assert tag.endswith("-gpu")


def test_the_image_installs_a_pinned_torch_and_sweeper_with_its_extras_without_a_cache() -> None:
    commands = _commands()
    args = _args(commands)
    installs = [
        _expand(part, args)
        for run in _runs(commands)
        for part in run.split("&&")
        if "pip install" in part
    ]
    assert installs
    assert all("--no-cache-dir" in part for part in installs)
    words = [word for part in installs for word in shlex.split(part)]
    assert any(re.fullmatch(r"torch==\d+\.\d+\.\d+", word) for word in words)
    (package,) = (word for word in words if word.startswith("/home/ray/sweeper["))
    assert set(package.removeprefix("/home/ray/sweeper[").rstrip("]").split(",")) >= {
        "report",
        "nccl",
    }
    # a pipe hides a failed step unless pipefail is set (hadolint DL4006)
    assert not any("|" in run and "pipefail" not in run for run in _runs(commands))


def test_the_image_runs_as_rays_user_with_nvlink_multicast_off() -> None:
    commands = _commands()
    users = [c.value[0] for c in commands if c.cmd == "USER"]
    assert users
    assert users[-1] not in ("root", "0")
    env = {
        k: v
        for c in commands
        if c.cmd == "ENV"
        for k, v in zip(c.value[::2], c.value[1::2], strict=True)
    }
    assert env == MULTICAST_OFF
    (cmd,) = (c for c in commands if c.cmd == "CMD")
    assert cmd.json  # exec form: signals reach the process (hadolint DL3025)


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


def test_the_rayjob_and_the_cluster_launcher_run_sweepers_image_at_its_version() -> None:
    _, images = _rayjob_images()
    assert images == {IMAGE}
    cluster = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert cluster["docker"]["image"] == IMAGE
    assert _args(_commands())["RAY_VERSION"] == _rayjob_images()[0]
