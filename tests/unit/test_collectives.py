from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from sweeper.errors import BadInput
from sweeper.ops.descriptor import SUM
from sweeper.ops.registry import REGISTRY, load_plugins, resolve
from sweeper.planning.placement import Shape
from sweeper.wire import Engine


@pytest.mark.parametrize(
    ("name", "size", "itemsize", "n", "count"),
    [
        ("all_reduce", 8, 4, 4, 2),  # whole buffer: no per-rank rounding
        ("all_reduce", 10, 4, 4, 2),  # rounded down to whole elements
        ("all_reduce", 1, 4, 4, 1),  # never below one element
        ("all_gather", 8, 4, 4, 4),  # one element per rank at least
        ("all_gather", 1024, 4, 4, 256),
        ("all_gather", 1000, 4, 4, 240),  # 62 per rank -> 60 (16-byte chunks)
        ("reduce_scatter", 3 * 2**20, 2, 8, 3 * 2**19),
        ("all_to_all", 100, 1, 8, 8 * 12),  # 12 per rank: below 16 B, not aligned
        ("all_to_all", 1000, 1, 8, 8 * 112),  # 125 -> 112 (16 B)
    ],
)
def test_size_rounds_like_nccl_tests(
    name: str, size: int, itemsize: int, n: int, count: int
) -> None:
    assert REGISTRY[name].count(size, itemsize, n) == count


def test_every_rank_expects_exactly_its_output_buffer() -> None:
    for collective in (c for c in REGISTRY.values() if c.traits.fixed_count is None):
        for n in (1, 2, 3, 4, 8) if collective.traits.ranks is None else (collective.traits.ranks,):
            count = collective.count(4096, 4, n)
            for rank in range(n):
                layout = collective.layout(count, n, rank)
                out = layout.recv or layout.send
                covered = sorted((s.offset, s.offset + s.length) for s in layout.expected)
                if covered:  # contiguous and exactly the output buffer
                    assert covered[0][0] == 0
                    assert covered[-1][1] == out
                    assert all(a[1] == b[0] for a, b in pairwise(covered))
                for span in (*layout.inputs, *layout.expected):
                    assert span.source == SUM or 0 <= span.source < n
                    assert span.index + span.length <= count


def test_reductions_declare_that_they_sum() -> None:
    for collective in REGISTRY.values():
        sums = any(s.source == SUM for s in collective.layout(8, 2, 0).expected)
        assert sums == collective.reduces, collective.name


def test_in_place_follows_the_layout() -> None:
    in_place = {name for name, c in REGISTRY.items() if c.in_place}
    assert in_place == {
        "all_reduce",
        "reduce",
        "broadcast",
        "reduce_scatter+all_gather",
        "reduce+broadcast",
        "all_reduce:symm_two_shot",
    }


def test_composites_report_the_operation_they_replace() -> None:
    assert REGISTRY["reduce_scatter+all_gather"].op == "all_reduce"
    assert REGISTRY["reduce+broadcast"].op == "all_reduce"


def test_resolve_all_and_unknown() -> None:
    core = [name for name, c in REGISTRY.items() if c.core]
    assert [c.name for c in resolve(["all"])] == core
    assert core[:9] == [
        "all_reduce",
        "reduce",
        "broadcast",
        "all_gather",
        "gather",
        "reduce_scatter",
        "scatter",
        "all_to_all",
        "send_recv",
    ]
    assert [c.name for c in resolve(["p2p*"])] == ["p2p", "p2p:reverse", "p2p:bi"]
    assert [c.algorithm for c in resolve(["all_to_all*"])] == [
        "native",
        "pairwise",
        "ring",
        "mesh2d",
        "hierarchical",
    ]
    assert {c.name for c in resolve(["*"])} == set(REGISTRY)
    assert [c.name for c in resolve(["gather", "all_reduce"])] == ["gather", "all_reduce"]
    with pytest.raises(BadInput, match="unknown operation 'allreduce'"):
        resolve(["allreduce"])


@pytest.mark.parametrize(
    ("name", "ring", "tree", "nvls_ll"),
    [
        ("all_reduce", True, True, False),  # NVLS is Simple only
        ("reduce_scatter+all_gather", True, False, False),  # Tree implements AllReduce alone
        ("reduce+broadcast", True, False, False),  # Broadcast and Reduce: Ring alone
        ("all_gather", True, False, False),
        ("all_to_all", True, True, True),  # point-to-point: nothing pinned touches it
        ("send_recv", True, True, True),
    ],
)
def test_a_pinned_nccl_algo_or_proto_runs_only_the_kernels_it_implements(
    name: str, ring: bool, tree: bool, nvls_ll: bool
) -> None:
    collective = REGISTRY[name]
    for env, runs in (
        ((("NCCL_ALGO", "Ring"),), ring),
        ((("NCCL_ALGO", "tree"),), tree),
        ((("NCCL_ALGO", "NVLS"), ("NCCL_PROTO", "LL")), nvls_ll),
    ):
        reason = collective.why_not_on(Shape(4, (0, 0, 0, 0), "nccl", True, env))
        assert (reason is None) == runs, (env, reason)
    assert collective.why_not_on(Shape(4, (0, 0, 0, 0), "nccl", True)) is None
    # gloo reads no NCCL variable: nothing there to refuse
    gloo = Shape(4, (0, 0, 0, 0), "gloo", False, (("NCCL_ALGO", "Tree"),))
    assert collective.why_not_on(gloo) is None


def test_the_nccl_engine_has_every_core_operation_and_the_pairs_but_no_variant() -> None:
    direct = {c.name for c in REGISTRY.values() if c.runs_on(Engine.NCCL)}
    # copies call no NCCL: nothing to call directly
    core = {c.name for c in REGISTRY.values() if c.core and c.traits.per_gpu is None}
    assert direct == core | {"p2p", "p2p:reverse", "p2p:bi"}


@pytest.mark.usefixtures("isolated_registry")
@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("def broken(:\n", "SyntaxError: "),
        ("raise RuntimeError('no GPU\\nhere')\n", "RuntimeError: no GPU here)"),
        (
            "import no_such_dependency\n",
            "ModuleNotFoundError: No module named 'no_such_dependency')",
        ),
        (
            "from dataclasses import replace\n"
            "from sweeper.ops.registry import REGISTRY, register\n"
            "register(replace(REGISTRY['all_gather'], name='all_reduce'))\n",
            "ValueError: an operation named 'all_reduce' is already registered)",
        ),
    ],
)
def test_a_plugin_that_fails_as_it_is_imported_is_bad_input_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, why: str
) -> None:
    (tmp_path / "broken_plugin.py").write_text(source)
    monkeypatch.syspath_prepend(tmp_path)
    with pytest.raises(BadInput) as info:
        load_plugins(["broken_plugin"])
    message = str(info.value)
    assert message.startswith(f"--plugins broken_plugin: cannot import it ({why}")
    assert "\n" not in message
