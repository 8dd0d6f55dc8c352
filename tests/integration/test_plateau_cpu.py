"""A real gloo sweep leaves out the sizes above the busbw plateau it measured and still runs
its largest size; the plateau is the one `sizes.plateau_size` finds in its own rows. On the
session's Ray, over the modelled link of `tests.plugins.wire` (a sleep of size / 10 MB/s a
call): its busbw is flat from the smallest size up, where gloo's own moves by 10x between
neighbouring sizes on the busy 2-core box."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.planning.sizes import grid, plateau_size, thinned
from sweeper.wire import Status

pytestmark = pytest.mark.usefixtures("ray_session")

# 256K to 1.9M in steps of 1.25 (26 to 195 ms a call): 10 sizes, so that a plateau found in
# any of the first five windows of four leaves sizes out, whatever a hiccup of the box does
# to one window; each block a tenth of a second or one call (rank/timing.py)
SIZES = grid(256 * 2**10, 1953125, 1.25)
FLAT = (
    *("--ops", "wire", "--min-size", "256K", "--max-size", str(SIZES[-1])),
    *("--step-factor", "1.25", "--no-check", "--world", "2", "--no-report"),
)


@pytest.mark.usefixtures("isolated_registry")  # the plugin's operation leaves with the test
def test_a_sweep_skips_sizes_above_the_plateau_it_measured_and_reaches_the_largest(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    args = ["run", *FLAT, "--plugins", "tests.plugins.wire", "--results", str(results)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = sweeper.load(results).sort_values("size_bytes")
    assert len(SIZES) == 10
    assert (rows["status"] == Status.OK).all()  # a size left out has no row at all
    ran = [int(size) for size in rows["size_bytes"]]
    busbw = list(rows["busbw_gb_per_s"])
    planned = [4 * (size // 4) for size in SIZES]  # whole float32 elements
    # the run applied the rule to what it measured: where its busbw held within 2% over four
    # sizes early enough, it left sizes out (the unit tests hold that it does on a flat curve);
    # where the box's load moved every window, or the first flat one came late, it kept the
    # grid (a CI run found its plateau at the sixth size of ten: nothing left to leave out)
    assert ran == thinned(planned, plateau_size(ran, busbw)), busbw
    assert ran[-1] == planned[-1]
