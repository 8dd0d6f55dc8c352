"""Graceful stops, with real signals sent to a real process."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from sweeper.driver.stops import SIGNALS, Stopped, graceful

# Stops itself at "stop": the first signal's Stopped, then a cleanup that a second one cuts.
_RUN = """
import time
from sweeper.driver.stops import Stopped, graceful

with graceful():
    try:
        print("measuring", flush=True)
        time.sleep(60)
    except Stopped as stop:
        print(f"stopped {stop.exit_code}", flush=True)
        time.sleep(60)  # a slow cleanup
    finally:
        print("cleaned up", flush=True)
"""


def _run(*signals: signal.Signals) -> tuple[int, list[str], str]:
    with subprocess.Popen(
        [sys.executable, "-c", _RUN], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip()]
        for signum in signals:
            proc.send_signal(signum)
            lines.append(proc.stdout.readline().strip())
        out, err = proc.communicate(timeout=30)
    return proc.returncode, [*lines, *out.split()], err


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_second_signal_cuts_the_cleanup_short_with_the_signals_exit_code(
    signum: signal.Signals, code: int
) -> None:
    returncode, lines, err = _run(signum, signum)
    assert returncode == code
    assert lines[:2] == ["measuring", f"stopped {code}"]
    assert "cleaned up" not in lines
    name = signum.name
    assert err == f"sweeper: stopped at once by a second {name}; measured rows are kept\n"


def test_the_first_signal_stops_the_run_and_the_previous_handlers_come_back() -> None:
    before = {signum: signal.getsignal(signum) for signum in SIGNALS}
    with pytest.raises(Stopped) as stopped, graceful():
        signal.raise_signal(signal.SIGTERM)
    assert stopped.value.exit_code == 143
    assert stopped.value.line() == "stopped by SIGTERM before a run started; nothing was written"
    assert {signum: signal.getsignal(signum) for signum in SIGNALS} == before
