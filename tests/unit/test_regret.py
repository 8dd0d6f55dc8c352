"""NCCL's default against the alternatives measured beside it (sweeper/analysis/regret.py), on
the recorded grid of tests/data/results/h200-x4-channels-2026-11-27: two runs with NCCL's 24
channels and one with NCCL_MAX_NCHANNELS=2, 4 H200."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

import sweeper
from sweeper.analysis.regret import _judged, _Variant, configurations, regret, shown

DATA = Path(__file__).parents[1] / "data" / "results"
GRID = DATA / "h200-x4-channels-2026-11-27"
NARROW_RUN = "20261127T180732Z-1ebc7d"  # NCCL_MAX_NCHANNELS=2
SHARED = [("NCCL_NVLS_ENABLE", "0"), ("NCCL_VERSION", "2.28.3-1")]


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    return sweeper.load(GRID)


def swapped(rows: pd.DataFrame) -> pd.DataFrame:
    """The grid with its roles swapped: the narrowed run as the baseline, the two runs of
    NCCL's own 24 channels as the variant NCCL_MAX_NCHANNELS=24 (what their communicators
    had, `nccl_channels` 24, so the setting changes nothing they measured). The default's
    regret is then the loss the narrowed run really measured."""
    narrow = rows["run_id"] == NARROW_RUN
    env = [SHARED if n else [("NCCL_MAX_NCHANNELS", "24"), *SHARED] for n in narrow]
    return rows.assign(nccl_env=env)


def _at(table: pd.DataFrame, op: str, size: int) -> pd.Series:
    (index,) = table.index[(table["op"] == op) & (table["size_bytes"] == size)]
    return table.loc[index]


def test_configurations_are_named_by_what_they_set_beyond_the_shared_environment(
    grid: pd.DataFrame,
) -> None:
    found = [(c.run_id, c.name, c.default) for c in configurations(grid)]
    assert found == [
        ("20261127T180604Z-ed73d6", "default", True),
        ("20261127T180646Z-283fdf", "default", False),  # the default again, not an alternative
        (NARROW_RUN, "NCCL_MAX_NCHANNELS=2", False),
    ]


def test_no_winner_is_named_where_the_default_is_fastest_or_loses_within_noise(
    grid: pd.DataFrame,
) -> None:
    table = regret(grid)
    assert len(table) == 77  # every op and size both configurations measured
    assert not table["clear"].any()
    assert set(table["best"]) == {"default"}
    # from 1 MiB the default is fastest: no regret
    large = table[table["size_bytes"] >= 2**20]
    assert (large["fastest"] == "default").all()
    assert (large["regret"] == 0).all()
    # send_recv at 8 B: two channels measured 19% faster, inside that size's noise
    tiny = _at(table, "send_recv", 8)
    assert tiny["fastest"] == "NCCL_MAX_NCHANNELS=2"
    assert tiny["regret"] == pytest.approx(0.1943, abs=1e-4)
    assert tiny["regret"] < tiny["noise"]
    assert shown(table).empty


def test_the_defaults_regret_is_its_measured_loss_and_a_winner_only_beyond_noise(
    grid: pd.DataFrame,
) -> None:
    table = regret(swapped(grid))
    big = _at(table, "all_reduce", 2**28)
    assert big["best"] == "NCCL_MAX_NCHANNELS=24"
    assert big["best_settings"] == "NCCL_MAX_NCHANNELS=24"
    # the median of the two 24-channel runs over the narrowed run's busbw
    runs = grid[(grid["op"] == "all_reduce") & (grid["size_bytes"] == 2**28)]
    narrow = runs[runs["run_id"] == NARROW_RUN]["busbw_gb_per_s"].iloc[0]
    wide = runs[runs["run_id"] != NARROW_RUN]["busbw_gb_per_s"].median()
    assert big["regret"] == pytest.approx(wide / narrow - 1)
    assert big["regret"] > big["noise"]
    # below 64 KiB no size of all_reduce is clear: the winner there is not named
    small = table[(table["op"] == "all_reduce") & (table["size_bytes"] < 2**16)]
    assert set(small["best"]) == {"default"}
    clear = shown(table)
    assert set(clear["op"]) == {"all_reduce", "all_gather", "send_recv"}
    assert clear["size_bytes"].min() == 2**16


def test_a_grid_of_one_run_meets_its_variants_groups_by_their_names(grid: pd.DataFrame) -> None:
    """The narrowed run as a variant of the first run (`--nccl-env` makes its group ids
    `<group>/<variant>`), the second run left out."""
    first, narrow = grid["run_id"] == "20261127T180604Z-ed73d6", grid["run_id"] == NARROW_RUN
    variant = grid[narrow].assign(
        run_id="20261127T180604Z-ed73d6",
        variant="channels2",
        group_id=[f"{g}/channels2" for g in grid[narrow]["group_id"]],
    )
    one_run = pd.concat([grid[first], variant], ignore_index=True)
    table = regret(one_run)
    assert len(table) == 77
    assert _at(table, "all_reduce", 2**28)["fastest"] == "default"


def test_a_run_of_nccls_defaults_alone_has_no_regret_to_judge() -> None:
    assert regret(sweeper.load(DATA / "h200-x4-default-2026-11-27")).empty


def _measured(busbw: float, energy: float, improved: bool = False) -> _Variant:
    return _Variant(busbw=busbw, energy=energy, improved=improved, noise=0.05)


def test_the_energy_optimal_variant_is_named_only_below_the_defaults_by_the_sizes_floor() -> None:
    settings = {"default": {}, "NCCL_ALGO=Tree": {"NCCL_ALGO": "Tree"}}
    # 1 GiB: a large size, floor 5%; the tree used 10% less energy per GB and is slower
    saving = {"default": _measured(300.0, 2.0), "NCCL_ALGO=Tree": _measured(280.0, 1.8)}
    judged = _judged(2**30, saving, settings)
    assert judged is not None
    assert judged[1] == "default"  # fastest
    assert judged[-2:] == ("NCCL_ALGO=Tree", 1.8)
    # 3% less is within the floor: the default stays named
    within = {"default": _measured(300.0, 2.0), "NCCL_ALGO=Tree": _measured(280.0, 1.94)}
    assert _judged(2**30, within, settings)[-2:] == ("default", 2.0)  # type: ignore[index]
    # no counter on the default: nothing to judge against
    unknown = {"default": _measured(300.0, math.nan), "NCCL_ALGO=Tree": _measured(280.0, 1.0)}
    assert _judged(2**30, unknown, settings)[-2] == "default"  # type: ignore[index]
