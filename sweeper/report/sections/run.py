"""What the run was: its header (facts, software, NCCL variables, nodes and GPUs, options),
the status of its points, and the links between its GPUs."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from sweeper.analysis import launch_modes
from sweeper.report.blocks import Block, Cell, Code, Facts, Section, Table, Text
from sweeper.report.sections import cells
from sweeper.report.view import RunView, members
from sweeper.results.records import RunRecord
from sweeper.topology import Node
from sweeper.wire import Status

_LINK_LEGEND = (
    "NV#: joined by # NVLinks (directly or through NVSwitches); PIX: one PCIe switch; "
    "PXB: several PCIe switches; PHB: a PCIe host bridge; NODE: host bridges of one NUMA "
    "node; SYS: across NUMA nodes."
)
# Why a node has no NVML (topology.read_nvml's reasons), in words: the first name found in
# the reason says it
_NO_NVML = {
    "LibraryNotFound": "the NVIDIA driver's library (NVML) is not installed",
    "DriverNotLoaded": "the NVIDIA driver is not loaded",
    "NoPermission": "NVML refused access",
    "pynvml": "nvidia-ml-py is not installed",
}

# Run header


def run_header(view: RunView) -> Section:
    df, record = view.rows, view.record
    first = df.iloc[0]
    started = first["run_started_at"]
    last = df["measured_at"].max()  # NaT where no row says when it was made
    took = "not recorded" if pd.isna(last) else f"{(last - started).total_seconds():.0f} s"
    gpus = members(df["gpu_uuids"])
    hosts = sorted(members(df["hosts"]))
    facts = [
        ("run", str(first["run_id"])),
        ("kind", str(first["run_kind"])),
        ("started", f"{started:%Y-%m-%d %H:%M:%S} UTC"),
        ("measuring took", took),
        ("cluster", str(first["cluster_name"])),
        ("hosts", ", ".join(hosts)),
        ("backend", str(first["backend"])),
        ("GPUs", f"{len(gpus)} x {first['gpu_model']}" if gpus else "none (CPU ranks)"),
        ("points", str(len(df))),
        ("launch modes", launch_modes(df["launch"])),
        ("buffers", _buffers(df)),
        ("command", record.command if record else "not recorded"),
    ]
    versions = [
        ("sweeper", first["sweeper_version"]),
        ("Ray", first["ray_version"]),
        ("torch", first["torch_version"]),
        ("NCCL", first["nccl_version"]),
        ("CUDA", first["cuda_version"]),
        ("driver", first["driver_version"]),
    ]
    # NCCL, CUDA and the driver are a GPU run's: a gloo run on CPU ranks has none to name
    gpu_only = {"NCCL", "CUDA", "driver"}
    versions = [(n, v) for n, v in versions if n not in gpu_only or cells.fmt(v, "") != "-"]
    blocks: list[Block] = [
        Facts(tuple(facts), code=frozenset({"command", "run"})),
        Table(
            ("software", "version"), tuple((Cell(n), Cell(cells.fmt(v, ""))) for n, v in versions)
        ),
        *((_nccl_env(df),) if cells.nccl(df) else ()),  # gloo reads none
        *_inventory(record, hosts, view.drained),
    ]
    if record is not None:
        blocks.append(Code("every option of the run", json.dumps(record.options, indent=1)))
    return Section("run", "Run", tuple(blocks))


def _buffers(df: pd.DataFrame) -> str:
    """Where the points' buffers came from: NCCL's allocator and registered
    (--register-buffers, as nccl-tests' are), or torch's, as a PyTorch program's."""
    if df["gpu_model"].isna().all():
        return "host memory (CPU ranks)"
    if df["registered"].eq(True).any():
        return "NCCL's allocator, registered with each group's communicators"
    return "torch's caching allocator"


def _nccl_env(df: pd.DataFrame) -> Table:
    rows = []
    for variant, group in df.groupby("variant", sort=False):
        env = group["nccl_env"].iloc[0]
        pairs = [f"{k}={v}" for k, v in (env if env is not None else [])]
        rows.append((Cell(str(variant)), Cell(" ".join(pairs) or "none set", "code wrap")))
    return Table(("actor set", "NCCL variables"), tuple(rows), "NCCL variables of each actor set")


# A fleet larger than this lists its nodes by kind, not a row a GPU, and its topologies by
# shape, not a table a node.
EVERY_GPU_UP_TO = 64


def _inventory(record: RunRecord | None, hosts: list[str], drained: frozenset[str]) -> list[Block]:
    """Every node's GPUs; of a large fleet, its kinds of node and every GPU of the nodes to
    drain."""
    if record is None:
        return [
            Text(
                "No run record (topology, command line) was saved for this run; hosts from the "
                "rows: " + ", ".join(hosts)
            )
        ]
    every = list(enumerate(record.nodes))
    if len(every) <= EVERY_GPU_UP_TO:
        return [_gpus(every, "nodes and GPUs (NVML)")]
    condemned = [(p, node) for p, node in every if node.node_id in drained]
    caption = "the nodes to drain, every GPU (NVML)"
    return [_shapes(record), *([_gpus(condemned, caption)] if condemned else [])]


def _gpus(nodes: list[tuple[int, Node]], caption: str) -> Table:
    """A row a GPU of each node (by its place in the run), a row a node without GPUs."""
    gpu_columns = ("GPU", "model", "memory", "PCI bus", "NUMA", "NVLink GB/s", "PCIe GB/s")
    any_gpus = any(node.gpus for _, node in nodes)
    columns = ("node", "host", "CPUs", *(gpu_columns if any_gpus else ("GPUs",)))
    rows: list[tuple[Cell, ...]] = []
    for position, node in nodes:
        where = (Cell(f"n{position}"), Cell(node.host), cells.num(node.cpus, "d"))
        if not node.gpus:  # why: in the topology section
            rows.append((*where, Cell("none"), *(Cell("") for _ in columns[len(where) + 1 :])))
        for gpu in node.gpus:
            rows.append(
                (
                    *where,
                    Cell(f"GPU{gpu.index}", title=gpu.uuid),
                    Cell(gpu.name),
                    Cell(f"{gpu.memory_total_bytes / 2**30:.0f} GiB", "num"),
                    Cell(gpu.pci_bus_id, "code"),
                    Cell(cells.fmt(gpu.numa_node, "")),
                    cells.num(gpu.nvlink_gb_per_s, ".0f"),
                    cells.num(gpu.pcie_gb_per_s, ".0f"),
                )
            )
    return Table(columns, tuple(rows), caption)


def _few(names: list[str]) -> str:
    """The first three names and the last: a kind's hosts in a cell."""
    return ", ".join(names[:3]) + (f" ... {names[-1]}" if len(names) > 3 else "")


def _shapes(record: RunRecord) -> Table:
    """A large fleet's nodes by what they hold, one row a kind of node (its CPUs and its GPUs'
    model, memory and links), where a row a GPU came to megabytes before the page's first
    figure at 1024 nodes of 8."""
    Kind = tuple[str, int, float | None, float | None]  # a GPU's model, memory, NVLink, PCIe
    kinds: dict[tuple[int, tuple[Kind, ...]], list[str]] = {}
    for node in record.nodes:
        held = tuple(
            (g.name, g.memory_total_bytes, g.nvlink_gb_per_s, g.pcie_gb_per_s) for g in node.gpus
        )
        kinds.setdefault((node.cpus, held), []).append(node.host)
    columns = ("nodes", "hosts", "CPUs", "GPUs", "memory", "NVLink GB/s", "PCIe GB/s")
    rows = []
    for (cpus, gpus), hosts in kinds.items():
        models = Counter(g[0] for g in gpus)
        rows.append(
            (
                cells.num(len(hosts), "d"),
                Cell(_few(hosts)),
                cells.num(cpus, "d"),
                Cell(", ".join(f"{n} x {m}" for m, n in models.items()) or "none"),
                Cell(", ".join(sorted({f"{g[1] / 2**30:.0f} GiB" for g in gpus})), "num"),
                cells.num(min((g[2] for g in gpus if g[2]), default=None), ".0f"),
                cells.num(min((g[3] for g in gpus if g[3]), default=None), ".0f"),
            )
        )
    caption = (
        f"{len(record.nodes)} nodes by kind (NVML; the slowest GPU's links); each GPU: sweeper topo"
    )
    return Table(columns, tuple(rows), caption)


# Status


def status(view: RunView) -> Section:
    df = view.rows
    counts = df["status"].value_counts()
    unchecked = int(((df["status"] == Status.OK) & df["n_wrong"].isna()).sum())
    facts = [(str(s), str(int(n))) for s, n in counts.items()]
    if unchecked:
        facts.append(("ok but not checked", str(unchecked)))
    failed = df[df["status"] != Status.OK]
    if failed.empty:
        return Section(
            "status",
            "Status",
            (Facts(tuple(facts)), Text(f"Every one of the {len(df)} points ran and was exact.")),
        )
    blocks: list[Block] = [Facts(tuple(facts))]
    if failed["status"].eq(Status.SKIPPED).all():
        blocks.append(
            Text(f"Every point that can run here ran; {len(failed)} cannot, each saying why.")
        )
    failed = failed.assign(operation=cells.labels(failed), error=failed["error"].fillna(""))
    keys = ["group_id", "operation", "dtype", "status", "error"]
    rows = [
        (
            Cell(str(group_id)),
            Cell(str(operation)),
            Cell(str(dtype)),
            cells.status(state),
            cells.num(len(part), "d"),
            Cell(cells.size_range(part["size_bytes"])),
            cells.short(error),
        )
        for (group_id, operation, dtype, state, error), part in failed.groupby(keys, sort=False)
    ]
    columns = ("group", "operation", "dtype", "status", "points", "sizes", "why")
    return Section("status", "Status", (*blocks, cells.table(columns, rows)))


# Topology


def topology(view: RunView) -> Section | None:
    record = view.record
    if record is None:
        return None
    every = list(enumerate(record.nodes))
    if len(every) <= EVERY_GPU_UP_TO:
        blocks = [_links(f"n{position} {node.host}", node) for position, node in every]
    else:
        blocks = _topology_shapes(every, view.drained)
    if any(node.gpus for node in record.nodes):
        blocks.append(Text(_LINK_LEGEND, "muted"))
    return Section(
        "topology", "Topology", tuple(blocks), "Links between GPUs, as nvidia-smi topo -m"
    )


def _links(name: str, node: Node) -> Block:
    """A node's links between its GPUs as a table, or why it has no GPUs."""
    if not node.gpus:
        return Text(f"{name}: {no_gpus(node.reason)}.")
    names = tuple(f"GPU{gpu.index}" for gpu in node.gpus)
    rows = tuple(
        (Cell(gpu, "head"), *(Cell(link, _link_css(link)) for link in links))
        for gpu, links in zip(names, node.links, strict=True)
    )
    return Table(("", *names), rows, name)


def _topology_shapes(nodes: list[tuple[int, Node]], drained: frozenset[str]) -> list[Block]:
    """A large fleet's links, a table for each shape of node (its links, or why it has no
    GPUs), where a table a node came to 2.7 MB at 1024 nodes: each says how many nodes have
    it, the first of them and the last, and every node to drain."""
    shapes: dict[tuple[tuple[tuple[str, ...], ...], str], list[tuple[int, Node]]] = {}
    for position, node in nodes:
        why = "" if node.gpus else no_gpus(node.reason)
        shapes.setdefault((node.links, why), []).append((position, node))
    blocks: list[Block] = []
    for held in shapes.values():
        names = [f"n{position} {node.host}" for position, node in held]
        name = names[0] if len(held) == 1 else f"{len(held)} nodes: {_few(names)}"
        condemned = [n for n, (_, node) in zip(names, held, strict=True) if node.node_id in drained]
        if condemned and len(held) > 1:
            name += f"; to drain: {', '.join(condemned)}"
        blocks.append(_links(name, held[0][1]))
    return blocks


def no_gpus(reason: str | None) -> str:
    """Why NVML showed a node no GPUs, in words, with NVML's own where they say more."""
    if reason is None:
        return "no GPUs seen by NVML"
    words = next((w for name, w in _NO_NVML.items() if name in reason), None)
    return f"no GPUs: {words or f'NVML did not start ({reason})'}"


def _link_css(link: str) -> str:
    kind = "nv" if link.startswith("NV") else link.lower()
    return f"link link-{kind}"
