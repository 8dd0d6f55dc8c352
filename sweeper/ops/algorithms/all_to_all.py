"""All-to-all: the layout every algorithm shares (the block transpose) and the algorithms.

Rank r's send buffer is n blocks, block d bound for rank d; afterwards block s of rank d's
receive buffer is block d of rank s. Every algorithm here is checked against exactly that.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sweeper.ops.descriptor import Buffers, Comm, Layout, Pairs, Span, blocks
from sweeper.planning.placement import Shape

if TYPE_CHECKING:
    import torch


def layout(count: int, n: int, rank: int, work: int = 0) -> Layout:
    """Chunk k of rank r's send buffer goes to rank k; rank d receives chunk d of every rank."""
    b = count // n
    received = tuple(Span(k * b, b, k, rank * b) for k in range(n))
    return Layout(count, count, (Span(0, count, rank, 0),), received, work)


def exchange(comm: Comm, sends: Pairs, recvs: Pairs) -> None:
    """Send and receive tensors as one batch now (an algorithm step with changing peers)."""
    comm.grouped(sends, recvs)()


def _keep_own(buf: Buffers, comm: Comm) -> tuple[torch.Tensor, torch.Tensor]:
    send, recv = blocks(buf.send, comm.size), blocks(buf.out, comm.size)
    recv[comm.rank].copy_(send[comm.rank])
    return send, recv


def pairwise(buf: Buffers, comm: Comm) -> None:
    """n-1 steps, one partner each: rank XOR step for powers of two (each step a perfect
    matching), else send to rank+step and receive from rank-step."""
    n, r = comm.size, comm.rank
    send, recv = _keep_own(buf, comm)
    matching = n & (n - 1) == 0
    for step in range(1, n):
        to, frm = (r ^ step, r ^ step) if matching else ((r + step) % n, (r - step) % n)
        exchange(comm, [(send[to], to)], [(recv[frm], frm)])


def ring_work(count: int, n: int) -> int:
    return 2 * (count // n) * (n - 1)


def ring(buf: Buffers, comm: Comm) -> None:
    """Store and forward around the ring: step k moves the n-k blocks still travelling to the
    right neighbour; each rank keeps the first block it receives (from rank - k), which is
    its own, and forwards the rest. Work: two (n-1)-block halves, used in turn."""
    n, r = comm.size, comm.rank
    send, recv = _keep_own(buf, comm)
    if n == 1:
        return
    assert buf.work is not None
    halves = buf.work.view(2, n - 1, -1)
    for distance in range(1, n):  # travelling blocks in order of distance: first off first
        halves[0][distance - 1].copy_(send[(r + distance) % n])
    outgoing, spare = halves[0], 1
    right, left = (r + 1) % n, (r - 1) % n
    for step in range(1, n):
        incoming = halves[spare][: n - step]
        exchange(comm, [(outgoing, right)], [(incoming, left)])
        recv[(r - step) % n].copy_(incoming[0])
        outgoing, spare = incoming[1:], 1 - spare


def grid_work(count: int, n: int) -> int:
    return 2 * count


def two_phase(buf: Buffers, comm: Comm, rows: int, cols: int) -> None:
    """All-to-all over a rows x cols grid (rank = row * cols + col) in two exchanges.

    Phase 1, along my row: to the rank in column j' goes the bundle of my blocks bound for
    column j' (one per row). Regroup what arrived by destination row. Phase 2, along my
    column: to the rank in row i' goes what I hold for it, which lands in its receive buffer
    as one contiguous run (the blocks from row i's ranks). Work: a pack and a stage buffer.
    """
    i, j = divmod(comm.rank, cols)
    send, recv = blocks(buf.send, comm.size), blocks(buf.out, comm.size)
    assert buf.work is not None
    pack, stage = buf.work.view(2, comm.size, -1)
    bundles = pack.view(cols, rows, -1)  # bundles[j'][i'] = my block for (i', j')
    bundles.copy_(send.view(rows, cols, -1).transpose(0, 1))
    arrived = stage.view(cols, rows, -1)  # arrived[jj][i'] = (i, jj)'s block for (i', j)
    arrived[j].copy_(bundles[j])
    peers = [jj for jj in range(cols) if jj != j]
    exchange(comm, [(bundles[jj], i * cols + jj) for jj in peers],
             [(arrived[jj], i * cols + jj) for jj in peers])  # fmt: skip
    onward = pack.view(rows, cols, -1)  # onward[i'][jj]: (i, jj)'s block for (i', j)
    onward.copy_(arrived.transpose(0, 1))
    landed = recv.view(rows, cols, -1)  # landed[ii]: the blocks from row ii's ranks
    landed[i].copy_(onward[i])
    peers = [ii for ii in range(rows) if ii != i]
    exchange(comm, [(onward[ii], ii * cols + j) for ii in peers],
             [(landed[ii], ii * cols + j) for ii in peers])  # fmt: skip


def grid_of(n: int) -> tuple[int, int] | None:
    """The most square r x c = n with r, c > 1 (r <= c), or None for primes and n < 4."""
    rows = max((r for r in range(2, math.isqrt(n) + 1) if n % r == 0), default=None)
    return (rows, n // rows) if rows else None


def mesh2d_why_not(shape: Shape) -> str | None:
    if grid_of(shape.size) is None:
        return f"no r x c grid with r, c > 1 for {shape.size} ranks (prime or below 4)"
    return None


def mesh2d(buf: Buffers, comm: Comm) -> None:
    grid = grid_of(comm.size)
    assert grid is not None
    two_phase(buf, comm, *grid)


def hierarchical_why_not(shape: Shape) -> str | None:
    per_node = [shape.nodes.count(node) for node in dict.fromkeys(shape.nodes)]
    if len(per_node) < 2:
        return "all ranks on one node: nothing to exchange between nodes"
    if len(set(per_node)) > 1 or list(shape.nodes) != sorted(shape.nodes):
        return f"ranks per node differ ({per_node}): no node x local-rank grid"
    return None


def hierarchical(buf: Buffers, comm: Comm) -> None:
    """Within each node first (rows = nodes), then between nodes among equal local ranks."""
    nodes = len(set(comm.nodes))
    two_phase(buf, comm, nodes, comm.size // nodes)
