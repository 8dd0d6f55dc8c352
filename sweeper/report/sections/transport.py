"""The report's opening where NCCL did not take the path a group's tier is for: each group
whose transport breaks its tier's contract (the rows' `transport_flag`, sweeper/fabric/
contract.py), with what to check, and the groups that crossed nodes over TCP sockets
because their nodes have no RDMA device. Their bandwidths measure another link than the
tier's; `sweeper run` exits 5 where any row is flagged."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis import tier_name
from sweeper.report.blocks import Block, Cell, Section, Table, Text
from sweeper.report.view import RunView, members
from sweeper.wire import Tier

SOCKET = "NET/Socket"
_WHERE = (
    "Check the NCCL variables each actor set was given (the run section lists them), NCCL's "
    "configuration files (NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf), and the "
    "kernel modules the flag names (nvidia_peermem, the RDMA drivers)."
)


def transport(view: RunView) -> Section | None:
    """The flagged groups, one line per group and engine, and the TCP groups; None where
    there are neither (every transport kept its tier, or none was read)."""
    rows = view.rows
    flagged = rows[rows["transport_flag"].notna()]
    # the contract flags sockets where a node has RDMA ports: an internode group over them,
    # unflagged, ran where none has any
    tcp = rows[
        rows["transport"].fillna("").str.contains(SOCKET, regex=False)
        & rows["transport_flag"].isna()
        & (rows["tier"] == Tier.INTERNODE)
    ]
    blocks: list[Block] = []
    if not flagged.empty:
        blocks += [_flagged(flagged), Text(_WHERE)]
    if not tcp.empty:
        hosts = ", ".join(sorted(members(tcp["hosts"])))
        groups = ", ".join(dict.fromkeys(tcp["group_id"].astype(str)))
        blocks.append(
            Text(
                f"No RDMA device (InfiniBand, RoCE, EFA) on {hosts}: NCCL crossed nodes over "
                f"TCP sockets ({SOCKET}) in {groups}. These figures are TCP's, not an RDMA "
                "fabric's."
            )
        )
    if not blocks:
        return None
    count = flagged["group_id"].nunique()
    return Section(
        "transport",
        "Transport",
        tuple(blocks),
        intro=(
            f"NCCL took another path than the tier's for {count} group(s): their bandwidths "
            "measure that path, not the tier's link."
            if count
            else ""
        ),
    )


def _flagged(rows: pd.DataFrame) -> Table:
    keys = ["group_id", "engine"]
    lines = []
    for (group_id, engine), part in rows.groupby(keys, sort=False):
        first = part.iloc[0]
        lines.append(
            (
                Cell(str(group_id), "code"),
                Cell(tier_name(str(first["tier"]), str(first["variant"]))),
                Cell(str(engine)),
                Cell(", ".join(sorted(members(part["hosts"])))),
                Cell(str(first["transport"]), "code bad"),
                Cell(str(first["transport_flag"]), "wrap"),
            )
        )
    return Table(
        ("group", "tier", "engine", "hosts", "transport", "what breaks the tier, what to check"),
        tuple(lines),
        "Groups whose transport contradicts their tier",
    )
