"""`sweeper ops`: the operations `--ops` takes and the tiers `--tiers` takes, which were
named only in the error for a name that is neither."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, TextIO

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from sweeper.commands.common import examples, fail, printing
from sweeper.commands.options import Format, OutputFormat
from sweeper.errors import SweeperError
from sweeper.ops.descriptor import Collective
from sweeper.ops.registry import REGISTRY, load_plugins
from sweeper.wire import REQUESTABLE_TIERS, Tier

EXAMPLES = examples(
    "sweeper ops",
    "sweeper ops --plugins my_ops --format json",
)

# What each tier --tiers takes groups over: the slowest link its groups cross
TIER_WORDS = {
    Tier.NVLINK: "GPUs of one node joined by NVLink (direct or through NVSwitches)",
    Tier.PCIE: "GPUs of one node with no NVLink between them: PCIe, through the host",
    Tier.INTERNODE: "GPUs of different nodes: the network (InfiniBand, RoCE, EFA, TCP)",
    Tier.CPU: "CPU ranks (gloo): the host's cores and memory",
}


def operations() -> list[dict[str, Any]]:
    """Every registered operation, in the registry's order: its --ops name, the op and
    algorithm its rows say, its kind, and whether `--ops all` runs it."""
    return [_operation(c) for c in REGISTRY.values()]


def _operation(c: Collective) -> dict[str, Any]:
    return {
        "name": c.name,
        "op": c.op,
        "algorithm": c.algorithm,
        "kind": str(c.kind),
        "in_all": c.core,
    }


def tiers() -> list[dict[str, str]]:
    return [{"name": str(tier), "groups": TIER_WORDS[tier]} for tier in REQUESTABLE_TIERS]


def print_listing(out: TextIO | None = None) -> None:
    """The operations, then the tiers, at the terminal's width and made to read at 80."""
    console = Console(file=out or sys.stdout, highlight=False)
    listed = operations()
    table = Table(
        title=f"{len(listed)} operations: --ops takes names, shell patterns (p2p*) or all",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),
    )
    for column in ("name", "op (algorithm)", "kind"):
        table.add_column(column, overflow="fold")
    table.add_column("in all", justify="center", no_wrap=True)
    for o in listed:
        what = o["op"] if o["algorithm"] == "native" else f"{o['op']} ({o['algorithm']})"
        table.add_row(o["name"], what, o["kind"], "yes" if o["in_all"] else "")
    console.print(table)
    levels = Table(
        title="tiers: --tiers takes these, all, or world (every rank as one group)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0),
    )
    levels.add_column("tier", no_wrap=True)
    levels.add_column("its groups", overflow="fold")
    for tier in tiers():
        levels.add_row(tier["name"], tier["groups"])
    console.print(levels)


def ops(
    plugins: Annotated[
        str | None,
        typer.Option(
            metavar="MODULE",
            help="Python modules that register more operations, comma-separated.",
        ),
    ] = None,
    format: OutputFormat = Format.human,
) -> None:
    """The operations --ops takes (with those `--ops all` runs) and the tiers --tiers
    takes, each with what it is."""
    try:
        load_plugins(name for name in (plugins or "").split(",") if name.strip())
    except SweeperError as exc:
        raise fail(exc) from None
    with printing():
        if format is Format.json:
            print(json.dumps({"operations": operations(), "tiers": tiers()}, indent=1))
        else:
            print_listing()
