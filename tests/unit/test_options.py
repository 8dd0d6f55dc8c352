"""The worked example of docs/ARCHITECTURE.md's "An option": one field added to its section of
sweeper/planning/spec.py reaches the command line (`sweeper run --help`, its parsing and its
refusals), the profile's JSON Schema, the Python API's keywords and the run record, with no
other file touched. The child process loads spec.py with the field added to its source, then
the rest of sweeper as it is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.planning.spec import SECTIONS, SweepSpec, TimingSection

SPEC = Path(__file__).parents[2] / "sweeper" / "planning" / "spec.py"
DGX = Path(__file__).parents[1] / "data" / "topologies" / "dgx-h100-nvswitch.json"
# The one declaration the example adds, in TimingSection, after its seed
ADDED = """
    rounds: Annotated[int, Cli("N")] = Field(
        1, ge=1, le=100, description="Rounds of every point (a worked example).", strict=True
    )
"""
ANCHOR = 'Seed of the deterministic input data.", strict=True\n    )\n'

CHILD = textwrap.dedent(
    """
    import importlib.util, inspect, json, sys
    from typer.testing import CliRunner

    source = open(sys.argv[1]).read().replace(sys.argv[2], sys.argv[2] + sys.argv[3], 1)
    spec = importlib.util.spec_from_loader("sweeper.planning.spec", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(compile(source, sys.argv[1], "exec"), module.__dict__)

    import sweeper
    from sweeper.cli import app
    from sweeper.planning.profile import Profile, build_spec
    from sweeper.planning.request import resolve
    from sweeper.results.records import RunRecord
    from sweeper.wire import Backend

    runner = CliRunner()
    shown = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).stdout
    refused = runner.invoke(app, ["run", "--rounds", "0"])
    plan = resolve(build_spec(rounds=3), Backend.GLOO)
    print(json.dumps({
        "help": [line for line in shown.splitlines() if "--rounds" in line],
        "refused": [refused.exit_code, refused.stderr],
        "schema": Profile.model_json_schema()["properties"].get("rounds"),
        "keyword": str(inspect.signature(sweeper.run).parameters.get("rounds")),
        "documented": "Rounds of every point" in (sweeper.run.__doc__ or ""),
        "record": RunRecord.of("r", plan.options, ()).options.get("rounds"),
    }))
    """
)


def _with_the_option_added() -> dict[str, object]:
    source = SPEC.read_text()
    assert source.count(ANCHOR) == 1  # where the example adds its field
    found = subprocess.run(
        [sys.executable, "-c", CHILD, str(SPEC), ANCHOR, ADDED],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(found.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_an_option_added_to_its_section_reaches_the_cli_the_schema_the_api_and_the_record() -> None:
    seen = _with_the_option_added()
    help_lines = seen["help"]
    assert isinstance(help_lines, list)
    assert len(help_lines) == 1
    assert " N " in help_lines[0]
    assert "Rounds of every point" in help_lines[0]
    assert "[default: 1]" in help_lines[0]
    code, stderr = seen["refused"]  # type: ignore[misc]
    assert code == 2
    assert stderr == "sweeper: error: --rounds: must be at least 1\n"
    schema = seen["schema"]
    assert isinstance(schema, dict)
    assert (schema["type"], schema["default"], schema["minimum"]) == ("integer", 1, 1)
    assert seen["keyword"] == "rounds=1"
    assert seen["documented"] is True
    assert seen["record"] == 3


def test_every_option_is_declared_by_exactly_one_section() -> None:
    declared = [name for section in SECTIONS for name in section.model_fields]
    assert len(declared) == len(set(declared))
    assert set(declared) == set(SweepSpec.model_fields)
    assert "seed" in TimingSection.model_fields


def test_an_option_whose_validator_reads_text_takes_text_from_the_command_line() -> None:
    # min_size is an int once read; its option takes 1K, which its validator reads
    asked = ["plan", "--topology", str(DGX), "--ops", "all_reduce", "--format", "json"]
    result = CliRunner().invoke(app, [*asked, "--min-size", "1K", "--max-size", "4K"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["points"] > 0
