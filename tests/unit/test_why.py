"""Why an outlier is one, from recorded NVML data: a 4x H200 run (tests/report_data.py with
`health`) whose GPU1 trained its link at x8 of x16, GPU2 sits at its power cap and replays
NVLink, and GPU3 replayed NVLink at the one all_reduce point that took three times as long;
the rows go through the store as a sweep's do."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis import why
from sweeper.analysis.host_copies import host_table
from sweeper.results.load import frame, run_rows
from sweeper.topology import Node
from tests import report_data
from tests.nvml_replay import recorded

TOPOLOGIES = Path(__file__).parents[1] / "data" / "topologies"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    results = tmp_path_factory.mktemp("why") / "results"
    report_data.write_run(results, "health", health=True)
    return run_rows(results, "health")


def _uuid(index: int) -> str:
    return report_data.h200_node().gpus[index].uuid


def _texts(evidence: list[why.Evidence]) -> list[str]:
    return [str(e) for e in evidence]


def test_a_power_capped_gpu_says_its_clock_against_its_peers_and_why(rows: pd.DataFrame) -> None:
    found = _texts(why.GpuHealth.of(rows).evidence[_uuid(2)])
    assert found[:4] == [
        "SM clock 1.41 GHz against 1.98 GHz",
        "throttle: power cap, sync boost (held to a slower GPU of its group)",
        "power 698 W at its 700 W cap",
        "67 °C against 46",
    ]
    points = len(why.readings(rows).query("gpu_uuid == @_uuid(2)"))
    assert (
        f"NVLink: {8 * points} replays, {2 * points} CRC errors in {points} of {points} points"
        in found
    )
    assert "XID 63" in found


def test_a_link_trained_at_x8_is_its_gpus_only_evidence(rows: pd.DataFrame) -> None:
    assert _texts(why.GpuHealth.of(rows).evidence[_uuid(1)]) == ["PCIe link x8 of x16"]
    assert why.states(rows)[_uuid(1)].link() == "Gen5 x8 of Gen5 x16"


def test_gpus_that_read_like_their_peers_have_no_line(rows: pd.DataFrame) -> None:
    assert _uuid(0) not in why.GpuHealth.of(rows).evidence


def test_host_copies_are_a_share_of_each_gpus_pcie_peak(rows: pd.DataFrame) -> None:
    table = host_table(rows).set_index(["gpu_uuid", "copy"])
    peak = report_data.h200_node().gpus[0].pcie_gb_per_s  # Gen5 x16, from the topology
    assert peak is not None
    alone = table.loc[(_uuid(0), "h2d")]
    assert alone["alongside"] == 0
    assert alone["pinned_pct_of_peak"] == pytest.approx(100 * alone["pinned_gb_per_s"] / peak)
    assert alone["pinned_pct_of_peak"] == pytest.approx(87, abs=1)
    assert table.loc[(_uuid(1), "h2d"), "pinned_pct_of_peak"] == pytest.approx(44, abs=1)  # x8
    assert table.loc[(_uuid(1), "h2d"), "pageable_gb_per_s"] == alone["pageable_gb_per_s"]


def test_a_point_off_its_neighbours_names_what_its_gpus_read_differently(
    rows: pd.DataFrame,
) -> None:
    names = {gpu.uuid: f"n0 GPU{gpu.index}" for gpu in report_data.h200_node().gpus}
    off = why.off_neighbours(rows[rows["kind"] == "collective"], names)
    op, _, _, size = report_data.SPIKE
    assert off[["operation", "size_bytes"]].values.tolist() == [[op, size]]
    (line,) = off["why"]
    # GPU2 is power-capped at its neighbours too, and GPU1's link is x8 there too: only the
    # replays are this point's own
    assert line == "n0 GPU3: NVLink: 41 replays, 3 CRC errors, 1 recovery"
    assert off["time_us"].iloc[0] > why.OFF_FACTOR * off["expected_us"].iloc[0]


def test_a_weak_pair_names_its_route_and_its_gpus_evidence(rows: pd.DataFrame) -> None:
    nodes = (report_data.h200_node(),)
    names = {gpu.uuid: f"n0 GPU{gpu.index}" for gpu in nodes[0].gpus}
    evidence = why.GpuHealth.of(rows).evidence
    line = why.pair_line(nodes, _uuid(2), _uuid(3), ["NV18"] * 12, evidence, names)
    assert line.startswith("route: NVLink (18 links). n0 GPU2: SM clock 1.41 GHz against 1.98")
    assert ". n0 GPU3: NVLink: 41 replays" in line
    unknown = why.pair_line(nodes, _uuid(0), "GPU-elsewhere", ["NV18"], evidence, names)
    assert unknown == "route: not in the topology. Both GPUs read like their peers"


def test_a_pair_off_its_tiers_usual_route_says_so() -> None:
    node = Node.from_record(json.loads((TOPOLOGIES / "l40sx4-two-numa.json").read_text()))
    a, c = node.gpus[0].uuid, node.gpus[2].uuid
    line = why.pair_line((node,), a, c, ["PIX", "PIX", "SYS", "PIX"], {}, {})
    assert line.startswith(
        "route: PCIe and the link between CPU sockets, no NVLink, where most pairs of its "
        "tier take PCIe through one switch, no NVLink"
    )


def test_a_fanout_names_the_route_of_each_destination(tmp_path: Path) -> None:
    """The puzzle of issue 17: copies from one GPU to three at once on three streams take
    4.3, 53.3 and 8.5 ms; the routes tell why."""
    node = Node.from_record(json.loads((TOPOLOGIES / "a100x4-nvlink-pairs.json").read_text()))
    report_data.write_fanout(tmp_path, "fan", node, {1: 4.3e3, 2: 53.3e3, 3: 8.5e3})
    rows = run_rows(tmp_path, "fan")
    (fan,) = why.fanouts(rows, (node,))
    names = {gpu.uuid: f"GPU{gpu.index}" for gpu in node.gpus}
    assert why.fanout_sentence(fan, names, "256M") == (
        "GPU0 copied 256M to GPU1, GPU2 and GPU3 at once: to GPU1 in 4.3 ms over NVLink "
        "(12 links); to GPU2 in 53.3 ms over PCIe and the link between CPU sockets, no NVLink; "
        "to GPU3 in 8.5 ms over PCIe and the link between CPU sockets, no NVLink."
    )


def test_a_generation_trained_down_counts_only_where_its_peers_did_not() -> None:
    """An idle GPU trains its PCIe generation down (the GeForce reads Gen1 before a point):
    one GPU below the others is evidence, every GPU idle alike is not."""
    idle = why.state(why.readings(_telemetry_frame("rtx3060-geforce.json", before=True)))
    loaded = why.state(why.readings(_telemetry_frame("rtx3060-geforce.json")))
    assert (idle.pcie_gen, idle.pcie_width) == (1, 8)
    assert "PCIe Gen1 of Gen4" in _texts(why.differences(idle, [loaded, loaded]))
    assert "PCIe Gen1 of Gen4" not in _texts(why.differences(idle, [idle, idle]))
    # x8 of x16 under load, whatever the generation, where its peers trained wider
    wide = why.State(**{**vars(loaded), "pcie_width": 16})
    assert "PCIe link x8 of x16" in _texts(why.differences(loaded, [wide]))


def _telemetry_frame(name: str, before: bool = False) -> pd.DataFrame:
    """One row whose single GPU read the recorded file (its first sample, where `before`)."""
    from sweeper import telemetry
    from tests.nvml_replay import DATA

    reading = recorded(name)
    if before:
        sample = json.loads((DATA / name).read_text())["samples"][0]
        gen = sample["nvmlDeviceGetCurrPcieLinkGeneration()"]
        reading = telemetry.Reading(**{**vars(reading), "pcie_gen": gen})
    columns = telemetry.columns([reading])
    return frame([{"gpu_uuids": ["GPU-a"], **columns}])
