"""Each GPU against its peers, from what NVML read of it around the points, and its copies
to and from host memory over its PCIe link; where one differs, the evidence why."""

from __future__ import annotations

from collections.abc import Sequence

from sweeper.analysis import mad_outliers, why
from sweeper.analysis.host_copies import host_table
from sweeper.report.blocks import Cell, Section
from sweeper.report.sections import cells
from sweeper.report.view import RunView


def _why_cell(evidence: Sequence[why.Evidence] | None) -> Cell:
    if not evidence:
        return Cell("like its peers", "muted")
    return Cell("; ".join(map(str, evidence)), "bad wrap why")


# GPUs against their peers


def gpus(view: RunView) -> Section | None:
    """Each GPU's state over the run (NVML, read around every point) and, for a GPU that
    differs from the others, the evidence."""
    states, evidence = view.health.states, view.health.evidence
    if not states:
        return None
    names = view.gpu_names
    order = sorted(states, key=lambda uuid: (names[uuid], uuid))
    lines = [
        (
            Cell(names[uuid], title=uuid),
            cells.num(states[uuid].points, "d"),
            cells.num(states[uuid].sm_clock_mhz, ".0f"),
            cells.num(states[uuid].power_w, ".0f"),
            cells.num(states[uuid].power_limit_w, ".0f"),
            cells.num(states[uuid].temperature_c, ".0f"),
            Cell(states[uuid].link()),
            _why_cell(evidence.get(uuid)),
        )
        for uuid in order
    ]
    columns = ("GPU", "points", "SM clock MHz", "power W", "cap W", "°C", "PCIe link", "why")
    return Section(
        "gpus",
        "GPUs against their peers",
        (cells.table(columns, lines, "medians over the points that read each GPU"),),
        "What NVML read of each GPU around the points (medians; the PCIe link at the best it "
        "trained to, against the most the GPU and its slot allow) and, where a GPU differs from "
        f"the others, why: an SM clock under {why.CLOCK_SHARE:.0%} of theirs, a throttle reason, "
        f"power at its cap, {why.HOTTER_C:.0f} °C hotter, error counts (NVLink replays, CRC "
        "errors, recoveries, ECC, XIDs), a link trained below its max.",
    )


# Host <-> device


def host(view: RunView) -> Section | None:
    table = host_table(view.preferred)
    if table.empty:
        return None
    states, evidence = view.health.states, view.health.evidence
    table = table.assign(
        name=table["gpu_uuid"].map(view.gpu_names),
        # a GPU whose pinned copies fall short of the other GPUs' in the same direction
        outlier=mad_outliers(table["pinned_gb_per_s"], table["copy"], "low"),
    ).sort_values(["name"], kind="stable")

    def why_cell(uuid: str, outlier: bool) -> Cell:
        """The link's evidence where it has some; else, for a copy that falls short, the
        GPU's whole line (or that nothing NVML reads explains it)."""
        found = evidence.get(uuid, [])
        link = [e for e in found if e.topic == "pcie"]
        if link or not outlier:
            return _why_cell(link)
        if found:
            return _why_cell(found)
        return Cell("slower than the other GPUs; nothing NVML reads differs", "bad wrap why")

    lines = [
        (
            Cell(str(r["name"]), title=str(r["gpu_uuid"])),
            Cell(str(r["copy"])),
            cells.size(r["size_bytes"]),
            cells.num(r["alongside"], "d"),
            cells.num(r["pinned_gb_per_s"], cells.SIG, "bad" if r["outlier"] else ""),
            cells.num(r["pinned_pct_of_peak"], ".0f", "bad" if r["outlier"] else ""),
            cells.num(r["pageable_gb_per_s"], cells.SIG),
            cells.num(r["pageable_pct_of_peak"], ".0f"),
            Cell(states[r["gpu_uuid"]].link() if r["gpu_uuid"] in states else "-"),
            why_cell(str(r["gpu_uuid"]), bool(r["outlier"])),
        )
        for r in cells.records(table)
    ]
    columns = (
        "GPU",
        "copy",
        "size",
        "alongside",
        "pinned GB/s",
        "% of PCIe peak",
        "pageable GB/s",
        "% of PCIe peak",
        "PCIe link",
        "why",
    )
    return cells.table_section(
        "host",
        "Host <-> device",
        columns,
        lines,
        "Each GPU's copies to and from host memory at the largest size, pinned (the copy "
        "engines read it directly) and pageable (staged through a bounce buffer): algorithm "
        "bandwidth and its share of the GPU's PCIe peak (NVML's max generation x width, one "
        "direction); alongside: other GPUs of its group copying at the same time. The link is "
        "as trained during the points, against the most the GPU and its slot allow.",
    )
