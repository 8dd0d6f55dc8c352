"""NCCL's INFO lines, read: the connections a communicator set up (each peer's transport), its
channels, and the algorithm and protocol of each call where NCCL printed them.

A line is `host:pid:tid [cudaDev] NCCL INFO <message>`. The messages read are those NCCL
2.23-2.30 print for channels and their transports, CollNet and NVLS setup, channel counts, a
net plugin's devices, tuning choices and init timings; docs/ARCHITECTURE.md, "Inside the
rooms", quotes one of each. Pure: lines in, records out; tests/data/nccl_logs holds examples."""

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
