"""What the GPU tests ask of the GPU they run on."""

from __future__ import annotations

from functools import cache

from sweeper.rank.preflight import local_nccl_allocators


@cache
def nccl_allocates() -> bool:
    """Whether torch can allocate from NCCL on every GPU here (it needs GPU multicast): the
    question the driver asks each node before a --register-buffers run."""
    return all((local_nccl_allocators() or {"none": False}).values())
