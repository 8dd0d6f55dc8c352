"""Launch modes: which rows the analyses read where a point was timed both ways, and what
issuing each call eagerly costs.

`sweeper run --launch graph,eager` times each point twice on the same buffers: replays of
a captured CUDA graph (`graph`, as nccl-tests -G) and calls issued from Python (`eager`).
The graph time is the operation's own; eager adds the host's launch path, which decides
the time at small sizes. So every analysis of time or bandwidth reads each point's graph
row, and its eager row only where it has no graph row (CPU ranks, copy-engine rows, a
capture that failed, runs from before launch modes, which `results.upgrade` makes eager).
"""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.changes import params_text
from sweeper.analysis.summary import label, tier_name
from sweeper.results import schema
from sweeper.wire import Engine, Launch, Status

# What one point is, whatever its engine and launch mode (the point of `schema.POINT` in
# each run, without them): the rows one engine and launch mode of a point is chosen among.
POINT = tuple(key for key in ("run_id", *schema.POINT) if key not in ("launch", "engine"))
# Which of a point's rows the analyses read, best first: the closest to the wire (from a
# graph, then NCCL called directly) before what a PyTorch program adds to it. An engine not
# named here comes after those that are, so a new engine's rows are read, never refused.
LAUNCH_ORDER: tuple[str, ...] = (Launch.GRAPH, Launch.EAGER)  # names: members equal them
ENGINE_ORDER: tuple[str, ...] = (Engine.NCCL, Engine.TORCH)


def preference(engine: str, launch: str) -> int:
    """A row's place in the order the analyses read a point's rows in (smallest first)."""
    own = ENGINE_ORDER.index(engine) if engine in ENGINE_ORDER else len(ENGINE_ORDER)
    return LAUNCH_ORDER.index(launch) * (len(ENGINE_ORDER) + 1) + own


SMALL_BYTES = 64 * 2**10  # up to here an operation's time is mostly its fixed cost
COST_COLUMNS = (
    "tier",
    "world_size",
    "operation",
    "size_bytes",  # the smallest size measured both ways
    "graph_time_us",
    "eager_time_us",
    "cost_us",  # eager - graph at that size
    "small_cost_us",  # the median of eager - graph over the sizes up to SMALL_BYTES
    "small_sizes",  # how many sizes that median is over
)


def _point_ids(rows: pd.DataFrame) -> pd.Series:
    """A number per point (rows of one point, in any launch mode, share it)."""
    # params: lists of pairs, unhashable, so compared as text
    frame = rows[list(POINT)].assign(params=rows["params"].map(params_text))
    ids: pd.Series = frame.groupby(list(POINT), dropna=False, sort=False).ngroup()
    return ids


def preferred(rows: pd.DataFrame) -> pd.DataFrame:
    """Each point's rows in one engine and launch mode, the first it has in `preference`'s
    order (graph before eager, the nccl engine before torch), whatever their status."""
    rank = pd.Series(
        [preference(e, la) for e, la in zip(rows["engine"], rows["launch"], strict=True)],
        index=rows.index,
    )
    best = rank.groupby(_point_ids(rows)).transform("min")
    kept: pd.DataFrame = rows[rank == best]
    return kept


def launch_costs(rows: pd.DataFrame, small_bytes: int = SMALL_BYTES) -> pd.DataFrame:
    """What issuing each torch.distributed call eagerly adds to its time (a PyTorch
    program's launch cost), per tier, group size and operation, from the torch engine's `ok`
    points timed both ways: eager - graph at the smallest such size, and the
    median of it over the sizes up to `small_bytes`. At each size, the groups and dtypes of a
    tier and group size count by their median. Columns: `COST_COLUMNS`, operations in the
    order first measured; empty when no point was timed both ways."""
    ok = rows[rows["status"].isin([Status.OK]) & rows["engine"].isin([Engine.TORCH])]  # isin: no NA
    ok = ok.assign(point=_point_ids(ok))
    times = ok.pivot_table(index="point", columns="launch", values="time_us", aggfunc="median")
    if Launch.GRAPH not in times or Launch.EAGER not in times:
        empty: pd.DataFrame = pd.DataFrame(columns=list(COST_COLUMNS))
        return empty
    both = times.dropna(subset=[Launch.GRAPH, Launch.EAGER])
    first = ok.drop_duplicates("point").set_index("point").loc[both.index]
    points = pd.DataFrame(
        {
            "tier": [
                tier_name(str(t), str(v))
                for t, v in zip(first["tier"], first["variant"], strict=True)
            ],
            "world_size": first["world_size"].astype("int64"),
            "operation": [
                label(str(o), str(a)) for o, a in zip(first["op"], first["algorithm"], strict=True)
            ],
            "size_bytes": first["size_bytes"].astype("int64"),
            "graph_time_us": both[Launch.GRAPH],
            "eager_time_us": both[Launch.EAGER],
            "cost_us": both[Launch.EAGER] - both[Launch.GRAPH],
        }
    )
    keys = ["tier", "world_size", "operation"]
    sizes = points.groupby([*keys, "size_bytes"], sort=False, as_index=False).median()
    out = []
    for (tier, world_size, operation), part in sizes.groupby(keys, sort=False):
        smallest = part.loc[part["size_bytes"].idxmin()]
        small = part.loc[part["size_bytes"] <= small_bytes, "cost_us"]
        out.append(
            {
                "tier": tier,
                "world_size": world_size,
                "operation": operation,
                "size_bytes": smallest["size_bytes"],
                "graph_time_us": smallest["graph_time_us"],
                "eager_time_us": smallest["eager_time_us"],
                "cost_us": smallest["cost_us"],
                "small_cost_us": small.median(),  # NaN where no size is that small
                "small_sizes": len(small),
            }
        )
    table: pd.DataFrame = pd.DataFrame(out, columns=list(COST_COLUMNS))
    return table
