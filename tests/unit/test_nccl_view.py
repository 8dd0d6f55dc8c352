"""NCCL's view on a rank (sweeper/rank/nccl_view.py) and on its rows (driver/measurement.py):
the observer made NCCL's tuner only where no other tuner would be, built and loaded in the
rank's process; a communicator NCCL opens and calls (through the plugin's own entry points,
as NCCL calls them) read back per group and step; and the columns a row gets from it."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from sweeper.driver.measurement import of_point
from sweeper.rank.execution import Execution
from sweeper.rank.nccl_view import UNLOADED, VARIABLE, NcclViews, other_tuner
from sweeper.wire import Block, Engine, Launch, NcclView, Predicted, Timed
from tests.unit.test_measurement import RUN, _done, _placement, _ran
from tests.unit.test_tuner_observer import ALGOS, ALLREDUCE, PROTOS, TunerV4, _Table, _table

KEY = ("g", Engine.NCCL)


def _environment(tmp_path: Path) -> dict[str, str]:
    runtime = tmp_path / "run"
    runtime.mkdir()
    return {"XDG_RUNTIME_DIR": str(runtime), "LD_LIBRARY_PATH": str(tmp_path / "lib")}


def test_the_users_tuner_or_the_machines_stays_nccls_and_the_view_says_why(
    tmp_path: Path,
) -> None:
    env = _environment(tmp_path)
    assert other_tuner(env, ()) is None
    mine = {**env, VARIABLE: "/opt/tuner.so"}
    assert (
        other_tuner(mine, ())
        == f"{VARIABLE}=/opt/tuner.so (the user's tuner: NCCL's cost tables not seen)"
    )
    conf = tmp_path / "nccl.conf"
    conf.write_text("# comment\nNCCL_TUNER_PLUGIN=/etc/tuner.so\n")
    assert "NCCL_TUNER_PLUGIN=/etc/tuner.so" in str(other_tuner(env, (conf,)))
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libnccl-net.so").write_bytes(b"")
    assert "a network plugin" in str(other_tuner(env, ()))
    (tmp_path / "lib" / "libnccl-tuner.so").write_bytes(b"")
    assert "libnccl-tuner.so of its own" in str(other_tuner(env, ()))
    off = {**env, VARIABLE: "none"}
    assert other_tuner(off, ()) == f"{VARIABLE}=none: NCCL runs no tuner, as the user asked"
    views = NcclViews.start(mine, ())
    assert views.observer is None
    assert mine[VARIABLE] == "/opt/tuner.so"  # kept
    assert views.view(()) == NcclView(partial=views.partial)


def test_a_rank_reads_nccls_cost_table_for_its_groups_first_step_only(tmp_path: Path) -> None:
    env = _environment(tmp_path)
    views = NcclViews.start(env, ())
    assert views.observer is not None
    assert env[VARIABLE] == str(views.observer.path)  # NCCL will load this one
    assert views.added == (VARIABLE,)
    tuner = TunerV4.in_dll(ctypes.CDLL(env[VARIABLE]), "ncclTunerPlugin_v4")
    # NCCL opens the group's communicator: the plugin's init between the marks
    since = views.opening()
    context = ctypes.c_void_p()
    tuner.init(2, 1, None, ctypes.byref(context))
    views.opened(KEY, since)
    table, channels = _table(), ctypes.c_int(0)

    def call(size: int) -> None:
        tuner.get_coll_info(
            context, ALLREDUCE, size, 1, ctypes.cast(table, _Table), ALGOS, PROTOS, 0, channels
        )

    call(64)  # a call before the step: an agreement, not the point's
    marks = views.mark(KEY)
    call(2**20)
    (seen,) = views.view(marks).calls
    assert (seen.function, seen.size_bytes) == ("AllReduce", 2**20)
    views.share(KEY, ("h", Engine.NCCL))
    assert views.mark(("h", Engine.NCCL)) == views.mark(KEY)
    views.forget("g")
    assert views.mark(KEY) == ()
    # a communicator NCCL opened without the observer: no context between the marks
    views.opened(("x", Engine.NCCL), views.opening())
    assert views.view(views.mark(("x", Engine.NCCL))) == NcclView(partial=UNLOADED)
    tuner.destroy(context)


def _timed(view: NcclView | None, seconds: float = 30e-6) -> Timed:
    return Timed(
        engine=Engine.NCCL,
        launch=Launch.GRAPH,
        blocks=(Block(seconds=seconds * 10, iters=10, samples=None),) * 3,
        warmup_iters=2,
        n_wrong=0,
        nccl_view=view,
    )


COSTS = (("RING/LL", 15.0), ("RING/SIMPLE", 28.0), ("TREE/LL", 21.0))


def test_a_row_carries_what_nccl_ran_its_prediction_and_the_measured_ratio() -> None:
    call = Predicted(function="AllReduce", size_bytes=4096, costs_us=COSTS)
    seen = NcclView(calls=(call,))
    (row,) = of_point(
        RUN, _placement(), _done("all_reduce", (0, 1), _ran(_timed(seen), _timed(seen)))
    )
    assert row.nccl_view == "observed"
    assert (row.nccl_algo, row.nccl_proto) == ("RING", "LL")
    assert row.nccl_predicted_us == 15.0
    assert row.nccl_predictions == COSTS
    assert row.measured_over_predicted == pytest.approx(30.0 / 15.0)


def test_a_composites_calls_are_summed_and_named_by_function() -> None:
    scatter = Predicted(function="ReduceScatter", size_bytes=4096, costs_us=(("RING/LL", 6.0),))
    gather = Predicted(function="AllGather", size_bytes=4096, costs_us=(("RING/LL", 9.0),))
    seen = NcclView(calls=(scatter, gather))
    done = _done("reduce_scatter+all_gather", (0, 1), _ran(_timed(seen), _timed(seen)))
    (row,) = of_point(RUN, _placement(), done)
    assert row.nccl_predicted_us == 15.0
    assert row.nccl_predictions == (("ReduceScatter RING/LL", 6.0), ("AllGather RING/LL", 9.0))
    assert row.nccl_algo == "RING"


def test_a_partial_view_on_any_rank_says_why_and_predicts_nothing() -> None:
    call = Predicted(function="AllReduce", size_bytes=4096, costs_us=COSTS)
    why = f"{VARIABLE}=/opt/tuner.so (the user's tuner: NCCL's cost tables not seen)"
    ranks = _ran(_timed(NcclView(calls=(call,))), _timed(NcclView(partial=why)))
    (row,) = of_point(RUN, _placement(), _done("all_reduce", (0, 1), ranks))
    assert row.nccl_view == f"partial: {why}"
    assert (row.nccl_predicted_us, row.nccl_algo) == (None, None)


def test_a_step_of_no_collective_call_and_rows_of_no_nccl_say_so() -> None:
    (pair,) = of_point(
        RUN, _placement(), _done("send_recv", (0, 1), _ran(_timed(NcclView()), _timed(NcclView())))
    )
    assert (pair.nccl_view, pair.nccl_predicted_us) == ("no collective call", None)
    (gloo,) = of_point(
        RUN, _placement(), _done("all_reduce", (0, 1), _ran(_timed(None), _timed(None)))
    )
    assert gloo.nccl_view is None


def _call(size: int) -> Predicted:
    return Predicted(function="AllReduce", size_bytes=size, costs_us=COSTS)


def test_a_graphs_rows_take_the_view_of_its_captures_last_step() -> None:
    """A capture issues the step once a replay's iteration: the last step's calls (as many as
    the eager first step made) stand for the graph's, whose buffers NCCL tunes as registered."""
    execution = Execution(None, None, None, None, None)  # type: ignore[arg-type]
    first = NcclView(calls=(_call(1), _call(2)))
    assert execution._graphs_view(first) == first  # no capture: the eager step's
    execution.captured = NcclView(calls=tuple(_call(s) for s in range(10, 16)))
    assert execution._graphs_view(first) == NcclView(calls=(_call(14), _call(15)))
    assert execution._graphs_view(NcclView()) == NcclView()  # a step of no collective call
    execution.captured = NcclView(partial="the user's tuner")
    assert execution._graphs_view(first) == NcclView(partial="the user's tuner")
