"""A scan's verdicts as one JSON document, the run's scan summary: `document(scanned)` makes
it, `SCHEMA` is its JSON Schema (`sweeper config schema --verdicts` prints it), `verdicts(doc)`
reads the verdicts back. `sweeper scan --format json` prints it, the driver writes it beside
the run's record, and `sweeper export` turns it into verdict series. Pure.

The shape is stable within a `version`: a field is added only as optional, and anything else
is a new version. Every key of a verdict is always there (null where it does not apply), so a
reader never guesses whether a key was left out or does not exist.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.scan.fleet import Fleet, GroupOutcome, Stage
from sweeper.scan.policy import Strategy
from sweeper.scan.reference import entry
from sweeper.scan.simulate import WaveRun
from sweeper.scan.thresholds import Finding
from sweeper.scan.verdict import Health, Subject, Verdict
from sweeper.topology import Gpu
from sweeper.topology import Node as Machine

VERSION = 1
KIND = "sweeper.scan"


@dataclass(frozen=True, kw_only=True, slots=True)
class Scanned:
    """A finished scan: what ran, how long each wave took, and the judge's verdicts."""

    run_id: str
    fleet: Fleet
    strategy: Strategy
    outcomes: tuple[GroupOutcome, ...]
    verdicts: tuple[Verdict, ...]
    waves: tuple[WaveRun, ...]  # each wave as it ran on the cluster, timed
    rows: int
    seconds: float  # from connecting to the verdicts
    # Rank actors started, each a process of its own: one a rank where no node left or
    # failed to start, or where the other nodes' ranks joined again without it; more where
    # an actor set started again (a drop that failed) or a failed group's were replaced.
    actors_started: int = 0
    machines: tuple[Machine, ...] = ()  # the nodes as discovered: GPU UUIDs, PCI bus ids
    findings: tuple[Finding, ...] = ()  # the fleet as a subject (`thresholds.findings`)


def _gpus(machines: Sequence[Machine]) -> dict[str, dict[int, Gpu]]:
    return {m.node_id: {g.index: g for g in m.gpus} for m in machines}


def _verdict(v: Verdict, hosts: Mapping[str, str], gpus: Mapping[str, dict[int, Gpu]]) -> Any:
    known = gpus.get(v.nodes[0], {}).get(v.gpu) if v.gpu is not None else None
    share = v.reference_share
    return {
        "name": v.name,
        "subject": str(v.subject),
        "health": str(v.health),
        "nodes": list(v.nodes),
        "hosts": [hosts.get(n, n) for n in v.nodes],
        "gpu": v.gpu,
        "peer_gpu": v.peer_gpu,
        "uuid": known.uuid if known else None,
        "pci_bus_id": known.pci_bus_id if known else None,
        "stage": str(v.stage) if v.stage else None,
        "partners": list(v.partners),
        "busbw_gb_per_s": v.busbw_gb_per_s,
        "fleet_gb_per_s": v.fleet_gb_per_s,
        "threshold_gb_per_s": v.threshold_gb_per_s,
        "threshold_source": v.threshold_source,
        "reference": entry(v.reference_source) or None,
        "reference_gb_per_s": v.reference_gb_per_s,
        "reference_share": None if share is None else round(share, 4),
        "tests": v.tests,
        "passed": v.passed,
        "pass_ratio": v.pass_ratio,
        "evidence": v.evidence,
        "notes": list(v.notes),
    }


def _stages(waves: Sequence[WaveRun]) -> list[dict[str, Any]]:
    """Each stage in the order it first ran: its waves, groups and seconds together."""
    out: dict[str, dict[str, Any]] = {}
    for w in waves:
        stage = out.setdefault(str(w.stage), {"stage": str(w.stage), "waves": 0, "groups": 0})
        stage["waves"] += 1
        stage["groups"] += w.groups
        stage["seconds"] = round(stage.get("seconds", 0.0) + w.seconds, 3)
    return list(out.values())


def document(scanned: Scanned) -> dict[str, Any]:
    """The scan's summary: `SCHEMA`'s shape, JSON types only."""
    hosts = {n.id: n.host for n in scanned.fleet.nodes}
    gpus = _gpus(scanned.machines)
    nodes = [v for v in scanned.verdicts if v.subject is Subject.NODE]
    return {
        "version": VERSION,
        "kind": KIND,
        "run_id": scanned.run_id,
        "strategy": str(scanned.strategy),
        "seed": scanned.strategy.seed,
        "gpu_model": scanned.fleet.gpu_model,
        "seconds": round(scanned.seconds, 3),
        "rows": scanned.rows,
        "groups": len(scanned.outcomes),
        "actors_started": scanned.actors_started,
        # the fleet as a subject, before any node: what operators read first
        "findings": [
            {
                "kind": f.kind,
                "off": f.off,
                "figure_gb_per_s": f.figure_gb_per_s,
                "threshold_gb_per_s": f.threshold_gb_per_s,
                "source": f.source,
                "below": f.below,
                "nodes": f.nodes,
                "evidence": f.evidence,
            }
            for f in scanned.findings
        ],
        "nodes": [
            {
                "id": n.id,
                "host": n.host,
                "gpus": n.gpus,
                "domain": n.domain,
            }
            for n in scanned.fleet.nodes
        ],
        "stages": _stages(scanned.waves),
        "waves": [
            {
                "index": w.index,
                "stage": str(w.stage),
                "groups": w.groups,
                "largest": w.largest,
                "seconds": round(w.seconds, 3),
            }
            for w in scanned.waves
        ],
        "health": dict(sorted(Counter(str(v.health) for v in nodes).items())),
        "condemned": [v.name for v in scanned.verdicts if v.condemned],
        "verdicts": [_verdict(v, hosts, gpus) for v in scanned.verdicts],
        # each reference the verdicts quote, once: a fleet's verdicts share a few
        "references": {
            entry(source): source
            for source in dict.fromkeys(v.reference_source for v in scanned.verdicts)
            if source
        },
    }


def verdicts(doc: Mapping[str, Any]) -> list[Verdict]:
    """The verdicts of a document `SCHEMA` accepts, as the judge gave them."""
    sources = doc.get("references", {})
    return [
        Verdict(
            subject=Subject(v["subject"]),
            nodes=tuple(v["nodes"]),
            gpu=v["gpu"],
            peer_gpu=v.get("peer_gpu"),
            health=Health(v["health"]),
            stage=Stage(v["stage"]) if v["stage"] else None,
            partners=tuple(v["partners"]),
            busbw_gb_per_s=v["busbw_gb_per_s"],
            fleet_gb_per_s=v["fleet_gb_per_s"],
            threshold_gb_per_s=v["threshold_gb_per_s"],
            threshold_source=v.get("threshold_source") or "",
            reference_gb_per_s=v.get("reference_gb_per_s"),
            reference_source=sources.get(v.get("reference") or "", ""),
            tests=v["tests"],
            passed=v["passed"],
            evidence=v["evidence"],
            notes=tuple(v.get("notes", ())),
        )
        for v in doc["verdicts"]
    ]


def _nullable(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **more}


_STRINGS = {"type": "array", "items": {"type": "string"}}
_COUNT = {"type": "integer", "minimum": 0}
_SECONDS = {"type": "number", "minimum": 0}
_GBPS = _nullable("number", minimum=0, description="GB/s (1e9 bytes per second)")
_STAGE = {"enum": list(Stage.values())}


def _object(description: str, properties: dict[str, Any], *optional: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": [k for k in properties if k not in optional],
    }


_VERDICT = _object(
    "One node's, GPU's, link's or unseparated group's verdict and its evidence.",
    {
        "name": {"type": "string", "description": "node, node/gpuN, a-b (link), a+b (group)"},
        "subject": {"enum": list(Subject.values())},
        "health": {"enum": list(Health.values())},
        "nodes": {**_STRINGS, "minItems": 1, "description": "node ids: one, or a link's ends"},
        "hosts": {**_STRINGS, "minItems": 1, "description": "the nodes' host names, in order"},
        "gpu": _nullable("integer", minimum=0, description="a GPU's index on its node"),
        "peer_gpu": _nullable("integer", minimum=0, description="an NVLink's other GPU"),
        "uuid": _nullable("string", description="a GPU's UUID, where known"),
        "pci_bus_id": _nullable("string", description="a GPU's PCI bus id, where known"),
        "stage": {"enum": [*Stage.values(), None], "description": "where its evidence came from"},
        "partners": {**_STRINGS, "description": "the node ids it was measured beside"},
        "busbw_gb_per_s": {**_GBPS, "description": "its median bus bandwidth there, GB/s"},
        "fleet_gb_per_s": {**_GBPS, "description": "the fleet's median it was compared with"},
        "threshold_gb_per_s": {**_GBPS, "description": "the threshold it had to reach"},
        "threshold_source": {
            "type": "string",
            "description": "where the threshold came from: the fleet's median, the reference "
            "table (with its source), a flag",
        },
        "reference": _nullable(
            "string",
            description="the reference figure's table entry (its source: the document's "
            "references); null where none is known for its GPU model, tier, group size and "
            "operation",
        ),
        "reference_gb_per_s": {**_GBPS, "description": "that reference's figure"},
        "reference_share": _nullable(
            "number",
            minimum=0,
            description="busbw_gb_per_s as a share of reference_gb_per_s (0.46: 46%)",
        ),
        "tests": {**_COUNT, "description": "internode groups it took part in"},
        "passed": {**_COUNT, "description": "of those, passed"},
        "pass_ratio": _nullable("number", minimum=0, maximum=1),
        "evidence": {"type": "string", "description": "one sentence"},
        "notes": {
            **_STRINGS,
            "description": "its failures that did not reproduce (transient), each in words: "
            "held against nothing",
        },
        "retest": {
            "type": "string",
            "description": "a condemned verdict's: the command that scans its subject again",
        },
    },
    "retest",
    # added within version 1: a summary written before them has none
    "reference",
    "reference_gb_per_s",
    "reference_share",
    "notes",
)

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sweeper scan summary",
    **_object(
        "A scan's verdict for every node, GPU and link, with the evidence, and how it ran.",
        {
            "version": {"const": VERSION},
            "kind": {"const": KIND},
            "run_id": {"type": "string"},
            "strategy": {"type": "string", "description": "adaptive, ring, bisect, random:K, all"},
            "seed": {"type": "integer", "description": "random:K's matchings"},
            "gpu_model": _nullable("string"),
            "seconds": {**_SECONDS, "description": "from connecting to the verdicts"},
            "rows": _COUNT,
            "groups": {**_COUNT, "description": "groups measured, every stage"},
            "actors_started": {
                **_COUNT,
                "description": "rank actors started: one a rank, more where a set started again",
            },
            "nodes": {
                "type": "array",
                "items": _object(
                    "A node of the fleet.",
                    {
                        "id": {"type": "string", "description": "its Ray node id"},
                        "host": {"type": "string"},
                        "gpus": {**_COUNT, "description": "its ranks (GPUs, or CPU ranks)"},
                        "domain": _nullable("string", description="its --domain-label value"),
                    },
                ),
            },
            "stages": {
                "type": "array",
                "items": _object(
                    "A stage, in the order it first ran.",
                    {"stage": _STAGE, "waves": _COUNT, "groups": _COUNT, "seconds": _SECONDS},
                ),
            },
            "waves": {
                "type": "array",
                "items": _object(
                    "A wave: every group of it at once.",
                    {
                        "index": _COUNT,
                        "stage": _STAGE,
                        "groups": _COUNT,
                        "largest": {**_COUNT, "description": "nodes in its largest group"},
                        "seconds": _SECONDS,
                    },
                ),
            },
            "health": {
                "type": "object",
                "description": "nodes per verdict",
                "propertyNames": {"enum": list(Health.values())},
                "additionalProperties": _COUNT,
            },
            "condemned": {**_STRINGS, "description": "the names of slow, failed, unreachable"},
            "findings": {
                "type": "array",
                "items": _object(
                    "The fleet as a subject: a threshold the fleet as a whole misses (off: no "
                    "node is condemned on it alone), or none absolute to hold it to.",
                    {
                        "kind": {"enum": ["gate", "internode"]},
                        "off": {"type": "boolean"},
                        "figure_gb_per_s": {**_GBPS, "description": "the fleet's median"},
                        "threshold_gb_per_s": _GBPS,
                        "source": {
                            "type": "string",
                            "description": "where the threshold came from",
                        },
                        "below": {
                            **_COUNT,
                            "description": "nodes under it in every group of theirs",
                        },
                        "nodes": {**_COUNT, "description": "nodes those groups measured"},
                        "evidence": {"type": "string"},
                    },
                ),
            },
            "verdicts": {"type": "array", "items": _VERDICT},
            "references": {
                "type": "object",
                "description": "each reference the verdicts quote, by its table entry: the "
                "entry and where its figure comes from (a URL, or the command, machine and "
                "date it was measured with)",
                "additionalProperties": {"type": "string"},
            },
        },
        "actors_started",
        "findings",
        "references",
    ),
}
