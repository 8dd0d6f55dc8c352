"""A point's outcome from what its ranks returned: one line per failure, with NCCL's reason."""

from __future__ import annotations

from sweeper.driver.outcome import executed

NCCL_REFUSAL = (
    "NCCL error in: NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN for details), "
    "NCCL version 2.28.9\n"
    "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
    "Last error:\n"
    'Unrecognized element token "bogus" when parsing "allreduce:bogus"\n'
)


def test_an_nccl_error_is_one_line_with_the_reason_nccl_gave() -> None:
    done = executed([RuntimeError(NCCL_REFUSAL)])
    assert done.status == "error"
    assert done.error == (
        "RuntimeError: NCCL error in: NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN "
        'for details), NCCL version 2.28.9 (NCCL: Unrecognized element token "bogus" when '
        'parsing "allreduce:bogus")'
    )


def test_other_errors_keep_their_first_line() -> None:
    done = executed([ValueError("bad buffer\ndetails"), None])
    assert done.error == "ValueError: bad buffer"
    assert executed([KeyError("Last error:")]).error == "KeyError: 'Last error:'"
