"""Errors a user can cause, each carrying the exit code the CLI turns it into."""

from __future__ import annotations


class SweeperError(Exception):
    """An expected failure: the CLI prints its message on one line and exits with `exit_code`."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class SweeperWarning(UserWarning):
    """Something the user should know that does not stop the command: shown in one line."""


class CorruptResults(SweeperWarning):
    """A results file of sweeper's own name that it cannot take (not readable Parquet, not
    sweeper's columns, a second copy of a batch, a run record that is not one): skipped."""


class BadInput(SweeperError):
    """The command line, a profile or a size was wrong; nothing was run or written."""

    exit_code = 2


class InfrastructureError(SweeperError):
    """Ray was unreachable, or the cluster has fewer nodes or GPUs than asked for."""

    exit_code = 3


class ResultsUnwritable(InfrastructureError):
    """The results directory refused a write (a full disk, a read-only file system): the
    sweep stops, and what was written stays readable."""

    @classmethod
    def of(cls, results: object, exc: OSError) -> ResultsUnwritable:
        return cls(f"cannot write results to {results}: {exc.strerror or exc}")
