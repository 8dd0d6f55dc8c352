"""What a node offers NCCL's network, read where a rank runs (or a task on its node) from sysfs
and procfs under `root` (`/`; tests give recorded trees, tests/data/sysfs):

- its RDMA ports (`/sys/class/infiniband/DEV/ports/N`: state, rate, link layer; the device's
  driver tells EFA from InfiniBand and RoCE);
- GPUDirect RDMA: the kernel's peer-memory module (the files NCCL's IB transport checks, or
  `/proc/modules`), or DMA-BUF (a kernel of 5.12 or later and NVIDIA's open kernel module);
- NCCL's net plugin: NCCL_NET_PLUGIN, else a `libnccl-net*.so` where the loader looks;
- what NCCL will choose between two such nodes (`between_nodes`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# net_ib.cc: nv_peer_mem (MLNX_OFED's) or nvidia_peermem (the driver's)
PEER_MEMORY = (
    "sys/kernel/mm/memory_peers/nv_mem/version",
    "sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "sys/module/nvidia_peermem/version",
)
PEER_MODULES = ("nvidia_peermem", "nv_peer_mem")
_DMA_BUF_KERNEL = (5, 12)  # RDMA on DMA-BUF (ib_umem_dmabuf)
# Where the dynamic loader, and so NCCL's dlopen of its plugin, finds a library beside
# LD_LIBRARY_PATH; with the places the EFA installer and aws-ofi-nccl put theirs
_LIBRARY_DIRS = (
    "usr/local/lib",
    "usr/lib",
    "usr/lib64",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "opt/amazon/ofi-nccl/lib",
    "opt/amazon/ofi-nccl/lib64",
    "opt/aws-ofi-nccl/lib",
)
# The NCCL variables that choose the network, each as the preflight line quotes it
NETWORK_VARIABLES = (
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_SOCKET_IFNAME",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Port:
    """An RDMA port: `mlx5_0/1`, its kind (IB, RoCE, EFA), state and rate as sysfs says."""

    name: str
    kind: str
    state: str  # ACTIVE, DOWN, INIT, ...
    rate: str  # "400 Gb/sec (4X NDR)"; "" where sysfs gives none

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"


@dataclass(frozen=True, kw_only=True, slots=True)
class Offer:
    """What one node offers NCCL's network."""

    ports: tuple[Port, ...] = ()
    peer_memory: str | None = None  # the peer-memory module loaded, if one is
    dma_buf: bool = False  # the kernel and NVIDIA's module can carry GPUDirect RDMA over DMA-BUF
    net_plugin: str | None = None  # NCCL_NET_PLUGIN's value, else a plugin library found
    variables: tuple[tuple[str, str], ...] = ()  # NETWORK_VARIABLES as the ranks get them

    @property
    def rdma(self) -> tuple[Port, ...]:
        """The active RDMA ports."""
        return tuple(port for port in self.ports if port.active)

    @property
    def gpudirect(self) -> bool:
        return self.peer_memory is not None or self.dma_buf


def ports(root: Path = Path("/")) -> tuple[Port, ...]:
    """Every RDMA port of the node, by device and port number."""
    found = []
    for device in sorted((root / "sys/class/infiniband").glob("*")):
        driver = _link_name(device / "device/driver")
        for port in sorted((device / "ports").glob("*")):
            layer = _read(port / "link_layer")
            kind = (
                "EFA"
                if driver == "efa" or device.name.startswith("efa")
                else "RoCE"
                if layer == "Ethernet"
                else "IB"
            )
            state = _read(port / "state")  # "4: ACTIVE"
            found.append(
                Port(
                    name=f"{device.name}/{port.name}",
                    kind=kind,
                    state=state.split(":")[-1].strip() or "unknown",
                    rate=_read(port / "rate"),
                )
            )
    return tuple(found)


def rdma_devices(root: Path = Path("/")) -> tuple[str, ...]:
    """The node's active RDMA ports (InfiniBand, RoCE, EFA): `mlx5_0/1`, ..."""
    return tuple(port.name for port in ports(root) if port.active)


def peer_memory_module(root: Path = Path("/")) -> str | None:
    """The peer-memory module GPUDirect RDMA over InfiniBand needs, where one is loaded: as
    NCCL checks it (its files), or as /proc/modules lists it."""
    for path in PEER_MEMORY:
        if (root / path).exists():
            return "nv_peer_mem" if "nv_mem" in path else "nvidia_peermem"
    for line in _read(root / "proc/modules").splitlines():
        name = line.split(" ", 1)[0]
        if name in PEER_MODULES:
            return name
    return None


def peer_memory(root: Path = Path("/")) -> bool:
    """Whether a peer-memory module is loaded."""
    return peer_memory_module(root) is not None


def dma_buf(root: Path = Path("/")) -> bool:
    """Whether GPUDirect RDMA can go over DMA-BUF here: a kernel of 5.12 or later and
    NVIDIA's open kernel module (the proprietary one exports no DMA-BUF)."""
    release = _read(root / "proc/sys/kernel/osrelease").split("-")[0].split(".")
    try:
        kernel = tuple(int(part) for part in release[:2])
    except ValueError:
        return False
    driver = _read(root / "proc/driver/nvidia/version")
    return kernel >= _DMA_BUF_KERNEL and "Open Kernel Module" in driver


def net_plugin(environ: Mapping[str, str], root: Path = Path("/")) -> str | None:
    """NCCL's net plugin: NCCL_NET_PLUGIN as set (`none`: none), else the first
    `libnccl-net*.so` in LD_LIBRARY_PATH or the loader's usual places."""
    named = environ.get("NCCL_NET_PLUGIN")
    if named is not None:
        return None if named.lower() == "none" else named
    listed = [entry.lstrip("/") for entry in environ.get("LD_LIBRARY_PATH", "").split(":") if entry]
    for directory in (*listed, *_LIBRARY_DIRS):
        found = sorted((root / directory).glob("libnccl-net*.so*"))
        if found:
            return str(Path("/") / found[0].relative_to(root))
    return None


def offer(environ: Mapping[str, str] | None = None, root: Path = Path("/")) -> Offer:
    """What this node offers, for ranks whose environment is `environ` (this process's)."""
    environ = os.environ if environ is None else environ
    return Offer(
        ports=ports(root),
        peer_memory=peer_memory_module(root),
        dma_buf=dma_buf(root),
        net_plugin=net_plugin(environ, root),
        variables=tuple((k, environ[k]) for k in NETWORK_VARIABLES if k in environ),
    )


def between_nodes(node: Offer) -> str:
    """The transport NCCL will choose to another node like this one, as rows name it: the
    network NCCL_NET names, else the plugin's, else NCCL's own IB over InfiniBand or RoCE
    ports (unless NCCL_IB_DISABLE=1), else TCP sockets. EFA needs its plugin
    (aws-ofi-nccl): NCCL's IB transport does not drive it."""
    variables = dict(node.variables)
    if "NCCL_NET" in variables:
        return f"NET/{variables['NCCL_NET']}"
    if node.net_plugin is not None:
        return f"NET/<{Path(node.net_plugin).name}>"
    ib = [port for port in node.rdma if port.kind != "EFA"]
    if ib and variables.get("NCCL_IB_DISABLE") != "1":
        return "NET/IB" + ("+GDRDMA" if node.gpudirect else "")
    return "NET/Socket"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return ""


def _link_name(path: Path) -> str:
    try:
        return Path(os.readlink(path)).name
    except OSError:
        return ""
