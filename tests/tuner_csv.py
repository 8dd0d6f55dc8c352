"""NCCL's example tuner plugin's reading of its CSV (plugins/tuner/example/plugin.c: loadConfig,
pluginGetCollInfo), rule for rule, so a test holds what `sweeper tune` writes to what that plugin
will take: lines read 255 bytes at a time (fgets into 256), `#` or an empty line skipped,
fields split at commas as strtok does (empty fields vanish) and trimmed of spaces and tabs,
8 to 10 fields or the line is dropped, unknown names read as its fallbacks (allreduce, ring,
simple), numbers as strtoull and atoi read them, and the first matching line wins."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LINE = 255
COLLECTIVES = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("ll", "ll128", "simple")


@dataclass(frozen=True)
class Config:
    collective: str
    min_bytes: int
    max_bytes: int
    algorithm: str
    protocol: str
    channels: int
    nodes: int
    ranks: int
    pipe_ops: int
    reg_buff: int
    fell_back: tuple[str, ...]  # fields the plugin read as its fallback (an unknown name)


def _atoi(text: str) -> int:
    found = re.match(r"[ \t]*[+-]?\d+", text)
    return int(found.group()) if found else 0


def _lines(text: str) -> list[str]:
    """What fgets(line, 256, file) returns, call after call."""
    out = []
    for whole in text.splitlines(keepends=True):
        out += [whole[i : i + MAX_LINE] for i in range(0, len(whole), MAX_LINE)]
    return out


def parse(text: str) -> list[Config]:
    configs = []
    for read in _lines(text):
        if read.startswith(("#", "\n")):
            continue
        line = read.split("\n", 1)[0]
        if not line:
            continue
        tokens = [t.strip(" \t") for t in line.split(",") if t != ""][:10]
        if not 8 <= len(tokens) <= 10:
            continue
        fell_back = []
        collective, algorithm, protocol = tokens[0], tokens[3], tokens[4]
        if collective not in COLLECTIVES:
            collective, fell_back = "allreduce", [*fell_back, "collective"]
        if algorithm not in ALGORITHMS:
            algorithm, fell_back = "ring", [*fell_back, "algorithm"]
        if protocol not in PROTOCOLS:
            protocol, fell_back = "simple", [*fell_back, "protocol"]
        configs.append(
            Config(
                collective=collective,
                min_bytes=_atoi(tokens[1]) % 2**64,
                max_bytes=_atoi(tokens[2]) % 2**64,
                algorithm=algorithm,
                protocol=protocol,
                channels=_atoi(tokens[5]),
                nodes=_atoi(tokens[6]),
                ranks=_atoi(tokens[7]),
                pipe_ops=_atoi(tokens[8]) if len(tokens) > 8 else -1,
                reg_buff=_atoi(tokens[9]) if len(tokens) > 9 else -1,
                fell_back=tuple(fell_back),
            )
        )
    return configs


def matching(
    configs: list[Config],
    collective: str,
    size_bytes: int,
    nodes: int,
    ranks: int,
    pipe_ops: int = 1,
    reg_buff: int = 0,
) -> Config | None:
    """The line pluginGetCollInfo applies to a call, or None (no line matches)."""
    for c in configs:
        if (
            c.collective == collective
            and c.min_bytes <= size_bytes <= c.max_bytes
            and c.nodes in (-1, nodes)
            and c.ranks in (-1, ranks)
            and c.pipe_ops in (-1, pipe_ops)
            and c.reg_buff in (-1, reg_buff)
        ):
            return c
    return None
