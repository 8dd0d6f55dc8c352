"""A test plugin that holds the driver in its exit: where $SWEEPER_TEST_EXITING names a file,
the driver (`python -m sweeper`, not a rank or an actor, which load plugins too) touches it
as its last Python runs, after the run's end, and then naps, so a signal lands there."""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path

EXIT_NAP_S = 60.0


def _linger(marker: str) -> None:
    Path(marker).touch()
    time.sleep(EXIT_NAP_S)


if os.environ.get("SWEEPER_TEST_EXITING") and Path(sys.argv[0]).name == "__main__.py":
    atexit.register(_linger, os.environ["SWEEPER_TEST_EXITING"])
