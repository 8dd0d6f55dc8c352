"""A group's communicator start-up seconds and its GPUs' energy over the timed blocks: timed by
a real rank (gloo, a world of one in this process, beside a toy engine whose start is slow),
read from recorded NVML answers (tests/data/telemetry), and folded into rows."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sweeper.driver.measurement import of_point
from sweeper.rank.engines import Opening
from sweeper.rank.worker import Rank
from sweeper.telemetry import Watch, energy_mj
from sweeper.wire import Backend, Block, Engine, Launch, Limits, Point, RayFacts, Status, Timing
from sweeper.wire import Timed as TimedRecord
from tests.nvml_replay import DATA, Replay
from tests.unit.test_engines import (
    StoreComm,
    StoreEngine,
    store_engine,  # noqa: F401 (the fixture `toy` asks)
)
from tests.unit.test_measurement import RUN, _done, _placement, _ran

SLOW_OPEN_S = 0.2


def _samples(name: str) -> list[dict[str, Any]]:
    record: dict[str, Any] = json.loads((DATA / name).read_text())
    return list(record["samples"])


class _Rising(dict[str, Any]):
    """An H200's recorded answers whose energy counter gains the recorded step at every
    reading, as a GPU busy between two readings does."""

    def __init__(self, name: str) -> None:
        before, after = _samples(name)
        super().__init__(before)
        self.key = "nvmlDeviceGetTotalEnergyConsumption()"
        self.step = after[self.key] - before[self.key]
        self.readings = 0

    def __getitem__(self, key: str) -> Any:
        if key != self.key:
            return super().__getitem__(key)
        self.readings += 1
        return super().__getitem__(key) + self.readings * self.step


@pytest.fixture
def toy(request: pytest.FixtureRequest) -> StoreEngine:
    """test_engines' toy engine, registered for the test."""
    engine: StoreEngine = request.getfixturevalue("store_engine")
    return engine


@pytest.fixture
def rank(monkeypatch: pytest.MonkeyPatch, toy: StoreEngine) -> Iterator[Rank]:
    """A gloo rank in a world of one with group "g" open in torch and in the toy store
    engine, whose communicator takes SLOW_OPEN_S to open."""

    def slow(at: Opening) -> StoreComm:
        time.sleep(SLOW_OPEN_S)
        return StoreEngine.open(toy, at)

    monkeypatch.setattr(toy, "open", slow)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    facts = RayFacts(gpu_ids=(), node_id="node", ip="127.0.0.1")
    engines = (Engine.TORCH, toy.engine)
    made = Rank(Backend.GLOO, (), Limits(host_share_bytes=2**30), None, engines, facts=facts)
    try:
        port = made.listen("127.0.0.1")
        made.join(0, 1, "127.0.0.1", port, 60.0, "127.0.0.1")
        made.open_group("g", (0,), (0,))
        yield made
    finally:
        made.leave()


def _point(engines: tuple[Engine, ...]) -> Point:
    timing = Timing(iters=5, warmup=2, blocks=3, engines=engines)
    return Point(
        group_id="g", op="all_reduce", dtype="float32", size_bytes=4096, count=1024, timing=timing
    )


def test_a_rank_times_each_engines_communicator_as_the_group_opens(
    rank: Rank, toy: StoreEngine
) -> None:
    engines = (Engine.TORCH, toy.engine)
    assert rank.prepare(_point(engines)).status == Status.OK
    torch_timed, store_timed = rank.execute().timed
    assert store_timed.start_s is not None
    assert store_timed.start_s >= SLOW_OPEN_S
    # the group is the world: its torch communicator's start is the world's join (and none
    # of the toy engine's)
    assert torch_timed.start_s is not None
    world_s = rank.groups.started["world", Engine.TORCH]
    assert 0 <= torch_timed.start_s - world_s < SLOW_OPEN_S
    rank.close_group("g")
    assert ("g", toy.engine) not in rank.groups.started


def test_a_rank_reads_its_gpus_energy_counter_around_the_timed_blocks_only(
    rank: Rank, toy: StoreEngine
) -> None:
    answers = _Rising("h200-healthy.json")
    rank.watch = Watch(Replay(answers, None), "handle")
    assert rank.prepare(_point((Engine.TORCH, toy.engine))).status == Status.OK
    timed = rank.execute().timed
    # one reading after the first block's barrier, one after the last block: one step each
    assert [t.energy_mj for t in timed] == [answers.step, answers.step]
    assert answers.readings == 4


def test_the_energy_counter_is_nvmls_where_the_gpu_has_one_and_none_where_not() -> None:
    before, after = (Replay(s) for s in _samples("h200-healthy.json"))
    assert energy_mj(before, "h") == 187326451208
    assert energy_mj(after, "h") - energy_mj(before, "h") == 15720  # type: ignore[operator]
    (geforce, _) = (Replay(s) for s in _samples("rtx3060-geforce.json"))
    assert energy_mj(geforce, "h") is None


def _timed(
    start_s: float | None, energy: int | None, iters: int = 10, block_s: float = 0.4
) -> TimedRecord:
    return TimedRecord(
        engine=Engine.TORCH,
        launch=Launch.EAGER,
        blocks=(Block(seconds=block_s, iters=iters, samples=None),) * 3,
        warmup_iters=2,
        n_wrong=0,
        start_s=start_s,
        energy_mj=energy,
    )


def test_a_rows_start_up_is_its_slowest_ranks_and_its_energy_the_sum_of_its_gpus() -> None:
    done = _done("all_reduce", (0, 1), _ran(_timed(0.4, 15720), _timed(1.3, 20940)))
    (row,) = of_point(RUN, _placement(), done)
    assert row.comm_start_s == 1.3
    assert row.energy_j == pytest.approx(36.66)
    # 4096 B a call, 3 blocks of 10 iterations: 122,880 B
    assert row.energy_j_per_gb == pytest.approx(36.66 / 122880e-9)


def test_blocks_shorter_than_ten_of_the_counters_steps_have_no_energy() -> None:
    """The counter advances every 100 ms: 3 ms of blocks that gained one step (15.7 J, as if
    5 kW) would be a figure of the counter's phase, not of the collective."""
    short = _ran(_timed(0.4, 15720, block_s=1e-3), _timed(0.5, 20940, block_s=1e-3))
    (row,) = of_point(RUN, _placement(), _done("all_reduce", (0, 1), short))
    assert (row.energy_j, row.energy_j_per_gb) == (None, None)


def test_a_row_of_a_gpu_without_an_energy_counter_says_no_energy_rather_than_a_part() -> None:
    done = _done("all_reduce", (0, 1), _ran(_timed(0.4, 15720), _timed(0.5, None)))
    (row,) = of_point(RUN, _placement(), done)
    assert (row.energy_j, row.energy_j_per_gb) == (None, None)
    assert row.comm_start_s == 0.5
