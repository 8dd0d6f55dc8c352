"""The rank's process (`python -m sweeper.rank.process FD PARENT`): a fresh interpreter its
Ray actor (driver/actor.py) starts, which runs the rank and answers each call the actor
relays over a socket pair. It loads no Ray; it dies with its actor (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection

_PR_SET_PDEATHSIG = 1  # prctl(2)


def _die_with(parent: int) -> None:
    """SIGKILL for this process when its parent dies; at once if it already has."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def serve(fd: int, parent: int) -> None:
    """The rank, from the arguments its actor sends first, then each call the actor relays,
    until the actor goes."""
    _die_with(parent)
    conn = Connection(fd)
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
    serve(int(sys.argv[1]), int(sys.argv[2]))
