"""The engines a point is timed in, as a registry keyed by `wire.Engine`. Each entry says whether
it is installed here (the driver asks before any rank starts), opens and closes a group's
communicator on a rank (the `ops.descriptor.Comm` every bind is written against), and says
which operations it runs (those that list it, `Collective.engines`).

Adding an engine is a member of `wire.Engine` and an `EngineEntry` subclass in `ENGINES`
(docs/ARCHITECTURE.md, "Where to add"; tests/unit/test_engines.py registers a toy one). The
driver loads this module to ask `missing`, so it imports no torch: an entry imports its
communicator's module in `open`, which runs in a rank's process only."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from sweeper.ops.descriptor import Collective, Comm
from sweeper.rank.preflight import nccl_available
from sweeper.wire import Engine

if TYPE_CHECKING:
    import torch
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    from sweeper.rank.torch_engine import TorchComm


@dataclass(frozen=True, kw_only=True, slots=True)
class Opening:
    """What an engine opens a group's communicator from, on one of its members."""

    group_id: str  # a group opens once per world: a key of its own in the store
    ranks: tuple[int, ...]  # the group's members, as world ranks
    rank: int  # this rank's world rank
    nodes: tuple[int, ...]  # node of each group rank (positions in the sweep's node list)
    store: TCPStore  # the world's rendezvous store, for what the members must share
    process_group: TorchComm  # the group's torch group: its agreements and barriers, any engine
    stream: torch.cuda.Stream | None  # the rank's work stream (CUDA ranks)

    @property
    def position(self) -> int:
        """This rank's rank in the group."""
        return self.ranks.index(self.rank)


class EngineEntry(ABC):
    """An engine as the rank and the driver see it."""

    engine: Engine  # its key in ENGINES, and the rows' `engine`
    title: ClassVar[str]  # how a skipped row names the engine's form of an operation

    def missing(self) -> str | None:
        """What this machine lacks for the engine (`--engine X needs ...`), or None."""
        return None

    @abstractmethod
    def open(self, at: Opening) -> Comm:
        """The group's communicator in this engine; every member calls it at once."""

    @abstractmethod
    def close(self, comm: Comm) -> None:
        """Give back what `open` made."""

    def why_not(self, collective: Collective) -> str | None:
        """Why this engine does not run an operation, if it does not: one that lists its
        engines runs on those only."""
        if collective.runs_on(self.engine):
            return None
        engines = " or ".join(f"{e}" for e in collective.engines or ())
        return f"no {self.title} form: this operation runs on the {engines} engine only"


class TorchEngine(EngineEntry):
    """torch.distributed on the group's own process group: what a PyTorch program pays."""

    engine = Engine.TORCH
    title = "torch.distributed"

    def open(self, at: Opening) -> Comm:
        return at.process_group

    def close(self, comm: Comm) -> None:
        """Nothing of its own: `Groups` destroys the group's process group."""


class NcclEngine(EngineEntry):
    """NCCL called directly (nccl4py), a communicator of the group's own beside torch's."""

    engine = Engine.NCCL
    title = "direct NCCL"

    def missing(self) -> str | None:
        if nccl_available():
            return None
        return (
            "NCCL's Python bindings (nccl4py): install sweeper with its nccl extra "
            "(pip install '.[nccl]' in its clone)"
        )

    def open(self, at: Opening) -> Comm:
        """Its first rank makes the unique id and passes it through the set's store; every
        member then joins (NCCL waits for all of them)."""
        from sweeper.rank.nccl import NcclComm, unique_id  # torch: a rank's, never the driver's

        assert at.stream is not None  # --engine nccl needs GPU ranks (planning refuses CPU)
        key = f"sweeper/nccl-id/{at.group_id}"
        if at.rank == at.ranks[0]:
            at.store.set(key, unique_id())
        uid = at.store.get(key).decode()
        return NcclComm(uid, at.position, len(at.ranks), at.nodes, at.stream)

    def close(self, comm: Comm) -> None:
        from sweeper.rank.nccl import NcclComm  # torch: a rank's, never the driver's

        assert isinstance(comm, NcclComm)
        comm.destroy()


ENGINES: dict[Engine, EngineEntry] = {e.engine: e for e in (TorchEngine(), NcclEngine())}
