"""A mixture-of-experts layer's all-to-all-v: token dispatch to experts and the combine back.

Routing is drawn once, deterministically, from the MoE layer: each of a rank's tokens picks
`top_k` distinct experts with probability ~ (e+1)^-zipf (Gumbel top-k), and expert e lives
on rank e mod n. Every rank computes the same n x n matrix of routed tokens, so every rank
knows all split sizes, and the check knows what each received block must hold.
"""

from __future__ import annotations

from functools import lru_cache, partial

import numpy as np

from sweeper.ops.descriptor import Buffers, Comm, Layout, Span, Step, torch_group
from sweeper.wire import MoeLayer


@lru_cache(maxsize=8)
def routing(spec: MoeLayer, n: int) -> np.ndarray:
    """tokens[i, j]: (token, expert) pairs rank i sends to experts living on rank j."""
    weights = np.log(np.arange(1, spec.experts + 1, dtype=np.float64) ** -spec.zipf)
    owner = np.arange(spec.experts) % n
    out = np.zeros((n, n), dtype=np.int64)
    for source in range(n):
        rng = np.random.default_rng([spec.seed, source])
        keys = weights + rng.gumbel(size=(spec.tokens, spec.experts))
        picked = np.argpartition(-keys, spec.top_k - 1, axis=1)[:, : spec.top_k]
        out[source] = np.bincount(owner[picked].ravel(), minlength=n)
    return out


def busiest(spec: MoeLayer, n: int, combine: bool) -> int:
    """Elements the busiest rank sends: the point's S, in elements."""
    matrix = routing(spec, n).T if combine else routing(spec, n)
    return int(matrix.sum(axis=1).max()) * spec.hidden


def _splits(spec: MoeLayer, n: int, combine: bool) -> np.ndarray:
    """Elements rank i sends to rank j in this direction."""
    matrix = routing(spec, n)
    return (matrix.T if combine else matrix) * spec.hidden


def layout(spec: MoeLayer, combine: bool, n: int, rank: int) -> Layout:
    """Send blocks in destination order; receive blocks in source order, block i holding
    what rank i put at its offset for me."""
    splits = _splits(spec, n, combine)
    starts = np.concatenate([np.zeros((n, 1), dtype=np.int64), splits.cumsum(axis=1)], axis=1)
    send = int(splits[rank].sum())
    expected, offset = [], 0
    for source in range(n):
        length = int(splits[source, rank])
        expected.append(Span(offset, length, source, int(starts[source, rank])))
        offset += length
    return Layout(send, offset, (Span(0, send, rank, 0),), tuple(expected))


def bind(spec: MoeLayer, combine: bool, buf: Buffers, comm: Comm) -> Step:
    import torch.distributed as dist  # where it runs, the rank's process: the registry loads none

    splits = _splits(spec, comm.size, combine)
    return partial(
        dist.all_to_all_single,
        buf.out,
        buf.send,
        output_split_sizes=[int(x) for x in splits[:, comm.rank]],
        input_split_sizes=[int(x) for x in splits[comm.rank]],
        group=torch_group(comm),
    )
