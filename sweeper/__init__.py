"""sweeper: how fast a GPU cluster really moves data."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    import os

    import pandas as pd

    from sweeper.api import Run, plan, run

__all__ = ["Run", "__version__", "load", "plan", "run"]

# sweeper.api's names, loaded on first use: the spec's model (pydantic) is not needed to read
# results, nor by the Ray actors, which import this package too
_API = frozenset({"Run", "plan", "run"})
# `plan` names both the API's function and the planning subpackage. The subpackage (a
# docstring) is loaded now, so that loading its modules later binds nothing here, and its
# name dropped, so that `sweeper.plan` reaches __getattr__ and is the function.
importlib.import_module("sweeper.plan")
del globals()["plan"]


def __getattr__(name: str) -> Any:
    if name in _API:
        from sweeper import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(path: str | os.PathLike[str] = "results") -> pd.DataFrame:
    """Read a results directory into a DataFrame with the canonical column types."""
    from sweeper.results.load import load as _load  # pandas: not for `import sweeper`

    return _load(path)
