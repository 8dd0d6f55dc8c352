"""YAML profiles: the same keys as `sweeper run`'s options, validated once, flags on top."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from sweeper.analysis.regression import Policy
from sweeper.cli import app
from sweeper.commands.nightly_run import policy_of, scan_settings
from sweeper.errors import BadInput
from sweeper.planning.profile import NightlySettings, Profile, build_spec, load_profile
from sweeper.planning.spec import SweepSpec
from sweeper.results import scans
from sweeper.scan.thresholds import Thresholds
from sweeper.wire import REQUESTABLE_TIERS, Tier

ROOT = Path(__file__).resolve().parents[2]
NIGHTLY = ROOT / "jobs" / "nightly.yaml"
WEEKLY = ROOT / "jobs" / "weekly.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return path


def test_a_profile_takes_run_options_as_keys_in_yaml_or_command_line_spelling(
    tmp_path: Path,
) -> None:
    profile = load_profile(
        write(
            tmp_path,
            "ops: [all_reduce, all_gather]\ndtypes: bf16,float\nmax_size: 64M\n"
            "mem_limit: 50%\nworld: 4\nnightly:\n  window: 7\n  bandwidth_min_size: 16K\n",
        )
    )
    spec = build_spec(profile)
    assert spec.ops == ("all_reduce", "all_gather")
    assert spec.dtypes == ("bfloat16", "float32")
    assert spec.max_size == 64 * 2**20
    assert str(spec.mem_limit) == "50%"
    assert spec.world == 4
    assert profile.nightly.window == 7
    assert Policy.of(profile.nightly).bandwidth_min_size_bytes == 16 * 2**10


def test_a_profile_sets_the_measurement_and_report_options_too(tmp_path: Path) -> None:
    profile = load_profile(
        write(
            tmp_path,
            "ops: ['all_to_all*', 'moe*', 'p2p*']\nmoe: {tokens: 64, top_k: 1}\n"
            "nccl_algos: ring,tree\nconcurrent: true\ncopy_engine: true\nreport: false\n"
            f"reports_dir: {tmp_path / 'pages'}\n",
        )
    )
    spec = build_spec(profile)
    assert (spec.moe.tokens, spec.moe.top_k, spec.moe.experts) == (64, 1, 64)
    assert spec.nccl_algos == ("ring", "tree")
    assert spec.concurrent
    assert spec.copy_engine
    assert not spec.report
    assert spec.reports_dir == tmp_path / "pages"
    overridden = build_spec(profile, moe="tokens=8,top_k=2", report=True, concurrent=False)
    assert (overridden.moe.tokens, overridden.moe.top_k) == (8, 2)
    assert overridden.report
    assert not overridden.concurrent


def test_the_profile_keys_are_exactly_the_options_of_sweeper_run() -> None:
    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    # a hidden option is an old name of one of them (--output, now --results)
    shown = [p for p in run.params if not getattr(p, "hidden", False)]
    options = {"plugins" if p.name == "plugin" else p.name for p in shown}
    assert options - {"profile", "format", "resume"} == set(SweepSpec.model_fields)
    assert set(Profile.model_fields) == set(SweepSpec.model_fields) | {"nightly", "scan"}


def test_flags_override_the_profile_and_unset_keys_keep_their_defaults(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, "ops: all_reduce\nmax_size: 1M\nseed: 3\n"))
    spec = build_spec(profile, max_size="4K", seed=None, check=False)
    assert (spec.ops, spec.max_size, spec.seed, spec.check) == (("all_reduce",), 4096, 3, False)
    assert spec.dtypes == SweepSpec.model_fields["dtypes"].default


@pytest.mark.parametrize(
    ("text", "message", "hint"),
    [
        ("colour: blue\n", "unknown key 'colour'", None),
        ("max-size: 1M\n", "unknown key 'max-size'", "did you mean 'max_size'?"),
        ("nightly:\n  zscore: 3\n", "unknown key 'nightly.zscore'", None),
        (
            "nightly:\n  persistance: 3\n",
            "unknown key 'nightly.persistance'",
            "'nightly.persistence'",
        ),
        ("max_size: 12Q\n", "max_size: '12Q' is not a size", None),
        ("backend: mpi\n", "backend: 'mpi' is not one of", None),
        ("nightly:\n  min_change: 2\n", "nightly.min_change: must be less than 1", None),
        ("nightly:\n  window: 3\n", "nightly: min_history 5 is more than window 3", None),
        ("moe:\n  tokenz: 3\n", "unknown key 'moe.tokenz'", "did you mean 'moe.tokens'?"),
        ("copy-engine: true\n", "unknown key 'copy-engine'", "did you mean 'copy_engine'?"),
        ("nccl_algos: [ring, trees]\n", "nccl_algos: unknown NCCL algorithm 'trees'", None),
        ("nccl_env: {PROTO: [LL]}\n", "nccl_env: 'PROTO' is not an NCCL variable", None),
        ("nccl_env: [NCCL_PROTO]\n", "nccl_env: 'NCCL_PROTO': use KEY=V1,V2", None),
        (
            "nccl_env: [NCCL_MAX_NCHANNELS=4, NCCL_MIN_NCHANNELS+NCCL_MAX_NCHANNELS=8]\n",
            "nccl_env: NCCL_MAX_NCHANNELS given twice: tie or list it once",
            None,
        ),
        ("scan:\n  stratgy: ring\n", "unknown key 'scan.stratgy'", "'scan.strategy'"),
        ("scan:\n  sizes: [1G, 8]\n", "scan.sizes: two sizes, the latency one first", None),
        ("scan:\n  min_ratio: 2\n", "scan.min_ratio: must be at most", None),
        ("scan:\n  min_busbw_gb_per_s: {nic: 40}\n", "scan.min_busbw_gb_per_s.nic", None),
        ("ops: all\nmax_size: 1G\nscan: {}\n", "drop max_size, ops (a sweep's options)", None),
        ("- ops\n", "a profile is a mapping of option names to values", None),
        ("ops: [all_reduce\n", "", None),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, text: str, message: str, hint: str | None
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}")
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    if hint:
        assert hint in (info.value.hint or "")


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "ops: all_reduce\nmax_size: [1M\n")
    with pytest.raises(BadInput, match=rf"^{path}:3: "):
        load_profile(path)


def test_a_profile_that_is_not_utf8_text_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "profile.yaml"
    path.write_bytes(b"max_size: 64M\n\x89PNG\r\n\x1a\n\x00")
    with pytest.raises(BadInput) as info:
        load_profile(path)
    assert str(info.value) == f"--profile {path}: not UTF-8 text (byte 0x89 at offset 14)"


def test_a_profile_nested_deeper_than_python_recurses_is_bad_input(tmp_path: Path) -> None:
    path = write(tmp_path, "ops: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(BadInput, match=rf"^{path}: nested too deeply to be a profile$"):
        load_profile(path)


def test_a_missing_profile_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"--profile .*nothing\.yaml: No such file"):
        load_profile(tmp_path / "nothing.yaml")


def test_the_weekly_profile_sweeps_every_tier_up_to_memory() -> None:
    profile = load_profile(WEEKLY)
    assert profile.scan is None
    spec = build_spec(profile)
    assert spec.tiers == REQUESTABLE_TIERS
    assert spec.max_size == "auto"
    assert spec.force_network
    assert spec.samples
    assert profile.nightly == Profile.model_validate({}).nightly  # the documented defaults


def test_config_schema_is_json_schema_that_accepts_the_nightly_profile() -> None:
    result = CliRunner().invoke(app, ["config", "schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.stdout)
    assert schema == Profile.model_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(yaml.safe_load(NIGHTLY.read_text()))
    validator.validate(yaml.safe_load(WEEKLY.read_text()))
    validator.validate({"scan": {"strategy": "random:5", "sizes": [8, "1G"], "sigmas": 3}})
    validator.validate({"scan": {"min_busbw_gb_per_s": {"internode": 40}}, "backend": "gloo"})
    with pytest.raises(jsonschema.ValidationError, match="stratgy"):
        validator.validate({"scan": {"stratgy": "ring"}})
    validator.validate({"ops": "all_reduce,gather", "max_size": "8G", "min_size": 8})
    validator.validate({"moe": "tokens=64,top_k=1", "nccl_algos": ["ring"], "report": False})
    validator.validate({"moe": {"tokens": 64}, "copy_engine": True, "reports_dir": "pages"})
    with pytest.raises(jsonschema.ValidationError, match="tokenz"):
        validator.validate({"moe": {"tokenz": 64}})
    with pytest.raises(jsonschema.ValidationError, match="colour"):
        validator.validate({"colour": "blue"})
    with pytest.raises(jsonschema.ValidationError, match="zscore"):
        validator.validate({"nightly": {"zscore": 3}})
    assert schema["properties"]["max_size"]["description"].startswith("Largest size S")


def test_nccl_env_is_a_profile_mapping_or_command_line_pairs_and_nccl_algos_joins_it(
    tmp_path: Path,
) -> None:
    text = "nccl_env:\n  NCCL_PROTO: [LL, Simple]\n  NCCL_MAX_NCHANNELS: 1,4\nnccl_algos: [tree]\n"
    spec = build_spec(load_profile(write(tmp_path, text)))
    assert spec.nccl_env == {"NCCL_PROTO": ("LL", "Simple"), "NCCL_MAX_NCHANNELS": ("1", "4")}
    assert spec.nccl_variables()["NCCL_ALGO"] == ("Tree",)
    numbers = build_spec(load_profile(write(tmp_path, "nccl_env: {NCCL_MIN_NCHANNELS: [2, 8]}\n")))
    assert numbers.nccl_env == {"NCCL_MIN_NCHANNELS": ("2", "8")}
    given = build_spec(nccl_env=["NCCL_PROTO=LL,LL", "NCCL_ALGO=Ring"], nccl_algos="ring")
    assert given.nccl_variables() == {"NCCL_PROTO": ("LL",), "NCCL_ALGO": ("Ring",)}


def test_a_resumed_nightly_run_is_judged_by_the_profile_its_command_named(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "max_size: 64M\nnightly:\n  window: 7\n  min_history: 3\n")
    for command in (f"sweeper nightly --profile {path}", f"sweeper nightly --profile={path}"):
        assert policy_of(command) == Policy.of(load_profile(path).nightly)
    assert policy_of("sweeper nightly --output results") == Policy.of(NightlySettings())
    assert policy_of(f"sweeper nightly --profile {path}").window == 7
    scan = write(tmp_path, "scan: {strategy: ring}\n")
    with pytest.raises(BadInput, match="a nightly scan is not resumed"):
        policy_of(f"sweeper nightly --profile {scan}")


def test_a_scan_section_holds_sweeper_scans_settings_and_takes_where_and_timing_keys(
    tmp_path: Path,
) -> None:
    text = (
        "backend: gloo\ngpus_per_node: 1\niters: 3\nblocks: 2\nreport: false\n"
        "scan:\n  strategy: random:3\n  seed: 7\n  nodes: 6\n  op: faulty\n"
        "  sizes: [8, 64K]\n  min_busbw_gb_per_s: {internode: 40}\n  sigmas: 0\n"
        "  domain_label: rack\n"
    )
    profile = load_profile(write(tmp_path, text))
    assert profile.scan is not None
    settings = scan_settings(profile.scan)
    assert str(settings.strategy) == "random:3"
    assert settings.strategy.seed == 7
    assert settings.sizes == (8, 64 << 10)
    assert (settings.op, settings.nodes, settings.domain_label) == ("faulty", 6, "rack")
    limits = settings.thresholds
    assert limits.min_busbw_gb_per_s == {Tier.INTERNODE: 40.0}
    assert (limits.sigmas, limits.min_ratio) == (0.0, Thresholds().min_ratio)
    assert "scan" not in profile.options()  # the sweep's options, the scan's spec
    spec = build_spec(profile)
    assert (spec.iters, spec.blocks, spec.report) == (3, 2, False)


def test_the_nightly_profile_is_the_fleets_adaptive_scan() -> None:
    profile = load_profile(NIGHTLY)
    assert profile.scan is not None
    settings = scan_settings(profile.scan)
    assert str(settings.strategy) == "adaptive"
    assert settings.thresholds == Thresholds(sigmas=4.0, min_ratio=0.85)  # the judge's own
    assert profile.nightly == Profile.model_validate({}).nightly


def test_each_nights_scan_moves_its_seed_on_by_the_scans_before_it(tmp_path: Path) -> None:
    """So the nights take turns at a large fleet's rounds of pairs (`policy.window`)."""
    profile = load_profile(write(tmp_path, "scan:\n  seed: 7\n"))
    assert profile.scan is not None
    results = tmp_path / "results"
    assert scan_settings(profile.scan, results).strategy.seed == 7
    for run_id in ("20261204T010000Z-000001", "20261205T010000Z-000002"):
        scans.save(results, run_id, {"condemned": []})
    assert scan_settings(profile.scan, results).strategy.seed == 9
    assert scan_settings(profile.scan).strategy.seed == 7


@pytest.mark.parametrize("strategy", ["random", "random:0", "spiral"])
def test_a_scan_sections_strategy_that_is_none_is_bad_input_naming_the_key(
    tmp_path: Path, strategy: str
) -> None:
    profile = load_profile(write(tmp_path, f"scan:\n  strategy: {strategy}\n"))
    assert profile.scan is not None
    with pytest.raises(BadInput, match=r"^scan.strategy: ") as info:
        scan_settings(profile.scan)
    assert "\n" not in str(info.value)
