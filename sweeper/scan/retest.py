"""A scan's summary as its run keeps it (`scan.document`), each condemned verdict with the
command that scans its subject again with the scan's own settings (`retest`). Pure."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sweeper.planning.profile import SCAN_OPTIONS
from sweeper.planning.spec import SweepSpec
from sweeper.scan.document import Scanned, document
from sweeper.scan.fleet import FleetNode
from sweeper.scan.settings import ScanSettings
from sweeper.scan.thresholds import Thresholds
from sweeper.scan.verdict import Verdict


def summary(scanned: Scanned, options: Mapping[str, Any], settings: ScanSettings) -> dict[str, Any]:
    """The scan's summary (`scan.document`), each condemned verdict with the command that
    scans its subject again (`retest`); `options`: the scan's sweep options, as its run
    record keeps them."""
    doc = document(scanned)
    name_of = host_names(scanned.fleet.nodes)
    flags = _flags(options, settings)
    for verdict, shown in zip(scanned.verdicts, doc["verdicts"], strict=True):
        if verdict.condemned:
            shown["retest"] = retest(verdict, name_of, flags)
    return doc


def host_names(nodes: Sequence[FleetNode]) -> dict[str, str]:
    """Each node by its host where the host has one node of the scan, else by its Ray id."""
    hosts = Counter(node.host for node in nodes)
    return {n.id: n.host if hosts[n.host] == 1 else n.id for n in nodes}


def retest(verdict: Verdict, name_of: Mapping[str, str], flags: Sequence[str]) -> str:
    """The command that scans a verdict's subject again: its nodes (a node beside the
    partners it was judged beside, so that it meets the same internode test; a link's two
    ends; a GPU's node), with the scan's own settings."""
    nodes = dict.fromkeys((*verdict.nodes, *verdict.partners))
    named_ = ",".join(name_of.get(node, node) for node in nodes)
    return shlex.join(["sweeper", "scan", "--nodes", named_, *flags])


def _flags(options: Mapping[str, Any], settings: ScanSettings) -> list[str]:
    """The options that make a re-test the scan's test: where and how it ran and where its
    rows went (the sweep options a scan takes, off their defaults) and how it judged (the
    scan's settings off theirs, but for which nodes and how they are grouped)."""
    words = ["--results", str(options["results"])]
    taken = set(SCAN_OPTIONS - {"results"})
    for key, usual in SweepSpec().model_dump(mode="json", include=taken).items():
        value = options[key]
        if value == usual:
            continue
        flag = "--" + key.replace("_", "-")
        for each in value if isinstance(value, list) else [value]:
            words += [flag, str(each)]
    plain = settings.plain()
    usual = ScanSettings(strategy=settings.strategy, thresholds=Thresholds()).plain()
    for key in ("op", "sigmas", "min_ratio"):
        if plain[key] is not None and plain[key] != usual[key]:
            words += ["--" + key.replace("_", "-"), str(plain[key])]
    if plain["sizes"]:
        words += ["--sizes", ",".join(map(str, plain["sizes"]))]
    for tier, figure in plain["min_busbw_gb_per_s"].items():
        words += ["--min-busbw", f"{tier}={figure}"]
    return words
