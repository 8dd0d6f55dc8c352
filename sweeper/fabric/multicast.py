"""The variables that switch NVLink multicast: NCCL's NVLink SHARP (NVLS) and multi-node NVLink,
torch's symmetric memory (multimem) and NVSHMEM's NVLS.

sweeper sets none of them: the ranks run under the user's environment and NCCL's files, and
NCCL's defaults apply where nothing is set. A shared machine that must keep multicast off (a
program using it there can take shared GPUs out of service) sets `MULTICAST_OFF` in its
environment and NCCL_NVLS_ENABLE=0 in /etc/nccl.conf. sweeper hands those to every rank
unchanged, and lets them into an `--nccl-env` grid only with `--allow-multicast-knobs`."""

from __future__ import annotations

from collections.abc import Iterable

# What a machine that keeps multicast off sets (the image does; the benchmarks' bare loops set
# it for themselves, as such a machine would)
MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# NCCL_NVLS_*: NVLS's switch and sizes; NCCL_NVLSTREE_*: its tree across nodes; NCCL_MNNVL_*:
# NVLink across nodes (GB200 NVL72), which NVLS rides on
_PREFIXES = ("NCCL_NVLS_", "NCCL_NVLSTREE_", "NCCL_MNNVL_")


def switches_multicast(name: str) -> bool:
    """Whether a variable turns NVLink multicast on or off, or shapes it."""
    return name in MULTICAST_OFF or name.startswith(_PREFIXES)


def multicast_names(names: Iterable[str]) -> list[str]:
    """Those of `names` that switch multicast, sorted."""
    return sorted({name for name in names if switches_multicast(name)})
