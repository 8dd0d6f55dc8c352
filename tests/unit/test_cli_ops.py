"""`sweeper ops`: every operation --ops takes and every tier --tiers takes, at 80 columns and
as JSON, where they were named only in the error for a name that is neither. No Ray."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.ops.registry import REGISTRY, resolve
from sweeper.wire import REQUESTABLE_TIERS


def test_ops_lists_every_operation_and_tier_at_80_columns() -> None:
    result = CliRunner().invoke(app, ["ops"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    first_words = {line.split()[0] for line in lines if line.strip()}
    assert set(REGISTRY) <= first_words
    assert {str(tier) for tier in REQUESTABLE_TIERS} <= first_words
    assert lines[0].strip().startswith(f"{len(REGISTRY)} operations")


def test_ops_as_json_says_which_operations_all_runs() -> None:
    result = CliRunner().invoke(app, ["ops", "--format", "json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [o["name"] for o in listed["operations"]] == list(REGISTRY)
    in_all = [o["name"] for o in listed["operations"] if o["in_all"]]
    assert in_all == [c.name for c in resolve(["all"])]
    assert [t["name"] for t in listed["tiers"]] == [str(t) for t in REQUESTABLE_TIERS]


def test_ops_with_a_plugin_that_is_not_there_is_one_line_and_exit_2() -> None:
    result = CliRunner().invoke(app, ["ops", "--plugins", "no_such_module_here"])
    assert result.exit_code == 2
    assert result.stderr.startswith("sweeper: error: --plugins no_such_module_here:")
    assert len(result.stderr.strip().splitlines()) == 1
