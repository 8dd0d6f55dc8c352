"""sweeper: how fast a GPU cluster really moves data."""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    import os

    import pandas as pd

__all__ = ["__version__", "load"]


def load(path: str | os.PathLike[str] = "results") -> pd.DataFrame:
    """Read a results directory into a DataFrame with the canonical column types."""
    from sweeper.results.load import load as _load  # pandas: not for `import sweeper`

    return _load(path)
