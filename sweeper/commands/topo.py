"""`sweeper topo`: the cluster as a sweep would see it: nodes, GPUs, the link matrix and the
groups each tier runs."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sweeper.commands.common import examples, fail, printing
from sweeper.commands.options import (
    Address,
    Backend,
    ConnectTimeout,
    ForceNetwork,
    Format,
    GpusPerNode,
    Nodes,
    OutputFormat,
    Pairs,
    World,
)
from sweeper.errors import SweeperError
from sweeper.planning.profile import build_spec

EXAMPLES = examples(
    "sweeper topo",
    "sweeper topo --nodes 2 --format json",
)


def topo(
    address: Address = None,
    connect_timeout: ConnectTimeout = None,
    backend: Backend = None,
    world: World = None,
    nodes: Nodes = None,
    gpus_per_node: GpusPerNode = None,
    tiers: Annotated[
        str, typer.Option(metavar="TIERS", help="Tiers whose groups to list.")
    ] = "all",
    pairs: Pairs = None,
    force_network: ForceNetwork = None,
    format: OutputFormat = Format.human,
) -> None:
    """Nodes, GPUs, the link matrix (like nvidia-smi topo -m) and the groups each tier runs."""
    options: dict[str, Any] = dict(locals())
    output_format = options.pop("format")
    try:
        spec = build_spec(**options)
        # Ray and pandas: loaded once the options are good
        from sweeper.driver import console, sweep

        survey = sweep.survey(spec)
    except SweeperError as exc:
        raise fail(exc) from None
    with printing():
        if output_format is Format.json:
            console.print_json(console.topology_json(survey))
        else:
            console.print_topology(survey)
