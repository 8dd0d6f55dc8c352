"""sweeper: how fast a GPU cluster really moves data."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from sweeper._version import __version__
from sweeper.errors import BadInput

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.api import Run, plan, run

__all__ = ["Run", "__version__", "load", "plan", "run"]

# sweeper.api's names, loaded on first use: the spec's model (pydantic) is not needed to read
# results, nor by the Ray actors, which import this package too
_API = frozenset({"Run", "plan", "run"})


def __getattr__(name: str) -> Any:
    if name in _API:
        from sweeper import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(path: str | os.PathLike[str] = "results") -> pd.DataFrame:
    """Read a results directory into a DataFrame with the canonical column types;
    FileNotFoundError where there is none, BadInput for an empty path (which Path would
    take for the current directory)."""
    if not os.fspath(path).strip():
        raise BadInput("sweeper.load(''): an empty path; name a results directory")
    from sweeper.results.load import load as _load  # pandas: not for `import sweeper`

    return _load(path)
