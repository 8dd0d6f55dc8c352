"""--register-buffers where torch cannot allocate from NCCL: refused before anything is
written, with the ranks' own words, on recorded NVML topologies (the CUDA answers are the
boundary: what each node's survey task would read)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sweeper.commands.plan_estimate import recorded_node, replicated
from sweeper.driver.sweep import _check_allocators
from sweeper.errors import BadInput
from sweeper.rank.preflight import local_nccl_allocators, no_nccl_allocator
from sweeper.topology import Node

TOPOLOGIES = Path(__file__).parents[1] / "data" / "topologies"


def _nodes(count: int = 2) -> list[Node]:
    return replicated(recorded_node(TOPOLOGIES / "h200x4-nvswitch.json"), count)


def test_gpus_that_can_allocate_from_nccl_pass() -> None:
    nodes = _nodes()
    _check_allocators(nodes, [{gpu.uuid: True for gpu in node.gpus} for node in nodes])


def test_a_gpu_without_nccls_allocator_refuses_the_run_naming_it_and_its_node() -> None:
    nodes = _nodes()
    answers = [{gpu.uuid: True for gpu in node.gpus} for node in nodes]
    gpu = nodes[1].gpus[2]
    answers[1][gpu.uuid] = False
    with pytest.raises(BadInput) as refused:
        _check_allocators(nodes, answers)
    # the line a rank would write on every point's row, once, with the node it is on
    assert str(refused.value) == f"{no_nccl_allocator(gpu.name)} ({nodes[1].host})"
    assert "NVIDIA H200" in str(refused.value)
    assert "multicast" in str(refused.value)


def test_a_node_that_cannot_tell_is_left_to_its_ranks() -> None:
    nodes = _nodes()
    _check_allocators(nodes, [None, {}])


def test_a_gpu_nvml_did_not_list_is_named_by_its_uuid() -> None:
    nodes = _nodes(1)
    with pytest.raises(BadInput, match="on GPU-elsewhere: it needs"):
        _check_allocators(nodes, [{"GPU-elsewhere": False}])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU process can tell")
def test_a_process_without_cuda_cannot_tell() -> None:
    assert local_nccl_allocators() is None
