"""`sweeper export`: a run's figures as Prometheus textfiles, for node_exporter's textfile
collector: one file of every host's series (`--prometheus`), or one per host
(`--per-host`, `<host>.prom`, each holding its host's series and the run's); a scan's
verdicts with them, from its summary.

Every target is checked before the first is written, and each is written whole or not at
all: bad input writes nothing.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.metrics_core import Metric

from sweeper.errors import BadInput, ResultsUnwritable
from sweeper.results import prometheus, scans
from sweeper.results.files import RUN_ID, require_file
from sweeper.results.load import load, resolve

# A disk that is full or failing: infrastructure (exit 3), where other refusals are bad input
_DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EIO)


def _writable(path: Path, named: str) -> Path:
    """`path`, where a file can be written there: a regular file or none, in a directory."""
    require_file(path, named)
    if not path.parent.is_dir():
        raise BadInput(f"{named}: no directory {path.parent}")
    return path


def _host_file(directory: Path, host: str) -> Path:
    if not RUN_ID.fullmatch(host):
        raise BadInput(f"--per-host: the host name {host!r} is not a file name")
    return _writable(directory / f"{host}.prom", f"--per-host {directory}")


def export(results: Path, run_id: str, path: Path | None, per_host: Path | None) -> list[str]:
    """Write the run's textfiles; a line saying what each target got. BadInput, nothing
    written, for no target, no run, or a target that cannot be written."""
    if path is None and per_host is None:
        raise BadInput("nothing to export", hint="give --prometheus PATH or --per-host DIR")
    if path is not None:
        _writable(path, f"--prometheus {path}")
    if per_host is not None and not per_host.is_dir():
        raise BadInput(f"--per-host {per_host}: not a directory")
    run = resolve(results, run_id)
    rows = load(results, run, columns=prometheus.COLUMNS)
    summary = scans.load(results, run)  # a scan's verdicts; None for other runs
    files: dict[Path, Sequence[Metric]] = {}
    said = []
    if path is not None:
        files[path] = prometheus.metrics(rows, summary)
        said.append(f"prometheus: {path} ({prometheus.series(files[path])} series)")
    if per_host is not None:
        hosts = {
            _host_file(per_host, host): f for host, f in prometheus.per_host(rows, summary).items()
        }
        files.update(hosts)
        series = sum(map(prometheus.series, hosts.values()))
        said.append(f"prometheus: {per_host} ({len(hosts)} files, one per host: {series} series)")
    for target, families in files.items():
        try:
            prometheus.write(target, families)
        except OSError as exc:
            if exc.errno in _DISK_ERRORS:
                raise ResultsUnwritable(f"cannot write {target}: {exc.strerror}") from None
            # a place no file can be made (/proc, a folder we may not enter): the user's choice
            raise BadInput(f"cannot write {target}: {exc.strerror or exc}") from None
    return said
