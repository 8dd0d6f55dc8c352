"""What the GPU tests ask of the GPU they run on."""

from __future__ import annotations

import ctypes


def multicast() -> bool:
    """Whether GPU 0 supports multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, 132): torch
    hands out NCCL's allocator only then."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:  # no driver: no GPU tests either
        return False
    device, value = ctypes.c_int(), ctypes.c_int()
    ok = cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
    ok = ok and cuda.cuDeviceGetAttribute(ctypes.byref(value), 132, device) == 0
    return ok and bool(value.value)
