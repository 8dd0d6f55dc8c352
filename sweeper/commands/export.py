"""`sweeper export`: a run's figures as Prometheus textfiles for node_exporter's textfile
collector (`export_textfiles`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sweeper.commands.common import examples, fail
from sweeper.commands.options import Results, RunId, directory
from sweeper.errors import SweeperError

EXAMPLES = examples(
    "sweeper export --prometheus /var/lib/prometheus/node-exporter/sweeper.prom",
    "sweeper export 20261122T013412Z-33627a --results /data/results --per-host /data/prom",
)


def export(
    run_id: RunId = "latest",
    results: Results = Path("results"),
    prometheus: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Write every host's series to this file (node_exporter reads *.prom).",
        ),
    ] = None,
    per_host: Annotated[
        Path | None,
        typer.Option(
            parser=directory,
            metavar="DIR",
            help="Write one file per host into this directory: <host>.prom.",
        ),
    ] = None,
) -> None:
    """Write a run's figures as Prometheus textfiles for node_exporter's textfile collector:
    bus bandwidth at the largest size, latency at the smallest, the run's versions, duration
    and end."""
    from sweeper.commands import export_textfiles  # pandas: loaded only for an export

    try:
        said = export_textfiles.export(results, run_id, prometheus, per_host)
    except SweeperError as exc:
        raise fail(exc) from None
    print("\n".join(said))
