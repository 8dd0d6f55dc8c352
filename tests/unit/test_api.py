"""The Python API: `sweeper.run` and `sweeper.plan` take `sweeper run`'s and `sweeper plan`'s
options as keywords, and `import sweeper` stays cheap. (`run` on Ray:
tests/integration/test_api_cpu.py.)"""

from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import typer.main

import sweeper
from sweeper.api import PlanKeywords, RunKeywords
from sweeper.cli import app
from sweeper.commands.plan_estimate import Plan
from sweeper.errors import BadInput
from sweeper.planning.spec import SweepSpec
from sweeper.wire import Backend

ROOT = Path(__file__).parents[2]
DGX = ROOT / "tests" / "data" / "topologies" / "dgx-h100-nvswitch.json"
WEEKLY = ROOT / "jobs" / "weekly.yaml"


def test_the_api_is_exported() -> None:
    assert {"run", "plan", "Run", "Plan", "load"} <= set(sweeper.__all__)
    assert all(getattr(sweeper, name) is not None for name in sweeper.__all__)
    assert sweeper.Plan is Plan


def test_help_of_the_package_lists_each_name_of_the_api_in_a_line_of_its_own() -> None:
    shown = pydoc.render_doc(sweeper, renderer=pydoc.plaintext)
    lines = [line.strip() for line in shown.splitlines()]
    for name in ("run(", "plan(", "load(", "Run ", "Plan "):
        assert [line for line in lines if line.startswith(name)], name
    # the lazy names are members pydoc documents, not only words of the docstring
    assert "class Run(" in shown
    assert "class Plan(" in shown


@pytest.mark.parametrize("function", ["run", "plan"])
def test_help_of_run_and_plan_shows_a_plain_signature_and_each_option_described_as_in_h(
    function: str,
) -> None:
    shown = pydoc.render_doc(getattr(sweeper, function), renderer=pydoc.plaintext)
    signature = shown.splitlines()[2]
    assert "Validator" not in shown
    assert "Annotated" not in shown
    assert "PosixPath" not in signature
    assert len(signature) < 1200  # it was 5,343 characters of pydantic's annotations
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    helps = {"plugins" if p.name == "plugin" else p.name: p.help for p in command.params}
    keywords = {"run": RunKeywords, "plan": PlanKeywords}[function].model_fields
    for name, field in keywords.items():
        assert f"\n        {name}=" in shown, name
        assert f"\n            {field.description}\n" in shown, name
        if field == SweepSpec.model_fields.get(name):  # a sweep option: -h says the same
            assert helps[name].replace("\\[", "[").startswith(str(field.description)), name
    assert set(SweepSpec.model_fields) <= set(keywords)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        sweeper.no_such_thing  # noqa: B018


def test_run_takes_every_sweep_option_a_profile_and_progress_as_keywords() -> None:
    parameters = inspect.signature(sweeper.run).parameters
    assert set(parameters) == {*SweepSpec.model_fields, "profile", "progress"}
    assert all(p.kind is p.KEYWORD_ONLY for p in parameters.values())
    assert parameters["max_size"].default == "auto"


def test_plan_takes_the_plan_commands_options_too() -> None:
    parameters = inspect.signature(sweeper.plan).parameters
    assert set(parameters) == {
        *SweepSpec.model_fields,
        *("profile", "topology", "calibrate", "results"),
    }


def test_importing_sweeper_loads_neither_torch_nor_ray_nor_pandas_and_plan_needs_no_ray() -> None:
    script = (
        "import sys, sweeper\n"
        "heavy = ('torch', 'ray', 'pandas', 'pydantic')\n"
        "assert not [m for m in heavy if m in sys.modules], sys.modules.keys()\n"
        f"sweeper.plan(topology={str(DGX)!r}, nodes=2, max_size='1M')\n"
        "assert not [m for m in ('torch', 'ray') if m in sys.modules]\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT)


def test_plan_on_a_recorded_topology_gives_its_schedule() -> None:
    found = sweeper.plan(topology=DGX, nodes=2, ops="all_reduce", max_size="64K")
    assert isinstance(found, Plan)
    assert found.placement.backend == Backend.NCCL
    assert len(found.placement.nodes) == 2
    assert found.spec.ops == ("all_reduce",)
    assert found.schedule.n_groups == 1  # the world of 16 GPUs
    assert found.estimate.points == 14  # 8 B to 64 KiB, doubling
    assert found.fitted_from is None


def test_keywords_override_a_profiles_options() -> None:
    found = sweeper.plan(profile=str(WEEKLY), topology=DGX, nodes=2, max_size="1G")
    assert found.spec.max_size == 2**30
    assert found.spec.tiers != ("world",)  # the profile's


def test_a_bad_keyword_value_is_bad_input_before_anything_runs() -> None:
    with pytest.raises(BadInput, match="--max-size"):
        sweeper.plan(topology=DGX, max_size="lots")
    with pytest.raises(BadInput, match="unknown option 'wrld'"):
        sweeper.run(wrld=2)  # type: ignore[call-arg]


def test_a_scan_profile_is_bad_input_to_a_sweep() -> None:
    nightly = WEEKLY.parent / "nightly.yaml"  # the fleet's nightly scan
    with pytest.raises(BadInput, match="has a scan: section"):
        sweeper.plan(profile=str(nightly), topology=DGX)
    with pytest.raises(BadInput, match="has a scan: section"):
        sweeper.run(profile=str(nightly))


def test_a_runs_repr_is_one_short_line_not_its_rows() -> None:
    rows = pd.DataFrame({"op": ["all_reduce"] * 500, "busbw_gb_per_s": range(500)})
    done = sweeper.Run(run_id="20261202T061723Z-f43af4", rows=rows, report=None)
    assert repr(done) == (
        "Run(run_id='20261202T061723Z-f43af4', rows=<500 rows x 2 columns>, report=None)"
    )


def test_load_selects_a_run_and_columns(tmp_path: Path) -> None:
    from tests import report_data

    results = tmp_path / "results"
    report_data.write_run(results, "base")
    report_data.write_run(results, "new")
    every = sweeper.load(results)
    assert set(every["run_id"]) == {"base", "new"}
    one = sweeper.load(results, run_id="base", columns=["run_id", "op", "busbw_gb_per_s"])
    assert list(one.columns) == ["run_id", "op", "busbw_gb_per_s"]
    assert set(one["run_id"]) == {"base"}
    assert len(one) == (every["run_id"] == "base").sum()
    latest = sweeper.load(results, run_id="latest", columns=["run_id"])
    assert set(latest["run_id"]) == {every["run_id"].max()}  # the newest, as the CLI says it
    assert set(sweeper.load(results, run_id=["base", "new"], columns="op")) == {"op"}
    with pytest.raises(BadInput, match="no run 'friday'"):
        sweeper.load(results, run_id="friday")
    with pytest.raises(BadInput, match="no column 'busbw'"):
        sweeper.load(results, columns=["op", "busbw"])


def test_load_keeps_the_rows_pyarrows_filters_match(tmp_path: Path) -> None:
    """An expression or the tuples `pyarrow.parquet.read_table` takes, on a column not read
    too; a filter Arrow cannot judge is one BadInput."""
    import pyarrow.dataset as ds

    from tests import report_data

    results = tmp_path / "results"
    report_data.write_run(results, "base")
    report_data.write_run(results, "new")
    every = sweeper.load(results)
    wanted = (every["run_id"] == "new") & (every["op"] == "all_reduce")
    tuples = sweeper.load(
        results, columns=["size_bytes"], filters=[("run_id", "=", "new"), ("op", "=", "all_reduce")]
    )
    assert list(tuples.columns) == ["size_bytes"]
    assert tuples["size_bytes"].tolist() == every.loc[wanted, "size_bytes"].tolist()
    expression = sweeper.load(results, run_id="new", filters=ds.field("op") == "all_reduce")
    assert len(expression) == wanted.sum() > 0
    assert set(expression["op"]) == {"all_reduce"}
    with pytest.raises(BadInput, match="filters"):
        sweeper.load(results, filters=ds.field("busbw") > 1)
