from __future__ import annotations

from sweeper.collectives import REGISTRY
from sweeper.plan import Timing, points

CORE = [c for c in REGISTRY.values() if c.core]


def test_points_are_rounded_per_operation_deduplicated_and_ascending() -> None:
    ops = [REGISTRY["all_reduce"], REGISTRY["all_gather"]]
    plan = list(points("cpu:r0,1,2,3", 4, ops, ["float32"], [8, 16, 32, 64], Timing()))
    by_op = {op.name: [p.size_bytes for p in plan if p.op == op.name] for op in ops}
    assert by_op["all_reduce"] == [8, 16, 32, 64]
    assert by_op["all_gather"] == [16, 32, 64]  # 8 B is below one float per rank: 16 B
    assert all(p.size_bytes == p.count * 4 for p in plan)


def test_points_cover_every_op_dtype_and_size_in_order() -> None:
    plan = list(points("cpu:r0,1", 2, CORE, ["float32", "bfloat16"], [1024, 2048], Timing()))
    assert len(plan) == len(CORE) * 2 * 2
    assert [p.op for p in plan[:4]] == ["all_reduce"] * 4
    assert [(p.dtype, p.size_bytes) for p in plan[:4]] == [
        ("float32", 1024),
        ("float32", 2048),
        ("bfloat16", 1024),
        ("bfloat16", 2048),
    ]
