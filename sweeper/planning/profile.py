"""YAML profiles: a sweep's options as keys, the nightly regression settings, and a fleet scan's
settings (a profile with a `scan:` section is a nightly scan). Here option values, a profile's
overridden by the command line's, become a SweepSpec, and a bad one is named as the user wrote
it."""

from __future__ import annotations

import difflib
import re
from collections.abc import Hashable
from pathlib import Path
from typing import Annotated, Any, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sweeper.errors import BadInput
from sweeper.planning.fields import Size, cli_of
from sweeper.planning.inputs import FILE_LIMIT_BYTES, QUOTE_CHARS, quoted, read_text
from sweeper.planning.spec import SweepSpec
from sweeper.wire import Tier


class NightlySettings(BaseModel):
    """The `nightly:` section of a profile: which runs a nightly run is compared with, and
    when a change is a regression (see sweeper/analysis/regression.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window: int = Field(
        14,
        ge=1,
        description="Baseline: up to this many earlier nightly runs of the same cluster.",
        strict=True,
    )
    min_history: int = Field(
        5,
        ge=2,
        description="Fewer earlier runs than this: the series is new, nothing alarms.",
        strict=True,
    )
    z: float = Field(
        3.5,
        gt=0,
        allow_inf_nan=False,
        description="Worse than the baseline median by this many robust sigmas (MAD).",
        strict=True,
    )
    min_change: float = Field(
        0.03,
        ge=0,
        lt=1,
        description="Relative floor: and worse by at least this fraction.",
        strict=True,
    )
    persistence: int = Field(
        2,
        ge=1,
        description="Alarm when this many runs in a row, tonight's included, are worse.",
        strict=True,
    )
    bandwidth_min_size: Size = Field(
        256 * 2**20, description="Peak bus bandwidth is taken over sizes at least this large."
    )

    @model_validator(mode="after")
    def _history(self) -> NightlySettings:
        if self.min_history > self.window:
            raise ValueError(f"min_history {self.min_history} is more than window {self.window}")
        return self


# The sweep's options a scan takes (`sweeper scan`'s too, each marked so in its section):
# where, on how many ranks a node, how each point is timed, where the rows go; the others
# choose what a sweep measures, which the scan chooses itself.
SCAN_OPTIONS = frozenset(n for n, f in SweepSpec.model_fields.items() if cli_of(f).scan)
# ... and a profile with a `scan:` section, whose nightly run writes a report
SCAN_TAKES = SCAN_OPTIONS | {"report", "reports_dir"}


Floor = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]  # GB/s


class ScanSection(BaseModel):
    """`sweeper scan`'s settings, declared once: its options (commands/scan.py makes them
    from these fields), a profile's `scan:` section (which makes `sweeper nightly` scan the
    fleet, sweeper/driver/scan.py, instead of sweeping), and what a scan's run record keeps
    to resume it. Plain values: the scan's own types (its strategy, its thresholds) are made
    from them, and the strategy checked, by `scan.settings.settings`, before Ray starts (the
    scan sits above planning)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: str = Field(
        "adaptive", description="How the internode groups are picked, after the same gate."
    )
    seed: int = Field(
        0, ge=0, description="Random matchings' and the simulation's seed.", strict=True
    )
    nodes: int | tuple[str, ...] | None = Field(
        None,
        description="Nodes to scan: how many, or which (host names or Ray node ids, comma "
        "separated: to re-test named nodes); default every node.",
    )
    domain_label: str | None = Field(
        None, description="A Ray node label (rack, an NVLink domain): the screen's groups."
    )
    op: str | None = Field(
        None,
        description="The operation of every group of whole nodes, by name; default each "
        "stage's own: all_reduce in a node's gate, all_to_all across nodes.",
    )
    sizes: tuple[Size, Size] | None = Field(
        None,
        description="The latency and bandwidth sizes (8,1G; in a profile [8, 1G]); default 8 "
        "and 1G, or the largest below it that fits (1M on CPU ranks).",
    )
    pair_rounds: int | None = Field(
        None,
        ge=0,
        le=1 << 16,
        description="The most rounds of node pairs tested alone, a wave each: a fleet of N "
        "nodes has N - 1 (a pair whose path caps its rate slows no larger group); fewer: that "
        "many in a row from where --seed puts them (successive seeds take turns); default: as "
        "many as 1024 nodes' 523,776 pairs fill (all up to 1024 nodes, 255 at 4096); 0: none.",
        strict=True,
    )
    min_busbw_gb_per_s: dict[Tier, Floor] = Field(
        default_factory=dict,
        description="Absolute floors, GB/s per tier (internode=40; in a profile {internode: "
        "40}); a tier left out is held to a share of the reference figure for its GPU model.",
    )
    # None: the judge's own defaults (scan.thresholds.Thresholds)
    sigmas: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="Robust sigmas below the fleet's median; default 4.",
        strict=True,
    )
    min_ratio: float | None = Field(
        None,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="... and below this share of it; default 0.85.",
        strict=True,
    )

    @field_validator("nodes", mode="before")
    @classmethod
    def _nodes(cls, nodes: object) -> object:
        """A count, or node names: `host1,host2` as one string (the option's) or a list."""
        if isinstance(nodes, str):
            text = nodes.strip()
            nodes = int(text) if text.isdigit() else [n.strip() for n in text.split(",")]
        if isinstance(nodes, (list, tuple)):
            if not all(isinstance(n, str) and n for n in nodes):
                raise ValueError("a count, or host names or node ids, comma separated")
            if odd := next((n for n in nodes if not n.isprintable() or " " in n), None):
                raise ValueError(f"{quoted(odd)} holds a space or a control character")
            return tuple(nodes)
        if isinstance(nodes, bool) or not isinstance(nodes, (int, type(None))):
            raise ValueError("a count, or host names or node ids, comma separated")
        if nodes is not None and nodes < 1:
            raise ValueError("at least one node")
        return nodes

    @field_validator("domain_label")
    @classmethod
    def _domain_label(cls, label: str | None) -> str | None:
        # a Ray label's name, shown in every screen group's line and the summary: one line
        if label is not None and not label.isprintable():
            raise ValueError(f"{quoted(label)} holds a control character; a label is one line")
        return label

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, sizes: tuple[int, int] | None) -> tuple[int, int] | None:
        if sizes is not None and sizes[0] >= sizes[1]:
            raise ValueError("two sizes, the latency one first, such as [8, 1G]")
        return sizes


class Profile(SweepSpec):
    """A YAML profile: `sweeper run`'s options as keys (lists as YAML lists or comma
    strings, sizes as 64M), a `nightly:` section that `sweeper nightly` reads, and a `scan:`
    section that makes `sweeper nightly` scan the fleet instead of sweeping."""

    nightly: NightlySettings = Field(
        default_factory=NightlySettings,
        description="sweeper nightly: which history to compare with, and regression thresholds.",
    )
    scan: ScanSection | None = Field(
        None,
        description="sweeper nightly scans the fleet (sweeper scan's settings) instead of "
        "sweeping; the other keys then are where and how each point is timed.",
    )

    @model_validator(mode="after")
    def _scan_takes(self) -> Profile:
        extra = sorted(self.model_fields_set - SCAN_TAKES - {"nightly", "scan"})
        if self.scan is not None and extra:
            raise ValueError(
                f"scan: chooses what a scan measures; drop {', '.join(extra)} (a sweep's "
                "options), or sweep in a profile without scan:"
            )
        return self

    def options(self) -> dict[str, Any]:
        """The sweep options the profile sets (not the ones it leaves at their defaults)."""
        return self.model_dump(exclude_unset=True, exclude={"nightly", "scan"})


def load_profile(path: Path) -> Profile:
    """A profile from its YAML file; a missing file, one over FILE_LIMIT_BYTES, bytes that are
    not UTF-8, bad YAML, a key given twice or a bad key is BadInput naming the file and the
    key."""
    text = read_text(path, "--profile", "profile")
    try:
        values = yaml.load(text, Loader=_OnceLoader)  # a SafeLoader that refuses duplicate keys
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        problem = _bounded(problem, 2 * QUOTE_CHARS)  # PyYAML quotes what it found whole
        raise BadInput(f"{path}{where}: {problem}") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise BadInput(f"{path}: nested too deeply to be a profile") from None
    except ValueError as exc:  # a scalar its constructor cannot make: 5000 digits, month 13
        problem = _bounded(str(exc).split(";")[0], 2 * QUOTE_CHARS)
        raise BadInput(f"{path}: a value no profile holds ({problem})") from None
    if not isinstance(values, dict):
        raise BadInput(f"{path}: a profile is a mapping of option names to values")
    try:
        return Profile.model_validate(values)
    except ValidationError as exc:
        raise BadInput(f"{path}: {describe(exc, key=True)}", hint=_known_key(exc)) from None


def load_sweep_profile(path: Path) -> Profile:
    """A profile to sweep by (`sweeper run`, `sweeper plan`, `sweeper.run`): one with a
    scan: section is BadInput, not swept without it (the scan is `sweeper nightly`'s)."""
    loaded = load_profile(path)
    if loaded.scan is not None:
        raise BadInput(
            f"--profile {path} has a scan: section: `sweeper nightly --profile {path}` scans "
            "the fleet with it; a sweep takes a profile without one"
        )
    return loaded


class _OnceLoader(yaml.SafeLoader):
    """YAML's safe loader, but a key given twice in one mapping is an error, not the last
    value silently (YAML 1.2 says keys are unique; PyYAML keeps the last), and a document
    whose aliases expand past EXPANDED_LIMIT is refused before it is built: an alias costs a
    reference as it is loaded, but whatever walks the values (a validator, an error message
    quoting one) pays the expansion, 9^k for k levels of nine aliases each."""

    def construct_document(self, node: yaml.Node) -> Any:
        if _expanded(node, {}, set()) > EXPANDED_LIMIT:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"its aliases expand to over {EXPANDED_LIMIT} values and characters "
                "(a profile is a page of text)",
                node.start_mark,
            )
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):  # `? [a, b]`: the safe loader's own error says
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {quoted(key)} given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


# What a profile's values may weigh with their aliases expanded: a node counts 1 and a
# scalar its characters too, so a file within FILE_LIMIT_BYTES written out without aliases
# weighs about its size; twice that leaves room, and bounds what any walk over it costs.
EXPANDED_LIMIT = 2 * FILE_LIMIT_BYTES


def _expanded(node: yaml.Node, weights: dict[int, int], open_: set[int]) -> int:
    """The weight of `node` with every alias expanded, each node's counted once (`weights`)
    however many aliases name it, so the walk costs the document's size; a node inside
    itself (`&a [*a]`) weighs more than any limit."""
    known = weights.get(id(node))
    if known is not None:
        return known
    if id(node) in open_:
        return EXPANDED_LIMIT + 1
    if isinstance(node, yaml.ScalarNode):
        weight = 1 + len(node.value)
    else:
        open_.add(id(node))
        children = (
            [part for pair in node.value for part in pair]
            if isinstance(node, yaml.MappingNode)
            else node.value
        )
        weight = 1
        for child in children:
            weight += _expanded(child, weights, open_)
            if weight > EXPANDED_LIMIT:
                break
        open_.discard(id(node))
    weights[id(node)] = weight
    return weight


def _section(path: list[str]) -> type[BaseModel] | None:
    """The model whose keys a section of a profile (nightly, moe) or option (--moe) takes;
    None where `path` is no section."""
    model: type[BaseModel] = Profile
    for parent in path:
        if parent not in model.model_fields:  # a key of a mapping (min_busbw_gb_per_s: tier)
            return None
        annotation = model.model_fields[parent].annotation
        # an optional section (scan: ScanSection | None) is its model
        found = [t for t in (annotation, *get_args(annotation)) if _is_model(t)]
        if not found:
            return None
        model = found[0]
    return model


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _known_key(exc: ValidationError) -> str | None:
    """For an unknown key, the known key it most likely meant (max-size: max_size)."""
    error = exc.errors()[0]
    if error["type"] != "extra_forbidden":
        return None
    *parents, name = (str(part) for part in error["loc"])
    model = _section(parents)
    if model is None or len(name) > QUOTE_CHARS:  # no option's name is longer than a line
        return None
    match = difflib.get_close_matches(name.replace("-", "_"), model.model_fields, n=1)
    return f"did you mean {'.'.join([*parents, match[0]])!r}?" if match else None


def build_spec(profile: Profile | None = None, **options: Any) -> SweepSpec:
    """A SweepSpec from a profile's options overridden by option values, None meaning 'not
    given'; errors become BadInput."""
    given = {key: value for key, value in options.items() if value is not None}
    try:
        spec = SweepSpec(**{**(profile.options() if profile else {}), **given})
    except ValidationError as exc:
        raise BadInput(describe(exc)) from None
    spec.grid()  # min > max, or a grid too fine to list, is bad input now, not after Ray started
    return spec


def describe(exc: ValidationError, key: bool = False) -> str:
    """One line for the first problem, named as the user wrote it: the option (--max-size),
    or with `key` the profile key (max_size, nightly.z)."""
    error = exc.errors()[0]
    # a key is a name as written: one longer than a line is shown as its start
    loc = [_bounded(str(part)) for part in error["loc"]]
    field = ".".join(loc) if key else (loc[0] if loc else "")
    name = field if key else "--" + field.replace("_", "-")
    said = str(error["msg"]).removeprefix("Value error, ")
    message = plainly(said)
    if not field:  # a rule between options: the message names them
        return message
    *parents, last = loc
    if not key and parents:  # a key of an option's key=value pairs (--moe tokens=...)
        section = _section(parents)
        if error["type"] == "extra_forbidden" and section is not None:
            return f"{name}: unknown key {quoted(last)}; known: {', '.join(section.model_fields)}"
        name = f"{name}: {'.'.join(loc[1:])}"
    if error["type"] == "extra_forbidden":
        return f"unknown {'key' if key else 'option'} {quoted(field)}"
    if error["type"] == "literal_error" and "input" in error:
        known = said.split("Input should be ")[-1]
        return f"{name}: {quoted(error['input'])} is not one of {known}"
    return f"{name}: {message}"


# pydantic's wording of a refused value (the spec's, and Typer's, which converts an option's
# value through pydantic), in sweeper's: what the value must be
_WORDING = (
    (r"Input should be greater than or equal to (.+)", r"must be at least \1"),
    (r"Input should be less than or equal to (.+)", r"must be at most \1"),
    (r"Input should be greater than (.+)", r"must be more than \1"),
    (r"Input should be less than (.+)", r"must be less than \1"),
    (r"Input should be a valid integer.*", "must be a whole number"),
    (r"Input should be a valid number.*", "must be a number"),
    (r"Input should be a finite number", "must be a finite number"),
    (r"Input should be a valid boolean.*", "must be true or false"),
    (r"Input should be a valid string", "must be text"),
    (r"Input should be a valid (list|tuple|array).*", "must be a list"),
    (r"Input should be a valid (dictionary|mapping).*", "must be a mapping of keys to values"),
    (r"Input should be (.+)", r"must be \1"),
)


def plainly(message: str) -> str:
    """A message of pydantic's in sweeper's words ("must be at least 1", where pydantic says
    "Input should be greater than or equal to 1"); any other message as it is."""
    for pattern, words in _WORDING:
        if re.fullmatch(pattern, message):
            return re.sub(pattern, words, message)
    return message


def _bounded(text: str, most: int = QUOTE_CHARS) -> str:
    return text if len(text) <= most else f"{text[: most - 3]}..."
