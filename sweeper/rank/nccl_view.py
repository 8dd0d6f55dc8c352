"""NCCL's view of each point, in the rank's process: sweeper's observing tuner plugin
(`fabric.observer`) made NCCL's tuner where no other would be, the communicators each group
opened in each engine, and the calls of a point's first step, as each row's `wire.NcclView`.

NCCL loads one tuner per process, as its first communicator starts: NCCL_TUNER_PLUGIN, else a
libnccl-tuner.so on the library path, else a net plugin's. Where the user or the machine has
one, sweeper leaves it NCCL's and the rows say the view is partial, and why. The plugin only
observes: NCCL's table, choice and channels are as they would be without it."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.fabric.observer import BuildFailed, TunerObserver, build
from sweeper.rank.nccl_debug import conf_files, configured
from sweeper.wire import NcclView

VARIABLE = "NCCL_TUNER_PLUGIN"
Key = tuple[str, str]  # a group id and an engine
# A communicator NCCL opened with no context of the observer's: an NCCL without tuner v3 or v4
# (before 2.22), or one that could not load the library
UNLOADED = "NCCL did not open this communicator with sweeper's tuner observer (NCCL 2.22 on)"
# Where the dynamic loader finds a library NCCL opens by its name alone, beside LD_LIBRARY_PATH
_SYSTEM_LIBRARIES = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib")


def _configured(environ: Mapping[str, str], files: tuple[Path, ...]) -> str | None:
    """NCCL_TUNER_PLUGIN as NCCL will see it: the environment's, else its files'."""
    return configured(environ, files, (VARIABLE,)).get(VARIABLE)


def _found(environ: Mapping[str, str], name: str) -> Path | None:
    """A library the loader would find by `name` (LD_LIBRARY_PATH, then the system's)."""
    searched = [d for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    multiarch = [str(p) for p in Path("/usr/lib").glob("*-linux-gnu")]
    for directory in (*searched, *_SYSTEM_LIBRARIES, *multiarch):
        candidate = Path(directory) / name
        if candidate.is_file():
            return candidate
    return None


def other_tuner(environ: Mapping[str, str], files: tuple[Path, ...]) -> str | None:
    """Why another tuner would be NCCL's, or None where NCCL would tune alone."""
    named = _configured(environ, files)
    if named is not None and named.lower() == "none":
        return f"{VARIABLE}={named}: NCCL runs no tuner, as the user asked"
    if named is not None:
        return f"{VARIABLE}={named} (the user's tuner: NCCL's cost tables not seen)"
    if (tuner := _found(environ, "libnccl-tuner.so")) is not None:
        return f"NCCL loads the tuner {tuner} of its own: NCCL's cost tables not seen"
    net = environ.get("NCCL_NET_PLUGIN")
    if net is not None or (net_lib := _found(environ, "libnccl-net.so")) is not None:
        which = f"NCCL_NET_PLUGIN={net}" if net is not None else str(net_lib)
        return f"a network plugin ({which}) may carry NCCL's tuner: NCCL's cost tables not seen"
    return None


def private_directory(environ: Mapping[str, str]) -> Path:
    """Where the plugin is built: the user's runtime directory, else a temporary one of the
    user's (sweeper-UID), as the rank template's socket."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "sweeper"
    return Path(environ.get("TMPDIR", "/tmp")) / f"sweeper-{os.getuid()}"


@dataclass
class NcclViews:
    """The rank's observer (None: why, in `partial`) and each group's communicators in it."""

    observer: TunerObserver | None
    partial: str | None = None
    added: tuple[str, ...] = ()  # what sweeper set, which the rows' nccl_env leave out
    comms: dict[Key, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def start(
        cls, environ: MutableMapping[str, str] = os.environ, files: tuple[Path, ...] | None = None
    ) -> NcclViews:
        """Before NCCL's first communicator in this process: the observer made NCCL's tuner,
        where no other would be (else why not)."""
        why = other_tuner(environ, conf_files(environ) if files is None else files)
        if why is not None:
            return cls(observer=None, partial=why)
        try:
            library = build(private_directory(environ))
        except (BuildFailed, OSError) as exc:
            return cls(observer=None, partial=str(exc))
        observer = TunerObserver(library)  # loaded first: NCCL's dlopen of the path shares it
        environ[VARIABLE] = str(library)
        return cls(observer=observer, added=(VARIABLE,))

    def opening(self) -> int:
        """A mark before a communicator opens."""
        return self.observer.opened() if self.observer is not None else 0

    def opened(self, key: Key, since: int) -> None:
        """The communicators NCCL opened since the mark are `key`'s."""
        if self.observer is not None:
            new = range(since, self.observer.opened())
            self.comms[key] = (*self.comms.get(key, ()), *new)

    def share(self, source: Key, key: Key) -> None:
        """`key` uses `source`'s communicators (a group of every rank: the world's)."""
        self.comms[key] = self.comms.get(source, ())

    def forget(self, group_id: str) -> None:
        self.comms = {k: v for k, v in self.comms.items() if k[0] != group_id}

    def mark(self, key: Key) -> tuple[tuple[int, int], ...]:
        """Before a step: each of `key`'s communicators and its calls so far."""
        if self.observer is None:
            return ()
        return tuple((comm, self.observer.calls(comm)) for comm in self.comms.get(key, ()))

    def view(self, marks: tuple[tuple[int, int], ...]) -> NcclView:
        """After the step: its calls since `marks`, or why they are not known (no observer,
        or NCCL opened the group's communicator without it)."""
        if self.observer is None:
            return NcclView(partial=self.partial)
        if not marks:
            return NcclView(partial=UNLOADED)
        return NcclView(calls=self.observer.since(marks))
