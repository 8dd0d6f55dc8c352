"""The element types a sweep can use: torch's spelling, nccl-tests' aliases, item sizes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sweeper.planning.inputs import quoted


@dataclass(frozen=True, kw_only=True, slots=True)
class Dtype:
    name: str  # torch spelling, written to the `dtype` column
    itemsize: int
    aliases: tuple[str, ...] = ()
    gloo: bool = True  # gloo raises "Invalid scalar type" for the float8 types


DTYPES: dict[str, Dtype] = {
    d.name: d
    for d in (
        Dtype(name="float32", itemsize=4, aliases=("float", "fp32")),
        Dtype(name="float64", itemsize=8, aliases=("double", "fp64")),
        Dtype(name="float16", itemsize=2, aliases=("half", "fp16")),
        Dtype(name="bfloat16", itemsize=2, aliases=("bf16",)),
        Dtype(name="int8", itemsize=1),
        Dtype(name="uint8", itemsize=1),
        Dtype(name="int32", itemsize=4, aliases=("int",)),
        Dtype(name="int64", itemsize=8),
        Dtype(name="float8_e4m3fn", itemsize=1, aliases=("fp8_e4m3", "f8e4m3"), gloo=False),
        Dtype(name="float8_e5m2", itemsize=1, aliases=("fp8_e5m2", "f8e5m2"), gloo=False),
    )
}
_DTYPE_BY_ALIAS = {alias: d.name for d in DTYPES.values() for alias in (d.name, *d.aliases)}


def canonical_dtype(name: str) -> str:
    try:
        return _DTYPE_BY_ALIAS[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {quoted(name)}; known: {', '.join(DTYPES)}") from None


def gloo_refuses(dtypes: Iterable[str]) -> str | None:
    """Why CPU ranks (gloo) cannot run these dtypes (canonical names), if they cannot."""
    unsupported = [name for name in dtypes if not DTYPES[name].gloo]
    return f"--dtypes: gloo cannot reduce or move {unsupported[0]}" if unsupported else None
