"""`sweeper run` through the CLI in this process, for tests that read its rows back."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

import sweeper
from sweeper.cli import app


def sweep(tmp_path: Path, *args: str, exit_code: int = 0) -> pd.DataFrame:
    """Run with `args`, rows to tmp_path/results; the exit code must be `exit_code`."""
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["run", "--results", str(out), *args])
    assert result.exit_code == exit_code, result.output
    return sweeper.load(out)


def statuses(df: pd.DataFrame) -> dict[str, str]:
    """Each point's status, keyed algorithm@size."""
    keys = df["algorithm"] + "@" + df["size_bytes"].astype(str)
    return dict(zip(keys, df["status"], strict=True))
