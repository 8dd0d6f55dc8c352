"""How many iterations a point runs when they are not given: the adaptive rule's figures and
its last step, shared by the ranks that apply it (rank/timing.py's `calibrate`) and the cost
model that predicts it (planning/costs.py), so a plan counts what a run does. Pure.
"""

from __future__ import annotations

import math

TARGET_POINT_S = 0.03  # adaptive: a point's timed blocks last about 30 ms together ...
MIN_ITERS = 5  # ... with at least this many iterations a block, while they fit its budget ...
MAX_ITERS = 10_000  # ... and at most this many
# A block's budget for its minimum of iterations: where one iteration takes a large fraction
# of a second (all_reduce of 147 GB on 4 H200: 0.6 s), MIN_ITERS made one point of 3 blocks
# last 9 s for a figure that one iteration a block gives to within its noise. Past this
# budget a block has as many iterations as fit it, at least one: a point keeps its blocks
# (compare's verdicts need 3, analysis/changes.py) and its timed iterations last about 0.3 s.
BLOCK_BUDGET_S = 0.1
GRAPH_ITERS = 100  # iterations captured in one graph; a block replays it as often as it needs


def block_iters(per_iter_s: float, target_s: float) -> int:
    """A block's iterations once one is known to take `per_iter_s`: enough to last
    `target_s`, at least MIN_ITERS where they fit BLOCK_BUDGET_S (else as many as fit, at
    least one), at most MAX_ITERS."""
    fewest = max(1, min(MIN_ITERS, math.floor(BLOCK_BUDGET_S / per_iter_s)))
    return min(MAX_ITERS, max(fewest, math.ceil(target_s / per_iter_s)))
