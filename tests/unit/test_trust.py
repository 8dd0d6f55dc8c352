"""What the driver makes safe before Ray starts (driver/trust.py) and the import path an actor
hands its rank (driver/actor.py): plain functions on files in a temporary home."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sweeper.driver import trust
from sweeper.driver.actor import import_path
from sweeper.errors import BadInput


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(trust.TOKEN_ENV, raising=False)
    monkeypatch.delenv(trust.TOKEN_PATH_ENV, raising=False)
    return tmp_path


def _token(home: Path, mode: int, directory_mode: int = 0o755) -> Path:
    (home / ".ray").mkdir(mode=directory_mode)
    (home / ".ray").chmod(directory_mode)
    token = home / ".ray" / "auth_token"
    token.write_text("secret")
    token.chmod(mode)
    return token


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_token_file_others_can_read_is_narrowed_with_one_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = _token(home, 0o644)
    trust.narrow_token_file()
    assert _mode(token) == 0o600
    assert _mode(token.parent) == 0o700
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert "readable by other users (0644)" in lines[0]
    trust.narrow_token_file()  # once narrowed, nothing more to say
    assert capsys.readouterr().err == ""


def test_a_token_file_named_by_its_variable_is_narrowed_and_its_directory_left(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = home / "secrets" / "token"
    token.parent.mkdir(mode=0o755)
    token.write_text("secret")
    token.chmod(0o640)
    monkeypatch.setenv(trust.TOKEN_PATH_ENV, str(token))
    trust.narrow_token_file()
    assert _mode(token) == 0o600
    assert _mode(token.parent) == 0o755


def test_an_owners_token_file_is_left_as_it_is(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = _token(home, 0o600, directory_mode=0o755)
    trust.narrow_token_file()
    assert _mode(token) == 0o600
    assert capsys.readouterr().err == ""


def test_a_token_given_in_the_environment_leaves_files_alone(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = _token(home, 0o644)
    monkeypatch.setenv(trust.TOKEN_ENV, "given")
    trust.narrow_token_file()
    assert _mode(token) == 0o644


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_another_users_token_file_others_can_read_is_refused(home: Path) -> None:
    token = _token(home, 0o644)
    os.chown(token, 65534, 65534)
    with pytest.raises(BadInput, match="not this user's to narrow"):
        trust.narrow_token_file()
    assert _mode(token) == 0o644


def test_a_minted_token_lives_in_the_environment_until_dropped(home: Path) -> None:
    assert trust.mint_token()
    minted = os.environ[trust.TOKEN_ENV]
    assert len(minted) >= 32
    assert not (home / ".ray").exists()
    trust.drop_token()
    assert trust.TOKEN_ENV not in os.environ


def test_a_token_the_user_gave_is_not_replaced(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trust.TOKEN_ENV, "given")
    assert not trust.mint_token()
    assert os.environ[trust.TOKEN_ENV] == "given"


def test_the_rank_import_path_drops_what_another_user_could_plant_in(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir(mode=0o755)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    archive = tmp_path / "lib.zip"
    archive.write_bytes(b"")
    entries = ["", ".", "relative", str(own), str(shared), str(tmp_path / "missing"), str(archive)]
    assert import_path(entries) == [str(own), str(archive)]


def test_a_working_directory_others_can_write_is_warned_of_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    trust.warn_if_shared(str(mine))
    assert capsys.readouterr().err == ""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    trust.warn_if_shared(str(shared))
    trust.warn_if_shared(str(shared))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert str(shared) in lines[0]
