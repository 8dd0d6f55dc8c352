"""Files named on the command line (a profile, a recorded topology), read bounded. Such a file is
a page of text, so one larger than FILE_LIMIT_BYTES (or a device that never ends, /dev/zero) is
bad input, refused unread or one byte past the bound, never read whole.

Nothing here waits. The file is opened non-blocking and must be a regular file or a character
device that answers at once (/dev/zero, /dev/null). A FIFO, a socket or a directory is refused
as it is, since opening a FIFO would wait for a writer for ever; a device with nothing to give
now (a terminal) is refused, not waited on."""

from __future__ import annotations

import json
import math
import os
import reprlib
import stat
from pathlib import Path
from typing import Any

from sweeper.errors import BadInput

# A profile or an NVML record of an 8-GPU node is a few KiB (the largest in tests/data, 24 KiB)
FILE_LIMIT_BYTES = 2**20
# How much of a value an error message quotes: a name, a size, a short list. reprlib walks
# no further than it shows, so quoting a value that an alias bomb made costs what is shown.
QUOTE_CHARS = 80
_QUOTE = reprlib.Repr()
_QUOTE.maxlevel, _QUOTE.maxlist, _QUOTE.maxtuple, _QUOTE.maxdict = 2, 4, 4, 4
_QUOTE.maxstring = _QUOTE.maxlong = _QUOTE.maxother = QUOTE_CHARS


def quoted(value: object) -> str:
    """`value` as Python writes it (`repr`), bounded: at most QUOTE_CHARS characters of it,
    with `...` where it goes on."""
    shown = _QUOTE.repr(value)
    return shown if len(shown) <= QUOTE_CHARS else f"{shown[: QUOTE_CHARS - 3]}..."


def read_text(path: Path, option: str, what: str) -> str:
    """The UTF-8 text of the file `option` names, a `what`; BadInput where it cannot be read,
    is not a regular file or a character device, is larger than FILE_LIMIT_BYTES, or is not
    UTF-8."""
    limit = f"{FILE_LIMIT_BYTES // 2**20} MiB"
    too_large = f"{option} {path}: larger than {limit}, more than a {what} can be"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb", buffering=0) as file:
            found = os.fstat(fd)
            if stat.S_ISREG(found.st_mode) and found.st_size > FILE_LIMIT_BYTES:
                raise BadInput(too_large)  # refused unread
            if not (stat.S_ISREG(found.st_mode) or stat.S_ISCHR(found.st_mode)):
                raise BadInput(f"{option} {path}: not a regular file (a {_kind(found.st_mode)})")
            data = _read_bounded(file)
    except BlockingIOError:
        raise BadInput(f"{option} {path}: a device with nothing to read now") from None
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


def _read_bounded(file: Any) -> bytes:
    """Up to one byte past FILE_LIMIT_BYTES (an unbuffered file answers a read in parts)."""
    chunks: list[bytes] = []
    left = FILE_LIMIT_BYTES + 1
    while left > 0:
        chunk = file.read(left)
        if chunk is None:  # a non-blocking device with nothing now
            raise BlockingIOError
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _kind(mode: int) -> str:
    kinds = {stat.S_ISFIFO: "FIFO", stat.S_ISSOCK: "socket", stat.S_ISDIR: "directory"}
    return next((name for test, name in kinds.items() if test(mode)), "block device")


def read_json(path: Path, option: str, what: str) -> Any:
    """The JSON document of the file `option` names (read by `read_text`); BadInput where it
    is not JSON, holds a number no float is (1e400, NaN, Infinity), or is nested deeper than
    the parser recurses."""
    text = read_text(path, option, what)
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except ValueError as exc:
        raise BadInput(f"{option} {path}: not a {what} ({exc})") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise BadInput(f"{option} {path}: nested too deeply to be a {what}") from None


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is out of range of a number")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a number a record holds")
