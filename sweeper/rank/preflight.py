"""What the driver asks about the ranks' side before any rank starts: whether the nccl engine
is installed, and whether torch can allocate from NCCL on each GPU (--register-buffers). The
driver loads this module, so it imports no torch; `local_nccl_allocators` runs in a Ray task
of its own, which does.
"""

from __future__ import annotations

import importlib.util


def nccl_available() -> bool:
    """Whether nccl4py (the nccl engine) is installed, without importing it (or torch's NCCL)."""
    try:
        return importlib.util.find_spec("nccl.bindings") is not None
    except ImportError:  # no package `nccl` at all
        return False


def no_nccl_allocator(gpu: str) -> str:
    """Why --register-buffers cannot run on a GPU model: torch hands out NCCL's allocator only
    where the GPU supports multicast (one H100 of a cloud machine does not), whatever
    NCCL_NVLS_ENABLE says."""
    return (
        f"--register-buffers: torch cannot allocate from NCCL (ncclMemAlloc) on {gpu}: "
        "it needs the GPU's multicast support"
    )


def local_nccl_allocators() -> dict[str, bool] | None:
    """For each GPU this process sees, by UUID as NVML names it: whether torch can allocate
    from NCCL there, as --register-buffers needs (torch's own test, on a one-rank group that
    never makes a communicator). None where torch has no NCCL or sees no GPU."""
    import torch  # in the Ray task that runs this, never in the driver that names it
    import torch.distributed as dist

    if not (torch.cuda.is_available() and dist.is_nccl_available()):
        return None
    from torch.distributed import HashStore, ProcessGroupNCCL  # type: ignore[attr-defined]

    backend = ProcessGroupNCCL(HashStore(), 0, 1, ProcessGroupNCCL.Options())
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    return {
        f"GPU-{torch.cuda.get_device_properties(d).uuid}": bool(backend.supports_tensor_alloc(d))
        for d in devices
    }
