"""What the cluster is made of: nodes, their GPUs and the links between them.

`read_nvml()` asks NVML (nvidia-ml-py) what one node has and returns a plain record (the
form kept as data files under tests/data/topologies); `Node.from_record` turns a record
into the model the planner uses (`Node.recorded` reads a file of either form, or what
`sweeper topo --format json` prints): GPUs, a link matrix labelled like `nvidia-smi topo -m`
(NV#, PIX, PXB, PHB, NODE, SYS) and NVLink islands. No Ray, no torch here: `cluster.py`
runs `read_nvml` on each node.
"""

from __future__ import annotations

import os
import socket
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from sweeper.wire import Tier

Record = dict[str, Any]

# NVML_TOPOLOGY_* levels, nearest first, as nvidia-smi topo -m names them.
_ANCESTORS = {0: "INT", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
_REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch"}
# nvmlGpuP2PCapsIndex_t values from nvml.h: pynvml spells READ as a one-element tuple.
_P2P_READ, _P2P_NVLINK = 0, 2
# Per-link, per-direction NVLink bandwidth in GB/s by NVML's nvmlNvlinkVersion_t (an enum:
# 4 is NVLink 3.0, 6 is NVLink 4.0), where NVML reports no speed. NVLink 4.0 signals
# 53.125 Gbit/s on 4 lanes: 26.5625 GB/s, as nvidia-smi nvlink -s shows.
_NVLINK_GB_PER_S = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 26.5625, 7: 53.125}
# PCIe per-lane, per-direction GB/s by generation (after encoding).
_PCIE_LANE_GB_PER_S = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# The link inside a node that a tier's traffic crosses, and the Gpu field holding its peak.
GPU_LINKS: dict[Tier, tuple[str, str]] = {
    Tier.NVLINK: ("NVLink", "nvlink_gb_per_s"),
    Tier.PCIE: ("PCIe", "pcie_gb_per_s"),
}
# The most GPUs one node's record may list: as many ranks as sweeper places on a node
# (planning.spec.MAX_RANKS_PER_NODE). The link matrix is n x n, so a record of under 1 MiB
# listing 20,000 GPUs would take gigabytes before anything else looked at it.
MAX_GPUS = 1024
# A GPU's NVLinks: NVML reports at most NVML_NVLINK_MAX_LINKS (18 in nvml.h), room above it
MAX_NVLINKS = 64
# A node's CPUs: Linux's own bound on them (CONFIG_NR_CPUS at most 8192)
MAX_CPUS = 8192
# Why NVML did not answer, in words, by pynvml's error class
_NO_NVML = {
    "NVMLError_LibraryNotFound": "no NVIDIA driver here (NVML's library is not installed)",
    "NVMLError_DriverNotLoaded": "the NVIDIA driver is not loaded",
    "NVMLError_NoPermission": "NVML refuses this user",
}


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML index on its node (PCI order)
    uuid: str
    pci_bus_id: str
    name: str
    memory_total_bytes: int
    memory_free_bytes: int
    numa_node: int | None
    nvlink_gb_per_s: float  # all active links together, one direction
    pcie_gb_per_s: float | None  # max generation x width (as trained, where known), one direction


def link_peak(speeds: Sequence[float | None]) -> float | None:
    """A group's one-direction link peak: its slowest member's (GPU or node), None unless
    every member's is known."""
    known = [speed for speed in speeds if speed]
    return min(known) if known and len(known) == len(speeds) else None


def gpu_link_peak(tier: str, gpus: Sequence[Gpu | None]) -> float | None:
    """The one-direction peak of the GPU link `tier` crosses (`GPU_LINKS`: NVLink, all of a
    GPU's active links together; PCIe, generation x width) in a group of these GPUs: the
    slowest one's. None where a GPU's is unknown (None: no record of it) or the tier crosses
    no GPU link. The rows' busbw_pct_of_link and the report's link peaks are this figure."""
    if tier not in GPU_LINKS:
        return None
    field = GPU_LINKS[Tier(tier)][1]
    return link_peak([getattr(gpu, field) if gpu else None for gpu in gpus])


@dataclass(frozen=True)
class Node:
    host: str
    node_id: str
    ip: str
    gpus: tuple[Gpu, ...]
    links: tuple[tuple[str, ...], ...]  # links[i][j]: "X", "NV#", "PIX", ..., "SYS"
    nvml: bool = True  # False: no NVML here (a CPU node), not an error
    driver_version: str | None = None
    cpus: int = 0
    reason: str | None = None  # why there is no NVML
    network_gb_per_s: float | None = None  # its NICs together, one direction; None: unknown

    def nvlinked(self, a: int, b: int) -> bool:
        return self.links[a][b].startswith("NV")

    def islands(self) -> list[tuple[int, ...]]:
        """Sets of GPUs (by position) joined by NVLink, directly or through switches."""
        seen: set[int] = set()
        out = []
        for start in range(len(self.gpus)):
            if start in seen:
                continue
            island, stack = [], [start]
            seen.add(start)
            while stack:
                gpu = stack.pop()
                island.append(gpu)
                for peer in range(len(self.gpus)):
                    if peer not in seen and self.nvlinked(gpu, peer):
                        seen.add(peer)
                        stack.append(peer)
            out.append(tuple(sorted(island)))
        return out

    @classmethod
    def recorded(cls, record: object) -> Node:
        """The node a topology file holds: `sweeper topo --format json`'s document (its first
        node), one node of it, or an NVML record (`from_record`); ValueError for anything
        else, or for a node bigger than a node can be."""
        if isinstance(record, dict) and isinstance(record.get("nodes"), list):  # topo's
            if not record["nodes"]:
                raise ValueError("a document of no node")
            record = record["nodes"][0]
        if not isinstance(record, dict) or not isinstance(record.get("gpus"), list):
            raise ValueError("no 'gpus' list")
        if "links" not in record:
            return cls.from_record(record)
        gpus, links = record["gpus"], record["links"]
        if len(gpus) > MAX_GPUS:
            raise ValueError(f"{len(gpus)} GPUs on one node; a node holds at most {MAX_GPUS}")
        if len(links) != len(gpus) or any(len(row) != len(gpus) for row in links):
            raise ValueError(f"a link matrix that is not {len(gpus)} x {len(gpus)}")
        return cls(
            host=str(record.get("host", "")),
            node_id=str(record.get("node_id", "")),
            ip=str(record.get("ip", "")),
            gpus=tuple(_shown_gpu(g) for g in gpus),
            links=tuple(tuple(str(label) for label in row) for row in links),
            nvml=bool(record.get("nvml", False)),
            driver_version=record.get("driver_version"),
            cpus=_cpus(record.get("cpus", 0)),
            reason=record.get("reason"),
            network_gb_per_s=_number(record.get("network_gb_per_s")),
        )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Node:
        """The node a record describes; ValueError for one that lists more than MAX_GPUS
        GPUs (before the link matrix is built), a GPU index twice, more pairs than its GPUs
        make or more NVLinks than a GPU has, or a pair naming a GPU it does not list."""
        gpus_raw = record.get("gpus", [])
        if len(gpus_raw) > MAX_GPUS:
            raise ValueError(f"{len(gpus_raw)} GPUs on one node; a node holds at most {MAX_GPUS}")
        gpus_raw = sorted(gpus_raw, key=lambda g: g["index"])
        position = {g["index"]: pos for pos, g in enumerate(gpus_raw)}
        if len(position) < len(gpus_raw):
            listed = Counter(g["index"] for g in gpus_raw)
            twice = max(listed, key=listed.__getitem__)  # a number or a string, from JSON
            raise ValueError(f"GPU {twice!r:.80} listed twice")
        by_bus = {g["pci_bus_id"]: pos for pos, g in enumerate(gpus_raw)}
        n = len(gpus_raw)
        pairs = record.get("pairs", [])
        # each pair counts its GPUs' links: a record of more is quadratic work in its size
        if len(pairs) > n * (n - 1) // 2:
            raise ValueError(f"{len(pairs)} pairs of {n} GPUs; they make {n * (n - 1) // 2}")
        if any(len(g.get("nvlinks", [])) > MAX_NVLINKS for g in gpus_raw):
            raise ValueError(f"a GPU with more than {MAX_NVLINKS} NVLinks")
        links = [["X" if i == j else "SYS" for j in range(n)] for i in range(n)]
        for pair in pairs:
            a, b = _position(position, pair["a"]), _position(position, pair["b"])
            label = pair.get("ancestor", "SYS")
            count = _nvlink_count(gpus_raw[a], gpus_raw[b], by_bus)
            if pair.get("p2p_nvlink", count > 0) and count:
                label = f"NV{count}"
            links[a][b] = links[b][a] = label
        gpus = tuple(_gpu(g) for g in gpus_raw)
        return cls(
            host=str(record.get("host", "")),
            node_id=str(record.get("node_id", "")),
            ip=str(record.get("ip", "")),
            gpus=gpus,
            links=tuple(tuple(row) for row in links),
            nvml=bool(record.get("nvml", False)),
            driver_version=record.get("driver_version"),
            cpus=_cpus(record.get("cpus", 0)),
            reason=record.get("reason"),
            network_gb_per_s=_network(record.get("nics") or []),
        )


def _cpus(value: object) -> int:
    """A node's CPU count as a record says it: a whole number, 0 (unknown) up to what a
    node can hold; ValueError for anything else (`cpus: -5` planned no CPU ranks)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CPUS:
        raise ValueError(f"cpus {value!r:.80}: a count of 0 to {MAX_CPUS}")
    return value


def _position(position: Mapping[int, int], index: int) -> int:
    try:
        return position[index]
    except (KeyError, TypeError):  # TypeError: an index no GPU's can be ([0])
        raise ValueError(f"a pair names GPU {index}, which the record does not list") from None


def _nvlink_count(a: Mapping[str, Any], b: Mapping[str, Any], by_bus: Mapping[str, int]) -> int:
    """Links between two GPUs: direct ones, or, through NVSwitches, the fewer either has."""
    direct = sum(1 for link in a.get("nvlinks", []) if link["remote_pci_bus_id"] == b["pci_bus_id"])
    if direct:
        return direct

    def switched(g: Mapping[str, Any]) -> int:
        return sum(1 for link in g.get("nvlinks", []) if link["remote_type"] == "switch")

    return min(switched(a), switched(b))


def _network(nics: Sequence[Mapping[str, Any]]) -> float | None:
    """A node's network peak: its RDMA ports together (InfiniBand, RoCE), else its Ethernet
    interfaces together (a RoCE port is both: counted once); None where none is known."""
    for kind in ("rdma", "ethernet"):
        speeds = [float(n["gb_per_s"]) for n in nics if n.get("kind") == kind and n.get("gb_per_s")]
        if speeds:
            return sum(speeds)
    return None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _shown_gpu(shown: Mapping[str, Any]) -> Gpu:
    """A GPU as `sweeper topo --format json` shows it: the model's fields."""
    numa = shown.get("numa_node")
    return Gpu(
        index=int(shown["index"]),
        uuid=str(shown["uuid"]),
        pci_bus_id=str(shown["pci_bus_id"]),
        name=str(shown.get("name", "")),
        memory_total_bytes=int(shown.get("memory_total_bytes", 0)),
        memory_free_bytes=int(shown.get("memory_free_bytes", 0)),
        numa_node=None if numa is None else int(numa),
        nvlink_gb_per_s=float(shown.get("nvlink_gb_per_s", 0.0)),
        pcie_gb_per_s=_number(shown.get("pcie_gb_per_s")),
    )


def _gpu(raw: Mapping[str, Any]) -> Gpu:
    nvlink = 0.0
    speed = raw.get("nvlink_speed_mbps")
    for link in raw.get("nvlinks", []):
        nvlink += speed / 1e3 if speed else _NVLINK_GB_PER_S.get(link.get("version") or 0, 0.0)
    gen, width = raw.get("pcie_max_gen"), raw.get("pcie_max_width")
    if width and raw.get("pcie_width"):  # a x16 GPU in a x8 slot trains at x8
        width = min(width, raw["pcie_width"])
    pcie = _PCIE_LANE_GB_PER_S[gen] * width if gen in _PCIE_LANE_GB_PER_S and width else None
    return Gpu(
        index=int(raw["index"]),
        uuid=str(raw["uuid"]),
        pci_bus_id=str(raw["pci_bus_id"]),
        name=str(raw.get("name", "")),
        memory_total_bytes=int(raw.get("memory_total_bytes", 0)),
        memory_free_bytes=int(raw.get("memory_free_bytes", 0)),
        numa_node=raw.get("numa_node"),
        nvlink_gb_per_s=nvlink,
        pcie_gb_per_s=pcie,
    )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bus(value: object) -> str:
    """NVML spells bus ids with an 8- or 4-digit domain depending on the call: one spelling."""
    domain, bus, function = _text(value).lower().split(":")
    return f"{int(domain, 16):08x}:{bus}:{function}"


def _maybe(call: Any, *args: Any) -> Any:
    """NVML answers NotSupported for what a GPU lacks (NVLink on a GeForce): that is None."""
    import pynvml

    try:
        return call(*args)
    except pynvml.NVMLError:
        return None


def node_record() -> Record:
    """What a survey task reads on its node: NVML's view, and where the node is. It lives
    here, with nothing heavier than NVML around it, so the task's process imports no torch."""
    import ray

    record = read_nvml()
    record.update(
        host=socket.gethostname(),
        node_id=ray.get_runtime_context().get_node_id(),
        ip=ray.util.get_node_ip_address(),
        cpus=os.cpu_count() or 0,
        nics=read_nics(),
    )
    return record


def read_nvml() -> Record:
    """This node's GPUs and links as NVML reports them; {"nvml": False} where there is none."""
    try:
        import pynvml
    except ImportError:
        return {"nvml": False, "reason": "nvidia-ml-py is not installed", "gpus": [], "pairs": []}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:  # LibraryNotFound, DriverNotLoaded, ...
        reason = _NO_NVML.get(type(exc).__name__, f"NVML: {exc}")
        return {"nvml": False, "reason": reason, "gpus": [], "pairs": []}
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        gpus = [_read_gpu(pynvml, i, h) for i, h in enumerate(handles)]
        pairs = [_read_pair(pynvml, a, b, handles) for a, b in combinations(range(len(handles)), 2)]
        return {
            "nvml": True,
            "driver_version": _text(pynvml.nvmlSystemGetDriverVersion()),
            "gpus": gpus,
            "pairs": pairs,
        }
    finally:
        pynvml.nvmlShutdown()


def _read_gpu(nvml: Any, index: int, handle: Any) -> Record:
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    links = []
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        if _maybe(nvml.nvmlDeviceGetNvLinkState, handle, link) != nvml.NVML_FEATURE_ENABLED:
            continue
        remote = _maybe(nvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
        kind = _maybe(nvml.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link)
        links.append(
            {
                "link": link,
                "remote_pci_bus_id": _bus(remote.busId) if remote is not None else None,
                "remote_type": _REMOTE_TYPES.get(kind, "unknown")
                if kind is not None
                else "unknown",
                "version": _maybe(nvml.nvmlDeviceGetNvLinkVersion, handle, link),
            }
        )
    return {
        "index": index,
        "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
        "pci_bus_id": _bus(nvml.nvmlDeviceGetPciInfo(handle).busId),
        "name": _text(nvml.nvmlDeviceGetName(handle)),
        "memory_total_bytes": int(memory.total),
        "memory_free_bytes": int(memory.free),
        "numa_node": _maybe(nvml.nvmlDeviceGetNumaNodeId, handle),
        "pcie_max_gen": _maybe(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        "pcie_max_width": _maybe(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        # as trained at the survey: the width holds, an idle GPU may train its generation down
        # (rows carry both per point)
        "pcie_gen": _maybe(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        "pcie_width": _maybe(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        "nvlinks": links,
        "nvlink_speed_mbps": _maybe(_link_speed, nvml, handle) if links else None,
    }


def _link_speed(nvml: Any, handle: Any) -> int | None:
    """Per-link, per-direction NVLink speed in MB/s common to the GPU's links."""
    (value,) = nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON])
    return int(value.value.uiVal) if value.nvmlReturn == nvml.NVML_SUCCESS else None


def _read_pair(nvml: Any, a: int, b: int, handles: Sequence[Any]) -> Record:
    level = _maybe(nvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b])

    def p2p(index: int) -> bool | None:
        status = _maybe(nvml.nvmlDeviceGetP2PStatus, handles[a], handles[b], index)
        return None if status is None else status == nvml.NVML_P2P_STATUS_OK

    return {
        "a": a,
        "b": b,
        "ancestor": _ANCESTORS.get(level, "SYS") if level is not None else "SYS",
        "p2p_nvlink": p2p(_P2P_NVLINK),
        "p2p_read": p2p(_P2P_READ),
    }


def read_nics(sys_class: Path = Path("/sys/class")) -> list[Record]:
    """This node's active network ports and their speeds, from sysfs (NVML knows no NICs):
    InfiniBand/RoCE ports (`rate`, e.g. "400 Gb/sec (4X NDR)") and physical Ethernet
    interfaces that are up (`speed`, Mb/s). What cannot be read is left out, never an error."""
    nics: list[Record] = []
    for port in sorted((sys_class / "infiniband").glob("*/ports/*")):
        state, rate = _sysfs(port / "state"), _sysfs(port / "rate")
        if state and "ACTIVE" in state and rate:
            try:
                gbit = float(rate.split()[0])
            except ValueError:
                continue
            nics.append(
                {"name": f"{port.parts[-3]}/{port.name}", "kind": "rdma", "gb_per_s": gbit / 8}
            )
    for interface in sorted((sys_class / "net").glob("*")):
        if not (interface / "device").exists() or _sysfs(interface / "operstate") != "up":
            continue  # virtual (lo, docker0, veth) or down
        speed = _sysfs(interface / "speed")  # reading it fails on some drivers when down
        if speed and speed.lstrip("-").isdigit() and int(speed) > 0:
            nics.append({"name": interface.name, "kind": "ethernet", "gb_per_s": int(speed) / 8e3})
    return nics


def _sysfs(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def nvml_driver_version() -> str | None:
    """The NVIDIA driver's version, or None where NVML is not there."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        return _text(pynvml.nvmlSystemGetDriverVersion())
    finally:
        pynvml.nvmlShutdown()
