"""How option values are spelled on the command line and in a profile, beside the Python
types they become: comma lists, sizes (64M), --mem-limit (8G, 50%), key=value pairs,
--nccl-env's KEY=V1,V2; and how an option shows on the command line (`Cli`). Each type
carries the JSON Schema of what a profile may spell (the validators accept more than the
Python types say), so the published schema accepts what the model does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema
from pydantic.fields import FieldInfo

from sweeper.planning.inputs import quoted
from sweeper.planning.sizes import parse_mem_limit, parse_size
from sweeper.wire import MemLimit


@dataclass(frozen=True, slots=True)
class Cli:
    """How an option shows on the command line beyond its field's name, description and
    default (a field's `Annotated` metadata). It gives what its value is called in help
    (`metavar`; none for an on/off flag), its flags where they are not --name (--name/--no-name
    for a flag), and whether it is given again for each value (`repeated`). It says which
    commands beyond `run` and `nightly` take it: `sweeper plan` (what a plan asks) and `sweeper
    scan` (where it runs and how points are timed; the scan chooses what it measures)."""

    metavar: str = ""
    flags: tuple[str, ...] = ()
    repeated: bool = False
    plan: bool = True
    scan: bool = False


def cli_of(field: FieldInfo) -> Cli:
    """How a field's option shows on the command line (its `Cli`, else the defaults)."""
    return next((m for m in field.metadata if isinstance(m, Cli)), Cli())


def _split(value: object) -> object:
    """Comma lists from the command line become lists; lists from YAML pass through."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


SIZE_SCHEMA = {
    "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "examples": ["64M"]}]
}
_LIST_SCHEMA = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}

Size = Annotated[int, BeforeValidator(parse_size), WithJsonSchema(SIZE_SCHEMA)]
CommaList = Annotated[tuple[str, ...], BeforeValidator(_split), WithJsonSchema(_LIST_SCHEMA)]


MemLimitField = Annotated[
    MemLimit,
    BeforeValidator(parse_mem_limit),
    PlainSerializer(str),
    WithJsonSchema({"type": "string", "examples": ["8G", "50%"]}),
]


def or_key_values(schema: dict[str, Any]) -> None:
    """The JSON Schema of `moe`: a mapping, or key=value pairs as on the command line."""
    mapping = {"$ref": schema.pop("$ref")}
    schema["anyOf"] = [mapping, {"type": "string", "examples": ["tokens=8192,top_k=2"]}]


def key_values(value: object) -> object:
    """--moe tokens=4096,top_k=2 from the command line (each value a number, as YAML reads
    one, so the layer's fields stay strict); a mapping from YAML."""
    if isinstance(value, str):
        pairs = [item.split("=", 1) for item in value.split(",") if item.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"{quoted(value)}: use key=value pairs, e.g. tokens=4096,top_k=2")
        out: dict[str, object] = {}
        for key, item in pairs:
            if key.strip() in out:
                raise ValueError(f"{quoted(key.strip())} given twice: give each key once")
            out[key.strip()] = _number(item.strip())
        return out
    return value


def _number(text: str) -> object:
    """A key=value pair's value as a number where it spells one (4096, 1.5), else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _nccl_variables(value: object) -> object:
    """--nccl-env KEY=V1,V2 (repeatable) from the command line, a list of such strings or a
    mapping of names to values (a list, or a comma string) from YAML: names -> values."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        out: dict[str, object] = {}
        for item in value:
            name, sep, values = str(item).partition("=")
            if not sep or not name.strip():
                raise ValueError(f"{quoted(item)}: use KEY=V1,V2, e.g. NCCL_PROTO=LL,Simple")
            if name.strip() in out:
                raise ValueError(f"{name.strip()} given twice: list its values once")
            out[name.strip()] = values
        value = out
    if isinstance(value, dict):
        split = {str(name): _split(values) for name, values in value.items()}
        # YAML reads NCCL_MAX_NCHANNELS: [1, 4] as numbers: values are the text NCCL reads
        return {n: [str(v) for v in vs] if isinstance(vs, list) else vs for n, vs in split.items()}
    return value


_NCCL_ENV_SCHEMA = {
    "anyOf": [
        {"type": "object", "additionalProperties": _LIST_SCHEMA},
        {"type": "array", "items": {"type": "string", "examples": ["NCCL_PROTO=LL,Simple"]}},
    ]
}
NcclVariables = Annotated[
    dict[str, tuple[str, ...]],
    BeforeValidator(_nccl_variables),
    WithJsonSchema(_NCCL_ENV_SCHEMA),
]
