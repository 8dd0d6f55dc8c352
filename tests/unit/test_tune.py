"""`sweeper tune`: recorded 4-H200 runs (tests/data/results: the channels grid, the default
sweep) turned into NCCL's example tuner plugin's CSV and crossover JSON, held to golden files
(tests/data/tuning) and read back by the plugin's own rules (tests/tuner_csv.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.commands.tune_files import CSV_NAME, JSON_NAME, MAX_LINE
from sweeper.results.schema import COLUMNS, SCHEMA
from sweeper.results.writer import ResultWriter
from tests import tuner_csv
from tests.unit.test_regret import GRID, NARROW_RUN, swapped

DATA = Path(__file__).parents[1] / "data"
GOLDEN = DATA / "tuning"
# NCCL 2.28.9's own choices on 4 H200 (NVLink multicast off), as its TUNING lines said them
LOG = DATA / "nccl_logs" / "h200-x4-2026-11-27" / "p2p.log"
_TUNING = re.compile(r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)")
_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather"}
MAPS = [f.name for f in SCHEMA if pa.types.is_map(f.type)]  # pairs, as Arrow takes a map
RUNS = ("20261127T180604Z-ed73d6", "20261127T180646Z-283fdf", NARROW_RUN)


def nccl_choices() -> dict[tuple[str, int], tuple[str, str]]:
    """(op, size) -> (algorithm, protocol) from the recorded log's TUNING lines."""
    found = {}
    for line in LOG.read_text().splitlines():
        said = _TUNING.search(line)
        if said is not None and said.group(1) in _OPS:
            found[_OPS[said.group(1)], int(said.group(2))] = (said.group(3), said.group(4))
    return found


def told(rows: pd.DataFrame) -> pd.DataFrame:
    """The swapped grid, its 24-channel rows saying what NCCL chose where the recorded log
    says it for that operation and size (1 MiB and 64 MiB all_reduce, 2 MiB all_gather): what
    NCCL's view puts on every row; the other rows, as recorded, say nothing."""
    out = swapped(rows)
    choices = nccl_choices()
    wide = out["run_id"] != NARROW_RUN
    picked = [
        choices.get((str(o), int(s))) if w else None
        for o, s, w in zip(out["op"], out["size_bytes"], wide, strict=True)
    ]
    out["nccl_algo"] = pd.array([p[0] if p else None for p in picked], dtype="string")
    out["nccl_proto"] = pd.array([p[1] if p else None for p in picked], dtype="string")
    return out


def _cell(value: Any) -> Any:
    if isinstance(value, (np.ndarray, list, tuple)):
        return [_cell(v) for v in value]
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


def write(rows: pd.DataFrame, root: Path) -> Path:
    """Rows back into a results directory, run by run, through the writer."""
    for run_id, part in rows.groupby("run_id", sort=False):
        writer = ResultWriter(root, str(run_id), "2026-11-27")
        for record in part[list(COLUMNS)].to_dict("records"):
            row = {k: _cell(v) for k, v in record.items()}
            for pairs in MAPS:
                if row[pairs] is not None:
                    row[pairs] = [tuple(p) for p in row[pairs]]
            writer.append(row)
        writer.flush()
    return root


def tune(results: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    args = ["tune", *RUNS, "--results", str(results), "--out", str(out), *extra]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def grid() -> pd.DataFrame:
    return sweeper.load(GRID)


def test_the_recorded_grid_tunes_nothing_where_the_default_won_and_says_so(
    tmp_path: Path,
) -> None:
    code, out, err = tune(GRID, tmp_path / "tuning")
    assert code == 0, err
    csv = (tmp_path / "tuning" / CSV_NAME).read_text()
    assert csv == (GOLDEN / "h200-x4-channels.conf").read_text()
    assert tuner_csv.parse(csv) == []
    document = json.loads((tmp_path / "tuning" / JSON_NAME).read_text())
    assert document == json.loads((GOLDEN / "h200-x4-channels.json").read_text())
    assert out.splitlines()[0].endswith(": 0 line(s) for NCCL's example tuner plugin")


def test_a_clear_winner_becomes_lines_the_example_plugin_reads_as_written(
    tmp_path: Path, grid: pd.DataFrame
) -> None:
    results = write(told(grid), tmp_path / "results")
    code, out, err = tune(results, tmp_path / "tuning")
    assert code == 0, err
    text = (tmp_path / "tuning" / CSV_NAME).read_text()
    assert text == (GOLDEN / "h200-x4-channels-swapped.conf").read_text()
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE
    configs = tuner_csv.parse(text)
    assert [c.fell_back for c in configs] == [()] * len(configs)  # no name read as a fallback
    assert len(configs) == 3
    # a CUDA graph's 1 MiB all_reduce of 4 ranks on one node (regBuff 1): NCCL's own LL
    # choice, on the 24 channels the winner's communicators had
    at = tuner_csv.matching(configs, "allreduce", 2**20, nodes=1, ranks=4, reg_buff=1)
    assert at is not None
    assert (at.algorithm, at.protocol, at.channels, at.pipe_ops) == ("ring", "ll", 24, -1)
    big = tuner_csv.matching(configs, "allreduce", 2**26, nodes=1, ranks=4, reg_buff=1)
    assert big is not None
    assert (big.algorithm, big.protocol) == ("ring", "simple")
    # not the sizes no row said NCCL's choice at, nor 8 ranks, nor eager calls
    assert tuner_csv.matching(configs, "allreduce", 2**28, nodes=1, ranks=4, reg_buff=1) is None
    assert tuner_csv.matching(configs, "allreduce", 2**20, nodes=1, ranks=8, reg_buff=1) is None
    assert tuner_csv.matching(configs, "allreduce", 2**20, nodes=1, ranks=4, reg_buff=0) is None
    assert "not written: allreduce" in out
    document = json.loads((tmp_path / "tuning" / JSON_NAME).read_text())
    assert document == json.loads((GOLDEN / "h200-x4-channels-swapped.json").read_text())
    (all_reduce,) = document["nccl"]["all_reduce"]
    assert all_reduce["crossovers"] == [
        {"up_to_bytes": 2**15, "use": "default"},
        {"up_to_bytes": 2**28, "use": "NCCL_MAX_NCHANNELS=24"},
    ]


def test_a_run_of_several_algorithms_gives_their_crossovers_and_no_nccl_line(
    tmp_path: Path,
) -> None:
    """The default sweep of 4 H200 measured all_reduce three ways (NCCL's, and its two
    composites): NCCL's wins at every size all three measured."""
    results = DATA / "results" / "h200-x4-default-2026-11-27"
    args = ["tune", "latest", "--results", str(results), "--out", str(tmp_path / "t")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    document = json.loads((tmp_path / "t" / JSON_NAME).read_text())
    assert document == json.loads((GOLDEN / "h200-x4-default.json").read_text())
    assert document["algorithms"]["all_reduce"][0]["crossovers"] == [
        {"up_to_bytes": 16 * 2**30, "use": "all_reduce"}
    ]
    assert document["nccl"] == {}
    csv = (tmp_path / "t" / CSV_NAME).read_text()
    assert "# no NCCL setting was measured beside the default: no line" in csv
    assert tuner_csv.parse(csv) == []


def test_runs_with_nothing_to_choose_between_are_refused_in_one_line_and_nothing_written(
    tmp_path: Path,
) -> None:
    results = DATA / "results" / "h200-x2-identical-2026-11-27"
    result = CliRunner().invoke(
        app, ["tune", "latest", "--results", str(results), "--out", str(tmp_path / "t")]
    )
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1
    assert "nothing to choose between" in result.stderr
    assert not (tmp_path / "t").exists()


def test_the_plugins_reading_drops_and_falls_back_where_it_does() -> None:
    """The reader holds the plugin's rules, so a line sweeper wrote wrong would show."""
    text = (
        "# comment\n\n"
        "allreduce,0,65536,tree,simple,2,1,-1,-1,1\n"
        "allgather,,0,100,ring,ll,4,1,8\n"  # strtok: the empty field vanishes, 8 left
        "broadcast,0,100,ring\n"  # 4 fields: dropped
        "bogus,0,100,weird,ll9,1,1,1\n"
        f"reduce,0,100,ring,simple,-1,-1,-1,-1,-1,{'x' * 300}\n"  # cut at 255: the rest a line
    )
    configs = tuner_csv.parse(text)
    assert [c.collective for c in configs] == ["allreduce", "allgather", "allreduce", "reduce"]
    assert (configs[1].reg_buff, configs[1].pipe_ops) == (-1, -1)
    assert configs[2].fell_back == ("collective", "algorithm", "protocol")
    first = tuner_csv.matching(configs, "allreduce", 100, nodes=1, ranks=4, reg_buff=1)
    assert first is configs[0]
