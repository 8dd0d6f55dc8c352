"""The typed measurement: its kind from the descriptor, and its rows in the canonical schema."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest

from sweeper import telemetry
from sweeper.commands.plan_estimate import recorded_node, replicated
from sweeper.driver.measurement import (
    MAX_CONNECTIONS,
    ResultRow,
    RunColumns,
    of_copy,
    of_point,
)
from sweeper.driver.outcome import Outcome, PointResult
from sweeper.driver.run import row_key
from sweeper.ops.descriptor import Collective
from sweeper.ops.registry import REGISTRY
from sweeper.planning.placement import Group, Placement, expected_placement
from sweeper.results.load import load
from sweeper.results.schema import COLUMNS, RUN_COLUMNS
from sweeper.results.writer import ResultWriter
from sweeper.wire import (
    Block,
    Copied,
    Engine,
    Fabric,
    Kind,
    Launch,
    Link,
    Point,
    RankTimings,
    Tier,
    Timed,
    Timing,
)
from tests.nvml_replay import Replay, recorded

DGX = Path(__file__).parents[1] / "data" / "topologies" / "dgx-h100-nvswitch.json"
TELEMETRY = Path(__file__).parents[1] / "data" / "telemetry"
WHEN = datetime(2026, 11, 24, 3, 0, tzinfo=timezone.utc)
TIMING = Timing()  # eager, torch: one measurement per point
# every column a placeholder but those a reader holds to a closed set (wire's enums)
RUN = RunColumns(
    **{column: "x" for column in RUN_COLUMNS} | {"run_started_at": WHEN, "backend": "nccl"}
)

# Every entry of the registry and the kind its rows carry: a new entry must be added here.
KIND_OF = {
    "all_reduce": "collective",
    "reduce": "collective",
    "broadcast": "collective",
    "all_gather": "collective",
    "gather": "collective",
    "reduce_scatter": "collective",
    "scatter": "collective",
    "all_to_all": "collective",
    "send_recv": "collective",
    "reduce_scatter+all_gather": "composite",
    "reduce+broadcast": "composite",
    "all_to_all:pairwise": "collective",
    "all_to_all:ring": "collective",
    "all_to_all:mesh2d": "collective",
    "all_to_all:hierarchical": "collective",
    "all_reduce:symm_one_shot": "collective",
    "all_reduce:symm_two_shot": "collective",
    "p2p": "p2p",
    "p2p:reverse": "p2p",
    "p2p:bi": "p2p",
    "moe:dispatch": "experiment",
    "moe:combine": "experiment",
    "h2d": "copy",
    "d2h": "copy",
    "h2d+d2h": "copy",
    "h2d:pageable": "copy",
    "d2h:pageable": "copy",
    "h2d+d2h:pageable": "copy",
    "d2d": "copy",
}


def test_every_registry_entry_has_its_kind() -> None:
    assert {name: c.kind for name, c in REGISTRY.items()} == KIND_OF


def test_a_kind_that_contradicts_the_descriptor_is_refused() -> None:
    with pytest.raises(ValueError, match="kind 'collective'"):
        replace(REGISTRY["p2p"], kind="collective")  # a pair's rows need its direction
    with pytest.raises(ValueError, match="kind 'p2p'"):
        replace(REGISTRY["all_reduce"], kind="p2p")


def test_every_field_is_a_column_of_the_schema() -> None:
    # `readings` holds a column per telemetry field
    own = {f.name for f in fields(ResultRow)} - {"run", "readings"} | set(telemetry.COLUMNS)
    assert own | set(RUN_COLUMNS) | {"nccl_env"} == set(COLUMNS)


def _placement() -> Placement:
    """One DGX node's eight ranks, each on the GPU of its NVML index, as actors report it."""
    expected = expected_placement("nccl", replicated(recorded_node(DGX), 1), [8])
    gpus = expected.nodes[0].gpus
    placed = tuple(replace(m, gpu_uuid=gpus[m.local].uuid) for m in expected.members)
    return replace(expected, members=placed)


def _result(
    group: Group,
    point: Point,
    collective: Collective,
    outcome: Outcome,
    wave: int,
    max_size_bytes: int | None,
    shares_node: bool,
) -> PointResult:
    return PointResult(
        group=group,
        point=point,
        collective=collective,
        outcome=outcome,
        wave=wave,
        started_at=WHEN,
        ended_at=WHEN,
        max_size_bytes=max_size_bytes,
        probe_s=None,
        shares_node=shares_node,
    )


def _done(
    name: str, ranks: tuple[int, ...], outcome: Outcome, timing: Timing = TIMING
) -> PointResult:
    group = Group("nvlink", "default", ranks)
    point = Point(
        group_id=_placement().group_id(group),
        op=name,
        dtype="float32",
        size_bytes=4096,
        count=1024,
        timing=timing,
    )
    return _result(group, point, REGISTRY[name], outcome, 3, 2**30, True)


def _ran(*per_rank: Timed) -> Outcome:
    return Outcome("ok", tuple(RankTimings(timed=(t,)) for t in per_rank))


def _timed(seconds: float, n_wrong: int | None = 0, skipped: str | None = None) -> Timed:
    blocks = () if skipped else (Block(seconds=seconds, iters=10, samples=None),) * 3
    return Timed(
        engine=Engine.TORCH,
        launch=Launch.EAGER,
        blocks=blocks,
        warmup_iters=2,
        n_wrong=n_wrong,
        skipped=skipped,
    )


@pytest.mark.parametrize("name", ["all_reduce", "reduce_scatter+all_gather", "moe:combine"])
def test_a_point_is_measured_with_the_kind_of_its_descriptor(name: str) -> None:
    ranks = tuple(range(8))
    (made,) = of_point(RUN, _placement(), _done(name, ranks, _ran(*[_timed(1e-3)] * 8)))
    assert made.kind == KIND_OF[name]
    assert (made.params is not None) == (made.kind == "experiment")
    assert made.src_rank is None  # not a pair
    assert made.concurrent is None
    assert made.time_us == pytest.approx(100.0)  # a 1 ms block of 10 iterations
    assert made.busbw_gb_per_s == pytest.approx(made.algbw_gb_per_s * made.busbw_factor)
    assert (made.wave, made.max_size_bytes, made.status) == (3, 2**30, "ok")


def test_a_pair_is_measured_from_its_source_to_its_destination() -> None:
    done = _done("p2p:reverse", (2, 5), _ran(_timed(1e-3), _timed(2e-3)))
    (made,) = of_point(RUN, _placement(), done)
    gpus = _placement().nodes[0].gpus
    assert made.kind == "p2p"
    assert (made.src_rank, made.dst_rank) == (5, 2)
    assert (made.src_gpu_uuid, made.dst_gpu_uuid) == (gpus[5].uuid, gpus[2].uuid)
    assert made.concurrent is True  # its wave had another group on its node
    assert made.time_us == pytest.approx(200.0)  # the slowest rank


def test_wrong_elements_fail_the_point_and_say_how_many() -> None:
    (made,) = of_point(RUN, _placement(), _done("p2p", (0, 1), _ran(_timed(1e-3, 3), _timed(1e-3))))
    assert (made.status, made.error, made.n_wrong) == ("error", "3 elements wrong (4K)", 3)


def test_a_failed_point_is_measured_once_per_engine_and_launch_it_asked_for() -> None:
    timing = Timing(launches=("graph", "eager"), engines=("torch", "nccl"))
    outcome = Outcome("timeout", error="point took over 5 s")
    made = of_point(RUN, _placement(), _done("all_reduce", (0, 1), outcome, timing))
    assert [(m.engine, m.launch) for m in made] == [
        ("torch", "graph"),
        ("torch", "eager"),
        ("nccl", "graph"),
        ("nccl", "eager"),
    ]
    assert {(m.kind, m.status, m.error, m.time_us) for m in made} == {
        ("collective", "timeout", "point took over 5 s", None)
    }


def test_a_mode_with_nothing_to_time_is_skipped_with_its_reason() -> None:
    outcome = _ran(_timed(0.0, skipped="no graph on gloo"), _timed(0.0))
    (made,) = of_point(RUN, _placement(), _done("all_reduce", (0, 1), outcome))
    assert (made.status, made.error, made.time_us) == ("skipped", "no graph on gloo", None)


def test_a_copy_is_a_copy_between_two_gpus_of_a_node() -> None:
    placement = _placement()
    gpus = placement.nodes[0].gpus
    copied = Copied(
        kind="fanout",
        src=gpus[0].uuid,
        dsts=(gpus[1].uuid, gpus[2].uuid),
        size_bytes=2**20,
        seconds=(1e-4,) * 2,
    )
    rank_of = {m.gpu_uuid: m.rank for m in placement.members}
    made = of_copy(RUN, placement, 0, copied, gpus[2].uuid, 1e-4, rank_of)
    assert (made.kind, made.op, made.algorithm, made.tier) == ("copy", "copy", "fanout", "nvlink")
    assert (made.src_rank, made.dst_rank, made.concurrent) == (0, 2, True)
    assert made.algbw_gb_per_s == pytest.approx(2**20 / 1e-4 / 1e9)


def test_measurements_go_through_the_store_as_rows_and_keep_their_kind(tmp_path: Path) -> None:
    placement = _placement()
    made = [
        *of_point(RUN, placement, _done("p2p:bi", (0, 1), _ran(_timed(1e-3), _timed(1e-3)))),
        *of_point(
            RUN, placement, _done("moe:dispatch", tuple(range(8)), _ran(*[_timed(1e-3)] * 8))
        ),
    ]
    writer = ResultWriter(tmp_path, "x", "2026-11-24")
    writer.extend(made)
    writer.flush()
    rows = load(tmp_path).sort_values("kind")
    assert rows["kind"].tolist() == ["experiment", "p2p"]
    assert set(rows["kind"]) <= set(Kind.values())
    assert dict(rows["params"].iloc[0]) == dict(REGISTRY["moe:dispatch"].params)
    assert rows["time_us_blocks"].iloc[1].tolist() == pytest.approx([100.0] * 3)


def test_a_gpu_point_carries_each_ranks_telemetry_through_the_store(tmp_path: Path) -> None:
    capped = recorded("h200-power-capped.json")  # XID 63 raised, 8 NVLink replays
    outcome = Outcome(
        "ok",
        (
            RankTimings(timed=(_timed(1e-3),), telemetry=capped),
            RankTimings(timed=(_timed(1e-3),), telemetry=None),
        ),
    )
    (made,) = of_point(RUN, _placement(), _done("all_reduce", (0, 1), outcome))
    (cpu,) = of_point(
        RUN, _placement(), _done("all_reduce", (0, 1), _ran(_timed(1e-3), _timed(1e-3)))
    )
    writer = ResultWriter(tmp_path, "x", "2026-11-24")
    writer.extend([made, replace(cpu, group_id="cpu")])
    writer.flush()
    rows = load(tmp_path).set_index("group_id")
    gpu = rows.drop(index="cpu").iloc[0]

    def ranks(column: str) -> list[object]:  # pandas reads a null in a list as NaN
        return [None if pd.isna(v) else v for v in gpu[column]]

    assert ranks("sm_clock_mhz") == [1410, None]  # the second rank has no NVML
    assert ranks("power_w") == [698.0, None]
    assert ranks("nvlink_replay_delta") == [8, None]
    assert ranks("pcie_width") + ranks("pcie_max_width") == [16, None, 16, None]  # x16 of x16
    assert ranks("pcie_max_gen") == [5, None]
    assert [list(r) for r in gpu["throttle_reasons"][:1]] == [["sw_power_cap", "sync_boost"]]
    assert [list(r) for r in gpu["xid_codes"][:1]] == [[63]]
    assert gpu["xid_codes"][1] is None
    assert all(rows.loc["cpu", column] is None for column in telemetry.COLUMNS)


ONE_H200 = Path(__file__).parents[1] / "data" / "topologies" / "h200x1.json"


@pytest.mark.parametrize(
    ("topology", "peak_gb_per_s"),
    [(ONE_H200, 16 * 3.938), (DGX.with_name("l40sx4-two-numa.json"), 16 * 1.969)],
)
@pytest.mark.parametrize("name", ["h2d", "h2d+d2h:pageable"])
def test_a_host_copy_is_a_share_of_its_gpus_pcie_peak(
    topology: Path, peak_gb_per_s: float, name: str
) -> None:
    placement = expected_placement("nccl", replicated(recorded_node(topology), 1), [1])
    group = Group(Tier.GPU, "default", (0,))
    point = Point(
        group_id=placement.group_id(group),
        op=name,
        dtype="float32",
        size_bytes=2**28,
        count=2**26,
        timing=TIMING,
    )
    seconds = 2**28 / 55.5e9 * 10  # a block of 10 copies at 55.5 GB/s
    done = _result(group, point, REGISTRY[name], _ran(_timed(seconds)), 0, None, False)
    (made,) = of_point(RUN, placement, done)
    assert (made.kind, made.op) == ("copy", name.split(":", maxsplit=1)[0])
    assert made.algorithm == ("pinned" if name == "h2d" else "pageable")
    assert made.pcie_pct_of_peak == pytest.approx(100 * 55.5 / peak_gb_per_s)
    assert made.concurrent is False  # its GPU alone


def _copied(name: str, ranks: tuple[int, ...], outcome: Outcome) -> list[ResultRow]:
    group = Group(Tier.GPU, "default", ranks)
    point = Point(
        group_id=_placement().group_id(group),
        op=name,
        dtype="uint8",
        size_bytes=2**28,
        count=2**28,
        timing=TIMING,
    )
    done = _result(group, point, REGISTRY[name], outcome, 0, None, False)
    return of_point(RUN, _placement(), done)


def test_copies_made_at_once_give_a_row_per_gpu_with_its_own_time_and_telemetry() -> None:
    record = json.loads((TELEMETRY / "h200-power-capped.json").read_text())
    before, after = (telemetry.sample(Replay(calls), "handle") for calls in record["samples"])
    seconds = [2**28 / gb_per_s * 10 for gb_per_s in (50e9, 25e9, 50e9, 25e9)]
    outcome = Outcome(
        "ok",
        tuple(
            RankTimings(
                timed=(_timed(t),),
                telemetry=telemetry.over(before, after, (), (None, None, None)) if i == 1 else None,
            )
            for i, t in enumerate(seconds)
        ),
    )
    made = _copied("h2d", (0, 1, 2, 3), outcome)
    gpus = _placement().nodes[0].gpus
    assert [m.gpu_uuids for m in made] == [(gpus[i].uuid,) for i in range(4)]
    assert {(m.group_id, m.world_size, m.concurrent) for m in made} == {("gpu:n0g0,1,2,3", 4, True)}
    # each GPU's own share: two behind a shared switch at half of the others'
    assert [m.algbw_gb_per_s for m in made] == pytest.approx([50.0, 25.0, 50.0, 25.0])
    peak = gpus[0].pcie_gb_per_s
    assert peak
    assert [m.pcie_pct_of_peak for m in made] == pytest.approx(
        [100 * gb / peak for gb in (50, 25, 50, 25)]
    )
    assert [m.readings["sm_clock_mhz"] for m in made] == [None, (1410,), None, None]  # NVML on one
    assert [m.rank for m in made] == [0, 1, 2, 3]
    assert len({row_key(m) for m in made}) == 4  # each its own row, resuming too


def test_a_failed_copy_at_once_is_one_row_for_the_group() -> None:
    (made,) = _copied("d2h", (0, 1), Outcome("oom", error="rank 1: out of memory"))
    assert (made.status, made.concurrent, len(made.gpu_uuids)) == ("oom", True, 2)


def test_the_device_local_copy_counts_its_read_and_write_and_has_no_pcie_share() -> None:
    (made,) = _copied("d2d", (5,), _ran(_timed(2**28 / 1e12 * 10)))
    assert (made.kind, made.op, made.algorithm, made.concurrent) == ("copy", "d2d", "device", False)
    assert made.algbw_gb_per_s == pytest.approx(1000.0)
    assert made.busbw_gb_per_s == pytest.approx(2000.0)  # the bytes its memory moved
    assert made.pcie_pct_of_peak is None


def test_a_collective_has_no_pcie_share() -> None:
    (made,) = of_point(
        RUN, _placement(), _done("all_reduce", (0, 1), _ran(_timed(1e-3), _timed(1e-3)))
    )
    assert made.pcie_pct_of_peak is None


def _through(
    *vias: str, channels: int | None = None, calls: tuple[tuple[str, str], ...] = ()
) -> Fabric:
    links = tuple(Link(src=0, dst=i + 1, via=via) for i, via in enumerate(vias))
    return Fabric(links=links, channels=channels, calls=calls)


def _fabric_rows(*fabrics: Fabric | None, name: str = "all_reduce") -> list[ResultRow]:
    per_rank = [replace(_timed(1e-3), fabric=fabric) for fabric in fabrics]
    return of_point(RUN, _placement(), _done(name, (0, 1), _ran(*per_rank)))


def _fabric_row(*fabrics: Fabric | None) -> ResultRow:
    (made,) = _fabric_rows(*fabrics)
    return made


def test_a_row_says_the_transport_every_rank_of_its_group_saw_nccl_set_up() -> None:
    made = _fabric_row(
        _through("P2P/CUMEM", channels=24, calls=(("RING", "LL"),)),
        _through("P2P/CUMEM", channels=24),  # NCCL prints TUNING on rank 0 only
    )

    assert (made.transport, made.transport_flag) == ("P2P/CUMEM", None)
    assert made.nccl_connections == ("0->1 P2P/CUMEM",)
    assert (made.nccl_channels, made.nccl_algo, made.nccl_proto) == (24, "RING", "LL")


def test_an_nvlink_group_through_host_memory_says_so_on_its_row() -> None:
    made = _fabric_row(_through("SHM/direct/direct"), _through("SHM/direct/direct"))

    assert made.tier == "nvlink"
    assert made.transport == "SHM"
    assert made.transport_flag is not None
    assert made.transport_flag.startswith("nvlink group through SHM")


def test_a_rank_whose_nccl_output_was_unreadable_makes_the_transport_unknown() -> None:
    made = _fabric_row(_through("P2P/CUMEM"), Fabric(unknown="NCCL_DEBUG=WARN (set by the user)"))

    assert made.transport == "unknown"


def test_rows_of_no_nccl_have_no_transport() -> None:
    gloo = _fabric_row(None, None)
    copies = _fabric_rows(_through("P2P/CUMEM"), _through("P2P/CUMEM"), name="h2d")

    assert (gloo.transport, gloo.nccl_connections, gloo.nccl_channels) == (None, None, None)
    assert [copy.transport for copy in copies] == [None, None]  # a row per GPU


def test_a_large_groups_connections_are_listed_up_to_a_bound_and_counted_beyond() -> None:
    vias = ["P2P/CUMEM"] * (MAX_CONNECTIONS + 5)  # a peer each
    made = _fabric_row(_through(*vias), _through("P2P/CUMEM"))

    assert made.nccl_connections is not None
    assert len(made.nccl_connections) == MAX_CONNECTIONS + 1
    assert made.nccl_connections[-1] == "... and 5 more"
    assert made.transport == "P2P/CUMEM"
