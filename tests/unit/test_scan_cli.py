"""`sweeper scan`'s command line: bad input is one line and exit 2 before any cluster, the
simulation prints its waves and score, and a scan's verdicts print as a table and as JSON."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer.main
from rich.markup import escape
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.commands.scan import SCAN_SETTINGS, print_verdicts
from sweeper.planning.profile import ScanSection
from sweeper.planning.spec import SweepSpec
from sweeper.results import records, scans
from sweeper.scan.document import Scanned, document
from sweeper.scan.policy import Strategy
from sweeper.scan.simulate import Fault, fleet_of, simulate


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--strategy", "random"], "--strategy random: strategy 'random': random takes a count"),
        (["--sizes", "1M,8"], "--sizes 1M,8: two sizes, the latency one first"),
        (["--sizes", "8,lots"], "--sizes: 'lots' is not a size"),
        (["--min-busbw", "wires=3"], "--min-busbw wires=3: TIER=GB/s"),
        (["--simulate", "--faults", "gremlins"], "--faults gremlins: a count, or names"),
        (["--pair-rounds", "-1"], "--pair-rounds: must be at least 0"),
    ],
)
def test_bad_scan_input_is_one_line_and_exit_2_before_any_cluster(
    args: list[str], line: str
) -> None:
    result = CliRunner().invoke(app, ["scan", *args])
    assert result.exit_code == 2, result.output
    (only,) = result.stderr.strip().splitlines()
    assert only.startswith(f"sweeper: error: {line}")


def test_every_setting_of_a_profiles_scan_section_is_a_scan_option_made_from_its_field() -> None:
    assert set(SCAN_SETTINGS) == set(ScanSection.model_fields)
    command = typer.main.get_command(app).commands["scan"]  # type: ignore[attr-defined]
    params = {p.name: p for p in command.params}
    for name, field in ScanSection.model_fields.items():
        assert params[name].help.startswith(escape(str(field.description)))
        assert params[name].multiple == (name == "min_busbw_gb_per_s")  # a flag a key


def test_a_scans_options_reach_its_settings() -> None:
    args = ["scan", "--simulate", "--nodes", "4", "--gpus-per-node", "1", "--faults", "0"]
    result = CliRunner().invoke(app, [*args, "--strategy", "random:2", "--seed", "4"])
    assert result.exit_code == 0, result.output
    assert "4 nodes x 1 GPUs, random:2, seed 4" in result.stdout
    refused = CliRunner().invoke(app, [*args, "--sizes", "8,1M"])
    assert "drop --op, --sizes" in refused.stderr


@pytest.mark.parametrize(
    ("given", "waves"),
    [
        ((), 9),
        (("--pair-rounds", "9"), 9),
        (("--pair-rounds", "4"), 4),
        (("--pair-rounds", "0"), 0),
    ],
)
def test_pair_rounds_bound_the_waves_of_pairs_a_scan_tests_alone(
    given: tuple[str, ...], waves: int
) -> None:
    """Ten nodes' pairs take nine rounds: all of them by default, at most --pair-rounds."""
    args = ["scan", "--simulate", "--nodes", "10", "--gpus-per-node", "1", "--faults", "0"]
    result = CliRunner().invoke(app, [*args, *given, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["stages"].get("pairs", 0) == waves


def test_the_simulation_prints_a_run_of_waves_of_one_shape_as_one_line() -> None:
    """A fleet of N nodes has N - 1 waves of pairs (1023 lines at 1024 nodes, before)."""
    args = ["scan", "--simulate", "--nodes", "40", "--gpus-per-node", "1", "--faults", "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    waves = [line.split() for line in result.stdout.splitlines() if line.startswith("  wave")]
    pairs = [line for line in waves if line[2] == "pairs"]
    assert len(pairs) == 1
    first, last = map(int, pairs[0][1].split("-"))
    assert (pairs[0][0], last - first + 1) == ("waves", 39)
    assert len(waves) < 20


def test_the_simulation_prints_its_verdicts_keeps_them_under_results_and_exits_1_condemning(
    tmp_path: Path,
) -> None:
    args = ["scan", "--simulate", "--nodes", "16", "--gpus-per-node", "2", "--faults", "slow-node"]
    result = CliRunner().invoke(app, [*args, "--results", str(tmp_path)])
    assert result.exit_code == 1, result.output  # a slow node condemned
    assert "16 nodes x 2 GPUs, adaptive, seed 0" in result.stdout
    assert "planted: slow-node" in result.stdout
    assert "precision 1.00, recall 1.00" in result.stdout
    (kept,) = (tmp_path / "_runs").glob("*.scan.json")
    assert f"summary: {kept}" in result.stdout
    summary = scans.load(tmp_path, kept.name.removesuffix(".scan.json"))
    assert summary is not None
    assert summary["condemned"] == [
        p.nodes[0] for p in simulate(nodes=16, gpus_per_node=2, faults=(Fault.SLOW_NODE,)).planted
    ]


def test_a_simulation_that_condemns_nothing_exits_0_and_writes_nothing_without_results() -> None:
    args = ["scan", "--simulate", "--nodes", "16", "--gpus-per-node", "2", "--faults", "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "planted: nothing" in result.stdout
    assert "summary:" not in result.stdout


def test_a_scans_verdicts_print_as_a_table_and_a_json_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sim = simulate(nodes=16, gpus_per_node=2, faults=(Fault.SLOW_NODE,))
    scanned = Scanned(
        run_id="20261125T000000Z-abcdef",
        fleet=fleet_of(16, 2),
        strategy=Strategy.parse("adaptive"),
        outcomes=(),
        verdicts=sim.verdicts,
        waves=sim.waves,
        rows=0,
        seconds=1.0,
    )
    (slow,) = sim.planted
    print_verdicts(scanned.verdicts)
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["name", "health", "stage", "evidence"]
    assert table[-1] == "nodes: 15 healthy, 1 slow"
    assert any(line.startswith(f"{slow.nodes[0]}  slow") for line in table)
    record = json.loads(json.dumps(document(scanned)))
    assert record["condemned"] == [slow.nodes[0]]
    (named,) = [v for v in record["verdicts"] if v["name"] == slow.nodes[0]]
    assert named["health"] == "slow"
    assert named["evidence"].startswith(f"{slow.nodes[0]}: all_to_all at 1 GiB")


def test_a_scan_and_a_sweep_are_each_resumed_by_their_own_command(tmp_path: Path) -> None:
    options = SweepSpec().model_dump(mode="json")
    scan_id, sweep_id = "20261127T000000Z-aaaaaa", "20261127T000000Z-bbbbbb"
    records.save(tmp_path, records.RunRecord(scan_id, "sweeper scan", {**options, "scan": {}}, ()))
    records.save(tmp_path, records.RunRecord(sweep_id, "sweeper run", options, ()))
    runner, where = CliRunner(), ["--results", str(tmp_path)]
    ran = runner.invoke(app, ["run", "--resume", scan_id, *where])
    assert ran.exit_code == 2, ran.output
    assert f"--resume {scan_id}: a scan; resume it with sweeper scan --resume" in ran.stderr
    scanned = runner.invoke(app, ["scan", "--resume", sweep_id, *where])
    assert scanned.exit_code == 2, scanned.output
    assert f"--resume {sweep_id}: a sweep; resume it with sweeper run --resume" in scanned.stderr


def _words(text: str) -> list[str]:
    return text.replace(" \\\n", " ").split()


def test_a_simulated_scans_lines_fold_at_80_columns_with_their_words_unchanged() -> None:
    """Its verdicts' evidence was one line of up to 489 characters; the JSON is unfolded."""
    args = ["scan", "--simulate", "--nodes", "16", "--gpus-per-node", "2", "--faults", "3"]
    narrow = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    wide = CliRunner().invoke(app, args, env={"COLUMNS": "1000"})
    assert narrow.exit_code == wide.exit_code == 1, narrow.output
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert max(len(line) for line in wide.stdout.splitlines()) > 80  # there was a long one
    assert _words(narrow.stdout) == _words(wide.stdout)
    (evidence,) = [i for i, line in enumerate(lines) if line.startswith("  slow         n0012: ")]
    assert lines[evidence + 1].startswith(" " * 15 + "against the fleet's")  # hangs beneath
    as_json = CliRunner().invoke(app, [*args, "--format", "json"], env={"COLUMNS": "80"})
    verdicts = json.loads(as_json.stdout)["verdicts"]
    assert max(len(v["evidence"]) for v in verdicts) > 80


def test_a_scans_verdicts_and_re_test_commands_fold_at_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each re-test command folds between its words with a shell's line continuation, so
    that pasted it is still one command."""
    sim = simulate(nodes=16, gpus_per_node=2, faults=(Fault.SLOW_NODE, Fault.SLOW_LINK))
    condemned = [v for v in sim.verdicts if v.condemned]
    command = "sweeper scan --nodes n0001,n0002 --results '/a results dir' --sigmas 4"
    retests = {v.name: command for v in condemned}
    monkeypatch.setenv("COLUMNS", "80")
    print_verdicts(sim.verdicts, retests, sim.findings)
    narrow = capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", "1000")
    print_verdicts(sim.verdicts, retests, sim.findings)
    wide = capsys.readouterr().out
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert max(len(line) for line in wide.splitlines()) > 80
    assert _words(narrow) == _words(wide)
    pasted = [line for line in narrow.replace(" \\\n", " ").splitlines() if "re-test:" in line]
    assert len(pasted) == len(condemned) >= 2
    for line in pasted:
        assert shlex.split(line.split("re-test:")[1]) == shlex.split(command)


def test_the_verdict_table_names_each_node_by_its_host(capsys: pytest.CaptureFixture[str]) -> None:
    """A real scan's node ids are Ray's (56 hex digits): the table shows the host instead,
    in the verdict's name and its evidence alike."""
    sim = simulate(nodes=16, gpus_per_node=2, faults=(Fault.SLOW_NODE,))
    ids = fleet_of(16, 2).ids
    hosts = {node: f"gpu-host-{i:02d}" for i, node in enumerate(ids)}
    print_verdicts(sim.verdicts, names=hosts)
    table = capsys.readouterr().out
    (slow,) = sim.planted
    assert any(line.startswith(f"{hosts[slow.nodes[0]]}  slow") for line in table.splitlines())
    shown = set(re.findall(r"[\w.-]+", table))
    assert not shown & set(ids), shown & set(ids)
    assert set(hosts.values()) <= shown
