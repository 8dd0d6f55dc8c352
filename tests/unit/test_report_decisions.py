"""The report's regret, energy and start-up sections (sweeper/report/sections/decisions.py),
from the recorded 4-H200 channels grid made one run's grid: the narrowed run as the variant
`channels2` of the first run, whose own rows set NCCL_MAX_NCHANNELS=24 (their communicators'
count, so it changes nothing they measured)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import sweeper
from sweeper.report import build
from sweeper.report.blocks import Figure, Table, Text
from sweeper.report.sections import decisions
from sweeper.report.view import RunView
from tests.unit.test_regret import GRID, NARROW_RUN, SHARED
from tests.unit.test_tune import write

FIRST = "20261127T180604Z-ed73d6"
# An H200 as the recorded healthy one reads under load (tests/data/telemetry/h200-healthy.json)
WATTS = 524.0


def one_run(rows: pd.DataFrame) -> pd.DataFrame:
    first, narrow = rows[rows["run_id"] == FIRST], rows[rows["run_id"] == NARROW_RUN]
    variant = narrow.assign(
        run_id=FIRST,
        variant="channels2",
        group_id=[f"{g}/channels2" for g in narrow["group_id"]],
        nccl_env=[SHARED] * len(narrow),
    )
    wide = first.assign(nccl_env=[[("NCCL_MAX_NCHANNELS", "24"), *SHARED]] * len(first))
    return pd.concat([wide, variant], ignore_index=True)


def with_figures(rows: pd.DataFrame) -> pd.DataFrame:
    """Start-up seconds per group and engine, and energy as four GPUs at WATTS over each
    row's blocks would use (time_us x iterations x blocks)."""
    blocks = rows["time_us_blocks"].map(len)
    seconds = rows["time_us"] * 1e-6 * rows["iters"] * blocks
    moved_gb = rows["size_bytes"] * rows["iters"] * blocks / 1e9
    energy_j = 4 * WATTS * seconds
    start = [1.5 if v == "channels2" else 0.75 for v in rows["variant"]]
    # NCCL's own split as the recorded 4-H200 log printed it (nccl_logs/h200-x4-2026-11-27)
    split = [("total", 0.73), ("kernels", 0.53), ("alloc", 0.09), ("bootstrap", 0.03)]
    return rows.assign(
        comm_start_s=start,
        energy_j=energy_j,
        energy_j_per_gb=energy_j / moved_gb,
        nccl_init_s=[split] * len(rows),
    )


@pytest.fixture(scope="module")
def view() -> RunView:
    return RunView.of(with_figures(one_run(sweeper.load(GRID))), None)


def test_the_regret_section_draws_a_curve_per_shape_and_lists_the_clear_sizes(
    view: RunView,
) -> None:
    section = decisions.regret(view)
    assert section is not None
    figure, table = section.blocks
    assert isinstance(figure, Figure)
    assert len(figure.figure.data) == 3  # all_reduce, all_gather, send_recv on 4 GPUs
    assert isinstance(table, Table)
    sizes = {row[1].text for row in table.rows}
    assert "64K" in sizes
    assert "32K" not in sizes  # below 64 KiB no winner beyond noise
    assert {row[2].text for row in table.rows} == {"NCCL_MAX_NCHANNELS=24"}


def test_a_run_whose_default_won_says_no_size_lost(view: RunView) -> None:
    rows = view.rows.assign(
        nccl_env=[
            [("NCCL_MAX_NCHANNELS", "2"), *SHARED] if v == "channels2" else SHARED
            for v in view.rows["variant"]
        ]
    )
    section = decisions.regret(RunView.of(rows, None))
    assert section is not None
    assert isinstance(section.blocks[1], Text)
    assert "No size where NCCL's default is clearly over 5% slower" in section.blocks[1].text


def test_energy_is_drawn_beside_busbw_and_start_up_against_group_size(view: RunView) -> None:
    energy = decisions.energy(view)
    assert energy is not None
    (figure,) = energy.blocks
    assert isinstance(figure, Figure)
    assert len(figure.figure.data) == 2 * 3 * 2  # busbw and J/GB, each shape and variant
    start = decisions.start_up(view)
    assert start is not None
    table = start.blocks[1]
    assert isinstance(table, Table)
    assert [row[4].text for row in table.rows] == ["1.5", "0.75"]  # slowest first, 3 digits
    assert table.rows[0][5].text == "kernels 0.53, alloc 0.09, bootstrap 0.03"


def test_rows_without_the_figures_leave_the_sections_out() -> None:
    bare = RunView.of(sweeper.load(GRID.parent / "h200-x4-default-2026-11-27"), None)
    assert decisions.regret(bare) is None
    assert decisions.energy(bare) is None
    assert decisions.start_up(bare) is None


def test_the_page_carries_the_three_sections(tmp_path: Path, view: RunView) -> None:
    results = write(view.rows, tmp_path / "results")
    page = build.write(results, FIRST, tmp_path / "page.html").read_text()
    found = re.findall(r'<section id="([^"]+)">', page)
    assert {"regret", "energy", "start-up"} <= set(found)


def test_a_size_whose_least_energy_configuration_is_not_its_best_is_listed(
    view: RunView,
) -> None:
    """The narrowed variant's GPUs drawing a tenth of the power: five times slower at the
    largest sizes, it uses half the energy per GB there, so the default is named least-energy
    beside the 24 channels that win on time."""
    rows = view.rows
    tenth = (rows["variant"] == "channels2").map({True: 0.1, False: 1.0})
    frugal = rows.assign(
        energy_j=rows["energy_j"] * tenth, energy_j_per_gb=rows["energy_j_per_gb"] * tenth
    )
    section = decisions.energy(RunView.of(frugal, None))
    assert section is not None
    table = section.blocks[1]
    assert isinstance(table, Table)
    largest = [row for row in table.rows if row[1].text == "256M"]
    assert [(row[2].text, row[3].text) for row in largest] == [
        ("NCCL_MAX_NCHANNELS=24", "default")
    ] * 3  # all_reduce, all_gather, send_recv
    assert len(decisions.energy(view).blocks) == 1  # same power: the best is least-energy too
