"""The torch engine: each primitive of the engine protocol (`ops.descriptor.Comm`) as
torch.distributed calls on the group's process group, what a PyTorch program pays."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
import torch.distributed as dist

from sweeper.ops.descriptor import Pairs, Step, rooted


@dataclass(frozen=True)
class TorchComm:
    """A group's torch.distributed process group as one of its ranks sees it."""

    group: dist.ProcessGroup
    rank: int
    size: int
    nodes: tuple[int, ...] = ()  # node of each group rank (positions in the sweep's node list)

    def all_reduce(self, data: torch.Tensor) -> Step:
        return partial(dist.all_reduce, data, group=self.group)

    def reduce(self, data: torch.Tensor, root: int) -> Step:
        return partial(dist.reduce, data, group=self.group, group_dst=root)

    def broadcast(self, data: torch.Tensor, root: int) -> Step:
        return partial(dist.broadcast, data, group=self.group, group_src=root)

    def all_gather(self, out: torch.Tensor, mine: torch.Tensor) -> Step:
        # torch 2.13 renamed all_gather_into_tensor (and deprecated the old name).
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return partial(gather, out, mine, group=self.group)

    def reduce_scatter(self, out: torch.Tensor, whole: torch.Tensor) -> Step:
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return partial(scatter, out, whole, group=self.group)

    def gather(self, out: torch.Tensor, mine: torch.Tensor, root: int) -> Step:
        return rooted(self, out, mine, root, gather=True)

    def scatter(self, out: torch.Tensor, whole: torch.Tensor, root: int) -> Step:
        return rooted(self, whole, out, root, gather=False)

    def all_to_all(self, out: torch.Tensor, whole: torch.Tensor) -> Step:
        return partial(dist.all_to_all_single, out, whole, group=self.group)

    def grouped(self, sends: Pairs, recvs: Pairs) -> Step:
        """A rank's transfers to itself are part of the batch on CUDA, where NCCL moves them
        alongside the others; gloo cannot send to itself, so on CPU they are local copies."""
        tensors = [t for t, _ in (*sends, *recvs)]
        local = bool(tensors) and tensors[0].device.type != "cuda"

        def remote(pairs: Pairs) -> Pairs:
            return [(t, p) for t, p in pairs if not (local and p == self.rank)]

        selves = list(
            zip(
                [t for t, p in sends if local and p == self.rank],
                [t for t, p in recvs if local and p == self.rank],
                strict=True,
            )
        )
        group = self.group
        ops = [dist.P2POp(dist.isend, t, group=group, group_peer=p) for t, p in remote(sends)]
        ops += [dist.P2POp(dist.irecv, t, group=group, group_peer=p) for t, p in remote(recvs)]

        def step() -> None:
            for source, target in selves:
                target.copy_(source)
            if ops:
                for work in dist.batch_isend_irecv(ops):
                    work.wait()

        return step
