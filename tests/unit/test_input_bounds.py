"""Inputs bounded before they are built, and bad input refused in one line (issue 40, items
4, 6 and 7): a small input never takes unbounded memory or waits for ever, and every error
quotes a bounded part of a value. The cases that would take gigabytes or block for ever
without their bound run in one child process under a 2 GiB address-space limit and a
deadline, so a regression fails fast instead of eating the machine."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app
from sweeper.errors import BadInput
from sweeper.planning.knobs import GRID_LIMIT
from sweeper.planning.profile import build_spec, load_profile

DATA = Path(__file__).parents[1] / "data" / "topologies"
NODE = DATA / "h200x4-nvswitch.json"
BOMB_KEYS = ("pairs", "backend", "gpu_visibility", "max_size", "nccl_env")
ONE_LINE_CHARS = 400  # what a refusal may take, its bounded quote included


def alias_bomb(key: str, levels: int) -> str:
    """A profile whose `key` is `levels` levels of nine aliases each over nine 10-character
    strings: a few hundred bytes that expand to 9^levels x 90 characters."""
    lines = [f"x0: &a0 [{', '.join(['xxxxxxxxxx'] * 9)}]"]
    for level in range(1, levels):
        lines.append(f"x{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]")
    lines.append(f"{key}: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def _guarded_cases(tmp: Path) -> dict[str, list[str]]:
    """Each case's command line: without its bound, each took gigabytes or never answered."""
    cases: dict[str, list[str]] = {}
    for key in BOMB_KEYS:
        (tmp / f"bomb-{key}.yaml").write_text(alias_bomb(key, 9))
        cases[f"alias-bomb-{key}"] = ["plan", "--profile", str(tmp / f"bomb-{key}.yaml")]
    gpus = [{"index": i, "uuid": "", "pci_bus_id": i} for i in range(20_000)]
    (tmp / "gpus.json").write_text(json.dumps({"gpus": gpus}, separators=(",", ":")))
    cases["topology-20000-gpus"] = ["plan", "--topology", str(tmp / "gpus.json")]
    grid = [f"NCCL_{name}=0,1,2,3,4,5,6,7,8,9" for name in "ABCDEF"]  # 10^6 combinations
    cases["nccl-grid"] = ["plan", "--topology", str(NODE), *(f"--nccl-env={g}" for g in grid)]
    cases["simulate-nodes"] = ["scan", "--simulate", "--nodes", "2147483647"]
    os.mkfifo(tmp / "fifo")  # no writer: a blocking open waits for one for ever
    cases["fifo-profile"] = ["plan", "--topology", str(NODE), "--profile", str(tmp / "fifo")]
    cases["fifo-topology"] = ["plan", "--topology", str(tmp / "fifo")]
    return cases


_CHILD = """
import json, sys, time
from typer.testing import CliRunner
from sweeper.cli import app
out = {}
for name, args in json.loads(sys.argv[1]).items():
    start = time.monotonic()
    result = CliRunner().invoke(app, args)
    out[name] = {"exit_code": result.exit_code, "stderr": result.stderr[-2000:],
                 "seconds": time.monotonic() - start}
print(json.dumps(out))
"""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every guarded case's outcome, from one child process (2 GiB, 120 s for them all)."""
    tmp = tmp_path_factory.mktemp("bounds")
    cases = _guarded_cases(tmp)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cases)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited,
        cwd=tmp,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    outcomes: dict[str, dict[str, Any]] = json.loads(child.stdout)
    return outcomes


@pytest.mark.parametrize(
    ("case", "line"),
    [
        *(
            (f"alias-bomb-{key}", "its aliases expand to over 2097152 values and characters")
            for key in BOMB_KEYS
        ),
        ("topology-20000-gpus", "20000 GPUs on one node; a node holds at most 1024"),
        ("nccl-grid", f"= 1000000 combinations of values; a sweep runs at most {GRID_LIMIT}"),
        ("simulate-nodes", "--nodes 2147483647: the simulation holds 1 to 8192 nodes"),
        ("fifo-profile", "not a regular file (a FIFO)"),
        ("fifo-topology", "not a regular file (a FIFO)"),
    ],
)
def test_a_small_input_that_would_take_gigabytes_or_wait_for_ever_is_refused_at_once(
    guarded: dict[str, dict[str, Any]], case: str, line: str
) -> None:
    outcome = guarded[case]
    assert outcome["exit_code"] == 2, outcome["stderr"]
    (only,) = outcome["stderr"].strip().splitlines()
    assert only.startswith("sweeper: error: ")
    assert line in only
    assert len(only) < ONE_LINE_CHARS
    assert outcome["seconds"] < 30


@pytest.mark.parametrize("key", BOMB_KEYS)
def test_an_error_quotes_a_bounded_prefix_of_the_value(tmp_path: Path, key: str) -> None:
    """Four levels expand within the bound (590k characters): the refusal quotes its start."""
    (tmp_path / "p.yaml").write_text(alias_bomb(key, 4))
    with pytest.raises(BadInput) as info:
        load_profile(tmp_path / "p.yaml")
    assert str(info.value).startswith(f"{tmp_path / 'p.yaml'}: {key}")
    assert len(str(info.value)) < ONE_LINE_CHARS
    assert "..." in str(info.value)


def test_an_unknown_key_as_long_as_the_file_allows_is_quoted_bounded(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(f"? {'k' * 500_000}\n: 1\n")  # explicit: no length cap
    with pytest.raises(BadInput) as info:
        load_profile(tmp_path / "p.yaml")
    assert str(info.value).startswith(f"{tmp_path / 'p.yaml'}: unknown key 'kkkk")
    assert len(str(info.value)) < ONE_LINE_CHARS


def test_an_nccl_grid_past_its_limit_is_refused_from_the_counts_before_expanding() -> None:
    values = ",".join(map(str, range(1000)))
    start = time.monotonic()
    with pytest.raises(BadInput, match=r"--nccl-env: 1000 x 1000 = 1000000 combinations"):
        build_spec(nccl_env=[f"NCCL_A={values}", f"NCCL_B={values}"])
    assert time.monotonic() - start < 5
    build_spec(nccl_env=["NCCL_A=1,2,3,4", "NCCL_B=" + ",".join(map(str, range(64)))])


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--faults", "1000000"], "--faults 1000000: the simulation plants at most 8192"),
        (["--faults", "160"], "--faults: 160 faults take 195 nodes of their own; the fleet has 64"),
        (["--nodes", "3", "--faults", "3"], "--faults: 3 faults take 4 nodes of their own; the"),
        (["--nodes", "8", "--faults", "slow-node=9"], "--faults: 9 faults take 9 nodes of"),
        (["--faults", "slow-node=x"], "--faults slow-node=x: a count, or names"),
        (["--faults", "²"], "--faults ²: a count, or names"),  # a digit int() does not read
        (["--slowdown", "1.5"], "--slowdown 1.5: a share of its speed a fault takes"),
        # the sweep options are checked as a real scan's, before the simulation's own
        (["--nodes", "16", "--gpus-per-node", "2000"], "--gpus-per-node: 2000 ranks on a node"),
        (["--sizes", "8,lots"], "--sizes: 'lots' is not a size"),
        (["--sizes", "8,1M"], "--simulate times "),
        (["--op", "no_such_op"], "--simulate times "),
        (["--min-busbw", "-1"], "--min-busbw -1: a floor is a finite figure above 0 GB/s"),
        (["--min-busbw", "nan"], "--min-busbw nan: a floor is a finite figure above 0 GB/s"),
        (["--min-busbw", "internode=inf"], "--min-busbw internode=inf: a floor is a finite"),
    ],
)
def test_a_simulated_scan_refuses_what_a_real_one_would_in_one_line(
    args: list[str], line: str
) -> None:
    result = CliRunner().invoke(app, ["scan", "--simulate", *args])
    assert result.exit_code == 2, result.output
    (only,) = result.stderr.strip().splitlines()
    assert only.startswith(f"sweeper: error: {line}")


def _record(path: Path, gpus: list[dict[str, Any]], raw: str | None = None) -> Path:
    path.write_text(raw if raw is not None else json.dumps({"gpus": gpus, "pairs": []}))
    return path


@pytest.mark.parametrize(
    ("write", "line"),
    [
        (
            lambda p: _record(
                p, [], '{"gpus": [{"index": 1e400, "uuid": "u", "pci_bus_id": "b"}]}'
            ),
            "not a topology record (1e400 is out of range of a number)",
        ),
        (
            lambda p: _record(p, [], '{"gpus": [], "cpus": NaN}'),
            "not a topology record (NaN is not a number a record holds)",
        ),
        (
            lambda p: _record(p, [], "[" * 100_000 + "]" * 100_000),
            "nested too deeply to be a topology record",
        ),
        (
            lambda p: _record(p, [{"index": 0, "uuid": "a", "pci_bus_id": "0"}] * 2),
            "not a topology record (GPU 0 listed twice)",
        ),
        (
            lambda p: _record(
                p,
                [],
                json.dumps(
                    {
                        "gpus": [{"index": i, "uuid": "", "pci_bus_id": str(i)} for i in (0, 1)],
                        "pairs": [{"a": 0, "b": 1}] * 20_000,  # each pair counts the links again
                    }
                ),
            ),
            "not a topology record (20000 pairs of 2 GPUs; they make 1)",
        ),
        (
            lambda p: _record(
                p, [{"index": 0, "uuid": "", "pci_bus_id": "0", "nvlinks": [{}] * 20_000}]
            ),
            "not a topology record (a GPU with more than 64 NVLinks)",
        ),
    ],
)
def test_a_topology_record_out_of_range_nested_or_not_a_nodes_is_one_line_exit_2(
    tmp_path: Path, write: Any, line: str
) -> None:
    record = write(tmp_path / "node.json")
    result = CliRunner().invoke(app, ["plan", "--topology", str(record)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"sweeper: error: --topology {record}: {line}"


@pytest.mark.parametrize(
    ("profile", "line"),
    [
        ("? [a, b]\n: 1\n", ":1: found unhashable key"),
        ("iters: true\n", ": iters: must be a whole number"),
        ("nightly:\n  window: yes\n", ": nightly.window: must be a whole number"),
        ("moe:\n  tokens: false\n", ": moe.tokens: must be a whole number"),
        ("results: ''\n", ": results: an empty path; name a directory"),
    ],
)
def test_a_profile_with_a_complex_key_a_boolean_count_or_an_empty_path_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str, line: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.yaml").write_text(profile)
    result = CliRunner().invoke(app, ["plan", "--topology", str(NODE), "--profile", "p.yaml"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"sweeper: error: p.yaml{line}"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"moe": "tokens=8,tokens=16"}, "--moe: 'tokens' given twice: give each key once"),
        ({"iters": True}, "--iters: must be a whole number"),
        ({"timeout": True}, "--timeout: must be a number"),
        (
            {"backend": "gloo", "dtypes": "float8_e4m3fn"},
            "--dtypes: gloo cannot reduce or move float8_e4m3fn",
        ),
        ({"results": ""}, "--results: an empty path; name a directory"),
    ],
)
def test_options_that_were_taken_wrongly_are_refused_before_anything_starts(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(BadInput) as info:
        build_spec(**options)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "args",
    [
        ["history", "--results", ""],
        ["export", "latest", "--per-host", ""],
        ["compare", "a", "b", "--results", " "],
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().endswith(": an empty path; name a directory")
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_an_empty_path_and_a_missing_results_directory(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"sweeper.load\(''\): an empty path"):
        sweeper.load("")
    with pytest.raises(BadInput, match="--results: an empty path"):
        sweeper.run(results="")
    with pytest.raises(BadInput, match="topology='': an empty path"):
        sweeper.plan(topology="")
    with pytest.raises(FileNotFoundError, match="no results directory at"):
        sweeper.load(tmp_path / "missing")


@pytest.mark.parametrize("threshold", ["inf", "1e309"])
def test_compare_refuses_an_infinite_threshold(threshold: str) -> None:
    result = CliRunner().invoke(app, ["compare", "a", "b", "--threshold", threshold])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"sweeper: error: --threshold {float(threshold)}: a ratio is a finite number, such as 0.05"
    )


@pytest.mark.usefixtures("isolated_registry")
def test_a_plugins_print_goes_to_stderr_while_json_owns_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "chatty_plugin.py").write_text("print('hello from the plugin')\n")
    monkeypatch.syspath_prepend(tmp_path)
    args = ["plan", "--topology", str(NODE), "--plugins", "chatty_plugin", "--format", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout is the document alone
    assert "hello from the plugin" in result.stderr


@pytest.mark.usefixtures("isolated_registry")
def test_a_plugin_exception_whose_message_fails_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rude_plugin.py").write_text(
        "class Rude(Exception):\n"
        "    def __str__(self):\n"
        "        raise RuntimeError('no message')\n"
        "raise Rude()\n"
    )
    monkeypatch.syspath_prepend(tmp_path)
    result = CliRunner().invoke(app, ["plan", "--topology", str(NODE), "--plugins", "rude_plugin"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "sweeper: error: --plugins rude_plugin: cannot import it "
        "(Rude: its message cannot be shown: RuntimeError)"
    )
