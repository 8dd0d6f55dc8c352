"""NCCL's default against the alternatives measured beside it. Per operation, group shape and
size: the fastest configuration, the default's regret (how much slower it is), whether the
compare rules (`changes.point_changes`) put that beyond the runs' noise, so that a winner is
named only then, and the configuration that used the least energy per byte.

A configuration is a run and variant (one actor set's NCCL environment). What it sets is read
from its rows' `nccl_env` against what every configuration shares, so a grid in one run
(`--nccl-env`, `--nccl-algos`) and runs in different environments compare alike. Pure: frames
in, frames out (`sweeper.load` users call `regret`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweeper.analysis.changes import RegressionRule, point_changes, size_class
from sweeper.analysis.summary import missing
from sweeper.results.schema import POINT
from sweeper.wire import DEFAULT_VARIANT, Status

# What a tuning is chosen per: an operation on a group shape, in an engine and launch mode
# (a graph's calls are registered for NCCL, eager ones only with --register-buffers)
SHAPE = [
    "op",
    "algorithm",
    "dtype",
    "in_place",
    "tier",
    "world_size",
    "n_nodes",
    "engine",
    "launch",
    "registered",
]
REGRET_COLUMNS = (
    *SHAPE,
    "size_bytes",
    "groups",  # how many groups of the shape the figures are the median of
    "default_busbw_gb_per_s",
    "fastest",  # the configuration measured fastest (`default` among them)
    "fastest_busbw_gb_per_s",
    "regret",  # fastest / default - 1 of busbw: how much slower the default is (>= 0)
    "noise",  # the change the compare rules would call noise there (the fastest's)
    "clear",  # the fastest is an alternative, an improvement beyond noise in every group
    "best",  # the fastest where clear, else `default`
    "best_settings",  # what `best` sets: K=V,K=V ("" for the default)
    "default_energy_j_per_gb",
    "efficient",  # the least energy per GB where below the default's by the size's floor
    "efficient_energy_j_per_gb",
)
SHOWN_REGRET = 0.05  # the report lists the sizes where a clear regret exceeds this
_KEYS = [c for c in POINT if c != "params"]  # experiments (params) are not tuned


def _env(value: object) -> dict[str, str]:
    """A row's `nccl_env` (pairs as read back, or a mapping) as a dict."""
    if value is None or missing(value):
        return {}
    pairs: Iterable[tuple[object, object]] = (
        value.items() if isinstance(value, Mapping) else value  # type: ignore[assignment]
    )
    return {str(k): str(v) for k, v in pairs}


def settings_text(settings: Mapping[str, str]) -> str:
    """A configuration's name from what it sets: `NCCL_ALGO=Ring,NCCL_PROTO=LL`."""
    return ",".join(f"{k}={v}" for k, v in sorted(settings.items()))


@dataclass(frozen=True)
class Configuration:
    """One actor set's NCCL environment in one run: what it sets beyond the environment every
    configuration shares, and its name (`default` where it sets nothing)."""

    run_id: str
    variant: str
    settings: tuple[tuple[str, str], ...]  # sorted (variable, value) pairs
    default: bool  # the first that sets nothing; later ones are the default measured again

    @property
    def name(self) -> str:
        return settings_text(dict(self.settings)) or DEFAULT_VARIANT


def configurations(rows: pd.DataFrame) -> list[Configuration]:
    """The rows' configurations, in the order their runs started."""
    if rows.empty:
        return []
    order = rows.sort_values("run_started_at", kind="stable")
    firsts = order.groupby(["run_id", "variant"], sort=False)["nccl_env"].first()
    envs = {(str(k[0]), str(k[1])): _env(env) for k, env in firsts.items()}
    shared = set.intersection(*(set(env.items()) for env in envs.values()))
    found: list[Configuration] = []
    for (run_id, variant), env in envs.items():
        own = tuple(sorted((k, v) for k, v in env.items() if (k, v) not in shared))
        first = not own and not any(c.default for c in found)
        found.append(Configuration(run_id, variant, own, first))
    return found


def _normal(rows: pd.DataFrame, variant: str) -> pd.DataFrame:
    """A configuration's rows as the default's would be: the default variant, the group id
    without the variant's suffix, so points of two configurations meet in `point_changes`."""
    out = rows[rows["params"].map(missing)].copy()
    out["group_id"] = [str(g).removesuffix(f"/{variant}") for g in out["group_id"]]
    out["variant"] = DEFAULT_VARIANT
    normal: pd.DataFrame = out
    return normal


def configured(rows: pd.DataFrame, configs: Sequence[Configuration]) -> pd.DataFrame:
    """The rows of every configuration but the default's repeats, as the default's would be
    (`_normal`), with their configuration's name (`config`) and `default` (whether the row
    is the default configuration's)."""
    parts = []
    for c in configs:
        if c.name == DEFAULT_VARIANT and not c.default:
            continue  # the default again: a second measurement of it, not an alternative
        mine = rows[(rows["run_id"] == c.run_id) & (rows["variant"] == c.variant)]
        parts.append(_normal(mine, c.variant).assign(config=c.name, default=c.default))
    frame: pd.DataFrame = pd.concat(parts, ignore_index=True)
    return frame


def _long(
    rows: pd.DataFrame, configs: Sequence[Configuration], rule: RegressionRule
) -> pd.DataFrame:
    """Every ok row of every configuration, named, with its verdict against the default."""
    each = configured(rows, configs)
    base = each[each["default"]]
    named = [base.assign(verdict=pd.NA, noise=math.nan)]
    for (_, _), mine in each[~each["default"]].groupby(["run_id", "variant"], sort=False):
        judged = point_changes(base, mine, rule)[[*_KEYS, "verdict", "noise"]]
        named.append(mine.merge(judged, on=_KEYS, how="left"))
    frame: pd.DataFrame = pd.concat(named, ignore_index=True)
    ok: pd.DataFrame = frame[frame["status"] == Status.OK]
    return ok


def regret(rows: pd.DataFrame, rule: RegressionRule | None = None) -> pd.DataFrame:
    """Per operation, group shape (`SHAPE`) and size that the default and at least one
    alternative measured: the columns `REGRET_COLUMNS`. Empty where no configuration sets
    nothing beyond the others (no default to judge) or none sets anything (no alternative)."""
    configs = configurations(rows)
    empty: pd.DataFrame = pd.DataFrame(columns=list(REGRET_COLUMNS))
    if not any(c.default for c in configs) or all(c.name == DEFAULT_VARIANT for c in configs):
        return empty
    each = _long(rows, configs, rule or RegressionRule())
    each["registered"] = each["registered"].fillna(False).astype(bool)
    keys = [*SHAPE, "size_bytes"]
    per = each.groupby([*keys, "config"], sort=False, dropna=False).agg(
        busbw=("busbw_gb_per_s", "median"),
        energy=("energy_j_per_gb", "median"),
        groups=("group_id", "nunique"),
        improved=("verdict", lambda v: bool(len(v)) and bool((v == "improvement").all())),
        noise=("noise", "max"),
    )
    settings = {c.name: dict(c.settings) for c in configs}
    found = []
    for key, part in per.reset_index().groupby(keys, sort=False, dropna=False):
        measured = {str(r.config): _Variant.of(r) for r in part.itertuples()}
        judged = _judged(int(part["size_bytes"].iloc[0]), measured, settings)
        if judged is not None:
            found.append((*key, int(part["groups"].max()), *judged))
    table: pd.DataFrame = pd.DataFrame(found, columns=list(REGRET_COLUMNS))
    return table


@dataclass(frozen=True)
class _Variant:
    """A configuration at one shape and size: its figures over the shape's groups."""

    busbw: float
    energy: float  # NaN: no energy counter
    improved: bool  # an improvement over the default beyond noise in every group
    noise: float

    @classmethod
    def of(cls, row: Any) -> _Variant:
        energy = math.nan if missing(row.energy) else float(row.energy)
        return cls(float(row.busbw), energy, bool(row.improved), float(row.noise))


def _judged(
    size_bytes: int, measured: Mapping[str, _Variant], settings: Mapping[str, Mapping[str, str]]
) -> tuple[object, ...] | None:
    """One shape and size, from `default_busbw_gb_per_s` on; None where the default or
    every alternative is missing there."""
    default = measured.get(DEFAULT_VARIANT)
    if default is None or len(measured) < 2:
        return None
    fastest = max(measured, key=lambda name: measured[name].busbw)
    top = measured[fastest]
    clear = fastest != DEFAULT_VARIANT and top.improved
    best = fastest if clear else DEFAULT_VARIANT
    efficient = DEFAULT_VARIANT
    known = {name: m.energy for name, m in measured.items() if not math.isnan(m.energy)}
    if known and not math.isnan(default.energy):
        lowest = min(known, key=lambda name: known[name])
        if known[lowest] < default.energy / (1 + size_class(size_bytes).floor):
            efficient = lowest
    return (
        default.busbw,
        fastest,
        top.busbw,
        max(0.0, top.busbw / default.busbw - 1),
        top.noise if fastest != DEFAULT_VARIANT else math.nan,
        clear,
        best,
        settings_text(settings.get(best, {})),
        default.energy,
        efficient,
        measured[efficient].energy,
    )


def shown(table: pd.DataFrame, at_least: float = SHOWN_REGRET) -> pd.DataFrame:
    """The sizes where the default's regret is clear and exceeds `at_least`."""
    picked: pd.DataFrame = table[table["clear"] & (table["regret"] > at_least)]
    return picked
