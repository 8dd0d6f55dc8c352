"""A stopped scan resumed on a Ray started anew (an embedded Ray always is): Ray knows its
nodes by new ids, so the record's nodes and finished waves take them, by host, where that
is unambiguous (driver/scan_ranks.py's `moved` and `rehomed`). Plain functions, no Ray."""

from __future__ import annotations

from sweeper.driver.cluster import NodeSlot
from sweeper.driver.scan_ranks import moved, rehomed
from sweeper.topology import Node


def _node(node_id: str, host: str) -> Node:
    return Node(host=host, node_id=node_id, ip="127.0.0.1", gpus=(), links=())


def _slot(node_id: str, host: str) -> NodeSlot:
    return NodeSlot(node_id=node_id, host=host, ranks=2)


def test_an_embedded_rays_one_node_is_the_records_node_under_its_new_id() -> None:
    assert moved([_node("old", "vm")], [_slot("new", "vm")]) == {"old": "new"}


def test_a_node_ray_still_knows_keeps_its_id_and_a_host_of_two_is_not_guessed() -> None:
    machines = [_node("a", "h1"), _node("b", "h2"), _node("c", "h2")]
    alive = [_slot("a", "h1"), _slot("x", "h2"), _slot("y", "h2")]
    assert moved(machines, alive) == {}  # b and c lost on h2, two new nodes there: no guess
    assert moved(machines[:2], [_slot("a", "h1"), _slot("x", "h2")]) == {"b": "x"}


def test_a_node_gone_for_good_stays_under_its_old_id() -> None:
    assert moved([_node("a", "h1"), _node("b", "h2")], [_slot("a", "h1")]) == {}


def test_the_finished_waves_take_the_new_ids_wherever_they_are() -> None:
    waves = [{"index": 0, "outcomes": [{"nodes": ["old", "other"], "gpus": [["old", 1]]}]}]
    machines, renamed = rehomed([_node("old", "vm")], waves, [_slot("new", "vm")])
    assert [m.node_id for m in machines] == ["new"]
    assert renamed == (
        {"index": 0, "outcomes": [{"nodes": ["new", "other"], "gpus": [["new", 1]]}]},
    )
