"""The swept NCCL variables' tables, from the synthetic run's NCCL_ALGO and NCCL_PROTO
variants (tests/report_data.py): which variable each variant sets, and the best value per
judged size with its gain over NCCL's default."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis import knobs, preferred
from sweeper.results.load import load
from tests import report_data


def test_judged_sizes_are_sixteen_times_apart_and_end_at_the_largest() -> None:
    assert knobs.judged_sizes([8 * 2**k for k in range(8)]) == [8, 128, 1024]
    assert knobs.judged_sizes(report_data.SIZES)[:3] == [8, 128, 2048]
    assert knobs.judged_sizes([]) == []


def test_a_variants_variables_are_those_its_environment_adds_to_the_defaults(
    tmp_path: Path,
) -> None:
    report_data.write_run(tmp_path, "r1", knobs=True)
    found = knobs.swept(load(tmp_path))
    assert sorted(zip(found["variant"], found["variable"], found["value"], strict=True)) == [
        ("algo=Ring", "NCCL_ALGO", "Ring"),
        ("algo=Tree", "NCCL_ALGO", "Tree"),
        ("proto=LL", "NCCL_PROTO", "LL"),
        ("proto=Simple", "NCCL_PROTO", "Simple"),
    ]
    assert (found["context"] == "").all()  # one variable swept at a time


def test_the_best_value_per_size_and_its_gain_follow_the_models(tmp_path: Path) -> None:
    report_data.write_run(tmp_path, "r1", knobs=True)
    rows = preferred(load(tmp_path))
    rows = rows[rows["status"] == "ok"]
    curves = knobs.lines(rows, knobs.swept(rows), "NCCL_PROTO")
    all_reduce = curves[curves["operation"] == "all_reduce"]
    assert set(all_reduce["line"]) == {"default", "LL", "Simple"}
    table = knobs.best_values(all_reduce).set_index("size_bytes")
    assert tuple(table.reset_index().columns) == knobs.TABLE_COLUMNS
    # LL's 20 us start wins the smallest size; Simple's 250 GB/s the largest
    assert table.loc[8, "best"] == "LL"
    assert table.loc[8, "gain"] == pytest.approx((35 + 8 / 240e3) / (20 + 8 / 60e3))
    largest = report_data.SIZES[-1]
    assert table.loc[largest, "best"] == "Simple"
    expected = (35 + largest / 240e3) / (40 + largest / 250e3)
    assert table.loc[largest, "gain"] == pytest.approx(expected)


def _variant_rows(envs: dict[str, dict[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "variant": list(envs),
            "group_id": [g if g == "default" else f"default/{g}" for g in envs],
            "nccl_env": [sorted(env.items()) for env in envs.values()],
        }
    )


def test_variables_set_together_to_one_value_are_one_knob() -> None:
    both = ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")
    tied = _variant_rows({"default": {}} | {f"n={n}": dict.fromkeys(both, n) for n in ("1", "32")})
    found = knobs.swept(tied)
    assert list(zip(found["variable"], found["value"], found["context"], strict=True)) == [
        ("NCCL_MAX_NCHANNELS+NCCL_MIN_NCHANNELS", "1", ""),  # in the rows' (sorted) order
        ("NCCL_MAX_NCHANNELS+NCCL_MIN_NCHANNELS", "32", ""),
    ]
    # a cartesian grid sets them apart somewhere: two knobs, each with the other as context
    grid = _variant_rows(
        {
            "default": {},
            "a": {"NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4"},
            "b": {"NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "4"},
        }
    )
    found = knobs.swept(grid)
    assert set(found["variable"]) == set(both)
    assert set(found.loc[found["variant"] == "b", "context"]) == {
        "NCCL_MAX_NCHANNELS=4",
        "NCCL_MIN_NCHANNELS=1",
    }
