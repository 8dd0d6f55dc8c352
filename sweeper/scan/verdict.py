"""A verdict: the subject it names, its health and its evidence (figure, threshold and their
sources); and the verdicts that name something. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from sweeper.scan.fleet import Stage
from sweeper.scan.reference import Reference
from sweeper.wire import Name


class Health(Name):
    HEALTHY = "healthy"
    SLOW = "slow"  # ran, below the threshold
    FAILED = "failed"  # an error, a hang, wrong data, NVML evidence
    UNREACHABLE = "unreachable"  # its actors never started, or it left
    UNCONFIRMED = "unconfirmed"  # a suspect the scan did not separate from its partners
    FLAKY = "flaky"  # passes and failures of its own: its pass ratio says how often
    # NCCL's transport broke the tier's contract (sweeper/fabric): a configuration to fix on
    # the nodes, not a slow node
    MISCONFIGURED = "misconfigured"


CONDEMNED = (Health.SLOW, Health.FAILED, Health.UNREACHABLE, Health.FLAKY, Health.MISCONFIGURED)


class Subject(Name):
    NODE = "node"
    GPU = "gpu"
    NVLINK = "nvlink"  # two GPUs of one node
    LINK = "link"  # two nodes: the path between them
    GROUP = "group"  # a failing group whose culprit was not separated


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    subject: Subject
    nodes: tuple[str, ...]
    gpu: int | None = None
    peer_gpu: int | None = None  # an NVLink's other GPU
    health: Health
    stage: Stage | None = None  # where the deciding evidence came from
    partners: tuple[str, ...] = ()  # the nodes it was measured beside in that evidence
    busbw_gb_per_s: float | None = None  # its median figure there
    fleet_gb_per_s: float | None = None  # the fleet's median it was compared with
    threshold_gb_per_s: float | None = None
    threshold_source: str = ""  # where the threshold came from
    # the reference figure for its GPU model, tier, group size and operation, and its table
    # entry and source (`scan.reference`); None and empty where none is known
    reference_gb_per_s: float | None = None
    reference_source: str = ""
    tests: int = 0  # groups it took part in (internode; a GPU's: inside its node)
    passed: int = 0
    evidence: str = ""  # one sentence
    # failures of its that did not reproduce (`transient`), each in words: held against
    # nothing, kept so that one that comes back is seen
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        if self.subject is Subject.GPU:
            return f"{self.nodes[0]}/gpu{self.gpu}"
        if self.subject is Subject.NVLINK:
            return f"{self.nodes[0]}/gpu{self.gpu}-gpu{self.peer_gpu}"
        return ("-" if self.subject is Subject.LINK else "+").join(self.nodes)

    @property
    def condemned(self) -> bool:
        return self.health in CONDEMNED

    @property
    def pass_ratio(self) -> float | None:
        return self.passed / self.tests if self.tests else None

    @property
    def reference_share(self) -> float | None:
        """Its figure as a share of its reference figure; None where either is unknown."""
        if self.busbw_gb_per_s is None or not self.reference_gb_per_s:
            return None
        return self.busbw_gb_per_s / self.reference_gb_per_s


class Against(TypedDict):
    reference_gb_per_s: float | None
    reference_source: str


def against(ref: Reference | None) -> Against:
    """A verdict's reference fields, from its deciding test's reference."""
    if ref is None:
        return {"reference_gb_per_s": None, "reference_source": ""}
    return {"reference_gb_per_s": ref.busbw_gb_per_s, "reference_source": ref.source}


def named(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts that name something: condemned or unconfirmed, a condemned node's GPUs
    left out (they go with it)."""
    down = {v.nodes[0] for v in verdicts if v.subject is Subject.NODE and v.condemned}
    return [
        v
        for v in verdicts
        if v.health is not Health.HEALTHY
        and not (v.subject in (Subject.GPU, Subject.NVLINK) and v.nodes[0] in down)
    ]
