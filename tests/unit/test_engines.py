"""The engine registry (sweeper/rank/engines.py), and the worked example of docs/ARCHITECTURE.md's
"Where to add an engine": a toy engine, a member of `wire.Engine` and an `EngineEntry`, timed
and checked by a real rank (worker.Rank on gloo, a world of one in this process) beside torch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from sweeper.ops.descriptor import Comm, Step
from sweeper.ops.registry import REGISTRY
from sweeper.rank.engines import ENGINES, EngineEntry, Opening
from sweeper.rank.worker import Rank
from sweeper.wire import Backend, Engine, Limits, Point, RayFacts, Status, Timing


class StoreComm:
    """A group's communicator that all-reduces through the world's rendezvous store: each
    rank posts its tensor under the call's number, then sums every rank's in rank order. A
    toy (the store keeps every call's parts), but a transport of its own: no gloo in it."""

    group = None  # no torch.distributed group: operations that reach torch do not run here

    def __init__(self, at: Opening) -> None:
        self.store = at.store
        self.rank = at.position
        self.size = len(at.ranks)
        self.nodes = at.nodes
        self.prefix = f"store-engine/{at.group_id}"
        self.calls = 0

    def all_reduce(self, data: torch.Tensor) -> Step:
        def step() -> None:
            self.calls += 1
            key = f"{self.prefix}/{self.calls}"
            self.store.set(f"{key}/{self.rank}", data.numpy().tobytes())
            parts = [
                torch.frombuffer(bytearray(self.store.get(f"{key}/{peer}")), dtype=data.dtype)
                for peer in range(self.size)
            ]
            data.copy_(torch.stack(parts).sum(0))

        return step


class StoreEngine(EngineEntry):
    """The toy engine's entry: installed everywhere, its communicator opened from the store."""

    title = "store"

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.opened: list[StoreComm] = []

    def open(self, at: Opening) -> StoreComm:
        comm = StoreComm(at)
        self.opened.append(comm)
        return comm

    def close(self, comm: Comm) -> None:
        """Nothing to give back: the store is the world's."""


@pytest.fixture
def store_engine(monkeypatch: pytest.MonkeyPatch) -> StoreEngine:
    """`Engine.STORE = "store"` and its entry in ENGINES, for this test only (a real engine
    writes its member into wire.Engine and its entry into engines.ENGINES)."""
    member = str.__new__(Engine, "store")
    member._name_, member._value_ = "STORE", "store"
    monkeypatch.setitem(Engine._member_map_, "STORE", member)
    monkeypatch.setitem(Engine._value2member_map_, "store", member)
    monkeypatch.setattr(Engine, "_member_names_", [*Engine._member_names_, "STORE"])
    entry = StoreEngine(Engine("store"))
    monkeypatch.setitem(ENGINES, entry.engine, entry)
    return entry


@pytest.fixture
def rank(monkeypatch: pytest.MonkeyPatch, store_engine: StoreEngine) -> Iterator[Rank]:
    """A gloo rank in a world of one, in this process, with a group "g" open in the torch and
    the store engines; it leaves the world (torch.distributed's) at the end."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # join sets it where unset: kept to the test
    facts = RayFacts(gpu_ids=(), node_id="node", ip="127.0.0.1")
    limits = Limits(host_share_bytes=2**30)
    engines = (Engine.TORCH, store_engine.engine)
    rank = Rank(Backend.GLOO, (), limits, None, engines, facts=facts)
    try:
        port = rank.listen("127.0.0.1")
        rank.join(0, 1, "127.0.0.1", port, 60.0, "127.0.0.1")
        rank.open_group("g", (0,), (0,))
        yield rank
    finally:
        rank.leave()


def _point(op: str, engines: tuple[Engine, ...]) -> Point:
    timing = Timing(iters=5, warmup=2, blocks=2, engines=engines)
    return Point(group_id="g", op=op, dtype="float32", size_bytes=4096, count=1024, timing=timing)


def test_a_registered_engine_is_timed_and_checked_by_the_rank_beside_torch(
    rank: Rank, store_engine: StoreEngine
) -> None:
    engines = (Engine.TORCH, store_engine.engine)
    assert rank.prepare(_point("all_reduce", engines)).status == Status.OK
    timed = rank.execute().timed
    assert [t.engine for t in timed] == list(engines)
    for t in timed:
        assert t.skipped is None
        assert t.n_wrong == 0
        assert [b.iters for b in t.blocks] == [5, 5]
    (comm,) = store_engine.opened
    assert comm.calls >= 2 * 5  # the blocks timed the store engine's own step


def test_an_engine_leaves_out_what_lists_other_engines_and_says_which(
    rank: Rank, store_engine: StoreEngine
) -> None:
    assert REGISTRY["all_to_all:pairwise"].engines == (Engine.TORCH,)
    assert rank.prepare(_point("all_to_all:pairwise", (store_engine.engine,))).status == Status.OK
    (timed,) = rank.execute().timed
    assert timed.skipped == "no store form: this operation runs on the torch engine only"
    assert timed.blocks == ()
    assert store_engine.opened[0].calls == 0


def test_every_engine_has_its_entry_under_its_own_name() -> None:
    assert list(ENGINES) == list(Engine)
    assert all(entry.engine == engine for engine, entry in ENGINES.items())
