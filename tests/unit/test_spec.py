from __future__ import annotations

import pytest

from sweeper.errors import BadInput
from sweeper.spec import build_spec, canonical_dtype, format_size, parse_size


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


@pytest.mark.parametrize("text", ["12Q", "-1", "0", 0, -5, "", "K", "1.1", "0.3", "1.0001K"])
def test_bad_sizes_are_refused(text: object) -> None:
    with pytest.raises(ValueError, match=r"size|whole number"):
        parse_size(text)


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
        ({"world": 0}, "--world: Input should be greater than or equal to 1"),
        ({"step_factor": 1}, "--step-factor"),
        ({"colour": "blue"}, "unknown option 'colour'"),
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
    assert build_spec(mem_limit="8G").model_dump(mode="json")["mem_limit"] == "8G"
