"""`sweeper topo --format json > node.json` is a topology `sweeper plan --topology` takes: the
document's first node is the node it replicates, planned as its NVML record would be."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sweeper
from sweeper.driver.console import topology_json
from sweeper.driver.sweep import Survey
from sweeper.errors import BadInput
from sweeper.planning.placement import expected_placement
from sweeper.topology import Node
from sweeper.wire import Backend

DATA = Path(__file__).parents[1] / "data" / "topologies"
DGX = DATA / "dgx-h100-nvswitch.json"


def _topo_json(*nodes: Node) -> dict[str, object]:
    """What `sweeper topo --format json` prints for these nodes (its groups: none asked)."""
    placement = expected_placement(Backend.NCCL, nodes, [len(n.gpus) for n in nodes])
    return topology_json(Survey(Backend.NCCL, nodes, placement, ()))


def test_topos_json_of_a_node_plans_as_its_nvml_record(tmp_path: Path) -> None:
    recorded = Node.from_record(json.loads(DGX.read_text()))
    shown = tmp_path / "node.json"
    shown.write_text(json.dumps(_topo_json(recorded), default=str))
    asked = {"nodes": 2, "ops": "all_reduce", "max_size": "64K", "tiers": "all"}
    from_topo = sweeper.plan(topology=shown, **asked)
    from_record = sweeper.plan(topology=DGX, **asked)
    assert from_topo.placement.nodes[0].links == from_record.placement.nodes[0].links
    assert from_topo.placement.nodes[0].gpus == from_record.placement.nodes[0].gpus
    assert from_topo.schedule.n_groups == from_record.schedule.n_groups
    assert from_topo.estimate.points == from_record.estimate.points


def test_a_topo_document_of_several_nodes_gives_its_first(tmp_path: Path) -> None:
    first = Node.from_record(json.loads(DGX.read_text()))
    second = Node.from_record(json.loads((DATA / "h200x4-nvswitch.json").read_text()))
    assert Node.recorded(json.loads(json.dumps(_topo_json(first, second), default=str))) == first


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"backend": "nccl", "nodes": [], "groups": []}, "a document of no node"),
        ({"nodes": [{"gpus": [], "links": [["X"]]}]}, "a link matrix that is not 0 x 0"),
        ({"nodes": [{"gpus": [{"index": 0}], "links": [["X"]]}]}, "'uuid'"),
    ],
)
def test_a_topo_document_that_is_no_node_is_one_line(
    tmp_path: Path, document: dict[str, object], problem: str
) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(document))
    with pytest.raises(BadInput, match=rf"--topology {path}: not a topology record \(.*{problem}"):
        sweeper.plan(topology=path, nodes=2)
