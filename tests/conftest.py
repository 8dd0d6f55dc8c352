"""Fixtures shared by every test: one real embedded Ray for the whole session, the sweeps
that several tests read back, and the head of the fake multi-node clusters."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ray.cluster_utils import Cluster

    from tests.cli_runs import Runs


def pytest_configure(config: pytest.Config) -> None:
    # Tests only: the product keeps Ray's token authentication on.
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    config.addinivalue_line(
        "markers",
        "own_cluster: the module runs on a Ray cluster of its own (ray.cluster_utils), "
        "so it runs after every test of the session's Ray",
    )
    config.addinivalue_line(
        "markers",
        "ends_session_ray: the module shuts the session's Ray down (its drivers join other "
        "clusters), so it runs after every other test of the session's Ray",
    )


@pytest.fixture
def ray_session() -> None:
    """A real local Ray with room for 4 CPU ranks on a 2-core machine, started once and shared
    by the tests that use it (sweeps join a Ray that is already up). A test module that needs
    another cluster (marked own_cluster) or joins one (marked ends_session_ray) shuts it down,
    so it runs after the others; a test that needs this one after it starts it again."""
    start_ray_session()


def start_ray_session() -> None:
    """ray_session's Ray, for a fixture of wider scope that uses it only while it sets up."""
    import ray

    from sweeper.driver.connection import without_monitors

    if not ray.is_initialized():
        with without_monitors():  # as the embedded Ray: its log monitor took CPU all along
            ray.init(
                address="local",
                num_cpus=4,
                include_dashboard=False,
                configure_logging=False,
                log_to_driver=False,
                namespace="sweeper-tests",
            )


@pytest.fixture(scope="session")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """tests/cli_runs.py's sweeps, on the session's Ray, once for all the tests that read them."""
    from tests import cli_runs

    start_ray_session()
    return cli_runs.run_all(tmp_path_factory.mktemp("cli-runs"))


@pytest.fixture(scope="session")
def cluster_head() -> Iterator[Cluster]:
    """The head of a fake multi-node Ray cluster on this machine (ray.cluster_utils), with no
    CPU of its own. Each module marked own_cluster adds its nodes with `cluster_nodes` and
    removes them after (or, last, runs on `fake_nodes`), so the head (its GCS) starts once
    for all of them."""
    import ray
    from ray.cluster_utils import Cluster

    ray.shutdown()  # the session's Ray: the next test that needs it starts it again
    # No dashboard modules, no log monitor, no autoscaler (it has no node to start): every
    # driver of it leaves workers' logs where they are (log_to_driver=False), and these took
    # CPU all the while the head was up.
    quiet = {"include_dashboard": False, "include_log_monitor": False, "no_monitor": True}
    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, **quiet})
    yield head
    head.shutdown()


@contextmanager
def cluster_nodes(head: Cluster, *nodes: Mapping[str, Any]) -> Iterator[Cluster]:
    """`head`'s cluster with a node for each of `nodes` (Cluster.add_node's arguments), the
    driver connected to it; afterwards the driver is not connected to any Ray and the nodes
    are gone, leaving the head as it was for the next module."""
    import ray

    ray.shutdown()  # the session's Ray, or nothing
    added = [head.add_node(**args) for args in nodes]
    try:
        head.wait_for_nodes()
        ray.init(address=head.address, log_to_driver=False, configure_logging=False)
        yield head
    finally:
        ray.shutdown()
        for node in added:
            if node in head.worker_nodes:  # a test may have removed it (a node that left)
                head.remove_node(node)


@pytest.fixture(scope="session")
def fake_nodes(cluster_head: Cluster) -> Iterator[Cluster]:
    """Four nodes of 2 (fake) GPUs each beside the head, started once for test_multinode and
    test_sizing_cpu (their modules run last, so no other module's cluster sees these nodes).
    Two have 2 CPUs and Ray's default `memory`; the other two 3 CPUs, so gloo ranks go to them
    first, and `memory` of 2 GiB and of 40 MiB: what their CPU ranks may use, which
    test_sizing_cpu's budgets come from."""
    plain = {"num_cpus": 2, "num_gpus": 2}
    rich = {"num_cpus": 3, "num_gpus": 2, "memory": 2 * 2**30}
    poor = {"num_cpus": 3, "num_gpus": 2, "memory": 40 * 2**20}
    with cluster_nodes(cluster_head, plain, plain, rich, poor) as nodes:
        yield nodes


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _after_the_session_ray(item: pytest.Item) -> int:
    """0 for a test that may run while the session's Ray is up; 1 for one of a module that
    shuts it down to join another cluster; 2 for one of a module with a cluster of its own."""
    if item.get_closest_marker("own_cluster") is not None:
        return 2
    return int(item.get_closest_marker("ends_session_ray") is not None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A module that shuts the session's Ray down (to join another cluster, or to run on one of
    # its own) runs after every test of it: a test of the session's Ray after such a module
    # started it again, and each new Ray's ranks import torch again (seconds on two cores,
    # each time). Last, those modules leave one start of it for the whole session; and last
    # of them, those on fake_nodes, which stay up to the session's end. The sort is stable:
    # the order within each part is the collected one.
    items.sort(key=lambda item: (_after_the_session_ray(item), "fake_nodes" in item.fixturenames))
    if _gpu_count():
        return
    skip = pytest.mark.skip(reason="needs NVIDIA GPUs; none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@contextmanager
def registry_kept() -> Iterator[None]:
    """Operations a plugin registers inside are gone after it (and registered again next time
    a plugin is imported), for a fixture of wider scope than isolated_registry's."""
    import sys

    from sweeper.ops.registry import REGISTRY

    before = dict(REGISTRY)
    modules = set(sys.modules)
    try:
        yield
    finally:
        REGISTRY.clear()
        REGISTRY.update(before)
        for name in set(sys.modules) - modules:
            if name.startswith("tests.plugins"):
                del sys.modules[name]


@pytest.fixture
def isolated_registry() -> Iterator[None]:
    """Operations a test's plugin registers are gone after it (and registered again next time)."""
    with registry_kept():
        yield


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The headless Chromium the report's browser tests open pages in; skipped without one."""
    from sweeper.errors import BadInput
    from sweeper.report import browser

    try:
        return browser.find_chromium()
    except BadInput as exc:
        pytest.skip(str(exc))
