"""The rank's capture of NCCL's debug output: it sets NCCL's debug variables only where the
user set none (environment or NCCL's configuration files), into a memfd of its own; reads the
user's file where their settings make one readable; and gives each group's communicator the
lines NCCL wrote while that communicator started or was called. NCCL itself is stood in for by
what it does with NCCL_DEBUG_FILE: opens the path for writing and writes whole lines."""

from __future__ import annotations

import os
import pwd
import socket
from pathlib import Path

import pytest

from sweeper.rank.nccl_debug import (
    NcclDebug,
    conf_files,
    configured,
    expanded,
    nccl_variables,
    unreadable,
)
from sweeper.wire import Link

RECORDED = Path(__file__).parents[1] / "data" / "nccl_logs" / "h200-x4-2026-11-27"
GROUP, TORCH, NCCL = "g0", "torch", "nccl"


def _line(message: str, pid: int | None = None) -> str:
    return f"vm:{pid or os.getpid()}:{os.getpid()} [0] NCCL INFO {message}\n"


@pytest.fixture
def mine() -> NcclDebug:
    environ: dict[str, str] = {}
    debug = NcclDebug.start(environ, files=())
    assert environ["NCCL_DEBUG_FILE"] == debug.path
    return debug


def _nccl_writes(debug: NcclDebug, *lines: str) -> None:
    assert debug.path is not None
    with open(debug.path, "a") as out:  # NCCL's file, opened as its own
        out.write("".join(lines))


def test_where_the_user_set_nothing_the_rank_asks_nccl_for_setup_lines_only() -> None:
    environ = {"NCCL_NVLS_ENABLE": "0"}

    debug = NcclDebug.start(environ, files=())

    assert environ["NCCL_DEBUG"] == "INFO"
    assert environ["NCCL_DEBUG_SUBSYS"] == "INIT,NET"  # no COLL, no TUNING: nothing per call
    assert environ["NCCL_DEBUG_FILE"] == f"/proc/self/fd/{debug.fd}"
    assert environ["NCCL_NVLS_ENABLE"] == "0"  # nothing else is touched
    assert debug.added == ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")
    assert debug.unknown is None


def test_the_rows_nccl_env_lists_the_users_variables_not_the_debug_output_sweeper_set() -> None:
    environ = {"NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1", "PATH": "/bin"}

    debug = NcclDebug.start(environ, files=())

    assert nccl_variables(environ, debug.added) == (
        ("NCCL_NVLS_ENABLE", "0"),
        ("NCCL_P2P_DISABLE", "1"),
    )


def test_its_file_is_nameless_and_its_own() -> None:
    debug = NcclDebug.start({}, files=())
    assert debug.fd is not None

    assert os.readlink(f"/proc/self/fd/{debug.fd}").startswith("/memfd:sweeper-nccl-debug")
    assert os.get_inheritable(debug.fd) is False


def test_each_communicator_gets_the_lines_written_while_it_started_or_was_called(
    mine: NcclDebug,
) -> None:
    _nccl_writes(mine, _line("24 coll channels, 24 collnet channels, 0 nvls channels"))
    mine.take((GROUP, TORCH))  # the group's torch communicator started
    _nccl_writes(mine, _line("Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct"))
    first = mine.take((GROUP, NCCL))  # the nccl engine's first call

    torch, nccl = mine.fabric((GROUP, TORCH), first), mine.fabric((GROUP, NCCL), first)

    assert torch.channels == 24
    assert torch.links == ()
    assert nccl.links == (Link(src=0, dst=1, via="SHM/direct/direct"),)


def test_what_a_communicator_set_up_stays_with_it_and_goes_when_its_group_closes(
    mine: NcclDebug,
) -> None:
    _nccl_writes(mine, _line("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"))
    mine.take((GROUP, TORCH))
    _nccl_writes(mine, _line("Channel 00/1 : 0[0] -> 2[2] via P2P/CUMEM"))
    later = mine.take((GROUP, TORCH))  # a later point: all_to_all's peers

    assert len(mine.fabric((GROUP, TORCH), later).links) == 2

    mine.forget(GROUP)

    assert mine.fabric((GROUP, TORCH), later).links == ()


def test_a_group_of_every_rank_has_what_the_world_set_up(mine: NcclDebug) -> None:
    _nccl_writes(mine, _line("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"))
    mine.take(("world", TORCH))

    mine.share(("world", TORCH), (GROUP, TORCH))

    assert len(mine.fabric((GROUP, TORCH), mine.take((GROUP, TORCH))).links) == 1


def test_a_line_nccl_is_still_writing_waits_for_its_end(mine: NcclDebug) -> None:
    whole = _line("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM")
    _nccl_writes(mine, whole[:30])
    assert mine.take((GROUP, TORCH)).links == ()

    _nccl_writes(mine, whole[30:])

    assert mine.take((GROUP, TORCH)).links == (Link(src=0, dst=1, via="P2P/CUMEM"),)


def test_a_net_connection_names_the_device_the_plugin_listed_as_nccl_started(
    mine: NcclDebug,
) -> None:
    _nccl_writes(mine, _line("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:x<0>"))
    mine.take(("world", TORCH))
    _nccl_writes(mine, _line("Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/1/GDRDMA"))
    first = mine.take((GROUP, TORCH))

    (link,) = mine.fabric((GROUP, TORCH), first).links

    assert link.device == "mlx5_1"


def test_what_is_read_gives_its_memory_back(mine: NcclDebug) -> None:
    assert mine.fd is not None
    recorded = RECORDED.joinpath("p2p.log").read_text().splitlines()
    _nccl_writes(mine, *(_line(line.split("NCCL INFO ")[-1]) for line in recorded))
    held = os.fstat(mine.fd).st_blocks

    mine.take((GROUP, TORCH))

    assert os.fstat(mine.fd).st_blocks < held / 4


def test_another_processs_lines_are_not_this_ranks(mine: NcclDebug) -> None:
    _nccl_writes(mine, _line("Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct", pid=1))

    assert mine.take((GROUP, TORCH)).links == ()


def test_nccl_that_wrote_nothing_is_unknown(mine: NcclDebug) -> None:
    first = mine.take(("world", TORCH))  # the world started, and NCCL said nothing

    fabric = mine.fabric(("world", TORCH), first)

    assert fabric.unknown is not None
    assert "set up elsewhere" in fabric.unknown


def test_a_users_debug_level_is_left_alone_and_the_rows_say_why_they_cannot_tell() -> None:
    environ = {"NCCL_DEBUG": "WARN"}

    debug = NcclDebug.start(environ, files=())

    assert environ == {"NCCL_DEBUG": "WARN"}
    assert debug.added == ()
    assert debug.fabric((GROUP, TORCH), debug.take((GROUP, TORCH))).unknown == (
        "NCCL_DEBUG=WARN (set by the user) prints no INFO"
    )


def test_debug_settings_in_nccls_configuration_file_are_the_users_too(tmp_path: Path) -> None:
    log = tmp_path / "nccl.%h.%p.log"
    conf = tmp_path / "nccl.conf"
    conf.write_text(f"# the site's\nNCCL_DEBUG=INFO\nNCCL_DEBUG_FILE={log}\n")
    environ: dict[str, str] = {}

    debug = NcclDebug.start(environ, files=(conf,))
    host = socket.gethostname().split(".")[0]
    Path(tmp_path / f"nccl.{host}.{os.getpid()}.log").write_text(
        _line("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM")
    )

    assert environ == {}
    assert debug.take((GROUP, TORCH)).links == (Link(src=0, dst=1, via="P2P/CUMEM"),)


def test_nccls_configuration_files_are_the_users_then_the_systems() -> None:
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    system = Path("/etc/nccl.conf")

    assert conf_files({}) == (home / ".nccl.conf", system)
    assert conf_files({"NCCL_CONF_FILE": "/site/nccl.conf"}) == (Path("/site/nccl.conf"), system)


def test_the_environment_wins_over_nccls_configuration_file(tmp_path: Path) -> None:
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\nNCCL_DEBUG_SUBSYS=ALL\n")

    found = configured({"NCCL_DEBUG": "INFO", "NCCL_NET": "IB"}, (conf,))

    assert found == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL"}


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"NCCL_DEBUG": "INFO"}, "goes to the rank's stdout"),
        ({"NCCL_DEBUG_FILE": "/x"}, "NCCL_DEBUG= (set by the user) prints no INFO"),
        ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "COLL", "NCCL_DEBUG_FILE": "/x"}, "INIT"),
        ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "^INIT", "NCCL_DEBUG_FILE": "/x"}, "INIT"),
    ],
)
def test_user_settings_that_leave_nothing_to_read_say_so(
    settings: dict[str, str], why: str
) -> None:
    assert why in (unreadable(settings) or "")


@pytest.mark.parametrize(
    "subsystems", [None, "INIT", "ALL", "init,coll", "^COLL", "INIT,GRAPH,ENV,NET,TUNING,COLL"]
)
def test_user_settings_with_init_into_a_file_are_read(subsystems: str | None) -> None:
    settings = {"NCCL_DEBUG": "info", "NCCL_DEBUG_FILE": "/x"}
    if subsystems is not None:
        settings["NCCL_DEBUG_SUBSYS"] = subsystems

    assert unreadable(settings) is None


def test_a_debug_file_is_expanded_as_nccl_expands_it() -> None:
    host = socket.gethostname().split(".")[0]

    assert expanded("/l/%h-%p-%%-%x", 42) == f"/l/{host}-42-%-%x"
