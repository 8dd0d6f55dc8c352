"""All-reduce on torch symmetric memory: one-shot and two-shot, over NVLink P2P only.

No multimem kernel: one-shot and two-shot read their peers' buffers over P2P. Whether the
rendezvous also maps multicast is the user's TORCH_SYMM_MEM_DISABLE_MULTICAST, which sweeper
hands on unchanged (fabric/multicast.py). The input
is allocated from symmetric memory when the point is prepared (a local step), and
exchanged with the group's other ranks (rendezvous, a collective step) only once every
rank has prepared. Torch is imported where the steps are bound, in the rank's process: the
registry that lists them loads no torch.
"""

from __future__ import annotations

from functools import partial

from sweeper.ops.descriptor import SUM, Buffers, Comm, Layout, Span, Step, torch_group
from sweeper.planning.placement import Shape
from sweeper.wire import Backend


def why_not(shape: Shape) -> str | None:
    if shape.backend != Backend.NCCL:
        return "torch symmetric memory needs CUDA GPUs"
    if len(set(shape.nodes)) > 1:
        return "torch symmetric memory needs every rank on one node (NVLink P2P)"
    if not shape.sees_node_gpus:
        return (
            "torch symmetric memory needs actors that see their node's GPUs (--gpu-visibility node)"
        )
    return None


def rendezvous(buf: Buffers, comm: Comm) -> None:
    import torch.distributed._symmetric_memory as symm_mem

    symm_mem.rendezvous(buf.send, torch_group(comm))


def one_shot_layout(count: int, n: int, rank: int) -> Layout:
    """Every rank reads all peers' inputs and sums them into its own output."""
    return Layout(count, count, (Span(0, count, rank, 0),), (Span(0, count, SUM, 0),))


def one_shot(buf: Buffers, comm: Comm) -> Step:
    import torch

    assert buf.recv is not None
    op = torch.ops.symm_mem.one_shot_all_reduce_out
    return partial(op, buf.send, "sum", torch_group(comm).group_name, buf.recv)


def two_shot_layout(count: int, n: int, rank: int) -> Layout:
    """Reduce-scatter then all-gather through peers' memory, in place."""
    return Layout(count, 0, (Span(0, count, rank, 0),), (Span(0, count, SUM, 0),))


def two_shot(buf: Buffers, comm: Comm) -> Step:
    import torch

    op = torch.ops.symm_mem.two_shot_all_reduce_
    return partial(op, buf.send, "sum", torch_group(comm).group_name)
