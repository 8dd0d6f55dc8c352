"""NCCL's own split of a communicator's start (its `Init timings` INFO line, src/init.cc), read
from the recorded 4-H200 log (tests/data/nccl_logs/h200-x4-2026-11-27/p2p.log) and the form
NCCL 2.23 printed, and a row's `nccl_init_s`: the slowest rank's."""

from __future__ import annotations

from pathlib import Path

from sweeper.driver.measurement import of_point
from sweeper.fabric.nccl_log import read
from sweeper.wire import Block, Engine, Fabric, Launch, Link, Timed
from tests.unit.test_measurement import RUN, _done, _placement, _ran

LOG = Path(__file__).parents[1] / "data" / "nccl_logs" / "h200-x4-2026-11-27" / "p2p.log"
# as NCCL 2.23 printed it (NVIDIA/nccl#1453's log), no function name after "Init timings"
OLDER = (
    "h100clust-worker-1:497888:497958 [0] NCCL INFO Init timings: rank 0 nranks 24 total 3.45 "
    "(kernels 0.33, bootstrap 2.75, allgathers 0.10, topo 0.03, graphs 0.12, connections 0.12, "
    "rest 0.00)"
)


def test_nccls_init_timings_are_read_per_process_with_their_total_first() -> None:
    said = read(LOG.read_text().splitlines())
    assert said[1060].init_s == (
        ("total", 0.73),
        ("kernels", 0.53),
        ("alloc", 0.09),
        ("bootstrap", 0.03),
        ("allgathers", 0.0),
        ("topo", 0.03),
        ("graphs", 0.01),
        ("connections", 0.02),
        ("rest", 0.01),
    )
    (older,) = read([OLDER]).values()
    assert older.init_s[:3] == (("total", 3.45), ("kernels", 0.33), ("bootstrap", 2.75))


def _timed(total: float) -> Timed:
    fabric = Fabric(
        links=(Link(src=0, dst=1, via="P2P/CUMEM"),),
        init_s=(("total", total), ("bootstrap", total / 2)),
    )
    return Timed(
        engine=Engine.NCCL,
        launch=Launch.EAGER,
        blocks=(Block(seconds=1e-3, iters=10, samples=None),) * 3,
        warmup_iters=2,
        n_wrong=0,
        fabric=fabric,
    )


def test_a_row_carries_the_split_of_its_slowest_ranks_start() -> None:
    (row,) = of_point(
        RUN, _placement(), _done("all_reduce", (0, 1), _ran(_timed(0.5), _timed(2.0)))
    )
    assert row.nccl_init_s == (("total", 2.0), ("bootstrap", 1.0))
