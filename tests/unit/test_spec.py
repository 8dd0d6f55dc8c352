from __future__ import annotations

import annotated_types
import numpy as np
import pytest

from sweeper.errors import BadInput
from sweeper.planning.dtypes import canonical_dtype
from sweeper.planning.profile import build_spec
from sweeper.planning.request import resolve
from sweeper.planning.sizes import SIZE_LIMIT_BYTES, format_size, parse_size
from sweeper.planning.spec import DEFAULT_CPU_RANKS, SECTIONS, SweepSpec
from sweeper.results import records
from sweeper.results.schema import SCHEMA
from sweeper.wire import Backend, Engine, Launch


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("8", 8),
        (8, 8),
        ("1K", 1024),
        ("1k", 1024),
        ("64M", 64 * 2**20),
        ("8G", 8 * 2**30),
        ("1.5K", 1536),
        ("4GiB", 4 * 2**30),
        ("2MB", 2 * 2**20),
        ("1T", 2**40),
    ],
)
def test_sizes_parse_like_nccl_tests(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    "text",
    ["12Q", "-1", "0", 0, -5, "", "K", "1.1", "0.3", "1.0001K", "\uff16\uff14", "\u0666\u0664M"],
)
def test_bad_sizes_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match=r"size|whole number"):
        parse_size(text)


def test_sizes_are_exact_and_at_most_the_largest_size() -> None:
    with pytest.raises(ValueError, match="whole number"):
        parse_size("1.0000000000000000001K")  # a float would say 1.0, and 1024 bytes
    assert parse_size("1024T") == SIZE_LIMIT_BYTES == parse_size(SIZE_LIMIT_BYTES)
    for too_large in ("1025T", "99999999999999999999", SIZE_LIMIT_BYTES + 1):
        with pytest.raises(ValueError, match=r"is larger than the largest size, 1024T$"):
            parse_size(too_large)


@pytest.mark.parametrize("size", [1, 8, 1000, 1024, 1536 * 1024, 3 * 2**30, 2**40 + 1])
def test_format_size_round_trips(size: int) -> None:
    assert parse_size(format_size(size)) == size


def test_grid_is_geometric_and_ends_at_or_below_the_maximum() -> None:
    spec = build_spec(min_size="8", max_size="1K")
    assert spec.sizes(1024) == [8, 16, 32, 64, 128, 256, 512, 1024]
    spec = build_spec(min_size="1K", step_factor=4)
    assert spec.sizes(10_000) == [1024, 4096]
    assert build_spec(min_size="1M").sizes(2**20) == [2**20]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_size": "12Q"}, "--max-size: '12Q' is not a size"),
        ({"min_size": "-1"}, "--min-size: '-1' is not a size"),
        ({"min_size": "2M", "max_size": "1M"}, "--min-size 2M is larger than --max-size 1M"),
        ({"dtypes": "complex64"}, "--dtypes: unknown dtype 'complex64'"),
        ({"backend": "mpi"}, "--backend: 'mpi' is not one of"),
        ({"world": 0}, "--world: must be at least 1"),
        ({"step_factor": 1}, "--step-factor"),
        ({"step_factor": float("inf")}, "--step-factor: must be a finite number"),
        ({"step_factor": float("nan")}, "--step-factor: must be a finite number"),
        (
            {"step_factor": 1.0001, "max_size": "1G"},
            "--step-factor 1.0001: 187160 sizes from 8B to 1G; at most 10000",
        ),
        ({"step_factor": 1.000001}, "--step-factor 1.000001: 32577934 sizes from 8B to 1024T"),
        ({"iters": 10**20}, "--iters: must be at most 1000000000"),
        ({"warmup": 2**31}, "--warmup: must be at most 1000000000"),
        ({"world": 2**31}, "--world: must be at most 2147483647"),
        ({"nodes": 2**31}, "--nodes: must be at most 2147483647"),
        ({"gpus_per_node": 2**31}, "--gpus-per-node: must be at most"),
        ({"seed": 10**23}, "--seed: must be at most 9223372036854775807"),
        ({"seed": 1.5}, "--seed: must be a whole number"),
        ({"timeout": float("inf")}, "--timeout: must be a finite number"),
        ({"timeout": 1e6}, "--timeout: must be at most 86400"),
        ({"max_size": "\uff16\uff14"}, "--max-size: '\uff16\uff14' is not a size"),
        ({"min_size": "\u0666\u0664"}, "--min-size: '\u0666\u0664' is not a size"),
        ({"mem_limit": "\uff15\uff10%"}, "--mem-limit: '\uff15\uff10%' is not a percentage"),
        ({"max_size": "99999999999T"}, "--max-size: '99999999999T' is larger than the largest"),
        ({"colour": "blue"}, "unknown option 'colour'"),
        (
            {"moe": "bogus=1"},
            "--moe: unknown key 'bogus'; known: tokens, hidden, top_k, experts, zipf, seed",
        ),
        ({"moe": "tokens=x"}, "--moe: tokens: must be a whole number"),
        ({"moe": "tokens=3000000000"}, "--moe: tokens: must be at most"),
        ({"moe": "zipf=inf"}, "--moe: zipf: must be a finite number"),
        ({"moe": "seed=1" + "0" * 20}, "--moe: seed: must be at most"),
        ({"moe": "top_k=3,experts=2"}, "--moe: top_k 3 is more than the 2 experts"),
    ],
)
def test_bad_options_give_one_line_naming_the_option(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(BadInput) as info:
        build_spec(**options)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_lists_split_and_dtype_aliases_canonicalise() -> None:
    spec = build_spec(ops="all_reduce, gather", dtypes="bf16,float,bfloat16")
    assert spec.ops == ("all_reduce", "gather")
    assert spec.dtypes == ("bfloat16", "float32")
    assert canonical_dtype("half") == "float16"


def test_max_size_defaults_to_auto_and_takes_sizes() -> None:
    assert build_spec(max_size="AUTO").max_size == "auto"
    assert build_spec().max_size == "auto"
    assert build_spec(max_size="4G").max_size == 4 * 2**30


def test_mem_limit_is_bytes_or_a_percentage_and_prints_as_given() -> None:
    assert str(build_spec(mem_limit="8G").mem_limit) == "8G"
    assert str(build_spec(mem_limit="50%").mem_limit) == "50%"
    assert str(build_spec(mem_limit=" 12.5 %").mem_limit) == "12.5%"
    assert build_spec(mem_limit="8G").model_dump(mode="json")["mem_limit"] == "8G"


def _most(field: str) -> int:
    info = SweepSpec.model_fields[field]
    (limit,) = (m.le for m in info.metadata if isinstance(m, annotated_types.Le))
    return int(limit)


def _column_max(column: str) -> int:
    return int(np.iinfo(SCHEMA.field(column).type.to_pandas_dtype()).max)


@pytest.mark.parametrize(
    ("field", "column"),
    [
        ("iters", "iters"),
        ("warmup", "warmup_iters"),
        ("world", "world_size"),
        ("world", "src_rank"),
        ("nodes", "n_nodes"),
        ("gpus_per_node", "world_size"),
    ],
)
def test_every_count_fits_the_column_it_is_written_to(field: str, column: str) -> None:
    assert _most(field) <= _column_max(column)


def test_the_largest_size_times_the_ranks_of_a_large_group_fits_the_size_column() -> None:
    assert _column_max("size_bytes") // 4096 >= SIZE_LIMIT_BYTES


def test_the_spec_is_the_union_of_its_sections_and_reads_what_they_derive() -> None:
    spec = build_spec(
        nodes=2, world=8, max_size="1M", launch="eager", engine="torch,nccl", cluster_name="c"
    )
    assert all(isinstance(spec, section) for section in SECTIONS)
    assert list(SweepSpec.model_fields) == [n for s in SECTIONS for n in s.model_fields]
    assert (spec.ranks_per_node, spec.cpu_ranks, spec.cluster_name) == (4, 4, "c")
    assert spec.requested_backend is None  # auto: the cluster decides
    assert spec.largest == 2**20
    assert spec.grid() == tuple(spec.sizes(2**20))
    timing = resolve(spec, Backend.NCCL).timing
    assert timing.launches == (Launch.EAGER,)
    assert timing.engines == (Engine.TORCH, Engine.NCCL)
    assert build_spec().cpu_ranks == DEFAULT_CPU_RANKS


def test_a_spec_resolves_once_for_the_backend_its_cluster_gave() -> None:
    asked = build_spec(min_size="1K")
    on_cpus, on_gpus = resolve(asked, Backend.GLOO), resolve(asked, Backend.NCCL)
    assert on_cpus.timing.launches == (Launch.EAGER,)  # graphs need GPU ranks
    assert on_gpus.timing.launches == (Launch.GRAPH,)
    assert str(on_cpus.mem_limit) == "64M"  # CPU ranks' default cap
    assert on_gpus.mem_limit is None
    assert on_cpus.sizes == asked.grid()
    assert on_cpus.spec.largest is None  # auto


def test_the_run_record_keeps_the_options_its_plan_was_resolved_from() -> None:
    """The driver is handed the plan alone: its record's options are the plan's, and a
    resume builds the spec they were read from again."""
    spec = build_spec(ops="all_reduce", max_size="64K", tiers="all", nccl_algos="ring")
    plan = resolve(spec, Backend.NCCL)
    record = records.RunRecord.of("r", plan.options, ())
    assert record.options == spec.model_dump(mode="json")
    assert build_spec(None, **record.options) == spec


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"launch": "graph"}, "--launch graph: CUDA graphs need GPU ranks"),
        ({"engine": "nccl"}, "--engine nccl: direct NCCL calls need GPU ranks"),
        ({"register_buffers": True}, "--register-buffers: NCCL registers GPU buffers"),
        ({"dtypes": "fp8_e4m3"}, "--dtypes: gloo cannot reduce or move float8_e4m3fn"),
    ],
)
def test_what_cpu_ranks_cannot_run_is_bad_input_once_the_backend_is_known(
    options: dict[str, object], message: str
) -> None:
    spec = build_spec(**options)  # the backend is auto: nothing to refuse yet
    with pytest.raises(BadInput, match=message):
        resolve(spec, Backend.GLOO)
