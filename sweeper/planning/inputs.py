"""Files named on the command line (a profile, a recorded topology), read bounded: such a
file is a page of text, so one larger than FILE_LIMIT_BYTES (or a device that never ends,
/dev/zero) is bad input, refused unread or after one byte past the bound, never read whole.
"""

from __future__ import annotations

from pathlib import Path

from sweeper.errors import BadInput

# A profile or an NVML record of an 8-GPU node is a few KiB (the largest in tests/data, 24 KiB)
FILE_LIMIT_BYTES = 2**20


def read_text(path: Path, option: str, what: str) -> str:
    """The UTF-8 text of the file `option` names, a `what`; BadInput where it cannot be read,
    is larger than FILE_LIMIT_BYTES, or is not UTF-8."""
    limit = f"{FILE_LIMIT_BYTES // 2**20} MiB"
    too_large = f"{option} {path}: larger than {limit}, more than a {what} can be"
    try:
        with Path(path).open("rb") as file:
            if Path(path).stat().st_size > FILE_LIMIT_BYTES:  # a regular file: refused unread
                raise BadInput(too_large)
            data = file.read(FILE_LIMIT_BYTES + 1)  # a device or a pipe: one byte past the bound
    except OSError as exc:
        raise BadInput(f"{option} {path}: {exc.strerror or exc}") from None
    if len(data) > FILE_LIMIT_BYTES:
        raise BadInput(too_large)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{option} {path}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start})"
        ) from None
