"""Issue-5 measurements on real gloo ranks: all-to-all algorithms, MoE, the P2P matrix."""

from __future__ import annotations

from collections.abc import Callable
from itertools import permutations
from pathlib import Path

import pandas as pd
import pytest

from sweeper.driver.measurement import ResultRow
from sweeper.driver.sweep import run
from sweeper.planning.profile import build_spec
from sweeper.results.writer import columns

pytestmark = pytest.mark.usefixtures("ray_session")


class Rows:
    def started(self, run: object) -> None: ...

    def point(self, row: ResultRow) -> None: ...

    def finished(self, run: object) -> None: ...


def sweep(tmp_path: Path, **options: object) -> pd.DataFrame:
    """Exactness and coverage, not timing: two iterations a block. No HTML report: the tests
    read the rows (the report's tests build pages)."""
    options = {"iters": 2, "warmup": 1, "report": False, **options}
    finished = run(build_spec(results=tmp_path / "results", **options), Rows())
    return pd.DataFrame([columns(row) for row in finished.rows])


MOE = "tokens=64,hidden=8,top_k=2,experts=6,zipf=1.5"
# The operations of several tests on one world size, in one sweep: starting a sweep's rank
# actors takes longer than its points here, so the tests share them and each reads its own
# rows back. (World 4's all-to-alls stay apart from the point-to-point sweeps, whose
# --tiers cpu would run them on every pair of ranks as well.)
SHARED = {
    2: {"ops": "all_to_all*,all_reduce:symm*,h2d*,d2d", "min_size": "64", "max_size": "16K"},
    3: {"ops": "all_to_all*,moe*", "moe": MOE, "min_size": "64", "max_size": "16K"},
    4: {"ops": "all_to_all*", "min_size": "64", "max_size": "16K"},
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], pd.DataFrame]:
    """The rows of SHARED[world]'s sweep: run by the first test that asks, kept for the others
    (they only look)."""
    swept: dict[int, pd.DataFrame] = {}

    def rows(world: int) -> pd.DataFrame:
        if world not in swept:
            swept[world] = sweep(
                tmp_path_factory.mktemp(f"world{world}"), world=world, **SHARED[world]
            )
        return swept[world]

    return rows


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_all_to_all_algorithm_is_exact_or_says_why_not(
    shared: Callable[[int], pd.DataFrame], world: int
) -> None:
    df = shared(world)
    df = df[df["op"] == "all_to_all"]
    ran = df[df["status"] == "ok"]
    assert (ran["n_wrong"] == 0).all()
    expected = {"native", "pairwise", "ring"} | ({"mesh2d"} if world == 4 else set())
    assert set(ran["algorithm"]) == expected
    skipped = df[df["status"] == "skipped"].drop_duplicates("algorithm").set_index("algorithm")
    assert (
        skipped.loc["hierarchical", "error"]
        == "all ranks on one node: nothing to exchange between nodes"
    )
    if world != 4:
        assert "prime or below 4" in skipped.loc["mesh2d", "error"]
    assert set(df["status"]) <= {"ok", "skipped"}


def test_moe_dispatch_and_combine_are_exact_and_record_the_routing(
    shared: Callable[[int], pd.DataFrame],
) -> None:
    df = shared(3)
    df = df[df["algorithm"].str.startswith("moe")]  # one point each: its size is the layer's
    assert list(df["algorithm"]) == ["moe_dispatch", "moe_combine"]
    assert (df["status"] == "ok").all()
    assert (df["n_wrong"] == 0).all()
    params = dict(df["params"].iloc[0])
    assert params == {
        "tokens": "64",
        "hidden": "8",
        "top_k": "2",
        "experts": "6",
        "zipf": "1.5",
        "seed": "0",
    }
    assert df["size_bytes"].iloc[0] > 64 * 2 * 8 * 4 // 3  # the busiest rank sends above average


@pytest.mark.parametrize("concurrent", [False, True])
def test_p2p_matrix_has_every_ordered_pair(tmp_path: Path, concurrent: bool) -> None:
    df = sweep(
        tmp_path,
        world=4,
        tiers="cpu",
        ops="p2p*",
        min_size="8",
        max_size="32K",
        step_factor=8,
        concurrent=concurrent,
    )
    assert (df["status"] == "ok").all()
    assert (df["n_wrong"] == 0).all()
    assert (df["concurrent"] == concurrent).all()
    uni = df[df["algorithm"] == "uni"]
    for size in (8, 32 * 1024):
        pairs = set(
            zip(
                uni.loc[uni["size_bytes"] == size, "src_rank"],
                uni.loc[uni["size_bytes"] == size, "dst_rank"],
                strict=True,
            )
        )
        assert pairs == set(permutations(range(4), 2))
    bi = df[df["algorithm"] == "bi"]
    assert len(bi.drop_duplicates(["src_rank", "dst_rank"])) == 6
    matrix = uni[uni["size_bytes"] == 32 * 1024].pivot(
        index="src_rank", columns="dst_rank", values="busbw_gb_per_s"
    )
    assert matrix.shape == (4, 4)
    assert matrix.isna().sum().sum() == 4  # the diagonal only


def test_symmetric_memory_is_skipped_off_cuda_with_the_reason(
    shared: Callable[[int], pd.DataFrame],
) -> None:
    df = shared(2)
    df = df[df["algorithm"].str.startswith("symm")]
    assert set(df["algorithm"]) == {"symm_one_shot", "symm_two_shot"}
    assert set(df["status"]) == {"skipped"}
    assert set(df["error"]) == {"torch symmetric memory needs CUDA GPUs"}


def test_copies_asked_by_name_are_skipped_at_every_size_on_cpu_ranks_with_the_reason(
    shared: Callable[[int], pd.DataFrame],
) -> None:
    df = shared(2)
    df = df[df["kind"] == "copy"]
    assert set(df["status"]) == {"skipped"}
    assert set(df["tier"]) == {"cpu"}  # no groups of their own: CPU ranks have no GPU
    assert set(df["op"] + ":" + df["algorithm"]) == {
        "h2d:pinned",
        "h2d:pageable",
        "h2d+d2h:pinned",
        "h2d+d2h:pageable",
        "d2d:device",
    }
    assert set(df["size_bytes"]) == {64 * 2**k for k in range(9)}  # by name: every size
    assert set(df["error"]) == {
        "host<->device copies need a GPU: CPU ranks have no device memory",
        "device-local copies need a GPU: CPU ranks have no device memory",
    }
