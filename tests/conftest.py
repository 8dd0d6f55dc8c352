"""Fixtures shared by every test: one real embedded Ray for the whole session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Tests only: the product keeps Ray's token authentication on.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture
def ray_session() -> None:
    """A real local Ray with room for 4 CPU ranks on a 2-core machine, started once and shared
    by the tests that use it (sweeps join a Ray that is already up). A test module that needs
    another cluster shuts it down, and the next test that needs this one starts it again."""
    start_ray_session()


def start_ray_session() -> None:
    """ray_session's Ray, for a fixture of wider scope that uses it only while it sets up."""
    import ray

    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=4,
            include_dashboard=False,
            configure_logging=False,
            log_to_driver=False,
            namespace="sweeper-tests",
        )


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_count():
        return
    skip = pytest.mark.skip(reason="needs NVIDIA GPUs; none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def isolated_registry() -> Iterator[None]:
    """Operations a test's plugin registers are gone after it (and registered again next time)."""
    import sys

    from sweeper.collectives import REGISTRY

    before = dict(REGISTRY)
    modules = set(sys.modules)
    yield
    REGISTRY.clear()
    REGISTRY.update(before)
    for name in set(sys.modules) - modules:
        if name.startswith("tests.plugins"):
            del sys.modules[name]
