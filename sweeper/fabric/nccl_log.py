"""NCCL's INFO lines, read: the connections a communicator set up (each peer's transport),
its channels, and the algorithm and protocol of each call where NCCL printed them.

A line is `host:pid:tid [cudaDev] NCCL INFO <message>` (after a timestamp where
NCCL_DEBUG_TIMESTAMP_LEVELS asks for one). The messages read here, as NCCL 2.23-2.30 print
them (src/transport/*.cc, src/init.cc, src/enqueue.cc):

- `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM` (P2P: CUMEM, IPC, direct pointer, indirect,
  MNNVL; `/read`, `/CE`), `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct`,
  `Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA` (a plugin's name, its device, a
  proxy rank in parentheses, `/GDRDMA` where GPUDirect RDMA is used, `/Shared`);
- `CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA`, and `NVLS comm 0x... headRank ...`
  when a communicator sets up its NVLink SHARP buffers;
- `24 coll channels, 24 collnet channels, 0 nvls channels, ...` as a communicator starts;
- `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ...`: a net plugin's devices;
- TUNING: `AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..23}` (2.24
  on; before, `... -> Algo 1 proto 0 time 5.1`, numbers, on rank 0 only);
- `Init timings - ncclCommInitRankConfig: rank 0 nranks 4 total 0.58 (kernels 0.31, ...)`
  (`Init timings: rank 0 ...` before 2.27): where a communicator's start went, in seconds.

Pure: lines in, records out; tests/data/nccl_logs holds recorded and written examples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sweeper.wire import Link

_LINE = re.compile(r"\S+?:(?P<pid>\d+):\d+ \[\d+\] NCCL INFO (?P<message>.*)")
_CHANNEL = re.compile(
    r"Channel \d+(?:/\d+)? : (?P<src>\d+)\[\d+\] -> (?P<dst>\d+)\[\d+\]"
    r"(?: \[(?:send|receive)\])? via (?P<via>.+)"
)
_COLLNET = re.compile(r"CollNet \d+/\d+ : (?P<src>\d+) \[(?:send|receive)\] via (?P<via>.+)")
_NVLS = re.compile(r"NVLS comm 0x[0-9a-f]+ headRank")
_CHANNELS = re.compile(r"(?P<n>\d+) coll channels, ")
_DEVICES = re.compile(r"NET/(?P<plugin>[^:]+?) : Using (?P<devices>[^;]*)")
_DEVICE = re.compile(r"\[(?P<index>\d+)\](?P<name>[^\s:\[]+)")
_TUNING = re.compile(r"\w+: \d+ Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)")
_INIT = re.compile(
    r"Init timings(?: - \w+)?: rank \d+ nranks \d+ total (?P<total>[\d.]+) \((?P<parts>[^)]*)\)"
)
_PART = re.compile(r"(?P<name>[a-z]+) (?P<seconds>[\d.]+)")
_NET = re.compile(
    r"(?P<kind>NET|COLLNET)/(?P<plugin>.+?)/(?P<device>\d+)(?:\(\d+\))?(?P<gdr>/GDRDMA)?"
)
# NCCL's numbers for them before it printed names (src/include/nccl_tuner.h)
_ALGORITHMS = ("TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT")
_PROTOCOLS = ("LL", "LL128", "SIMPLE")
# What a line must hold to be worth a regular expression: most of NCCL's are not
_WORTH = (" via ", "NVLS comm", " coll channels", "NET/", " Bytes -> Algo ", "Init timings")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcessLog:
    """What one process's lines say: its connections (each once, in the order NCCL set them
    up), its communicators' collective channels (the last to start), its calls' algorithm and
    protocol, and its net plugins' devices by plugin and index."""

    links: tuple[Link, ...] = ()
    channels: int | None = None
    calls: tuple[tuple[str, str], ...] = ()
    devices: dict[tuple[str, int], str] = field(default_factory=dict)
    init_s: tuple[tuple[str, float], ...] = ()  # the last communicator's start, NCCL's split


def read(lines: Iterable[str]) -> dict[int, ProcessLog]:
    """Each process's reading, by pid, from lines of one or more processes (a debug file of
    one rank, or several processes' output interleaved); lines not NCCL's INFO are skipped."""
    links: dict[int, dict[Link, None]] = {}
    channels: dict[int, int] = {}
    calls: dict[int, list[tuple[str, str]]] = {}
    devices: dict[int, dict[tuple[str, int], str]] = {}
    init_s: dict[int, tuple[tuple[str, float], ...]] = {}
    for line in lines:
        if not any(mark in line for mark in _WORTH):
            continue
        found = _LINE.search(line)
        if found is None:
            continue
        pid, message = int(found["pid"]), found["message"].rstrip()
        link = _link(message)
        if link is not None:
            links.setdefault(pid, {})[link] = None
        elif (count := _CHANNELS.match(message)) is not None:
            channels[pid] = int(count["n"])
        elif (tuning := _TUNING.match(message)) is not None:
            calls.setdefault(pid, []).append(_names(tuning["algo"], tuning["proto"]))
        elif (timings := _INIT.match(message)) is not None:
            parts = [(p["name"], float(p["seconds"])) for p in _PART.finditer(timings["parts"])]
            init_s[pid] = (("total", float(timings["total"])), *parts)
        elif (using := _DEVICES.match(message)) is not None:
            mine = devices.setdefault(pid, {})
            for device in _DEVICE.finditer(using["devices"]):
                mine[(using["plugin"], int(device["index"]))] = device["name"]
    pids = set(links) | set(channels) | set(calls) | set(devices) | set(init_s)
    return {
        pid: ProcessLog(
            links=tuple(links.get(pid, ())),
            channels=channels.get(pid),
            calls=tuple(calls.get(pid, ())),
            devices=devices.get(pid, {}),
            init_s=init_s.get(pid, ()),
        )
        for pid in sorted(pids)
    }


def _link(message: str) -> Link | None:
    if (channel := _CHANNEL.match(message)) is not None:
        return Link(src=int(channel["src"]), dst=int(channel["dst"]), via=channel["via"])
    if (collnet := _COLLNET.match(message)) is not None:
        return Link(src=int(collnet["src"]), dst=None, via=collnet["via"])
    if _NVLS.match(message):
        return Link(src=None, dst=None, via="NVLS")
    return None


def _names(algo: str, proto: str) -> tuple[str, str]:
    """An algorithm and a protocol by name, from NCCL's names or its older numbers."""
    if algo.isdigit() and int(algo) < len(_ALGORITHMS):
        algo = _ALGORITHMS[int(algo)]
    if proto.isdigit() and int(proto) < len(_PROTOCOLS):
        proto = _PROTOCOLS[int(proto)]
    return algo.upper(), proto.upper()


def net_device(via: str) -> tuple[str, int] | None:
    """A NET or COLLNET connection's plugin and device index (`NET/IB/1(0)/GDRDMA`: IB, 1)."""
    found = _NET.match(via)
    return None if found is None else (found["plugin"], int(found["device"]))


def transport(via: str) -> str:
    """A connection's transport as rows name it: P2P with its mode (`P2P/CUMEM`,
    `P2P/IPC/read`, `P2P/direct`, `P2P/indirect`), `SHM`, NET with its plugin and whether
    GPUDirect RDMA carries it (`NET/Socket`, `NET/IB+GDRDMA`), `NVLS`, `CollNet/<plugin>`."""
    if via.startswith("P2P/"):
        parts = via.split("/")
        mode = parts[1].split()[0]  # "direct pointer" is direct
        extras = [part for part in parts[2:] if part in ("read", "CE")]
        return "/".join(["P2P", mode, *extras])
    if via.startswith("SHM/"):
        return "SHM"
    found = _NET.match(via)
    if found is not None:
        kind = "NET" if found["kind"] == "NET" else "CollNet"
        return f"{kind}/{found['plugin']}" + ("+GDRDMA" if found["gdr"] else "")
    return via


def summary(links: Iterable[Link]) -> str | None:
    """The transports of a group's connections in one word: the one there is, or
    `mixed:` and each (sorted); None for no connection."""
    names = sorted({transport(link.via) for link in links})
    if not names:
        return None
    return names[0] if len(names) == 1 else "mixed:" + ",".join(names)


def spelled(link: Link) -> str:
    """A connection as the rows list it: `0->1 P2P/CUMEM`, `3->0 NET/IB/0/GDRDMA (mlx5_0)`,
    `0 COLLNET/SHARP/0`, `NVLS`."""
    ends = "->".join(str(rank) for rank in (link.src, link.dst) if rank is not None)
    device = f" ({link.device})" if link.device else ""
    return f"{ends} {link.via}{device}".strip()
