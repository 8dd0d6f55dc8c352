"""Copies each GPU makes on its own: to and from host memory, pinned or pageable (staged through
a pinned buffer, as a program that never pins pays), and within its own memory (the roof).
They run on groups of tier `gpu`, each GPU alone and then all of a node's at once, so GPUs
behind one PCIe switch or host bridge show what they share.

S is the bytes one way; `h2d+d2h` moves S each way at once, on two streams. Host buffers are
made when a point is bound, outside the timed loop; `d2h` is not checked (its output is on the
host). Torch is imported where the steps are bound, so the registry loads none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweeper.ops.descriptor import Buffers, Comm, Layout, Span, Step
from sweeper.planning.placement import Shape
from sweeper.wire import Backend

if TYPE_CHECKING:
    import torch


def layout(count: int, n: int, rank: int) -> Layout:
    """To the device: the send buffer's pattern lands in the receive buffer."""
    mine = (Span(0, count, rank, 0),)
    return Layout(count, count, mine, mine)


def from_device_layout(count: int, n: int, rank: int) -> Layout:
    """From the device: the send buffer goes to the host; nothing on the device to check. The
    receive buffer is held, unused, so the row is not taken for an in-place operation."""
    return Layout(count, count, (Span(0, count, rank, 0),), ())


def why_not(shape: Shape) -> str | None:
    if shape.backend != Backend.NCCL:
        return "host<->device copies need a GPU: CPU ranks have no device memory"
    return None


def why_not_on_device(shape: Shape) -> str | None:
    if shape.backend != Backend.NCCL:
        return "device-local copies need a GPU: CPU ranks have no device memory"
    return None


def _host(like: torch.Tensor, pinned: bool) -> torch.Tensor:
    import torch

    return torch.empty(like.shape, dtype=like.dtype, device="cpu", pin_memory=pinned)


def to_device(pinned: bool, buf: Buffers, comm: Comm) -> Step:
    host = _host(buf.send, pinned)
    host.copy_(buf.send)  # the filled pattern: what lands on the device is checked
    out = buf.out

    def step() -> None:
        out.copy_(host, non_blocking=pinned)

    return step


def from_device(pinned: bool, buf: Buffers, comm: Comm) -> Step:
    host = _host(buf.send, pinned)
    send = buf.send

    def step() -> None:
        host.copy_(send, non_blocking=pinned)

    return step


def both_ways(pinned: bool, buf: Buffers, comm: Comm) -> Step:
    """Up on the rank's stream, down on a side stream forked from it and joined back, so the
    two directions overlap and a CUDA graph captures both."""
    import torch

    up, down = _host(buf.send, pinned), _host(buf.send, pinned)
    up.copy_(buf.send)
    send, out = buf.send, buf.out
    side = torch.cuda.Stream(send.device)

    def step() -> None:
        main = torch.cuda.current_stream(send.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            down.copy_(send, non_blocking=pinned)
        out.copy_(up, non_blocking=pinned)
        main.wait_stream(side)

    return step


def within(buf: Buffers, comm: Comm) -> Step:
    """Device to device on one GPU: S read from the send buffer and written to the receive
    buffer, by the copy kernel (what the GPU's memory gives, twice S in traffic)."""
    send, out = buf.send, buf.out

    def step() -> None:
        out.copy_(send)

    return step
