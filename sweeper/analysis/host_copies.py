"""Host<->device copies per GPU: what each GPU's PCIe link carried, pinned and pageable.

Host copy rows (kind `copy`, op h2d, d2h or h2d+d2h, algorithm pinned or pageable, no
source or destination) time every rank of a group copying at once; the row's bandwidth is
the slowest rank's, so each of the group's GPUs is credited with it. Where a GPU was
measured in several groups, the smallest group counts: alone, its link is all its own.
"""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.launches import preferred
from sweeper.wire import Status

HOST_OPS = ("h2d", "d2h", "h2d+d2h")
MEMORIES = ("pinned", "pageable")
COLUMNS = [
    "gpu_uuid",
    "copy",  # h2d, d2h, h2d+d2h
    "size_bytes",  # the largest measured: the link at its peak
    "alongside",  # other GPUs of its group copying at the same time
    *(f"{memory}_{what}" for memory in MEMORIES for what in ("gb_per_s", "pct_of_peak")),
]


def host_rows(df: pd.DataFrame) -> pd.DataFrame:
    rows: pd.DataFrame = df[
        (df["kind"] == "copy") & df["op"].isin(HOST_OPS) & df["src_rank"].isna()
    ]
    return rows


def host_table(df: pd.DataFrame) -> pd.DataFrame:
    """One record per GPU and copy direction at the largest size: algbw (GB/s) and its
    share of the GPU's PCIe peak, from pinned and from pageable host memory."""
    rows = preferred(host_rows(df))
    rows = rows[rows["status"] == Status.OK]
    if rows.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=COLUMNS)
        return empty
    rows = rows[rows["size_bytes"] == rows.groupby("op")["size_bytes"].transform("max")]
    best: dict[tuple[str, str], dict[str, object]] = {}
    for row in rows.sort_values("world_size", kind="stable").itertuples(index=False):
        for uuid in row.gpu_uuids if row.gpu_uuids is not None else ():
            key = (str(uuid), str(row.op))
            entry = best.setdefault(
                key,
                {
                    "gpu_uuid": str(uuid),
                    "copy": str(row.op),
                    "size_bytes": int(row.size_bytes),
                    "alongside": int(row.world_size) - 1,
                },
            )
            if f"{row.algorithm}_gb_per_s" not in entry:  # the smallest group first
                entry[f"{row.algorithm}_gb_per_s"] = row.algbw_gb_per_s
                entry[f"{row.algorithm}_pct_of_peak"] = row.pcie_pct_of_peak
    table = pd.DataFrame.from_records(list(best.values())).reindex(columns=COLUMNS)
    order = {op: n for n, op in enumerate(HOST_OPS)}
    table = table.assign(order=table["copy"].map(order)).sort_values(["gpu_uuid", "order"])
    out: pd.DataFrame = table.drop(columns="order").reset_index(drop=True)
    return out
