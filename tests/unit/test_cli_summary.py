"""The closing summary table of `sweeper run` reads at 80 columns: every number whole, none cut
to an ellipsis, its figures in three significant digits; the text columns fold instead."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sweeper.analysis.summary import OpSummary, figure
from sweeper.driver.console import summary_table
from sweeper.driver.observer import Finished

WIDE = OpSummary(
    tier="internode/net",
    world_size=1024,
    label="reduce_scatter+all_gather",
    launch="graph, eager",
    engine="torch, nccl",
    points=999,
    failed=12,
    skipped=345,
    peak_busbw_gb_per_s=987.65,
    peak_size_bytes=16 << 30,
    min_time_us=12345.6,
    min_time_size_bytes=8,
)
NONE = OpSummary(
    tier="cpu",
    world_size=2,
    label="all_reduce",
    launch="eager",
    engine="torch",
    points=27,
    failed=0,
    skipped=0,
    peak_busbw_gb_per_s=None,
    peak_size_bytes=None,
    min_time_us=None,
    min_time_size_bytes=None,
)


def test_no_number_is_cut_at_80_columns() -> None:
    run = Finished(run_id="20261122T013412Z-33627a", rows=(), elapsed_s=58.0, output=Path("r"))
    console = Console(width=80, record=True, color_system=None)
    console.print(summary_table(run, [WIDE, NONE]))
    shown = console.export_text()
    assert "…" not in shown
    assert max(len(line) for line in shown.splitlines()) <= 80
    words = shown.split()
    # three significant digits, whole from 100 up: 987.65 GB/s and 12345.6 us as 988, 12,346
    for number in ("1024", "999", "12", "345", "988", "16G", "12,346", "8B", "27"):
        assert number in words, number
    assert "peak busbw" in shown


def test_a_figure_reads_in_three_significant_digits_and_whole_from_100_up() -> None:
    """As the report's tables have them: where the consoles printed 987.65, 12345.6 or
    1.23e+03 (compare's .3g) and 0.51 (two decimals of a CPU run's GB/s)."""
    assert [figure(v) for v in (987.65, 12345.6, 1234.0, 0.51234, 45.25, -150.4)] == [
        "988",
        "12,346",
        "1,234",
        "0.512",
        "45.2",
        "-150",
    ]
    assert figure(None) == figure(float("nan")) == "-"
