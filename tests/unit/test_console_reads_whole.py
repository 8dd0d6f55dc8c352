"""A console a user reads whole: what could not run on this machine is one line at the end,
not a line per point and a row of dashes in the summary; the summary fits 80 columns with
every operation's name whole; counts agree with their nouns; a refused value is said in
sweeper's words, not pydantic's; and a machine without NVML says why in words. The rows are
a real CPU run's (tests/data/results/main-2026-11-25: h2d skipped on CPU ranks); no Ray."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.progress import Progress
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.driver.console import HumanConsole, _intro, _Remaining
from sweeper.driver.observer import Finished, Started
from sweeper.planning.profile import plainly
from sweeper.topology import read_nvml
from sweeper.wire import Backend

ROOT = Path(__file__).parents[2]
CPU_RUN = ROOT / "tests" / "data" / "results" / "main-2026-11-25"
# what a user had to learn to ignore, each as it was printed
IGNORED = ("skipped:", "Token authentication", "Input should", "is not a valid", "NVMLError")


def _rows() -> list[SimpleNamespace]:
    """The recorded run's rows with a row's attributes, as the console reads them."""
    frame = sweeper.load(CPU_RUN)
    frame = frame.astype(object).where(frame.notna(), None)
    return [SimpleNamespace(**row) for row in frame.to_dict("records")]


def _console_of(rows: list[SimpleNamespace]) -> str:
    out = io.StringIO()
    console = HumanConsole(out)
    console.console.width = 80  # a terminal's
    for row in rows:
        console.point(row)  # type: ignore[arg-type]
    out.seek(0)
    out.truncate()  # a terminal shows the points in the progress bar: the end is what stays
    done = Finished(run_id=rows[0].run_id, rows=tuple(rows), elapsed_s=70.0, output=CPU_RUN)  # type: ignore[arg-type]
    console.finished(done)
    return out.getvalue()


def test_what_cannot_run_here_is_one_line_and_no_row_of_the_summary() -> None:
    shown = _console_of(_rows())
    lines = shown.splitlines()
    assert not [line for line in lines for ignored in IGNORED if ignored in line]
    said = [line for line in lines if "not run here" in line]
    assert len(said) == 1
    assert (
        " ".join(shown.split()).count(
            "not run here: h2d - host<->device copies need a GPU: CPU ranks have no device memory"
        )
        == 1
    )
    table = lines[lines.index(said[0]) + 2 :]
    assert not [line for line in table if line.split()[:1] == ["cpu"] and "h2d" in line]
    ending = lines[: [line.startswith("results: ") for line in lines].index(True)]
    assert max(len(line) for line in ending) <= 80  # but the results' path, as long as it is
    for name in ("all_reduce", "all_gather", "send_recv"):  # whole, not folded in pieces
        assert [line for line in table if line.split()[:1] == [name]], name
    # the tier, ranks, engine and launch mode every row shares are the title's, not columns
    assert "20261125T063903Z-c4526e: 32 points in 70 s (cpu x2, torch, eager)" in shown
    assert table[2].split() == ["operation", "points", "GB/s", "at", "us", "at"]


def test_a_point_line_is_printed_for_each_point_that_ran_and_none_for_a_skipped_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # a terminal wide enough for a point's line
    rows = _rows()
    out = io.StringIO()
    console = HumanConsole(out)
    for row in rows:
        console.point(row)  # type: ignore[arg-type]
    printed = out.getvalue().splitlines()
    assert len(printed) == sum(row.status != "skipped" for row in rows)
    assert not [line for line in printed if "h2d" in line]


def test_a_runs_point_lines_fit_80_columns_where_stdout_is_no_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A log or a pipe got lines of about 120 columns (the console was made 140 wide there):
    at 80 each point's figures are a line, beneath its group and operation's name where the
    point before had another; its figures are those of the wide line."""
    monkeypatch.setenv("COLUMNS", "80")  # the terminal's width, 80 where none is known
    rows = [row for row in _rows() if row.status != "skipped"]
    out = io.StringIO()
    console = HumanConsole(out)
    for row in rows:
        console.point(row)  # type: ignore[arg-type]
    printed = out.getvalue().splitlines()
    assert max(len(line) for line in printed) <= 80
    names = [line for line in printed if not line.startswith(" ")]
    assert len(printed) - len(names) == len(rows)  # a line of figures a point
    assert len(names) == len({(r.group_id, r.op, r.algorithm) for r in rows})  # said once
    assert names[0] == f"{rows[0].group_id} {rows[0].op}"
    figures = printed[1].split()
    assert figures[:3] == [rows[0].dtype, str(rows[0].size_bytes), f"{rows[0].time_us:.2f}"]
    assert figures[-3:] == [str(rows[0].n_wrong), rows[0].engine, rows[0].launch]


def test_the_runs_console_is_80_columns_wide_where_no_stream_is_a_terminal() -> None:
    """Its width follows a terminal (rich's: any standard stream's, or $COLUMNS), else 80."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    shown = subprocess.run(
        [sys.executable, "-c", _WIDTH_OF],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout == "80\n"


_WIDTH_OF = """
import io
from sweeper.driver.console import HumanConsole
print(HumanConsole(io.StringIO()).console.width)
"""


def test_the_time_left_is_the_whole_runs_pace_and_counts_down_while_a_point_runs() -> None:
    now = [0.0]
    column = _Remaining()
    progress = Progress(column, get_time=lambda: now[0], auto_refresh=False)
    task = progress.add_task("sweeping", total=10)

    def left() -> str:
        return str(column.render(progress.tasks[0]))

    assert left() == "-:--:--"
    now[0] = 1.0
    progress.update(task, advance=1)
    assert left() == "0:00:09"  # 1 s a point so far, 9 to go
    now[0] = 5.0  # a large point running: rich's own column's estimate would grow, not fall
    assert left() == "0:00:05"
    now[0] = 6.0
    progress.update(task, advance=1)
    assert left() == "0:00:24"  # 3 s a point over the whole run, 8 to go
    now[0] = 7.0
    progress.update(task, advance=1)  # a quick one: the pace moves, the last seconds' do not
    assert left() == "0:00:16"


def test_the_time_left_starts_at_the_runs_estimate_and_moves_to_the_pace_as_points_are_done() -> (
    None
):
    """10 points estimated at 100 s, the first two quick (1 s each): by the pace alone 8 s
    would be left, a figure that then climbs as the large sizes come; weighed by the share
    done, the estimate holds most of it."""
    now = [0.0]
    column = _Remaining(estimated_s=100.0)
    progress = Progress(column, get_time=lambda: now[0], auto_refresh=False)
    task = progress.add_task("sweeping", total=10)

    def left() -> str:
        return str(column.render(progress.tasks[0]))

    now[0] = 0.5
    assert left() == "0:01:40"  # no point done: the estimate (its time gone counted next)
    now[0] = 2.0
    progress.update(task, advance=2)
    assert left() == "0:01:20"  # 0.8 x (100 - 2) + 0.2 x 8
    now[0] = 92.0
    progress.update(task, advance=7)
    assert left() == "0:00:10"  # 0.1 x 8 + 0.9 x (92 / 9 x 1)


def test_one_operation_is_said_in_the_singular() -> None:
    known = {f.name for f in fields(Started)}
    started = Started(
        **{
            k: v
            for k, v in {
                "run_id": "r",
                "backend": Backend.GLOO,
                "groups": (),
                "ops": ("all_reduce",),
                "dtypes": ("float32",),
                "sizes": (8, None),
                "n_points": 1,
                "output": Path("results"),
            }.items()
            if k in known
        }
    )
    assert "\n1 operation (all_reduce) x float32" in _intro(started)


@pytest.mark.parametrize(
    ("pydantic", "ours"),
    [
        ("Input should be greater than or equal to 1", "must be at least 1"),
        ("Input should be less than or equal to 1000000000", "must be at most 1000000000"),
        ("Input should be greater than 0", "must be more than 0"),
        (
            "Input should be a valid integer, unable to parse string as an integer",
            "must be a whole number",
        ),
        ("Input should be a finite number", "must be a finite number"),
        ("an empty path; name a directory", "an empty path; name a directory"),
    ],
)
def test_pydantics_wording_is_said_in_sweepers(pydantic: str, ours: str) -> None:
    assert plainly(pydantic) == ours


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["run", "--blocks", "0"], "sweeper: error: --blocks: must be at least 1"),
        (["history", "--last", "0"], "sweeper: error: --last: must be at least 1"),
        (["topo", "--world", "2.5"], "sweeper: error: --world: must be a whole number"),
        (
            ["scan", "--simulate", "--strategy", "foo"],
            "sweeper: error: --strategy foo: not a strategy (one of adaptive, ring, bisect, "
            "random:K, all)",
        ),
    ],
)
def test_a_refused_value_is_said_in_sweepers_words(args: list[str], line: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == line


def test_a_machine_without_nvml_says_why_in_words() -> None:
    record = read_nvml()
    if record["nvml"]:
        pytest.skip("NVML answers here")
    assert record["reason"] in (
        "no NVIDIA driver here (NVML's library is not installed)",
        "the NVIDIA driver is not loaded",
    )


class _Started(Exception):
    """Where the fake ray.init stops connect: what came before it is the test's."""


def test_the_embedded_ray_has_token_authentication_on_before_ray_would_warn_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ray.init turns token authentication on for a cluster it starts, with a warning that was
    every run's first line, unless RAY_AUTH_MODE says; sweeper turns it on itself first, as
    Ray would (its own switch), so Ray finds the mode said. No Ray starts here."""
    from sweeper.driver import connection

    turned: list[str] = []
    monkeypatch.delenv("RAY_AUTH_MODE")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # an embedded Ray: no cluster to join
    monkeypatch.setattr(connection, "_enable_token_auth", lambda: turned.append("token"))
    monkeypatch.setattr(connection.ray, "is_initialized", lambda: False)

    def init(**options: object) -> None:
        turned.append(f"init {options['address']}")
        raise _Started

    monkeypatch.setattr(connection.ray, "init", init)
    with pytest.raises(_Started):
        connection.connect(None, 2)
    assert turned == ["token", "init local"]
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the user's say: sweeper leaves it
    turned.clear()
    with pytest.raises(_Started):
        connection.connect(None, 2)
    assert turned == ["init local"]


def _started(ops: tuple[str, ...], top: int | None = None) -> Started:
    known = {f.name for f in fields(Started)}
    given = {
        "run_id": "20261127T202200Z-75fed7",
        "backend": Backend.GLOO,
        "groups": (),
        "ops": ops,
        "dtypes": ("float32",),
        "sizes": (8, top),
        "n_points": 269,
        "output": Path("results"),
        "estimated_s": 55.0,
    }
    return Started(**{k: v for k, v in given.items() if k in known})


def test_the_runs_first_lines_fit_80_columns_with_every_operation() -> None:
    """The default CPU run's first line named its 18 operations and wrapped over five lines
    at 80 columns: they are counted there (the closing table names each), a few named."""
    every = _intro(_started(tuple(f"op{i}" for i in range(18)))).splitlines()
    assert max(len(line) for line in every) <= 80
    assert every[0] == "sweeper 20261127T202200Z-75fed7: gloo on  -> results/"
    assert every[1:] == [
        "18 operations x float32, 8B to the largest that fits (auto)",
        "about 269 points in about 55.0 s",
    ]
    few = _intro(_started(("all_reduce", "all_gather"), 64 * 2**20)).splitlines()
    assert few[1:] == [
        "2 operations (all_reduce, all_gather) x float32, 8B to 64M",
        "about 269 points in about 55.0 s",
    ]
    one = _intro(_started(("all_reduce",), 64 * 2**20)).splitlines()
    assert one[1:] == [
        "1 operation (all_reduce) x float32, 8B to 64M: about 269 points in about 55.0 s"
    ]
