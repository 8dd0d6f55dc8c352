"""sweeper as a library: `run` a sweep and get its rows as a DataFrame, or `plan` one, with the
keywords of `sweeper run` and `sweeper plan`.

The keywords are the SweepSpec's fields (declared once, in sweeper/planning/spec.py) and the
command's own few, given to each function as its signature (for `help()`, and type checkers
through the pydantic plugin), and checked by the spec as the command line is.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from pydantic import Field

from sweeper.errors import BadInput
from sweeper.planning.profile import build_spec, load_sweep_profile
from sweeper.planning.spec import SweepSpec
from sweeper.results.writer import columns

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


class PlanKeywords(RunKeywords):
    """`plan`'s keywords: `sweeper plan`'s options."""

    topology: Path | None = Field(
        None,
        description="A recorded topology (one node's), replicated `nodes` times: plan with no "
        "cluster. None: the nodes the cluster gives (Ray).",
    )
    results: Path | None = Field(
        None, description="Fit the cost model to the rows of an earlier run's results."
    )


def _keywords(
    model: Callable[Keywords, object],
) -> Callable[[Callable[..., Returned]], Callable[Keywords, Returned]]:
    """The function takes `model`'s fields as its keywords: its signature says so."""

    def give(function: Callable[..., Returned]) -> Callable[Keywords, Returned]:
        returned = inspect.signature(function).return_annotation
        signature = inspect.signature(model).replace(return_annotation=returned)
        function.__signature__ = signature  # type: ignore[attr-defined]
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


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class Run:
    """A finished sweep: its id, its rows (as `sweeper.load` reads them) and its report."""

    run_id: str
    rows: pd.DataFrame
    report: Path | None  # the HTML report; None with report=False


@_keywords(RunKeywords)
def run(**options: Any) -> Run:
    """Sweep as `sweeper run` does, with its options as keywords (`world=2`,
    `ops=["all_reduce"]` or `"all_reduce,all_gather"`, `max_size="64K"`, `report=False`;
    `help(sweeper.run)` lists them): the rows go to the results directory (`output`) and the
    report to `reports_dir` as they would, the progress to stderr. Bad options raise
    `sweeper.errors.BadInput` before anything starts; an unreachable cluster,
    `InfrastructureError`. Points that failed are rows whose `status` says so."""
    spec = _spec(options)
    # Ray and pandas load here, not at `import sweeper`: reading results needs neither
    from sweeper.driver import sweep
    from sweeper.driver.console import HumanConsole
    from sweeper.results.load import frame

    observer = HumanConsole(sys.stderr)
    try:
        finished = sweep.run(spec, observer)
    finally:
        observer.close()
    rows = frame([columns(row) for row in finished.rows])
    return Run(run_id=finished.run_id, rows=rows, report=finished.report)


@_keywords(PlanKeywords)
def plan(**options: Any) -> Plan:
    """The schedule `sweeper plan` prints, as a record: placement, actor sets and waves, and
    the estimated duration. With `topology` (a recorded node, `nodes` times) no cluster is
    needed; without it, the cluster's nodes are asked for through Ray."""
    topology, results = _path(options, "topology"), _path(options, "results")
    spec = _spec(options)
    from sweeper.commands import plan_estimate as planned  # pandas (the cost model): not at import

    return planned.plan(spec, topology, results)
