"""sweeper: how fast a GPU cluster really moves data.

    run(**options) -> Run      sweep as `sweeper run` does; its rows as a DataFrame
    plan(**options) -> Plan    the schedule and duration `sweeper plan` estimates
    load(path, run_id=, columns=, filters=) -> DataFrame   the rows of a results directory
    Run                        a finished sweep: run_id, rows, report
    Plan                       a planned sweep: spec, placement, schedule, estimate

help(sweeper.run) lists every keyword with its description; docs/API.md has an example."""

from __future__ import annotations

from sweeper._version import __version__

# Nothing else at import: the command line's signal handlers come after this package's
# import (sweeper/entry.py), and a signal before them has Python's own ending
TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence
    from typing import Any

    import pandas as pd
    import pyarrow.dataset as ds

    from sweeper.api import Run, plan, run
    from sweeper.commands.plan_estimate import Plan

__all__ = ["Plan", "Run", "__version__", "load", "plan", "run"]

# The API's names, loaded on first use: the spec's model (pydantic) is not needed to read
# results, nor by the Ray actors, which import this package too; nor pandas (Plan's module)
_LAZY = {"Run": "sweeper.api", "plan": "sweeper.api", "run": "sweeper.api"}
_LAZY["Plan"] = "sweeper.commands.plan_estimate"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The lazy names too, so `help(sweeper)` and completion see them."""
    return sorted({*globals(), *__all__})


def load(
    path: str | os.PathLike[str] = "results",
    run_id: str | Iterable[str] | None = None,
    columns: Sequence[str] | None = None,
    filters: ds.Expression | Sequence[Any] | None = None,
) -> pd.DataFrame:
    """Read a results directory into a DataFrame with the canonical column types: every
    run's rows, or `run_id`'s (a run id, `latest`, or several ids), and every column or
    only `columns` (read from the Parquet alone), every row or only those `filters` match
    (pyarrow's: an expression such as `pyarrow.dataset.field("op") == "all_reduce"`, or
    tuples as `pyarrow.parquet.read_table` takes them). FileNotFoundError where there is no
    directory; BadInput for an empty path (which Path would take for the current
    directory), a run the directory does not have, a column the rows do not have, or a
    filter that cannot be judged."""
    import os
    from pathlib import Path

    from sweeper.errors import BadInput

    if not os.fspath(path).strip():
        raise BadInput("sweeper.load(''): an empty path; name a results directory")
    from sweeper.results.load import load as _load  # pandas: not for `import sweeper`
    from sweeper.results.load import resolve

    if isinstance(columns, str):
        columns = [columns]
    if run_id is not None:
        asked = [run_id] if isinstance(run_id, str) else list(run_id)
        run_id = [resolve(Path(path), one) for one in asked]
    return _load(path, run_id, columns, filters)
