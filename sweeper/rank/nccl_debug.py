"""NCCL's own account of what it set up, captured in the rank's process: its INFO lines, read
after each communicator starts and each point's first call, folded per group and engine into
what the rows say (`wire.Fabric`).

Where the user set none of NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE, the rank asks for
INFO of INIT and NET into a memfd of its own; where they set any, it sets nothing and reads what
it can, else the rows say `unknown`. Lines carry no communicator: they are attributed by when
they came. docs/ARCHITECTURE.md, "Inside the rooms", says why."""

from __future__ import annotations

import ctypes
import os
import pwd
import socket
from collections.abc import Collection, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from sweeper.fabric import node
from sweeper.fabric.nccl_log import ProcessLog, net_device, read
from sweeper.wire import Fabric, Link

VARIABLES = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")
# Setup and connections: the COLL and TUNING subsystems print a line per call, inside timed loops
SUBSYSTEMS = "INIT,NET"
_CHUNK = 1 << 20
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02  # fallocate(2)

Key = tuple[str, str]  # a group id and an engine


def nccl_variables(
    environ: Mapping[str, str], leave_out: tuple[str, ...] = ()
) -> tuple[tuple[str, str], ...]:
    """The NCCL variables of `environ`, sorted, less `leave_out` (the debug output sweeper
    set, which the rows' nccl_env do not list: the user's settings are what they say)."""
    return tuple(
        sorted((k, v) for k, v in environ.items() if k.startswith("NCCL_") and k not in leave_out)
    )


def conf_files(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The files NCCL fills its variables from (src/misc/param.cc), in its order: the user's
    (NCCL_CONF_FILE, else .nccl.conf in the home directory the password database gives), then
    the system's."""
    system = Path("/etc/nccl.conf")
    if user := environ.get("NCCL_CONF_FILE"):
        return Path(user), system
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # no entry for this uid: NCCL reads no home file either
        return (system,)
    return Path(home) / ".nccl.conf", system


def configured(
    environ: Mapping[str, str], files: tuple[Path, ...], names: Collection[str] = VARIABLES
) -> dict[str, str]:
    """NCCL's variables `names` (its debug ones by default) as NCCL will see them: the
    environment's, then each file's `NAME=VALUE` lines (not `#`) for those it lacks."""
    found = {name: environ[name] for name in names if name in environ}
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            name, equals, value = line.partition("=")
            if equals and not line.startswith("#") and name.strip() in names:
                found.setdefault(name.strip(), value.strip())
    return found


def unreadable(settings: Mapping[str, str]) -> str | None:
    """Why the user's own debug settings give sweeper nothing to read; None where they do."""
    level = settings.get("NCCL_DEBUG", "").upper()
    if level not in ("INFO", "TRACE"):
        return f"NCCL_DEBUG={settings.get('NCCL_DEBUG', '')} (set by the user) prints no INFO"
    subsystems = settings.get("NCCL_DEBUG_SUBSYS")
    if subsystems is not None:  # NCCL's default is INIT,BOOTSTRAP,ENV
        named = {name.upper() for name in subsystems.lstrip("^").split(",")}
        inverted = subsystems.startswith("^")
        if (inverted and "INIT" in named) or (not inverted and not named & {"INIT", "ALL"}):
            return f"NCCL_DEBUG_SUBSYS={subsystems} (set by the user) leaves INIT out"
    if not settings.get("NCCL_DEBUG_FILE"):
        return "NCCL's INFO output goes to the rank's stdout (the user set NCCL_DEBUG)"
    return None


def expanded(path: str, pid: int) -> str:
    """NCCL_DEBUG_FILE as NCCL expands it: %h the host's name (to its first dot), %p the
    pid, %% a %."""
    out, chars = [], iter(path)
    for char in chars:
        if char != "%":
            out.append(char)
            continue
        code = next(chars, "")
        names = {"h": socket.gethostname().split(".")[0], "p": str(pid), "%": "%"}
        out.append(names.get(code, "%" + code))
    return "".join(out)


@dataclass
class NcclDebug:
    """One rank process's capture: where NCCL writes, how far it has been read, and what each
    group's communicator in each engine has set up so far."""

    path: str | None  # the file NCCL writes, read from `fd` (opened at the first read)
    own: bool  # sweeper's memfd, set up by `start`; else the user's file
    unknown: str | None = None
    added: tuple[str, ...] = ()  # the variables sweeper set, which the rows' nccl_env leave out
    fd: int | None = None
    offset: int = 0
    rest: bytes = b""  # a line NCCL has not finished writing
    devices: dict[tuple[str, int], str] = field(default_factory=dict)
    heard: dict[Key, ProcessLog] = field(default_factory=dict)
    node: Fabric = field(default_factory=Fabric)  # what this node offers: every record has it

    @classmethod
    def start(
        cls, environ: MutableMapping[str, str] = os.environ, files: tuple[Path, ...] | None = None
    ) -> NcclDebug:
        """Before NCCL's first call in this process: sweeper's own capture where the user set
        no debug variable in `environ` or NCCL's configuration `files`, else a reader of
        theirs (or nothing, and why)."""
        facts = Fabric(rdma_devices=node.rdma_devices(), peer_memory=node.peer_memory())
        settings = configured(environ, conf_files(environ) if files is None else files)
        if settings:
            why = unreadable(settings)
            if why is not None:
                return cls(path=None, own=False, unknown=why, node=facts)
            path = expanded(settings["NCCL_DEBUG_FILE"], os.getpid())
            return cls(path=path, own=False, node=facts)
        fd = os.memfd_create("sweeper-nccl-debug", os.MFD_CLOEXEC)
        path = f"/proc/self/fd/{fd}"
        if not os.path.exists(path):  # no /proc: NCCL would write to stdout instead
            os.close(fd)
            return cls(path=None, own=True, unknown="no /proc to hand NCCL its file", node=facts)
        environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS=SUBSYSTEMS, NCCL_DEBUG_FILE=path)
        return cls(path=path, own=True, added=VARIABLES, fd=fd, node=facts)

    def take(self, key: Key) -> ProcessLog:
        """What NCCL wrote since the last take, as `key`'s (a communicator that started, or
        was called, since): added to what `key` has set up, and returned."""
        found = read(line.decode(errors="replace") for line in self._lines()).get(
            os.getpid(), ProcessLog()
        )
        self.devices.update(found.devices)
        was = self.heard.get(key, ProcessLog())
        self.heard[key] = ProcessLog(
            links=tuple(dict.fromkeys(was.links + found.links)),
            channels=was.channels if was.channels is not None else found.channels,
            init_s=was.init_s or found.init_s,
        )
        return found

    def share(self, source: Key, key: Key) -> None:
        """`key` names the communicator `source` names (a group of every rank is the world)."""
        self.heard[key] = self.heard.get(source, ProcessLog())

    def forget(self, group_id: str) -> None:
        """A closed group's communicators: their records go."""
        self.heard = {key: r for key, r in self.heard.items() if key[0] != group_id}

    def fabric(self, key: Key, first: ProcessLog) -> Fabric:
        """What `key`'s communicator has set up on this rank, with its first call's choices
        (`first`, the take right after it) and this node's facts."""
        if self.unknown is not None:
            return replace(self.node, unknown=self.unknown)
        heard = self.heard.get(key, ProcessLog())
        return replace(
            self.node,
            links=tuple(self._named(link) for link in heard.links),
            channels=heard.channels,
            calls=first.calls,
            init_s=heard.init_s,
        )

    def _named(self, link: Link) -> Link:
        device = net_device(link.via)
        name = self.devices.get(device) if device is not None else None
        return link if name is None else replace(link, device=name)

    def _lines(self) -> list[bytes]:
        """The whole lines NCCL wrote since the last call."""
        if self.unknown is not None or self.path is None:
            return []
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                self.unknown = f"cannot read NCCL_DEBUG_FILE {self.path}: {exc.strerror}"
                return []
        chunks = [self.rest]
        while chunk := os.pread(self.fd, _CHUNK, self.offset):
            chunks.append(chunk)
            self.offset += len(chunk)
        if self.own and self.offset == 0:
            # NCCL set up its output before this process set the variables (a parent's)
            self.unknown = "NCCL wrote no INFO line: its debug output was set up elsewhere"
        if len(chunks) == 1:  # nothing new
            return []
        *lines, self.rest = b"".join(chunks).split(b"\n")
        if self.own:  # what is read is not needed again: its memory goes back
            _punch(self.fd, self.offset - len(self.rest))
        return lines


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _punch(fd: int, length: int) -> None:
    """Frees the first `length` bytes of a file whose writer goes on at its own offset."""
    mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    _libc().fallocate(fd, mode, ctypes.c_long(0), ctypes.c_long(length))  # best effort
