"""The rank's process: serves one rank (worker.Rank) to its Ray actor (driver/actor.py), which
relays each call over a socket. It loads no Ray and dies with its actor.

It is forked by its node's template (rank/template.py), which has loaded torch already, or,
where there is none (a kernel without pidfds), a fresh interpreter its actor starts
(`python -m sweeper.rank.process FD PARENT`), which dies with it by PR_SET_PDEATHSIG.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection

_PR_SET_NAME = 15  # prctl(2)
_PR_SET_PDEATHSIG = 1


def die_with(parent: int) -> None:
    """SIGKILL for this process when its parent dies; at once if it already has."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _named() -> None:
    """`sweeper-rank` in ps's COMMAND and top: a forked rank's command line is its template's."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, b"sweeper-rank")


def serve(conn: Connection) -> None:
    """Its pid first, then the rank, from the arguments its actor sends, then each call the
    actor relays, until the actor goes."""
    _named()
    conn.send(os.getpid())
    args, facts = conn.recv()
    from sweeper.rank.worker import Rank  # torch takes seconds to load: bound to the actor first

    try:
        rank = Rank(*args, facts=facts)
    except BaseException as exc:
        conn.send((False, exc))
        return
    conn.send((True, pickle.dumps(None)))
    while True:
        try:
            call, call_args = conn.recv()
        except EOFError:  # the actor is gone
            return
        reply: tuple[bool, bytes | BaseException]
        try:
            reply = (True, pickle.dumps(getattr(rank, call.value)(*call_args)))
        except BaseException as exc:
            reply = (False, exc)
        try:
            conn.send(reply)
        except Exception as unsent:  # an exception that does not pickle
            conn.send((False, RuntimeError(f"{type(unsent).__name__}: {unsent}")))


if __name__ == "__main__":
    die_with(int(sys.argv[2]))
    serve(Connection(int(sys.argv[1])))
