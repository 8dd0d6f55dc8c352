"""What a collective's busbw should be, per GPU model, tier, group size, operation and NCCL
algorithm, so even a first scan of a new cluster says whether its numbers are normal, and a
report gives each row's share of it. Each figure names its entry and its source (a URL, or
"measured here": the command, the device kind and its measurement page). Where nothing is
known, `reference` is None and the judge compares the fleet with itself only. Where NCCL's
algorithm is unknown, the ring's figure is taken (docs/ARCHITECTURE.md, "Inside the rooms")."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sweeper.wire import Tier

# NCCL's ceiling per NIC of 400 Gb/s (ConnectX-7 at NDR, or 400 GbE RoCE) by ring, in GB/s:
# NCCL's maintainers give 48-49 GB/s per NIC (https://github.com/NVIDIA/nccl-tests/issues/267),
# of the 50 on the wire; the lower end of what clusters reach (46-48) is taken.
NIC_400G_GB_PER_S = 46.0
_HGX_NICS = 8  # HGX and DGX H100, H200, B200: a 400 Gb/s NIC per GPU


@dataclass(frozen=True, kw_only=True, slots=True)
class Reference:
    gpu_model: str  # as `model` names it: "H100", "H100 PCIE", "H200", "B200", "GB200"
    tier: Tier
    ranks: int | None  # the group's ranks; None: any size (bound by each node's NICs)
    busbw_gb_per_s: float  # at 256 MiB or more (all_to_all across nodes: per NIC)
    citation: str  # a URL, or "measured here: command, device kind, date"
    op: str = "all_reduce"
    algorithm: str = "native"  # sweeper's (the rows' `algorithm`): the engine's own call
    nccl_algo: str | None = None  # NCCL's (RING, NVLS); None: whichever NCCL takes

    @property
    def name(self) -> str:
        """The table entry, as a report or a verdict names it: 'H200 nvlink x8 all_reduce
        RING'."""
        size = f"x{self.ranks}" if self.ranks else "any size"
        op = self.op if self.algorithm == "native" else f"{self.op} ({self.algorithm})"
        return " ".join(filter(None, (self.gpu_model, str(self.tier), size, op, self.nccl_algo)))

    @property
    def source(self) -> str:
        return f"{self.name}: {self.citation}"


def entry(source: str) -> str:
    """The table entry a reference's `source` names, without its citation."""
    return source.partition(": ")[0]


_H200_X4 = "docs/measurements/h200-x4-2026-11-22.md"
# nccl-tests 2.19.6 -g 4 at 2 GiB on nvidia-h200-x4 (4 H200, NV18 mesh), with the machine's
# NCCL_NVLS_ENABLE=0 (so NCCL's ring for the reductions): _H200_X4, beside sweeper's own peaks.
# The identical runs on the way to these plateaus: docs/measurements/h200-x4-2026-11-27.md.
_H200_X4_NCCL_TESTS = {
    ("all_reduce", "native", "RING"): 361.0,
    ("reduce", "native", "RING"): 364.0,
    ("broadcast", "native", "RING"): 361.0,
    ("all_gather", "native", "RING"): 336.0,
    ("reduce_scatter", "native", "RING"): 332.0,
    ("gather", "native", None): 376.0,
    ("scatter", "native", None): 370.0,
    ("all_to_all", "native", None): 348.0,
    ("send_recv", "ring", None): 363.0,
}

_H200_X1 = "docs/measurements/h200-x1-2026-12-02.md"
# One H200's own copies at the scan's 256 MiB, the lowest idle figures measured: _H200_X1.
_H200_ALONE = (
    f"measured here: python3 -m sweeper run, nvidia-h200 (PCIe Gen5 x16), 2026-12-02, at "
    f"256 MiB (tests/data/results/h200-x1-default-2026-12-02; {_H200_X1})"
)

REFERENCES: tuple[Reference, ...] = (
    # A GPU alone: its d2d (the memory's roof) and its slower host copy, h2d (pinned).
    *(
        Reference(
            gpu_model="H200",
            tier=Tier.GPU,
            ranks=1,
            busbw_gb_per_s=busbw,
            op=op,
            citation=_H200_ALONE,
        )
        for op, busbw in (("d2d", 3810.0), ("h2d", 55.2))
    ),
    Reference(
        gpu_model="H200",
        tier=Tier.NVLINK,
        ranks=2,
        busbw_gb_per_s=339.6,
        citation=(
            "measured here: nccl-tests 2.19.6 -R 1 eager all_reduce at 2 GiB, nvidia-h200-x2 "
            "(2x H200 NV18), 2026-11-24 (docs/measurements/h200-x2-2026-11-24.md); "
            "sweeper 340.3-342.9"
        ),
    ),
    *(
        Reference(
            gpu_model="H200",
            tier=Tier.NVLINK,
            ranks=4,
            busbw_gb_per_s=busbw,
            op=op,
            algorithm=algorithm,
            nccl_algo=nccl_algo,
            citation=(
                f"measured here: nccl-tests 2.19.6 -g 4 at 2 GiB, nvidia-h200-x4 (4x H200 NV18 "
                f"mesh), NCCL_NVLS_ENABLE=0, 2026-11-22 ({_H200_X4})"
            ),
        )
        for (op, algorithm, nccl_algo), busbw in _H200_X4_NCCL_TESTS.items()
    ),
    # A pair's send/recv, one way and both ways at once (S counts both directions), the
    # slowest ordered pair at 512 MiB.
    *(
        Reference(
            gpu_model="H200",
            tier=Tier.NVLINK,
            ranks=2,
            busbw_gb_per_s=busbw,
            op="p2p",
            algorithm=algorithm,
            citation=(
                "measured here: python3 -m sweeper run --dtypes bfloat16 --ops 'p2p*' --tiers "
                "nvlink --pairs all --copy-engine --max-size 1G --step-factor 4, "
                f"nvidia-h200-x4, 2026-11-22 ({_H200_X4}#p2p-matrix-nccl-sendrecv-between-"
                "rank-actors)"
            ),
        )
        for algorithm, busbw in (("uni", 365.0), ("bi", 607.0))
    ),
    # An 8-GPU NVSwitch node (HGX/DGX H100, H200): NVLS's all_reduce, and the ring's.
    Reference(
        gpu_model="H100",
        tier=Tier.NVLINK,
        ranks=8,
        busbw_gb_per_s=480.0,
        nccl_algo="NVLS",
        citation=(
            "published: NCCL's maintainer: 8 H100 reach a peak all_reduce busbw of about "
            "480 GB/s with NVLink SHARP, at sizes above 256 MiB "
            "(https://github.com/NVIDIA/nccl-tests/issues/212)"
        ),
    ),
    Reference(
        gpu_model="H200",
        tier=Tier.NVLINK,
        ranks=8,
        busbw_gb_per_s=480.0,
        nccl_algo="NVLS",
        citation=(
            "published: Azure ND H200 v5, nccl-tests all_reduce with NVLS, 479.98 GB/s at "
            "8 GiB (https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/"
            "ND_H200_v5_results.md)"
        ),
    ),
    *(
        Reference(
            gpu_model=model,
            tier=Tier.NVLINK,
            ranks=8,
            busbw_gb_per_s=370.0,
            nccl_algo="RING",
            citation=(
                "published: NCCL's maintainer: NVLink 4's 450 GB/s less NCCL's protocol "
                "overhead is an effective 370 GB/s, the busbw of NCCL_ALGO=RING "
                "(https://github.com/NVIDIA/nccl-tests/issues/212)"
            ),
        )
        for model in ("H100", "H200")
    ),
    # An H100 PCIe node: two cards joined by an NVLink bridge.
    Reference(
        gpu_model="H100 PCIE",
        tier=Tier.NVLINK,
        ranks=2,
        busbw_gb_per_s=116.0,
        citation=(
            "published: nccl-tests all_reduce_perf -g 2 on 2 H100 PCIe over an NVLink bridge, "
            "115.4-116.3 GB/s at 1-4 GiB (https://github.com/NVIDIA/nccl/issues/1161)"
        ),
    ),
    # HGX B200: NVLink 5, NCCL's default (NVLS) all_reduce; no ring figure is published.
    Reference(
        gpu_model="B200",
        tier=Tier.NVLINK,
        ranks=8,
        busbw_gb_per_s=830.0,
        nccl_algo="NVLS",
        citation=(
            "published: a user's 8 B200 in one machine, all_reduce_perf 830+ GB/s with NCCL "
            "2.27 (https://github.com/NVIDIA/nccl/issues/1807)"
        ),
    ),
    # GB200 NVL72: one compute tray's 4 GPUs over the rack's NVLink switches, by ring. Groups
    # of several trays cross the same switches (multi-node NVLink), which sweeper's tiers
    # count as internode: no figure is taken for them.
    Reference(
        gpu_model="GB200",
        tier=Tier.NVLINK,
        ranks=4,
        busbw_gb_per_s=679.6,
        nccl_algo="RING",
        citation=(
            "published: Azure ND GB200 v6 (a GB200 NVL72 tray), nccl-tests all_reduce by "
            "ring, 679.61 GB/s at 8 GiB (https://github.com/Azure/AI-benchmarking-guide/blob/"
            "main/Azure_Results/ND_GB200_v6_results.md)"
        ),
    ),
    # Across nodes of 8 GPUs with a 400 Gb/s NIC each (InfiniBand NDR or 400 GbE RoCE), by
    # ring: the node's NICs together, at NCCL's ceiling per NIC. The scan pins the ring for
    # internode groups, which cannot use the switches' reductions (SHARP, NVLS across nodes).
    *(
        Reference(
            gpu_model=model,
            tier=Tier.INTERNODE,
            ranks=None,
            busbw_gb_per_s=_HGX_NICS * NIC_400G_GB_PER_S,
            nccl_algo="RING",
            citation=(
                f"published: NCCL's maintainers' ceiling of 48-49 GB/s per 400 Gb/s NIC "
                "(https://github.com/NVIDIA/nccl-tests/issues/267), 46 taken, x "
                f"{_HGX_NICS} NICs per {model} node"
            ),
        )
        for model in ("H100", "H200", "B200")
    ),
    # Derived: an all_to_all across nodes moves each GPU's share for other nodes through that
    # GPU's own NIC ("Alltoall cannot aggregate the bandwidth of multiple NICs", NCCL's
    # maintainer in the same thread), and `Collective.nic_rate` gives that rate: below the
    # NIC's 48-49 GB/s, of which 45 is taken (headers and NCCL's proxy).
    *(
        Reference(
            gpu_model=model,
            tier=Tier.INTERNODE,
            ranks=None,
            busbw_gb_per_s=45.0,
            op="all_to_all",
            citation=(
                f"derived: one 400 Gb/s NIC per {model} GPU at NCCL's 48-49 GB/s ceiling "
                "(https://github.com/NVIDIA/nccl-tests/issues/267), 45 taken"
            ),
        )
        for model in ("H100", "H200", "B200")
    ),
)

# The model in a GPU's name: 'NVIDIA H100 80GB HBM3' -> H100, 'NVIDIA H100 PCIe' -> H100 PCIE,
# 'NVIDIA H200 NVL' -> H200 NVL (a PCIe card: no figure of the SXM part's fits it).
_MODEL = re.compile(r"\b([A-Z]{1,2}\d{2,3}[A-Z]?)\b")
_FORMS = ("PCIE", "NVL")


def model(gpu_model: str) -> str | None:
    """The model a reference names, from a GPU's name as NVML gives it; None where the name
    holds none."""
    name = gpu_model.upper()
    found = _MODEL.search(name)
    if found is None:
        return None
    words = name[found.end() :].replace("-", " ").split()
    form = next((word for word in words if word in _FORMS), None)
    return f"{found[1]} {form}" if form else found[1]


def reference(
    gpu_model: str | None,
    tier: Tier,
    ranks: int,
    op: str = "all_reduce",
    *,
    algorithm: str = "native",
    nccl_algo: str | None = None,
) -> Reference | None:
    """The figure for this model, tier, group size, operation (with sweeper's algorithm for
    it) and NCCL algorithm, or None where none is known (the judge then compares the fleet
    with itself only). Sizes are matched exactly: an NVLink island of 8 GPUs behind NVSwitch
    is not a 4-GPU mesh. NCCL's algorithm unknown (None), an entry for whichever NCCL takes
    fits, else the ring's (see the module's docstring)."""
    key = model(gpu_model) if gpu_model else None
    if key is None:
        return None
    fits = [
        ref
        for ref in REFERENCES
        if (ref.gpu_model, ref.tier, ref.op, ref.algorithm) == (key, tier, op, algorithm)
        and ref.ranks in (None, ranks)
    ]
    wanted = (None, nccl_algo.upper()) if nccl_algo else (None, "RING")
    return next((ref for want in wanted for ref in fits if ref.nccl_algo == want), None)


def share(busbw_gb_per_s: float | None, ref: Reference | None) -> float | None:
    """A busbw as a fraction of its reference; None where either is unknown."""
    if busbw_gb_per_s is None or ref is None:
        return None
    return busbw_gb_per_s / ref.busbw_gb_per_s
