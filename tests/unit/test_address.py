"""Ray addresses are checked as input before any connection: what is no address exits 2 in
one line, for every command that connects, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sweeper.cli import app
from sweeper.driver.connection import Address, parse_address
from sweeper.errors import BadInput


@pytest.mark.parametrize(
    ("given", "address"),
    [
        ("10.0.0.1:6379", Address(host="10.0.0.1", port=6379, client=False)),
        ("ray://head.svc.local:10001", Address(host="head.svc.local", port=10001, client=True)),
        ("[::1]:6379", Address(host="::1", port=6379, client=False)),
        ("auto", None),
    ],
)
def test_an_address_is_a_host_and_port_of_the_gcs_or_of_ray_client(
    given: str, address: Address | None
) -> None:
    assert parse_address(given, "--address") == address


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("foo:bar", "its port is no number from 1 to 65535"),
        ("localhost:99999", "its port is no number from 1 to 65535"),
        ("127.0.0.1:0", "its port is no number from 1 to 65535"),
        (":6379", "no host"),
        ("headnode", "no port"),
        ("ray://", "no host"),
        ("ray://:10001", "no host"),
        ("ray://head", "no port"),
        ("ray://head:abc", "its port is no number from 1 to 65535"),
        ("ray://head:10001/x", "nothing may come before the host or after the port"),
        ("ray://user@head:10001", "nothing may come before the host or after the port"),
        ("http://head:8265", "sweeper connects to no http:// address"),
        ("head\n:6379", "it holds a space or a control character"),
        ("he$d:6379", "'he$d' is no host name"),
    ],
)
def test_what_is_no_address_is_bad_input_that_says_why(given: str, why: str) -> None:
    with pytest.raises(BadInput) as raised:
        parse_address(given, "--address")
    assert str(raised.value) == f"--address {given!r} is no Ray address: {why}"


@pytest.mark.parametrize("command", ["run", "nightly", "topo", "plan"])
@pytest.mark.parametrize("address", ["foo:bar", "127.0.0.1:99999", "127.0.0.1:0", "ray://:10001"])
def test_every_command_that_connects_refuses_no_address_in_one_line_writing_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, address: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [command, "--address", address])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"sweeper: error: --address {address!r} is no Ray address")
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
