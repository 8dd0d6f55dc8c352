"""Swept NCCL variables (`--nccl-env`) against NCCL's defaults: which variables each variant
sets, busbw against size per value, and at the judged sizes the best value with its gain
over the default variant (the one that sets none of them).

A variant's variables are read from the rows, not its name: those of its `nccl_env` that the
default variant's rows do not hold with the same value. Only variants that measured the
default's groups (its `group_id` with a `/variant` suffix) are compared, so the fixed
variants of other tiers (p2p-off, network) are not taken for swept ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from sweeper.analysis.changes import size_class
from sweeper.analysis.summary import at_bound, label
from sweeper.wire import DEFAULT_VARIANT

JUDGED_STEP = 16  # judged sizes: the smallest, every 16x from it, and the largest
LINE_KEYS = ["operation", "tier", "world_size", "dtype"]
TABLE_COLUMNS = (
    "size_bytes",
    "best",
    "busbw_gb_per_s",
    "default_busbw_gb_per_s",
    "gain",
    "clear",  # the gain is beyond the size's floor (changes.SIZE_CLASSES), either way
)


def _env(rows: pd.DataFrame) -> dict[str, str]:
    env = rows["nccl_env"].iloc[0]
    return dict(env) if env is not None else {}


def swept(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per compared variant and variable it sets: variant, variable, value, and the
    variant's other swept variables as `context` (empty for a one-variable sweep)."""
    columns = ["variant", "variable", "value", "context"]
    default = rows[rows["variant"] == DEFAULT_VARIANT]
    if default.empty:
        return _frame([], columns)
    base = _env(default)
    groups = set(default["group_id"])
    changes: dict[str, dict[str, str]] = {}
    for variant, part in rows[rows["variant"] != DEFAULT_VARIANT].groupby("variant", sort=False):
        suffix = f"/{variant}"
        measured = {str(g).removesuffix(suffix) for g in part["group_id"]}
        if measured & groups:
            changes[str(variant)] = {k: v for k, v in _env(part).items() if base.get(k) != v}
    knob_of = _knobs(list(changes.values()))
    found: list[tuple[object, ...]] = []
    for variant, changed in changes.items():
        merged = {knob_of[k]: v for k, v in changed.items()}  # tied variables: one knob
        for variable, value in merged.items():
            context = ",".join(f"{k}={v}" for k, v in merged.items() if k != variable)
            found.append((variant, variable, value, context))
    return _frame(found, columns)


def _knobs(envs: Sequence[dict[str, str]]) -> dict[str, str]:
    """Each changed variable's knob: itself, or with the variables every variant sets
    together with it, to one value, joined by `+` (`NCCL_MIN_NCHANNELS+NCCL_MAX_NCHANNELS`:
    how `--nccl-env` ties them)."""

    def tied(a: str, b: str) -> bool:  # set together, to one value, wherever either is
        return all(env.get(a) == env.get(b) for env in envs if a in env or b in env)

    variables = list(dict.fromkeys(k for env in envs for k in env))
    knob_of: dict[str, str] = {}
    for variable in variables:
        if variable not in knob_of:
            group = [v for v in variables if v not in knob_of and tied(variable, v)]
            knob_of.update(dict.fromkeys(group, "+".join(group)))
    return knob_of


def lines(rows: pd.DataFrame, sets: pd.DataFrame, variable: str) -> pd.DataFrame:
    """busbw against size, a line per value of `variable` (and `default`): the median over
    the groups of a tier and size, per operation and dtype, and whether a group's --max-size
    auto bound fell there (`summary.at_bound`). `rows`: ok rows, one launch."""
    mine = sets[sets["variable"] == variable]
    names = {
        str(r.variant): f"{r.value} ({r.context})" if r.context else str(r.value)
        for r in mine.itertuples()
    }
    names[DEFAULT_VARIANT] = DEFAULT_VARIANT
    shown = rows[rows["variant"].isin(list(names))]
    shown = shown.assign(
        line=shown["variant"].map(names),
        operation=[
            label(str(o), str(a)) for o, a in zip(shown["op"], shown["algorithm"], strict=True)
        ],
    )
    keys = [*LINE_KEYS, "line", "size_bytes"]
    grouped = shown.assign(at_bound=at_bound(shown)).groupby(keys, sort=False)
    medians = grouped[["busbw_gb_per_s", "time_us"]].median()
    flat: pd.DataFrame = medians.join(grouped["at_bound"].any()).reset_index()
    return flat


def judged_sizes(sizes: Sequence[int]) -> list[int]:
    """The sizes a table judges: the smallest, each JUDGED_STEP times larger, the largest."""
    ordered = sorted(set(sizes))
    if not ordered:
        return []
    picked, next_at = [], ordered[0]
    for size in ordered:
        if size >= next_at:
            picked.append(size)
            next_at = size * JUDGED_STEP
    if picked[-1] != ordered[-1]:
        picked.append(ordered[-1])
    return picked


def best_values(curve: pd.DataFrame) -> pd.DataFrame:
    """For one operation's lines (one tier, group size, dtype): at each judged size the best
    value, its busbw, the default's, the gain (best / default; below 1 the default wins),
    and whether it is clear: beyond the size's floor either way, what two identical
    configurations, each on an actor set of its own, can be apart by. Sizes the default did
    not measure are left out."""
    wide = curve.pivot_table(index="size_bytes", columns="line", values="busbw_gb_per_s")
    if DEFAULT_VARIANT not in wide.columns:
        return _frame([], TABLE_COLUMNS)
    values = wide.drop(columns=DEFAULT_VARIANT)
    out: list[tuple[object, ...]] = []
    for size in judged_sizes([int(s) for s in wide.index]):
        measured = values.loc[size].dropna()
        default = wide.loc[size, DEFAULT_VARIANT]
        if measured.empty or pd.isna(default):
            continue
        best = str(measured.idxmax())
        gain = measured[best] / default
        clear = abs(math.log(gain)) > math.log1p(size_class(size).floor)
        out.append((size, best, measured[best], default, gain, clear))
    return _frame(out, TABLE_COLUMNS)


def _frame(rows: Sequence[tuple[object, ...]], columns: Sequence[str]) -> pd.DataFrame:
    frame: pd.DataFrame = pd.DataFrame(list(rows), columns=list(columns))
    return frame
