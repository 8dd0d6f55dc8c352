"""Bad input: one line, exit 2, nothing written. An unreachable cluster: exit 3."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.driver.console import JsonConsole
from tests import report_data


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-size", "12Q"], "--max-size: '12Q' is not a size"),
        (["--min-size", "-1"], "--min-size: '-1' is not a size"),
        (["--min-size", "2M", "--max-size", "1M"], "--min-size 2M is larger than --max-size 1M"),
        (["--ops", "allreduce"], "--ops: unknown operation 'allreduce'"),
        (["--dtypes", "complex64"], "--dtypes: unknown dtype 'complex64'"),
        (["--plugins", "no.such.module"], "--plugins no.such.module: cannot import it"),
        (["--launch", "turbo"], "--launch: unknown launch mode 'turbo'; known: graph, eager"),
        (["--blocks", "0"], "--blocks: must be at least 1"),
        (["--backend", "gloo", "--launch", "eager,graph"], "--launch graph: CUDA graphs need GPU"),
        (["--engine", "mpi"], "--engine: unknown engine 'mpi'; known: torch, nccl"),
        (["--backend", "gloo", "--engine", "nccl"], "--engine nccl: direct NCCL calls need GPU"),
        (
            ["--backend", "gloo", "--register-buffers"],
            "--register-buffers: NCCL registers GPU buffers",
        ),
        (
            ["--engine", "torch,nccl"],
            "--engine nccl needs NCCL's Python bindings (nccl4py): "
            "install sweeper with its nccl extra (pip install '.[nccl]' in its clone)",
        ),
        (["--nccl-env", "PROTO=LL"], "--nccl-env: 'PROTO' is not an NCCL variable"),
        (["--nccl-env", "NCCL_PROTO"], "--nccl-env: 'NCCL_PROTO': use KEY=V1,V2"),
        (["--nccl-env", "NCCL_PROTO="], "--nccl-env: NCCL_PROTO: no value given"),
        # refused by name, before any value of it could reach a process
        (["--nccl-env", "NCCL_NVLS_ENABLE=0"], "--nccl-env NCCL_NVLS_ENABLE: NVLink multicast"),
        (["--engine", ""], "--engine: Tuple should have at least 1 item after validation"),
        # one line each, as NCCL reads a variable and a row's reader a name
        (["--nccl-env", "NCCL_PROTO=LL\nX"], "--nccl-env: NCCL_PROTO: 'LL\\nX' holds a control"),
        (["--cluster-name", "a\nb"], "--cluster-name: 'a\\nb' holds a control character"),
        # every count and size fits the column it is written to (sweeper/results/schema.py)
        (["--iters", "99999999999999999999"], "--iters: must be at most"),
        (["--warmup", "3000000000"], "--warmup: must be at most"),
        (["--world", "99999999999"], "--world: must be at most"),
        # counts that fit their column but not a cluster are refused before Ray starts
        (["--world", "1000000"], "--world 1000000: more ranks than sweeper plans (65536)"),
        (["--nodes", "2147483647"], "--nodes 2147483647: more nodes than sweeper plans ranks"),
        (["--gpus-per-node", "5000"], "--gpus-per-node: 5000 ranks on a node; a node holds at"),
        (
            ["--moe", "tokens=2147483647,hidden=2147483647"],
            "--moe: tokens 2147483647 x experts 64: more routing keys than the driver draws",
        ),
        (["--seed", "99999999999999999999"], "--seed: must be at most"),
        (["--seed", "1e23"], "--seed: must be a whole number"),
        (["--max-size", "99999999999T"], "--max-size: '99999999999T' is larger than the largest"),
        (["--step-factor", "inf"], "--step-factor: must be a finite number"),
        (["--step-factor", "nan"], "--step-factor: must be a finite number"),
        (["--step-factor", "1.000001"], "--step-factor 1.000001: 32577934 sizes from 8B to"),
        (["--timeout", "inf"], "--timeout: must be a finite number"),
        (
            ["--moe", "bogus=1"],
            "--moe: unknown key 'bogus'; known: tokens, hidden, top_k, experts, zipf, seed",
        ),
        (["--moe", "tokens=99999999999"], "--moe: tokens: must be at most"),
        # sizes and percentages take ASCII digits only
        (["--max-size", "\uff16\uff14"], "--max-size: '\uff16\uff14' is not a size"),
        (["--min-size", "\u0666\u0664"], "--min-size: '\u0666\u0664' is not a size"),
        (["--mem-limit", "\uff15\uff10%"], "--mem-limit: '\uff15\uff10%' is not a percentage"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", *args, "--results", str(out)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: {message}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert not out.exists()


TOPOLOGIES = Path(__file__).parents[1] / "data" / "topologies"
DGX = TOPOLOGIES / "dgx-h100-nvswitch.json"


def _pair_naming_gpu_99(path: Path) -> None:
    record = json.loads(DGX.read_text())
    record["pairs"][0]["b"] = 99
    path.write_text(json.dumps(record))


@pytest.mark.parametrize(
    ("args", "write", "message"),
    [
        (["--profile", "/dev/zero"], None, "--profile /dev/zero: larger than 1 MiB, more than a"),
        (
            ["--profile", "{file}"],
            lambda path: path.write_text("iters: 3\n" * 200_000),
            "--profile {file}: larger than 1 MiB, more than a profile can be",
        ),
        (
            ["--profile", "{file}"],
            lambda path: path.write_text("max_size: 1M\niters: 3\nmax_size: 2M\n"),
            "{file}:3: key 'max_size' given twice",
        ),
        (
            ["--topology", "{file}"],
            lambda path: path.write_text("{}"),
            "--topology {file}: not a topology record (no 'gpus' list)",
        ),
        (
            ["--topology", "{file}"],
            _pair_naming_gpu_99,
            "--topology {file}: not a topology record (a pair names GPU 99, which the record",
        ),
        (
            ["--topology", "/dev/zero"],
            None,
            "--topology /dev/zero: larger than 1 MiB, more than a topology record can be",
        ),
        (
            ["--topology", str(DGX), "--nodes", "10000"],
            None,
            "--nodes: 10000 nodes x 8 ranks; sweeper plans at most 65536 ranks",
        ),
        (
            ["--topology", str(DGX), "--nodes", "8192", "--tiers", "all"],
            None,
            "--tiers nvlink,pcie,internode,cpu on 8192 nodes x 8 ranks: up to 34508803 groups; "
            "a plan holds at most 4000000",
        ),
    ],
)
def test_a_plan_input_too_large_or_not_what_it_says_is_one_line_exit_2(
    tmp_path: Path, args: list[str], write: Callable[[Path], None] | None, message: str
) -> None:
    file = tmp_path / "input"
    if write is not None:
        write(file)
    result = CliRunner().invoke(app, ["plan", *(arg.format(file=file) for arg in args)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: {message.format(file=file)}")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.usefixtures("isolated_registry")
@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("raise RuntimeError('boom')\n", "cannot import it (RuntimeError: boom)"),
        # not a silent exit 0 having done nothing
        ("import sys\nsys.exit(0)\n", "it calls sys.exit(0) as it is imported"),
    ],
)
def test_a_plugin_that_fails_or_exits_as_it_is_imported_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, message: str
) -> None:
    """The CLI's side; tests/unit/test_collectives.py has the kinds of failure."""
    (tmp_path / "a_plugin.py").write_text(code)
    monkeypatch.syspath_prepend(tmp_path)
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", "--plugins", "a_plugin", "--results", str(out)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: --plugins a_plugin: {message}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_stdout_that_refuses_the_output_is_one_line_exit_3_not_a_traceback(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    commands = [["config", "schema"], ["history", "--results", str(results), "--format", "json"]]
    with open("/dev/full", "w") as full:
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "sweeper", *args],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args in commands
        ]
        ended = [(proc.communicate(timeout=60)[1], proc.returncode) for proc in procs]
    for stderr, returncode in ended:
        assert returncode == 3, stderr
        assert stderr == "sweeper: error: cannot write to stdout: No space left on device\n"


@pytest.mark.parametrize("form", ["human", "json"])
def test_a_reader_that_went_away_ends_the_output_quietly(tmp_path: Path, form: str) -> None:
    """`sweeper history | head`: no line about a broken pipe, and exit 1 (rich's and Python's
    way), the table's and the JSON's alike."""
    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    command = [sys.executable, "-m", "sweeper", "history", "--results", str(results)]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write
    try:
        done = subprocess.run(
            [*command, "--format", form],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (1, "")


class _GoneReader(io.StringIO):
    """A pipe whose reader has gone (`sweeper run --format json | head -c 2000`)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_json_reader_that_goes_away_costs_its_lines_not_the_sweep(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = JsonConsole(_GoneReader())
    for _ in range(3):
        shown.close()
        shown._emit("point", status="ok")  # the sweep goes on: no exception
    assert capsys.readouterr().err == (
        "sweeper: warning: cannot write to stdout (Broken pipe); the run goes on, its rows kept "
        "in the results\n"
    )


@pytest.mark.parametrize("command", ["run", "nightly"])
def test_a_profile_that_is_not_utf8_text_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "profile.yaml"
    path.write_bytes(f"output: {tmp_path / 'results'}\n".encode() + b"\xff\xfe\x00binary")
    result = CliRunner().invoke(app, [command, "--profile", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: --profile {path}: not UTF-8 text (byte 0xff")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--reports-dir", "{file}"], "--reports-dir {file}: {file} is not a directory"),
        (["run", "--reports-dir", "{file}/r"], "--reports-dir {file}/r: {file} is not a directory"),
        (["nightly", "--reports-dir", "{file}"], "--reports-dir {file}: {file} is not a directory"),
        (
            ["run", "--results", "{file}/results"],
            "--results {file}/results: {file} is not a directory",
        ),
        (["report", "-o", "{dir}"], "-o {dir} is a directory; -o names the page's file"),
        (["report", "-o", "{file}/r.html"], "-o {file}/r.html: {file} is not a directory"),
        (["report", "--js", "{file}"], "--js {file}: {file} is not a directory"),
        (
            ["report", "-o", "{dir}/" + "a" * 300 + ".html"],
            "-o {dir}/" + "a" * 300 + ".html: File name too long",
        ),
        (
            ["report", "--screenshot", "{file}/x.png"],
            "--screenshot {file}/x.png: {file} is not a directory",
        ),
        (
            ["run", "--resume", "20261122T013412Z-33627a", "--results", "{file}"],
            "--results {file}: {file} is not a directory",
        ),
    ],
)
def test_a_file_where_a_directory_goes_or_the_reverse_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    results = tmp_path / "results"
    report_data.write_run(results, "r1")
    (tmp_path / "file").write_text("kept")
    (tmp_path / "dir").mkdir()
    paths = {"file": tmp_path / "file", "dir": tmp_path / "dir"}
    command, *options = (arg.format(**paths) for arg in args)
    # the results in tmp_path (reports go beside them), where the case names no other
    where = "--results"
    before = sorted(tmp_path.rglob("*"))
    result = CliRunner().invoke(app, [command, where, str(results), *options])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"sweeper: error: {message.format(**paths)}"
    assert sorted(tmp_path.rglob("*")) == before
    assert (tmp_path / "file").read_text() == "kept"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["history", "--last", "0"], "--last: must be at least 1"),
        (["compare", "a", "b", "--threshold", "x"], "--threshold: must be a number"),
        (["topo", "--world", "2.5"], "--world: must be a whole number"),
    ],
)
def test_a_value_the_option_type_refuses_is_one_line_exit_2_in_every_command(
    args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: {message}")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.usefixtures("ray_session")
def test_a_dtype_the_backend_cannot_do_is_bad_input(tmp_path: Path) -> None:
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", "--dtypes", "float8_e4m3fn", "--results", str(out)])
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == "sweeper: error: --dtypes: gloo cannot reduce or move float8_e4m3fn"
    )
    assert not out.exists()


# A driver that asks the CLI for a run and says whether Ray was started before the refusal
_REFUSED_BEFORE_RAY = """
import sys, ray
from sweeper.cli import app
try:
    app(["run", *sys.argv[1:]])
except SystemExit as exc:
    print(exc.code, ray.is_initialized())
"""


_GLOO_CANNOT = {
    "float8": ("--dtypes", "float8_e4m3fn"),
    "graph": ("--launch", "graph"),
    "nccl engine": ("--engine", "torch,nccl"),
}


@pytest.fixture(scope="module")
def refused_before_ray(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    """_REFUSED_BEFORE_RAY with each of _GLOO_CANNOT's options, the drivers started at once
    (each is mostly its imports, which overlap): how each ended, and where its rows would
    have gone. The tests only look."""
    root = tmp_path_factory.mktemp("refused-before-ray")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    procs = {}
    for name, args in _GLOO_CANNOT.items():
        cwd = root / name
        cwd.mkdir()
        procs[name] = subprocess.Popen(
            [sys.executable, "-c", _REFUSED_BEFORE_RAY, *args, "--results", str(cwd / "results")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
    ended = {}
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()  # no-op once it has exited; a hung driver fails, not hangs
        done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        ended[name] = (done, root / name / "results")
    return ended


@pytest.mark.parametrize("case", list(_GLOO_CANNOT))
def test_what_gloo_cannot_run_is_refused_before_an_embedded_ray_starts_on_a_cpu_box(
    refused_before_ray: dict[str, tuple[subprocess.CompletedProcess[str], Path]], case: str
) -> None:
    """No GPU here and no address: the ranks will be gloo's, so what gloo cannot run is bad
    input before Ray starts, where it was refused only once an embedded Ray was up (17 s)."""
    done, out = refused_before_ray[case]
    assert done.stdout.split() == ["2", "False"], done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--launch", "graph"],
            "--launch graph: CUDA graphs need GPU ranks (NCCL); CPU ranks launch eagerly",
        ),
        (
            ["--register-buffers"],
            "--register-buffers: NCCL registers GPU buffers; CPU ranks have none (gloo)",
        ),
    ],
)
def test_what_needs_gpus_on_a_cluster_without_them_is_bad_input(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", *args, "--results", str(out)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"sweeper: error: {message}"
    assert not out.exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Driver:
    """`python -m sweeper run ARGS` in a process of its own, in a directory of its own."""

    args: tuple[str, ...]
    returncode: int
    stderr: str
    output: Path  # where its rows would go: its directory's `results`


@pytest.fixture(scope="module")
def drivers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Driver]:
    """The drivers of the tests below, started at once: each is mostly its imports, which
    overlap. The tests only look."""
    unreachable = f"127.0.0.1:{_closed_port()}"
    cases: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
        "unreachable": (("--address", unreachable), {}),
        "foo:bar": (("--address", "foo:bar"), {}),
        "RAY_ADDRESS=localhost:99999": ((), {"RAY_ADDRESS": "localhost:99999"}),
        "debug": (("--max-size", "12Q"), {"SWEEPER_DEBUG": "1"}),
    }
    root = tmp_path_factory.mktemp("drivers")
    procs = {}
    for name, (args, env) in cases.items():
        (root / name).mkdir()
        output = () if name == "debug" else ("--results", str(root / name / "results"))
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "sweeper", "run", *args, *output],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root / name,  # debug's rows would go to the default --output, `results`
            env={**os.environ, **env},
        )
    ended = {}
    for name, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()  # no-op once it has exited; a hung driver fails, not hangs
        ended[name] = Driver(cases[name][0], proc.returncode, err, root / name / "results")
    return ended


def test_an_unreachable_address_exits_3_in_seconds(drivers: dict[str, Driver]) -> None:
    driver = drivers["unreachable"]
    address = driver.args[1]
    assert driver.returncode == 3, driver.stderr
    assert (
        driver.stderr.strip()
        .splitlines()[-1]
        .startswith(f"sweeper: error: cannot reach Ray at {address}")
    )
    assert "Traceback" not in driver.stderr
    assert not driver.output.exists()


@pytest.mark.parametrize(
    ("driver", "message"),
    [
        ("foo:bar", "--address 'foo:bar' is no Ray address: its port is no number from 1 to"),
        (
            "RAY_ADDRESS=localhost:99999",
            "$RAY_ADDRESS 'localhost:99999' is no Ray address: its port is no number from 1 to",
        ),
    ],
)
def test_an_address_whose_port_is_no_port_exits_2_in_one_line(
    drivers: dict[str, Driver], driver: str, message: str
) -> None:
    ran = drivers[driver]
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr.startswith(f"sweeper: error: {message}")
    assert len(ran.stderr.strip().splitlines()) == 1
    assert not ran.output.exists()


def test_debug_shows_the_traceback(drivers: dict[str, Driver]) -> None:
    driver = drivers["debug"]
    assert driver.returncode != 0
    assert "Traceback" in driver.stderr
    assert "BadInput" in driver.stderr


@pytest.mark.parametrize("command", ["run", "nightly"])
@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "--profile {path}: No such file or directory"),
        ("colour: blue\n", "{path}: unknown key 'colour'"),
        ("max_size: 64M\nnightly:\n  z: -1\n", "{path}: nightly.z: must be more than 0"),
    ],
)
def test_a_bad_profile_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path, command: str, text: str | None, message: str
) -> None:
    path = tmp_path / "profile.yaml"
    if text is not None:
        path.write_text(text + f"results: {tmp_path / 'results'}\n")
    result = CliRunner().invoke(app, [command, "--profile", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"sweeper: error: {message.format(path=path)}"
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("ray_session")
def test_nothing_to_measure_is_one_line_exit_3_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", "--tiers", "nvlink", "--results", str(out)])
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "sweeper: error: nothing to measure: --tiers nvlink gives no group on 2 ranks"
    )
    assert not out.exists()
