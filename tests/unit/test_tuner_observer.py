"""sweeper's observing tuner plugin (sweeper/fabric/tuner_observer.c), built with the system's C
compiler and called through its exported tuner entry points as NCCL calls them (the v4 and
v3 structs of nccl_tuner.h: init, getCollInfo with the cost table NCCL makes, float[7][3]
handed as float**, destroy), then read back as the rank reads it (fabric.observer)."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import pytest

from sweeper.fabric import observer
from sweeper.fabric.observer import TunerObserver, build, chosen

ALGOS, PROTOS = 7, 3
ALLREDUCE, ALLGATHER = 4, 2
_Init = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
)
_Table = ctypes.POINTER(ctypes.POINTER(ctypes.c_float))
_Destroy = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class TunerV4(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_char_p),
        ("init", _Init),
        (
            "get_coll_info",
            ctypes.CFUNCTYPE(
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_size_t,
                ctypes.c_int,
                _Table,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_int),
            ),
        ),
        ("destroy", _Destroy),
    )


class TunerV3(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_char_p),
        ("init", _Init),
        (
            "get_coll_info",
            ctypes.CFUNCTYPE(
                ctypes.c_int,
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.c_size_t,
                ctypes.c_int,
                _Table,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_int),
            ),
        ),
        ("destroy", _Destroy),
    )


# NCCL 2.28's table for a 1 MiB all_reduce on 4 H200 in shape: microseconds, -1 where NCCL
# ignores the pair (CollNet without a network that reduces, NVLS off, PAT not for all_reduce)
TABLE = [
    [21.5, 19.0, 30.25],  # TREE: LL, LL128, SIMPLE (each exact in float32)
    [14.25, 16.5, 28.0],  # RING
    [-1.0, -1.0, -1.0],
    [-1.0, -1.0, -1.0],
    [-1.0, -1.0, -1.0],
    [-1.0, -1.0, -1.0],
    [-1.0, -1.0, -1.0],
]


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("cc") is None:
        pytest.fail("the suite builds sweeper's tuner observer with cc, which is missing")
    return build(tmp_path_factory.mktemp("observer") / "private")


def _table() -> ctypes.Array[ctypes.Array[ctypes.c_float]]:
    cells = (ctypes.c_float * PROTOS) * ALGOS
    return cells(*((ctypes.c_float * PROTOS)(*row) for row in TABLE))


def test_the_plugin_records_the_cost_table_and_leaves_it_and_the_channels_unchanged(
    plugin: Path,
) -> None:
    lib = ctypes.CDLL(str(plugin))
    seen = TunerObserver(plugin)
    tuner = TunerV4.in_dll(lib, "ncclTunerPlugin_v4")
    assert tuner.name == b"sweeper-observer"
    first = seen.opened()
    context = ctypes.c_void_p()
    assert tuner.init(4, 1, None, ctypes.byref(context)) == 0
    assert seen.opened() == first + 1
    table, channels = _table(), ctypes.c_int(0)
    as_nccl_hands_it = ctypes.cast(table, _Table)
    code = tuner.get_coll_info(
        context, ALLREDUCE, 2**20, 1, as_nccl_hands_it, ALGOS, PROTOS, 1, ctypes.byref(channels)
    )
    assert code == 0
    assert [list(row) for row in table] == TABLE  # unchanged: NCCL chooses as it would
    assert channels.value == 0  # NCCL's own count
    (call,) = seen.since([(first, 0)])
    assert (call.function, call.size_bytes) == ("AllReduce", 2**20)
    assert call.costs_us == (
        ("TREE/LL", 21.5),
        ("TREE/LL128", 19.0),
        ("TREE/SIMPLE", 30.25),
        ("RING/LL", 14.25),
        ("RING/LL128", 16.5),
        ("RING/SIMPLE", 28.0),
    )
    assert chosen(call) == ("RING", "LL", 14.25)
    assert seen.since([(first, 1)]) == ()  # nothing after the call read
    assert tuner.destroy(context) == 0
    assert seen.calls(first) == 0  # closed: nothing to read


def test_the_v3_entry_records_alike_and_a_communicator_keeps_its_last_64_calls(
    plugin: Path,
) -> None:
    lib = ctypes.CDLL(str(plugin))
    seen = TunerObserver(plugin)
    tuner = TunerV3.in_dll(lib, "ncclTunerPlugin_v3")
    context = ctypes.c_void_p()
    assert tuner.init(8, 2, None, ctypes.byref(context)) == 0
    comm = seen.opened() - 1
    table, channels = _table(), ctypes.c_int(0)
    for size in range(1, 71):
        tuner.get_coll_info(
            context, ALLGATHER, size, 1, ctypes.cast(table, _Table), ALGOS, PROTOS, channels
        )
    calls = seen.since([(comm, 0)])
    assert [c.size_bytes for c in calls] == list(range(7, 71))
    assert {c.function for c in calls} == {"AllGather"}
    tuner.destroy(context)


def test_a_source_the_compiler_refuses_is_one_line_not_a_plugin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(observer, "SOURCE", broken)
    with pytest.raises(observer.BuildFailed, match="could not build sweeper's tuner observer"):
        build(tmp_path / "private")
    assert list((tmp_path / "private").iterdir()) == []


def test_a_directory_or_library_others_can_write_is_refused_not_loaded(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # as a planted /tmp directory would be
    with pytest.raises(observer.BuildFailed, match="is not this user's alone"):
        build(shared)
    mine = tmp_path / "mine"
    built = build(mine)
    built.chmod(0o666)  # someone could have swapped its code
    with pytest.raises(observer.BuildFailed, match="not loaded"):
        build(mine)


def test_past_its_last_communicator_the_plugin_lets_nccl_start_and_records_nothing(
    tmp_path: Path,
) -> None:
    """NCCL fails a communicator whose tuner's init fails, so the plugin never does: past the
    65,536 communicators a process may open, one gets no context and its calls go unrecorded."""
    own = build(tmp_path / "own")  # a library of its own: its count starts at 0
    tuner = TunerV4.in_dll(ctypes.CDLL(str(own)), "ncclTunerPlugin_v4")
    seen = TunerObserver(own)
    context = ctypes.c_void_p()
    for _ in range(65536):
        assert tuner.init(2, 1, None, ctypes.byref(context)) == 0
        tuner.destroy(context)
    assert tuner.init(2, 1, None, ctypes.byref(context)) == 0
    assert context.value is None
    table, channels = _table(), ctypes.c_int(0)
    args = (ALLREDUCE, 64, 1, ctypes.cast(table, _Table), ALGOS, PROTOS, 0, ctypes.byref(channels))
    assert tuner.get_coll_info(context, *args) == 0
    assert seen.opened() == 65537
    assert seen.since([(65536, 0)]) == ()
    assert tuner.destroy(context) == 0
