"""NCCL's own knobs as a sweep dimension: the grid of values `--nccl-env` asks for, the
variants' names, and what NCCL's algorithms and protocols implement. Pure: no Ray, no torch.

NCCL reads its environment once per process, so each combination of values runs on an actor
set of its own (a variant), beside NCCL's defaults (the `default` variant). The tables say
where a pinned value cannot run an operation, or changes nothing for it, so that only what
changes anything runs (NCCL 2.28, src/graph/tuning.cc and src/enqueue.cc).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from itertools import product

from sweeper.fabric.multicast import multicast_names
from sweeper.planning.inputs import quoted
from sweeper.wire import DEFAULT_VARIANT, Backend

Env = Mapping[str, str]

# The collective kernels each NCCL_ALGO value implements (tuning.cc: Broadcast and Reduce
# only Ring; AllGather and ReduceScatter Ring, PAT, NVLS, CollNetDirect; AllReduce all but
# PAT). Keys lower-cased: NCCL compares names without case.
ALGO_KERNELS: dict[str, frozenset[str]] = {
    "ring": frozenset({"AllReduce", "Reduce", "Broadcast", "AllGather", "ReduceScatter"}),
    "tree": frozenset({"AllReduce"}),
    "collnetdirect": frozenset({"AllReduce", "AllGather", "ReduceScatter"}),
    "collnetchain": frozenset({"AllReduce"}),
    "nvls": frozenset({"AllReduce", "AllGather", "ReduceScatter"}),
    "nvlstree": frozenset({"AllReduce"}),
    "pat": frozenset({"AllGather", "ReduceScatter"}),
}
PROTOCOLS = ("ll", "ll128", "simple")
# The protocols each algorithm has: NVLS, NVLSTree and PAT are Simple only (tuning.c skips
# the others), CollNet's other protocols get no bandwidth (never chosen).
ALGO_PROTOCOLS: dict[str, frozenset[str]] = {
    algo: frozenset(PROTOCOLS if algo in ("ring", "tree") else ("simple",)) for algo in ALGO_KERNELS
}
# Variables only collective kernels read: point-to-point calls (send/recv, and what torch
# builds from them: gather, scatter, all_to_all) take no algorithm, and pick LL or Simple by
# NCCL_P2P_LL_THRESHOLD, not NCCL_PROTO (enqueue.cc).
COLLECTIVE_ONLY = frozenset({"NCCL_ALGO", "NCCL_PROTO"})
_NAME = re.compile(r"NCCL_[A-Z0-9_]{1,100}", re.ASCII)  # NCCL's longest is 31 characters
# The most combinations a grid may have: each runs every group again on an actor set of its
# own, and 256 of them on one node of 4 GPUs are an estimated 12 hours already (a grid of
# 1024 plans in 8 s to 2 days; one of a million never finished planning).
GRID_LIMIT = 256


def names(key: str) -> tuple[str, ...]:
    """The variables a grid key sets: one, or several tied with `+` that take each value
    together (NCCL_MIN_NCHANNELS+NCCL_MAX_NCHANNELS=4 pins exactly 4 channels, which neither
    variable does alone)."""
    return tuple(key.split("+"))


def check_name(key: str) -> str:
    """A grid key as given: an NCCL variable's name, or several tied with `+`; ValueError for
    anything else."""
    tied = names(key)
    for name in tied:
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"{quoted(name)} is not an NCCL variable (names are NCCL_ and capitals)"
            )
    if len(set(tied)) != len(tied):
        raise ValueError(f"{key}: a variable tied to itself")
    return key


def check_multicast(variables: Collection[str], allowed: bool) -> None:
    """ValueError where grid keys set NVLink multicast variables (NCCL_NVLS_ENABLE, NCCL_NVLS_*,
    NCCL_MNNVL_*) and `allowed` (--allow-multicast-knobs) was not given: on a shared machine
    whose environment keeps multicast off, a variant that turns it on can take GPUs others
    share out of service."""
    found = multicast_names(name for key in variables for name in names(key))
    if found and not allowed:
        raise ValueError(
            f"--nccl-env {', '.join(found)}: NVLink multicast variables join a grid only with "
            "--allow-multicast-knobs (never on a machine whose environment keeps multicast off)"
        )


def label(env: Env) -> str:
    """A variant's name: its variables without the NCCL_ prefix, lower-cased, with their
    values, e.g. proto=LL,max_nchannels=4. Unique per grid: its keys are distinct."""
    return ",".join(f"{key.removeprefix('NCCL_').lower()}={value}" for key, value in env.items())


def check_size(variables: Mapping[str, Sequence[str]]) -> None:
    """ValueError where the grid of these values has more than GRID_LIMIT combinations,
    counted from the values before any combination is made."""
    combinations = math.prod(len(values) for values in variables.values())
    if combinations > GRID_LIMIT:
        counts = " x ".join(str(len(values)) for values in variables.values())
        raise ValueError(
            f"--nccl-env: {counts} = {combinations} combinations of values; a sweep runs at "
            f"most {GRID_LIMIT} (each on an actor set of its own)"
        )


def grid(variables: Mapping[str, Sequence[str]]) -> dict[str, dict[str, str]]:
    """Every combination of the keys' values (a cartesian product), by variant name, in the
    order given (the first key's values vary slowest); a key of tied variables sets each of
    them to the value."""
    keys = list(variables)
    combos = product(*(variables[key] for key in keys)) if keys else iter(())
    envs = (
        {name: value for key, value in zip(keys, values, strict=True) for name in names(key)}
        for values in combos
    )
    return {label(env): env for env in envs}


def _allowed(value: str, known: Collection[str]) -> frozenset[str] | None:
    """The names a list value enables (NCCL's parseList: 'a,b', or '^a' for all but a);
    None where the value is not such a list (NCCL's per-function syntax, 'allreduce:tree')."""
    if ":" in value or ";" in value:
        return None
    excluded = value.startswith("^")
    names = {n.strip().lower() for n in value.removeprefix("^").split(",") if n.strip()}
    return frozenset(set(known) - names if excluded else names & set(known))


def gap(kernels: Collection[str], env: Env) -> str | None:
    """Why the pinned NCCL_ALGO / NCCL_PROTO cannot run these collective kernels (NCCL fails
    with `invalid usage`), if they cannot; None where they can, or the value is not one
    sweeper can judge (NCCL's own error then says)."""
    if not kernels:
        return None
    algos = _allowed(env.get("NCCL_ALGO", ",".join(ALGO_KERNELS)), ALGO_KERNELS)
    protos = _allowed(env.get("NCCL_PROTO", ",".join(PROTOCOLS)), PROTOCOLS)
    if algos is None or protos is None:
        return None
    for kernel in sorted(kernels):
        usable = [a for a in sorted(algos) if kernel in ALGO_KERNELS[a]]
        if not usable:
            return f"NCCL_ALGO={env['NCCL_ALGO']}: no algorithm of it implements {kernel}"
        if not any(ALGO_PROTOCOLS[a] & protos for a in usable):
            return (
                f"NCCL_PROTO={env['NCCL_PROTO']}: not a protocol of {kernel}'s algorithms "
                f"({', '.join(usable)})"
            )
    return None


def applying(kernels: Collection[str], env: Env, backend: str) -> dict[str, str]:
    """The variables of `env` that can change an operation that launches these collective
    kernels: none on CPU ranks (gloo reads no NCCL variable), and none of the
    collective-only ones for point-to-point operations."""
    if backend != Backend.NCCL:
        return {}
    return {k: v for k, v in env.items() if kernels or k not in COLLECTIVE_ONLY}


def same_as(
    kernels: Collection[str],
    variant: str,
    envs: Mapping[str, Env],
    backend: str,
) -> str | None:
    """Why a grid variant would only repeat an earlier one for an operation (the default
    first): the reason its rows give, or None where it changes something."""
    mine = applying(kernels, envs[variant], backend)
    for other, env in envs.items():
        if other == variant:
            return None
        if applying(kernels, env, backend) == mine:
            inert = ", ".join(f"{k}={v}" for k, v in envs[variant].items() if k not in mine)
            why = (
                "NCCL variables are inert on CPU ranks (gloo)"
                if backend != Backend.NCCL
                else "no NCCL collective kernel"
            )
            return f"{inert} changes nothing: {why}" + (
                "" if other == DEFAULT_VARIANT else f" (as {other})"
            )
    return None
