"""`sweeper run`'s exit code says where NCCL took another path than a group's tier's: 5,
with one line naming the groups, once every point ran (a failed point's 4 comes first)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.driver import sweep
from sweeper.driver.observer import Finished
from sweeper.wire import Status

FLAG = "nvlink group through SHM: check NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, peer access"


def _finishing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *rows: SimpleNamespace) -> None:
    """The sweep, at the Ray boundary: it ends with these rows."""
    monkeypatch.setattr(sweep, "run", lambda *_, **__: Finished("r", rows, 1.0, tmp_path))


def _row(group_id: str, flag: str | None, status: Status = Status.OK) -> SimpleNamespace:
    return SimpleNamespace(group_id=group_id, transport_flag=flag, status=status)


def test_a_run_whose_transport_broke_its_tier_exits_5_naming_the_groups(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _finishing(monkeypatch, tmp_path, _row("nvlink:n0r0,1/p2p_disable=1", FLAG), _row("g", None))
    result = CliRunner().invoke(app, ["run", "--results", str(tmp_path), "--no-report"])
    assert result.exit_code == 5
    assert result.stderr.strip() == (
        "sweeper: warning: NCCL took another path than the tier's for 1 group(s) "
        "(nvlink:n0r0,1/p2p_disable=1): each row's transport_flag says what to check, and the "
        "report opens with them"
    )
    # failed points say 4 first; a run whose every transport kept its tier, 0
    _finishing(monkeypatch, tmp_path, _row("a", FLAG), _row("b", None, Status.TIMEOUT))
    assert CliRunner().invoke(app, ["run", "--results", str(tmp_path)]).exit_code == 4
    _finishing(monkeypatch, tmp_path, _row("a", None))
    assert CliRunner().invoke(app, ["run", "--results", str(tmp_path)]).exit_code == 0
