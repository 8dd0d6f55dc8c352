"""What a run's rows do not say: its command line, its options and its nodes' topology.

Kept beside the rows as `<results>/_runs/<run_id>.json`: the leading underscore hides it
from Parquet readers (pyarrow and pandas skip `_` and `.` names), so the dataset stays rows
only. The driver writes it before the first row and again at the end, saying how the run
ended (`ended`: complete or interrupted; still None after a kill); the report and `sweeper
history` read it. A run without one (an older run, or rows written by another tool) still
gets a report, without the link matrix and link peaks.
"""

from __future__ import annotations

import json
import shlex
import sys
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sweeper.errors import CorruptResults, ResultsUnwritable
from sweeper.results.files import RUN_ID, read_bounded, run_name, write_text
from sweeper.topology import Gpu, Node

RECORDS_DIR = "_runs"
# The options a record of an earlier release names otherwise: 0.1's results directory `output`
RENAMED_OPTIONS = {"output": "results"}


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    command: str  # the command line that started the run, as the shell would take it back
    options: dict[str, Any]  # every SweepSpec field, as JSON, by today's names
    nodes: tuple[Node, ...]
    ended: str | None = None  # complete, interrupted, or None: running, or killed

    @classmethod
    def of(
        cls,
        run_id: str,
        options: Mapping[str, Any],
        nodes: tuple[Node, ...],
        ended: str | None = None,
    ) -> RunRecord:
        """The record of a run of these options (`RunPlan.options`) on these nodes, started
        by this process's command line."""
        program = Path(sys.argv[0]).name if sys.argv else ""
        # `python -m sweeper` runs sweeper/__main__.py: show the command a user would type
        argv = ["sweeper" if program == "__main__.py" else program, *sys.argv[1:]]
        return cls(run_id, shlex.join(argv), dict(options), nodes, ended)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        nodes = tuple(
            Node(
                **{
                    **node,
                    "gpus": tuple(Gpu(**gpu) for gpu in node["gpus"]),
                    "links": tuple(tuple(row) for row in node["links"]),
                }
            )
            for node in data["nodes"]
        )
        # records from before `ended` existed were written once, at the end
        ended = data.get("ended", "complete")
        options = todays_options(data["options"])
        return cls(str(data["run_id"]), str(data["command"]), options, nodes, ended)


def todays_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A record's options by today's names (RENAMED_OPTIONS), so a run of an earlier release
    resumes and reports as one of today's; a name given both ways keeps today's value."""
    return {
        RENAMED_OPTIONS.get(name, name): value
        for name, value in options.items()
        if RENAMED_OPTIONS.get(name) not in options
    }


def path(results: Path, run_id: str) -> Path:
    return Path(results) / RECORDS_DIR / f"{run_name(run_id)}.json"


def save(results: Path, record: RunRecord) -> Path:
    """Write the record atomically (a reader never sees half of it)."""
    try:
        return write_text(
            path(results, record.run_id), json.dumps(record.to_json(), indent=1) + "\n"
        )
    except OSError as exc:
        raise ResultsUnwritable.of(results, exc) from None


def load(results: Path, run_id: str) -> RunRecord | None:
    """The run's record, or None when it has none, or one that is not a run record (junk,
    another JSON document, binary bytes, JSON nested past Python's recursion limit, a file
    over JSON_LIMIT_BYTES, a FIFO or a link: skipped with a CorruptResults warning naming
    it)."""
    where = path(results, run_id)
    try:
        data = read_bounded(where)
    except FileNotFoundError:
        return None
    except OSError as exc:  # not a regular file (a FIFO would block the read), or too large
        warnings.warn(f"skipped {where}: {exc.strerror or exc}", CorruptResults, stacklevel=2)
        return None
    try:
        return RunRecord.from_json(json.loads(data))
    except RecursionError:
        reason = "nested deeper than Python's recursion limit"
    # what malformed JSON, or JSON of another shape, raises on the way to a record
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    warnings.warn(f"skipped {where}: not a run record ({reason})", CorruptResults, stacklevel=2)
    return None


def run_ids(results: Path) -> list[str]:
    """The runs that have a record in `results` (a run stopped before its first row has
    nothing else), by name: a scan's summary beside them, and names that are no run id's,
    are not records."""
    found = (Path(results) / RECORDS_DIR).glob("*.json")
    named = (where.name.removesuffix(".json") for where in found)
    return sorted(r for r in named if RUN_ID.fullmatch(r) and not r.endswith(".scan"))
