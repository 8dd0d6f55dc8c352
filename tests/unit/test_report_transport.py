"""The report opens with the groups whose transport contradicts their tier, with what to
check, and says where nodes had no RDMA device so NCCL crossed them over TCP sockets."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from sweeper.report import build
from sweeper.report.blocks import Section, Table, Text
from sweeper.report.sections.transport import transport
from sweeper.report.view import RunView
from sweeper.results.load import frame
from tests import report_data

SHM_FLAG = "nvlink group through SHM: check NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, peer access"


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    """The synthetic GPU run, its default variant over P2P and its NCCL_PROTO variants, as
    a grid with NCCL_P2P_DISABLE=1 would be, through host memory and flagged."""
    rows = frame(list(report_data.gpu_rows("gpu", knobs=True)))
    nccl = rows["kind"].isin(["collective", "composite"])
    variant = rows["variant"] != "default"
    return rows.assign(
        transport=(nccl & ~variant)
        .map({True: "P2P/CUMEM", False: None})
        .where(~(nccl & variant), "SHM"),
        transport_flag=(nccl & variant).map({True: SHM_FLAG, False: None}),
    )


def _blocks(section: Section | None, kind: type) -> list:
    assert section is not None
    return [block for block in section.blocks if isinstance(block, kind)]


def test_the_report_opens_with_each_flagged_group_and_what_to_check(rows: pd.DataFrame) -> None:
    view = RunView.of(rows, None)
    (table,) = _blocks(transport(view), Table)
    flagged = rows[rows["transport_flag"].notna()]
    assert len(table.rows) == len(flagged.groupby(["group_id", "engine"]))
    assert {row[4].text for row in table.rows} == {"SHM"}
    assert {row[5].text for row in table.rows} == {SHM_FLAG}
    assert any("/etc/nccl.conf" in text.text for text in _blocks(transport(view), Text))
    one_op = build.render(rows[rows["op"] == "all_reduce"], None)  # the page, quickly
    assert re.findall(r'<section id="([^"]+)">', one_op)[:2] == ["transport", "run"]


def test_no_section_where_every_transport_kept_its_tier(rows: pd.DataFrame) -> None:
    assert transport(RunView.of(rows.assign(transport_flag=None), None)) is None


def test_an_internode_group_over_sockets_unflagged_says_its_nodes_have_no_rdma(
    rows: pd.DataFrame,
) -> None:
    """--force-network where no node has an RDMA port: the contract has nothing to flag (it
    flags sockets only beside RDMA ports), and the report says why NCCL took TCP."""
    network = rows.assign(
        tier="internode", transport="NET/Socket", transport_flag=None, variant="network"
    )
    (text,) = _blocks(transport(RunView.of(network, None)), Text)
    assert text.text.startswith("No RDMA device (InfiniBand, RoCE, EFA) on gpu-node-1: NCCL")
    assert "over TCP sockets (NET/Socket)" in text.text
