"""What an all_reduce's busbw should be, per GPU model, tier and group size, so even a first
scan of a new cluster says whether its numbers are normal. Each figure names where it comes
from; where nothing is known for a model, tier and size, `reference` says so (None) and the
judge compares the fleet with itself only.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.wire import Tier


@dataclass(frozen=True, kw_only=True, slots=True)
class Reference:
    gpu_model: str
    tier: Tier
    ranks: int | None  # the group's ranks; None: any size (a per-GPU-NIC rate)
    busbw_gb_per_s: float  # at 256 MiB or more (all_to_all across nodes: `thresholds.rate`)
    source: str
    op: str = "all_reduce"


REFERENCES: tuple[Reference, ...] = (
    Reference(
        gpu_model="H200",
        tier=Tier.NVLINK,
        ranks=2,
        busbw_gb_per_s=339.6,
        source=(
            "measured: nccl-tests 2.19.6 -R 1 eager all_reduce at 2 GiB on 2x H200 NV18, "
            "2026-11-24 (docs/measurements/h200-x2-2026-11-24.md); sweeper 340.3-342.9"
        ),
    ),
    Reference(
        gpu_model="H200",
        tier=Tier.NVLINK,
        ranks=4,
        busbw_gb_per_s=361.0,
        source=(
            "measured: nccl-tests 2.19.6 -g 4 all_reduce at 2 GiB on 4x H200 NV18 mesh, "
            "2026-11-22 (docs/measurements/h200-x4-2026-11-22.md); sweeper 361.5 at 4 GiB"
        ),
    ),
    # Published, not measured here: Saturn Cloud's "Validating Multi-Node GPU Clusters with
    # NCCL Tests" (saturncloud.io/blog/crusoe-nccl-cluster-validation) expects 400-450 GB/s
    # all_reduce_perf busbw at 8 GB and up across nodes of 8 H100 SXM or H200 SXM with NVLink
    # and InfiniBand NDR (a 400 Gb/s NIC per GPU). The lower end is taken: the scan pins
    # NCCL's ring, which cannot use the switch reductions that lift the upper end.
    *(
        Reference(
            gpu_model=model,
            tier=Tier.INTERNODE,
            ranks=None,
            busbw_gb_per_s=400.0,
            source=f"published: Saturn Cloud, NCCL cluster validation guide, {model} SXM + IB NDR",
        )
        for model in ("H100", "H200")
    ),
    # Derived, not measured: an all_to_all across nodes moves each GPU's share for other
    # nodes through that GPU's NIC, and `thresholds.rate` gives that rate; with one 400 Gb/s
    # NDR NIC per GPU (the same systems as above) it is at most 50 GB/s, of which 90% is taken
    # (headers and NCCL's proxy).
    *(
        Reference(
            gpu_model=model,
            tier=Tier.INTERNODE,
            ranks=None,
            busbw_gb_per_s=45.0,
            source=f"derived: 90% of a 400 Gb/s NDR NIC per GPU, {model} SXM",
            op="all_to_all",
        )
        for model in ("H100", "H200")
    ),
)


def reference(
    gpu_model: str | None, tier: Tier, ranks: int, op: str = "all_reduce"
) -> Reference | None:
    """The figure for this operation, model, tier and group size, or None where none is known (the
    judge then compares the fleet with itself only). Sizes are matched exactly: an NVLink
    island of 8 GPUs behind NVSwitch is not a 4-GPU mesh."""
    if gpu_model is None:
        return None
    model = gpu_model.upper()
    for ref in REFERENCES:
        if (
            ref.op == op
            and ref.gpu_model in model
            and ref.tier == tier
            and ref.ranks in (None, ranks)
        ):
            return ref
    return None
