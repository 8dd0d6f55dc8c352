"""What the cluster is made of: ranks, their hosts and GPUs, and the software they run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankInfo:
    """Where one rank actor landed, as it reports it."""

    rank: int
    host: str
    ip: str
    node_id: str
    pid: int
    device: str  # "cpu" or "cuda:<index>"
    gpu_uuid: str | None
    nccl_env: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Versions:
    torch: str
    nccl: str | None
    cuda: str | None
    driver: str | None
    gpu_model: str | None


def nvml_driver_version() -> str | None:
    """The NVIDIA driver's version, or None where NVML is not there."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return str(pynvml.nvmlSystemGetDriverVersion())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None
