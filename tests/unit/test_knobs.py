"""NCCL's knobs as a sweep dimension: the grid, the variants' names, and where a pinned
algorithm or protocol cannot run an operation or changes nothing for it."""

from __future__ import annotations

import pytest

from sweeper.driver import cluster
from sweeper.fabric.multicast import MULTICAST_OFF
from sweeper.planning import knobs

RING_ONLY = frozenset({"Broadcast"})
ALL_REDUCE = frozenset({"AllReduce"})
GATHER = frozenset({"AllGather"})


def test_the_grid_is_every_combination_named_short_and_unique() -> None:
    found = knobs.grid({"NCCL_PROTO": ("LL", "Simple"), "NCCL_MAX_NCHANNELS": ("1", "4", "32")})
    assert list(found)[:2] == ["proto=LL,max_nchannels=1", "proto=LL,max_nchannels=4"]
    assert len(found) == 6
    assert found["proto=Simple,max_nchannels=32"] == {
        "NCCL_PROTO": "Simple",
        "NCCL_MAX_NCHANNELS": "32",
    }
    assert knobs.grid({}) == {}


@pytest.mark.parametrize(
    ("kernels", "env", "refused"),
    [
        (ALL_REDUCE, {"NCCL_ALGO": "Tree"}, False),
        (GATHER, {"NCCL_ALGO": "Tree"}, True),
        (GATHER, {"NCCL_ALGO": "Tree,Ring"}, False),  # NCCL's lists: any of them
        (GATHER, {"NCCL_ALGO": "^Ring"}, False),  # all but Ring: PAT, NVLS, CollNetDirect
        (RING_ONLY, {"NCCL_ALGO": "^Ring"}, True),
        (GATHER, {"NCCL_ALGO": "PAT", "NCCL_PROTO": "LL128"}, True),  # PAT is Simple only
        (ALL_REDUCE, {"NCCL_ALGO": "NVLSTree", "NCCL_PROTO": "LL,Simple"}, False),
        (RING_ONLY, {"NCCL_PROTO": "LL"}, False),  # every protocol: Ring has them all
        (GATHER, {"NCCL_ALGO": "allgather:ring;allreduce:tree"}, False),  # not judged
        (frozenset(), {"NCCL_ALGO": "Tree"}, False),  # no collective kernel: nothing to refuse
    ],
)
def test_a_gap_is_a_pinned_algorithm_or_protocol_that_lacks_a_kernel(
    kernels: frozenset[str], env: dict[str, str], refused: bool
) -> None:
    assert (knobs.gap(kernels, env) is not None) == refused


def test_a_variant_that_only_repeats_an_earlier_one_says_which_and_why() -> None:
    envs = {"default": {}, **knobs.grid({"NCCL_ALGO": ("Ring", "Tree"), "NCCL_PROTO": ("LL",)})}
    # point-to-point: NCCL_ALGO and NCCL_PROTO are collective-only
    assert knobs.same_as(frozenset(), "algo=Ring,proto=LL", envs, "nccl") == (
        "NCCL_ALGO=Ring, NCCL_PROTO=LL changes nothing: no NCCL collective kernel"
    )
    assert knobs.same_as(ALL_REDUCE, "algo=Tree,proto=LL", envs, "nccl") is None
    channels = {
        "default": {},
        **knobs.grid({"NCCL_ALGO": ("Ring", "Tree"), "NCCL_MIN_NCHANNELS": ("4",)}),
    }
    assert knobs.same_as(frozenset(), "algo=Ring,min_nchannels=4", channels, "nccl") is None
    assert knobs.same_as(frozenset(), "algo=Tree,min_nchannels=4", channels, "nccl") == (
        "NCCL_ALGO=Tree changes nothing: no NCCL collective kernel (as algo=Ring,min_nchannels=4)"
    )
    assert knobs.same_as(ALL_REDUCE, "algo=Tree,proto=LL", envs, "gloo") == (
        "NCCL_ALGO=Tree, NCCL_PROTO=LL changes nothing: NCCL variables are inert on CPU ranks "
        "(gloo)"
    )


@pytest.mark.parametrize("name", ["PROTO", "nccl_proto", "CUDA_VISIBLE_DEVICES", "NCCL_"])
def test_only_nccl_variables_are_knobs(name: str) -> None:
    with pytest.raises(ValueError, match="is not an NCCL variable"):
        knobs.check_name(name)


@pytest.mark.parametrize(
    "keys",
    [
        ("NCCL_NVLS_ENABLE",),
        ("NCCL_PROTO", "NCCL_NVLS_NCHANNELS"),
        ("NCCL_MIN_NCHANNELS+NCCL_MNNVL_ENABLE",),
        ("NCCL_NVLSTREE_MAX_CHUNKSIZE",),
    ],
)
def test_multicast_variables_join_a_grid_only_with_the_opt_in(keys: tuple[str, ...]) -> None:
    """Checked by name alone, whatever the values: no value of theirs is ever set here."""
    for key in keys:
        knobs.check_name(key)
    with pytest.raises(ValueError, match="only with --allow-multicast-knobs"):
        knobs.check_multicast(keys, allowed=False)
    knobs.check_multicast(keys, allowed=True)


def test_a_grid_without_multicast_variables_needs_no_opt_in() -> None:
    knobs.check_multicast(("NCCL_PROTO", "NCCL_P2P_DISABLE", "NCCL_ALGO"), allowed=False)


def test_actor_sets_carry_the_users_library_variables_and_add_none() -> None:
    """sweeper forces no NCCL, PyTorch or NVSHMEM variable: what the driver's environment
    says reaches the actors unchanged (multicast off included), and nothing where it says
    nothing, so NCCL's configuration files and defaults decide."""
    assert cluster.actor_env(environ={"PATH": "/bin"}) == {}
    assert cluster.actor_env({"NCCL_PROTO": "LL"}, environ={}) == {"NCCL_PROTO": "LL"}
    users = {**MULTICAST_OFF, "NCCL_P2P_LEVEL": "NVL", "TORCH_NCCL_BLOCKING_WAIT": "1"}
    assert cluster.actor_env(environ={**users, "PATH": "/bin"}) == users
    assert cluster.actor_env({"NCCL_PROTO": "LL"}, environ=users) == {**users, "NCCL_PROTO": "LL"}
