"""sweeper as a library: `run` a sweep and get its rows as a DataFrame, or `plan` one, with the
keywords of `sweeper run` and `sweeper plan`.

The keywords are the SweepSpec's fields (each declared once, in its section of
sweeper/planning/spec.py) and the command's own few. Each function's signature and docstring
are made from those fields, as `sweeper run -h` is: `help(sweeper.run)` lists every keyword
with its default and the description `-h` gives it. The values are checked by the spec as the
command line's are.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from pydantic import BaseModel, Field
from pydantic.fields import FieldInfo

from sweeper.errors import BadInput
from sweeper.planning.profile import build_spec, load_sweep_profile
from sweeper.planning.spec import SweepSpec

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.commands.plan_estimate import Plan

Keywords = ParamSpec("Keywords")
Returned = TypeVar("Returned")


class RunKeywords(SweepSpec):
    """`run`'s keywords: `sweeper run`'s options, the spec's fields, and a profile."""

    profile: Path | None = Field(
        None, description="A YAML profile (sweeper run --profile); the keywords override it."
    )
    progress: bool = Field(
        True,
        description="A line per point as it runs, to stderr; False (a notebook): only the "
        "run's first line and its summary.",
    )


class PlanKeywords(SweepSpec):
    """`plan`'s keywords: `sweeper plan`'s options."""

    profile: Path | None = Field(
        None, description="A YAML profile (sweeper plan --profile); the keywords override it."
    )
    topology: Path | None = Field(
        None,
        description="A recorded topology (one node's, or `sweeper topo --format json` output), "
        "replicated `nodes` times: plan with no cluster. None: the nodes the cluster gives (Ray).",
    )
    calibrate: Path | None = Field(
        None, description="Fit the cost model to the rows of an earlier run (its results)."
    )


class _Shown:
    """A default as the keyword takes it, for the signature: "results", not PosixPath(...)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _shown(default: object) -> object:
    if isinstance(default, Path):
        return str(default)
    if isinstance(default, BaseModel):  # a record given as key=value pairs (moe)
        pairs = ",".join(f"{k}={v}" for k, v in default.model_dump().items())
        return _Shown(repr(pairs))
    return default


def _documented(fields: dict[str, FieldInfo], summary: str) -> str:
    """`summary`, then each keyword: its default and the description `-h` gives its option."""
    lines = [inspect.cleandoc(summary), "", "Keywords (as the command's -h describes them):"]
    for name, field in fields.items():
        default = _shown(field.get_default(call_default_factory=True))
        lines += [f"    {name}={default!r}", f"        {field.description}"]
    return "\n".join(lines)


def _keywords(
    model: Callable[Keywords, object],
) -> Callable[[Callable[..., Returned]], Callable[Keywords, Returned]]:
    """The function takes `model`'s fields as its keywords: its signature (the defaults as a
    keyword takes them, no annotations: the model's are pydantic's machinery) and its
    docstring (each keyword's description) say so."""

    fields = cast(type[BaseModel], model).model_fields

    def give(function: Callable[..., Returned]) -> Callable[Keywords, Returned]:
        returned = inspect.signature(function).return_annotation
        parameters = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=_shown(field.get_default(call_default_factory=True)),
            )
            for name, field in fields.items()
        ]
        function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            parameters, return_annotation=returned
        )
        function.__doc__ = _documented(fields, function.__doc__ or "")
        return function

    return give


def _path(options: dict[str, Any], name: str) -> Path | None:
    """The path keyword `name`, taken out of `options`; an empty one is BadInput, where
    Path("") would be the current directory."""
    value = options.pop(name, None)
    if value is None:
        return None
    if not str(value).strip():
        raise BadInput(f"{name}='': an empty path; name a file or directory")
    return Path(value)


def _spec(options: dict[str, Any]) -> SweepSpec:
    """The spec of the options given (a profile's, overridden by the rest); BadInput as the
    command line's."""
    profile = _path(options, "profile")
    return build_spec(load_sweep_profile(profile) if profile is not None else None, **options)


@dataclass(frozen=True, kw_only=True, slots=True, eq=False, repr=False)
class Run:
    """A finished sweep: its id, its rows (what `sweeper.load(results, run_id=...)` gives)
    and its HTML report (None with report=False)."""

    run_id: str
    rows: pd.DataFrame
    report: Path | None

    def __repr__(self) -> str:
        """One line, where the dataclass's repr printed the whole DataFrame."""
        rows, columns = self.rows.shape
        report = str(self.report) if self.report else None
        shape = f"<{rows} rows x {columns} columns>"
        return f"Run(run_id={self.run_id!r}, rows={shape}, report={report!r})"


@_keywords(RunKeywords)
def run(**options: Any) -> Run:
    """Sweep as `sweeper run` does, with its options as keywords: `world=2`,
    `ops=["all_reduce"]` or `"all_reduce,all_gather"`, `max_size="64K"`, `report=False`.
    The rows go to the results directory and the report to `reports_dir`, as the command's
    do; the progress goes to stderr. Bad options raise `sweeper.errors.BadInput` before
    anything starts; an unreachable cluster, `sweeper.errors.InfrastructureError`. Points
    that failed are rows whose `status` says so."""
    progress = options.pop("progress", True)
    spec = _spec(options)
    # Ray and pandas load here, not at `import sweeper`: reading results needs neither
    from sweeper.driver import sweep
    from sweeper.driver.console import HumanConsole
    from sweeper.results.load import load

    observer = HumanConsole(sys.stderr, points=bool(progress))
    try:
        finished = sweep.run(spec, observer)
    finally:
        observer.close()
    rows = load(spec.results, finished.run_id)  # as sweeper.load gives them: one frame
    return Run(run_id=finished.run_id, rows=rows, report=finished.report)


@_keywords(PlanKeywords)
def plan(**options: Any) -> Plan:
    """The schedule `sweeper plan` prints, as a record: placement, actor sets and waves, and
    the estimated duration. With `topology` (a recorded node, `nodes` times) no cluster is
    needed; without it, the cluster's nodes are asked for through Ray."""
    topology, calibrate = _path(options, "topology"), _path(options, "calibrate")
    spec = _spec(options)
    from sweeper.commands import plan_estimate as planned  # pandas (the cost model): not at import

    return planned.plan(spec, topology, calibrate)
