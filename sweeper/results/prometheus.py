"""A run's figures as Prometheus metrics, for node_exporter's textfile collector.

`metrics(rows)` is pure: per host and series, the bus bandwidth at the largest size that ran ok
and the time at the smallest, in base units; the run's versions, duration and end; and a scan's
fleet findings and verdicts, a series per verdict. A host's figure is the worst of the groups
it took part in, and labels take dcgm-exporter's names where it has one. `per_host(rows)` gives
each host its own series; `write(path, families)` writes them through `files.atomic_write`.
docs/MONITORING.md gives each metric and why it is so."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, InfoMetricFamily, Metric

from sweeper.results.files import atomic_write
from sweeper.results.schema import CURVE, RUN_COLUMNS
from sweeper.wire import Kind, Status

BUSBW = "sweeper_busbw_bytes_per_second"
LATENCY = "sweeper_latency_seconds"
RUN_INFO = "sweeper_run"  # written as sweeper_run_info, as an info family is
DURATION = "sweeper_run_duration_seconds"
END = "sweeper_run_end_timestamp_seconds"
NODE_VERDICT = "sweeper_node_verdict"
GPU_VERDICT = "sweeper_gpu_verdict"
LINK_VERDICT = "sweeper_link_verdict"
FINDING = "sweeper_fleet_finding_busbw_bytes_per_second"
FINDING_THRESHOLD = "sweeper_fleet_finding_threshold_bytes_per_second"
# What the exporter writes, as Prometheus shows it (dashboards and tests name these): every
# run's figures, and a scan's verdicts (unitless: each series is 1 or 0, as a state is).
NAMES = (BUSBW, LATENCY, f"{RUN_INFO}_info", DURATION, END)
VERDICT_NAMES = (NODE_VERDICT, GPU_VERDICT, LINK_VERDICT)
FINDING_NAMES = (FINDING, FINDING_THRESHOLD)
# The judge's verdicts (`scan.verdict.Health`), as a version 1 summary writes them.
VERDICTS = ("healthy", "slow", "failed", "unreachable", "unconfirmed", "flaky", "misconfigured")

# dcgm-exporter's host label (`Hostname` until 2026, when it became `hostname`); then the
# row's own columns.
HOST = "hostname"
PEER = "peer_hostname"  # a link's other end
# dcgm-exporter's GPU labels: its index on the node, its UUID, its PCI bus id
GPU_LABELS = ("gpu", "UUID", "pci_bus_id")
SERIES = ("tier", "variant", "op", "algorithm", "dtype", "world_size", "engine", "launch")
LABELS = (HOST, *SERIES, "size_bytes")
# The run's info labels: what it is and which software ran it (its start is in its end and
# duration).
INFO = tuple(column for column in RUN_COLUMNS if column != "run_started_at")
# What the figures are made of: a curve's rows, who ran them, and what they measured.
MEASURED = (
    "hosts",
    "kind",
    "size_bytes",
    "status",
    "busbw_gb_per_s",
    "time_us",
    "measured_at",
    "ended_at",
)
COLUMNS = tuple(dict.fromkeys([*RUN_COLUMNS, *CURVE, *SERIES, *MEASURED]))


def _per_host(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` (one size of each curve) with one row per host each ran on."""
    # a row of no hosts (another tool's, an old test's) belongs to none: dropped below
    hosts = rows["hosts"].map(lambda names: sorted(set(names)) if names is not None else [])
    exploded = rows.assign(**{HOST: hosts}).explode(HOST)
    known: pd.DataFrame = exploded.dropna(subset=[HOST, "value"])
    return known


def _worst(rows: pd.DataFrame, lowest: bool) -> pd.DataFrame:
    """Per host, series and size, the worst value of the groups that ran there."""
    grouped = _per_host(rows).groupby(list(LABELS), dropna=False)["value"]
    worst: pd.DataFrame = (grouped.min() if lowest else grouped.max()).reset_index()
    return worst


Samples = list[tuple[list[str], float]]  # each series' label values (LABELS) and value


def _samples(figures: pd.DataFrame) -> Samples:
    """Label values as strings, a null one empty (Prometheus reads an empty label as none),
    made a column at a time: a fleet has a few hundred thousand series."""
    labels = figures[list(LABELS)].astype("string").fillna("").to_numpy(dtype=object).tolist()
    return list(zip(labels, figures["value"].astype(float).tolist(), strict=True))


def _gauge(name: str, help_: str, unit: str, samples: Samples) -> Metric:
    family = GaugeMetricFamily(name, help_, labels=LABELS, unit=unit)
    for values, value in samples:
        family.add_metric(values, value)
    return family


def _run(rows: pd.DataFrame) -> list[Metric]:
    """The run's info series, duration and end (where its rows say when it ran); none for a
    run without rows."""
    if rows.empty:
        return []
    first = rows.iloc[0]
    info = InfoMetricFamily(RUN_INFO, "The run these figures are from, and its software.")
    info.add_metric([], {c: "" if pd.isna(first[c]) else str(first[c]) for c in INFO})
    started = pd.Timestamp(first["run_started_at"])
    ended = pd.Timestamp(pd.concat([rows["measured_at"], rows["ended_at"]]).max())
    if pd.isna(started) or pd.isna(ended):  # rows that do not say when they ran
        return [info]
    end = GaugeMetricFamily(END, "When the run's last point ended.", unit="seconds")
    end.add_metric([], ended.timestamp())
    duration = GaugeMetricFamily(
        DURATION, "How long the run took, from its start to its last point.", unit="seconds"
    )
    duration.add_metric([], (ended - started).total_seconds())
    return [info, duration, end]


def figures(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per host, series and size: the lowest bus bandwidth (bytes per second) at each
    curve's largest ok size, and the longest time (seconds) at its smallest. A copy measured
    at one size only (a scan's gate copies, at 256 MiB) has no latency point: its smallest
    size is its bandwidth's."""
    ok = rows[rows["status"] == Status.OK.value]
    sizes = ok.groupby(list(CURVE), dropna=False)["size_bytes"]
    low, high = sizes.transform("min"), sizes.transform("max")
    one_size_copy = (ok["kind"] == Kind.COPY.value) & (low == high)
    largest = ok[ok["size_bytes"] == high]
    smallest = ok[(ok["size_bytes"] == low) & ~one_size_copy]
    busbw = largest.assign(value=largest["busbw_gb_per_s"].astype("Float64") * 1e9)
    latency = smallest.assign(value=smallest["time_us"].astype("Float64") / 1e6)
    return _worst(busbw, lowest=True), _worst(latency, lowest=False)


def _families(
    busbw: Samples,
    latency: Samples,
    run: list[Metric],
    verdicts: Sequence[Mapping[str, Any]],
    found: Sequence[Metric] = (),
) -> list[Metric]:
    return [
        *found,
        _gauge(
            BUSBW,
            "Bus bandwidth at the largest size that ran ok: the lowest of the host's groups.",
            "bytes_per_second",
            busbw,
        ),
        _gauge(
            LATENCY,
            "Time of one operation at the smallest size that ran ok: the longest of the "
            "host's groups.",
            "seconds",
            latency,
        ),
        *run,
        *_verdicts(verdicts),
    ]


def _enum(family: GaugeMetricFamily, labels: list[str], health: str) -> None:
    for verdict in VERDICTS:
        family.add_metric([*labels, verdict], 1.0 if verdict == health else 0.0)


def _findings(summary: Mapping[str, Any] | None) -> list[Metric]:
    """A scan's fleet findings (the fleet as a subject): its median and the threshold it was
    held to, by kind (gate, internode), state (off, or unheld: no reference to hold it to)
    and the threshold's source; none where the summary has none."""
    found = (summary or {}).get("findings") or []
    if not found:
        return []
    labels = ["kind", "state", "source"]
    figure = GaugeMetricFamily(
        FINDING,
        "The fleet's median busbw where the scan made a fleet finding on it.",
        labels=labels,
        unit="bytes_per_second",
    )
    threshold = GaugeMetricFamily(
        FINDING_THRESHOLD,
        "The absolute threshold the fleet's median was held to in that finding.",
        labels=labels,
        unit="bytes_per_second",
    )
    for f in found:
        at = [str(f["kind"]), "off" if f["off"] else "unheld", str(f["source"])]
        figure.add_metric(at, float(f["figure_gb_per_s"]) * 1e9)
        if f["threshold_gb_per_s"] is not None:
            threshold.add_metric(at, float(f["threshold_gb_per_s"]) * 1e9)
    return [figure, threshold]


def _verdicts(verdicts: Sequence[Mapping[str, Any]]) -> list[Metric]:
    """The scan's verdict families; none for a run that was no scan."""
    if not verdicts:
        return []
    node = GaugeMetricFamily(
        NODE_VERDICT,
        "The scan's verdict of the node: 1 for it, 0 for the others.",
        labels=[HOST, "verdict"],
    )
    gpu = GaugeMetricFamily(
        GPU_VERDICT,
        "The scan's verdict of a GPU it did not find healthy: 1 for it, 0 for the others.",
        labels=[HOST, *GPU_LABELS, "verdict"],
    )
    link = GaugeMetricFamily(
        LINK_VERDICT,
        "The scan's verdict of a link between two nodes it did not find healthy: 1 for it, "
        "0 for the others.",
        labels=[HOST, PEER, "verdict"],
    )
    for v in verdicts:
        hosts, health = list(v["hosts"]), str(v["health"])
        if v["subject"] == "node":
            _enum(node, hosts, health)
        elif health == "healthy":
            continue
        elif v["subject"] == "gpu":
            ids = [str(v["gpu"]), v["uuid"] or "", v["pci_bus_id"] or ""]
            _enum(gpu, [hosts[0], *ids], health)
        elif v["subject"] == "link":
            _enum(link, hosts, health)
    return [node, gpu, link]


def metrics(rows: pd.DataFrame, summary: Mapping[str, Any] | None = None) -> list[Metric]:
    """One run's rows (`COLUMNS` at least) as metric families, every host's series, and the
    verdicts of its scan summary, if it has one."""
    busbw, latency = figures(rows)
    verdicts = summary["verdicts"] if summary else []
    found = _findings(summary)
    return _families(_samples(busbw), _samples(latency), _run(rows), verdicts, found)


def _by_host(samples: Samples) -> dict[str, Samples]:
    of: dict[str, Samples] = {}
    for sample in samples:
        of.setdefault(sample[0][0], []).append(sample)  # HOST is the first label
    return of


def per_host(
    rows: pd.DataFrame, summary: Mapping[str, Any] | None = None
) -> dict[str, list[Metric]]:
    """One run's metric families for each host its rows or its scan summary name: the
    host's own series and verdicts (a link's in each end's file), and the run's (so that
    each file says which run its figures are from, and when it ended)."""
    busbw, latency = (_by_host(_samples(figures_)) for figures_ in figures(rows))
    run = _run(rows)
    verdicts: dict[str, list[Mapping[str, Any]]] = {}
    for v in summary["verdicts"] if summary else []:
        for host in dict.fromkeys(v["hosts"]):
            verdicts.setdefault(host, []).append(v)
    named = sorted({host for names in rows["hosts"] for host in names} | set(verdicts))
    found = _findings(summary)  # the fleet's: in every host's file, as the run's are
    return {
        host: _families(
            busbw.get(host, []), latency.get(host, []), run, verdicts.get(host, []), found
        )
        for host in named
    }


def series(families: Iterable[Metric]) -> int:
    """How many series the families hold."""
    return sum(len(family.samples) for family in families)


class _Families:
    """A collector of families made beforehand, for a registry to write."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def write(path: Path, families: Sequence[Metric]) -> None:
    """The families in Prometheus' text format, written whole or not at all (a temporary
    name beside `path`, renamed: node_exporter reads only `*.prom`)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_Families(families))
    text = generate_latest(registry)
    atomic_write(path, lambda file: file.write(text))
