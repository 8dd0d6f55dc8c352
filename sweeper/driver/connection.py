"""Ray, from the driver: connect to a cluster (or start an embedded local Ray), watch its
head, and wait on Ray's calls so that a signal or a lost head ends the wait, never Ray.

An address is checked as bad input before any connection, and the whole handshake is bounded
by the caller's timeout. An embedded Ray runs on loopback. A `HeadWatch` asks the GCS every
second whether it answers; once it has not for a third of Ray's own limit (at once, once a
signal has asked the driver to stop), the driver's next wait raises `HeadLost`. Every wait
(`wait`, `wait_all`, `get`, `result`) holds signals while it is inside Ray, whose wait would
fail where a handler raises, and lets them in between slices of `SLICE_S`.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import grpc
import ray
from ray._common.utils import get_ray_address_file
from ray._private import parameter, ray_constants
from ray._private.authentication.authentication_token_setup import (
    AUTH_MODE_ENV_VAR,
    _enable_token_auth,
)
from ray._private.authentication.authentication_utils import is_token_auth_enabled
from ray._private.grpc_utils import init_grpc_channel
from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]  # not in its stub
from ray.core.generated import (
    gcs_service_pb2,
    gcs_service_pb2_grpc,
    ray_client_pb2,
    ray_client_pb2_grpc,
)

from sweeper.driver import stops, trust
from sweeper.errors import BadInput, InfrastructureError, SweeperError

SLICE_S = 0.2  # the longest the driver waits in Ray before it looks for a signal


@dataclass
class Connection:
    embedded: bool
    address: str | None
    watch: HeadWatch | None = None  # none for Ray Client, whose driver runs on the head
    minted: bool = False  # an embedded Ray's token, made for it (trust.mint_token)

    def gpus(self) -> int:
        return int(ray.cluster_resources().get("GPU", 0))

    def head_host(self) -> str:
        for node in ray.nodes():
            if node.get("Alive") and "node:__internal_head__" in node.get("Resources", {}):
                return str(node["NodeManagerHostname"])
        return socket.gethostname()

    def close(self) -> None:
        """An embedded Ray is shut down whole (no process of it left): a first signal
        meanwhile stops the run after it."""
        if head_lost():
            self._abandon()
            return
        if self.watch is not None:
            self.watch.stop()
        if self.embedded:
            with stops.held():
                ray.shutdown()
        if self.minted:
            trust.drop_token()

    def _abandon(self) -> None:
        """With the head lost, Ray is left as it is: ray.shutdown, and the interpreter's exit
        after it, would wait on the gone GCS until Ray's core worker ends the process itself
        (exit 1). The process ends at the start of its exit instead, once its lines are out,
        with exit 3. An embedded Ray's processes are ended; the watch stays on, to end the
        process where it does not end in time, with nothing more to say."""
        atexit.register(_end_now)  # atexit runs the last registered first: before Ray's
        if self.embedded:
            stops.end_descendants()
        if self.watch is not None:
            self.watch.epitaph = None


def _end_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(stops.exit_code(otherwise=HeadLost.exit_code))  # a signal's, where one stopped it


@dataclass(frozen=True, kw_only=True, slots=True)
class Address:
    """A Ray cluster to join: its GCS (HOST:PORT), or Ray Client's server (ray://HOST:PORT)."""

    host: str
    port: int
    client: bool  # ray://: through Ray Client

    @property
    def target(self) -> str:
        """host:port as gRPC takes it (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"ray://{self.target}" if self.client else self.target


# A DNS name (labels of letters, digits, '_' and '-'), an IPv4 address, or an IPv6 one
_HOST = re.compile(r"[\w-]+(\.[\w-]+)*|[0-9a-f.]*:[0-9a-f:.]*", re.ASCII)
_FORMS = (
    "give HOST:PORT (the head's GCS, port 6379 by default) or ray://HOST:PORT (Ray Client, "
    "port 10001 by default), or leave --address and $RAY_ADDRESS unset for an embedded Ray"
)


def parse_address(address: str, named: str) -> Address | None:
    """The address given as `named` (--address, $RAY_ADDRESS), checked before any connection:
    BadInput where it is none. None: auto or local, which Ray resolves itself."""
    if address in ("auto", "local"):
        return None

    def bad(why: str) -> BadInput:
        return BadInput(f"{named} {address!r} is no Ray address: {why}", hint=_FORMS)

    if not address.isprintable() or any(c.isspace() for c in address):
        raise bad("it holds a space or a control character")
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "", address
    if scheme not in ("", "ray"):
        raise bad(f"sweeper connects to no {scheme}:// address")
    parts = urlsplit(f"//{rest}")
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        raise bad("nothing may come before the host or after the port")
    if not parts.hostname:
        raise bad("no host")
    if not _HOST.fullmatch(parts.hostname):
        raise bad(f"{parts.hostname!r} is no host name")
    try:
        port = parts.port
    except ValueError:  # not a number, or over 65535
        port = -1
    if port is None:
        raise bad("no port")
    if not 0 < port <= 65535:
        raise bad("its port is no number from 1 to 65535")
    return Address(host=parts.hostname, port=port, client=scheme == "ray")


_TOKEN_HINT = (
    "`ray get-auth-token` on the head prints the cluster's token: give it as RAY_AUTH_TOKEN, "
    "in a file named by RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token"
)


def _recorded_address(named: str) -> str:
    """`auto`: the cluster the last `ray start` on this machine recorded (Ray's
    ray_current_cluster), as HOST:PORT, so the connection is bounded by --connect-timeout as any
    address is (ray.init resolves `auto` itself and then retries for minutes). A record that
    another user wrote (the file is in the shared temporary directory) is refused: joining
    their cluster would hand them this user's token and unpickle what they send."""
    path = get_ray_address_file(None)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        raise InfrastructureError(
            f"{named} 'auto': no Ray cluster was started on this machine ({path} is missing)",
            hint="start one with `ray start --head`, or give its HOST:PORT",
        ) from None
    with os.fdopen(fd) as record:
        owner = os.fstat(fd).st_uid
        recorded = record.read(256).strip()
    if owner not in (os.getuid(), 0):
        raise BadInput(
            f"{named} 'auto': {path} was written by uid {owner}, not this user: give the "
            "address of the cluster you mean to join"
        )
    return recorded


def _check_reachable(address: Address, timeout_s: float) -> None:
    """One call to the address that Ray's server answers at once, with `timeout_s` as its
    deadline. It fails in time where nothing listens, or where what listens never answers (a
    socket that accepts and stays silent, another server that keeps the HTTP/2 connection
    open). It fails too where it is not the Ray server that kind of address names, or where
    it wants a token. ray.init has no deadline of its own for these: it retries for minutes.

    A gRPC call, not ray.init in a thread given up at the deadline: the call's channel is
    closed here, so nothing is left running; and not Ray's GCS client, whose C++ core
    prints lines of its own as it retries. The channel is Ray's, with the token Ray would
    send; a cluster that asks for a token where none is sent gets the one Ray finds."""
    deadline = time.monotonic() + timeout_s
    failed = _first_call(address, timeout_s)
    if failed and failed[0] == grpc.StatusCode.UNAUTHENTICATED and _send_token_found():
        failed = _first_call(address, max(0.0, deadline - time.monotonic()))
    if failed:
        raise _unreachable(address, *failed, timeout_s)


def _first_call(address: Address, timeout_s: float) -> tuple[grpc.StatusCode, str] | None:
    """The status code and details of a failed call to the address; None: it answered."""
    channel = init_grpc_channel(address.target)
    try:
        if address.client:
            ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
            ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(ping, timeout=timeout_s)
        else:
            gcs = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            gcs.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)
    except grpc.RpcError as exc:
        return exc.code(), str(exc.details())
    finally:
        channel.close()
    return None


def _send_token_found() -> bool:
    """Token authentication on, where RAY_AUTH_MODE leaves it unsaid and Ray finds a token
    (RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token): the cluster
    asked for one. Ray turns it on by itself only for a cluster it finds on this machine, so
    a `ray://` address of a default cluster (token authentication on) fails without it."""
    if os.environ.get(AUTH_MODE_ENV_VAR) is not None:
        return False
    if not AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        return False
    _enable_token_auth()  # Ray's own switch: the variable, and its cached config
    return True


def _unreachable(
    address: Address, code: grpc.StatusCode, details: str, timeout_s: float
) -> InfrastructureError:
    """What a failed first call says, in a line."""
    server = "Ray Client's server" if address.client else "the head's GCS"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        given = (
            "refused the authentication token given"
            if is_token_auth_enabled()
            else ("wants an authentication token, and none was found")
        )
        return InfrastructureError(f"Ray at {address} {given}", hint=_TOKEN_HINT)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return InfrastructureError(
            f"cannot reach Ray at {address}: no answer within {timeout_s:g} s",
            hint=f"is this the port of {server}? a slow network may need more --connect-timeout",
        )
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return InfrastructureError(
            f"cannot connect to Ray at {address}: what answers there is not {server}",
            hint=_FORMS,
        )
    # gRPC's details end with the socket's: "... Connection refused", "... Domain name not found]"
    return InfrastructureError(
        f"cannot reach Ray at {address}: {details.rsplit(': ', 1)[-1].rstrip(']')}",
        hint="check --address / $RAY_ADDRESS, or leave both unset for an embedded local Ray",
    )


class HeadLost(SweeperError):
    """The head's GCS stopped answering mid-run. Exit 3 as an InfrastructureError, but not
    one: what goes on without a node that left (the scan) must not go on without the head."""

    exit_code = 3

    def __init__(self, address: str) -> None:
        super().__init__(f"lost the Ray head at {address}")
        self.address = address


class HeadWatch:
    """Asks the head's GCS whether it answers, every second, from a thread of its own.

    Where the GCS is gone, Ray's core worker retries for $RAY_gcs_rpc_server_reconnect_timeout_s
    (60 s) and then ends the driver itself, exit 1, with a line of Ray's, whatever the driver
    was doing: no row flushed, no line of sweeper's. After a third of that time the watch
    calls the head lost, and the driver's next wait raises HeadLost: the run ends as any
    error ends it, rows flushed and record marked. After two thirds the driver is stuck in a
    call that needs the GCS, and the watch ends the process itself, with `epitaph` as its
    line (given the GCS's address; none: said already) and exit 3: the rows shown are in the
    journal already (synced point by point).

    Once a signal has asked the driver to stop, nothing of a head that does not answer is
    waited for: it is lost at once, and the process ends after `STOPPING_EXIT_S` more with the
    signal's line and code. A SIGTERM to the whole process group (what `timeout`, systemd and
    Kubernetes send) ends an embedded Ray's GCS with the driver: the head's loss is the
    signal's doing."""

    def __init__(self, gcs: str) -> None:
        host, port = gcs.rsplit(":", 1)  # as Ray gives it: HOST:PORT, or [IPV6]:PORT
        self.address = gcs
        self.gcs = Address(host=host.strip("[]"), port=int(port), client=False)
        limit = float(os.environ.get(_RAY_GCS_TIMEOUT_VAR) or _RAY_GCS_TIMEOUT_S)
        self.lost_after_s, self.exit_after_s = limit / 3, 2 * limit / 3
        self.lost = False
        self.epitaph: Callable[[str], str] | None = lambda gcs: f"lost the Ray head at {gcs}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sweeper-head", daemon=True)

    def start(self) -> HeadWatch:
        _WATCHES.append(self)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self in _WATCHES:
            _WATCHES.remove(self)

    def _watch(self) -> None:
        down_since: float | None = None
        while not self._stop.wait(_CHECK_S):
            if self._answers():
                down_since = None
                continue
            now = time.monotonic()
            down_since = now if down_since is None else down_since
            stopping = stops.signalled() is not None
            lost_after, exit_after = (
                (0.0, STOPPING_EXIT_S) if stopping else (self.lost_after_s, self.exit_after_s)
            )
            self.lost = self.lost or now - down_since >= lost_after
            if now - down_since >= exit_after and not self._stop.is_set():
                self._exit()

    def gone(self) -> bool:
        """Whether the head is lost: called so by the watch, or, once a signal has asked the
        driver to stop, not answering now."""
        if not self.lost and stops.signalled() is not None and not self._answers():
            self.lost = True
        return self.lost

    def _answers(self) -> bool:
        """Whether the GCS answers at all: a refusal (a token it does not take) is an answer."""
        failed = _first_call(self.gcs, _CHECK_S)
        return failed is None or failed[0] not in _DOWN

    def _exit(self) -> None:
        signum = stops.signalled()
        if signum is not None:  # the head went with the signal: it is the signal's line
            stops.end_told(signum)
        if sys.stdout.isatty():  # a progress bar hid the cursor
            sys.stdout.write(stops.SHOW_CURSOR)
            sys.stdout.flush()
        if self.epitaph is not None:
            sys.stderr.write(f"sweeper: error: {self.epitaph(self.address)}\n")
            sys.stderr.flush()
        stops.end_descendants()  # an embedded Ray's processes, where its GCS died
        os._exit(HeadLost.exit_code)


# Ray's core worker ends the driver once the GCS has not answered for this long (its default)
_RAY_GCS_TIMEOUT_VAR = "RAY_gcs_rpc_server_reconnect_timeout_s"
_RAY_GCS_TIMEOUT_S = 60.0
_CHECK_S = 1.0
STOPPING_EXIT_S = 5.0  # a stopping driver stuck in a call to a head that is gone ends after it
_DOWN = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_WATCHES: list[HeadWatch] = []  # the connections' watches, while they are on


def head_lost() -> bool:
    """Whether the head is lost (`HeadWatch.gone`): nothing is left to ask of it."""
    return any([watch.gone() for watch in _WATCHES])


def _watched(connection: Connection) -> Connection:
    """The connection, with a watch on its GCS."""
    connection.watch = HeadWatch(str(ray.get_runtime_context().gcs_address)).start()
    return connection


def connect(address: str | None, cpu_ranks: int, timeout_s: float = 60.0) -> Connection:
    """Join the Ray cluster at `address` (default $RAY_ADDRESS), else start an embedded one.

    An embedded Ray gets at least `cpu_ranks` logical CPUs, so that many CPU rank actors fit
    even on a smaller machine. An address that is none is BadInput, before any connection; a
    cluster that does not answer within `timeout_s` is an InfrastructureError. SIGTERM keeps
    the caller's handler: ray.init would make it `sys.exit`, which dies by SIGABRT in Ray's
    core instead of stopping the sweep. An embedded Ray listens on loopback (`_on_loopback`).
    """
    named = "--address" if address else "$RAY_ADDRESS"
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address == "auto":
        address = _recorded_address(named)
    remote = parse_address(address, named) if address else None
    if ray.is_initialized():
        return _watched(Connection(embedded=False, address=None))
    trust.warn_if_shared()
    trust.narrow_token_file()
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        if address:
            if remote is not None:
                _check_reachable(remote, timeout_s)
                address = str(remote)
            try:
                with trust.from_code_root():
                    ray.init(address=address, namespace="sweeper", log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise InfrastructureError(f"cannot connect to Ray at {address}: {exc}") from None
            joined = Connection(embedded=False, address=address)
            return joined if remote is not None and remote.client else _watched(joined)
        if os.environ.get(AUTH_MODE_ENV_VAR) is None:
            # what ray.init does for a cluster it starts (token authentication on), where it
            # also warns so as the first line of every run: nothing the user has to act on
            _enable_token_auth()
        minted = is_token_auth_enabled() and trust.mint_token()
        try:
            with (
                _on_loopback(),
                without_monitors(),
                _socket_paths_checked(),
                trust.from_code_root(),
            ):
                ray.init(
                    address="local",
                    num_cpus=max(os.cpu_count() or 1, cpu_ranks),
                    include_dashboard=False,
                    namespace="sweeper",
                    log_to_driver=False,
                    configure_logging=False,
                )
        except BaseException:
            if minted:
                trust.drop_token()
            raise
        return _watched(Connection(embedded=True, address=None, minted=minted))
    finally:
        if on_sigterm is not None:  # None: a handler not set from Python, which Ray leaves be
            signal.signal(signal.SIGTERM, on_sigterm)


@contextmanager
def _on_loopback() -> Iterator[None]:
    """An embedded Ray started on loopback: its GCS, raylet, workers and agents listen on
    127.0.0.1 alone, where Ray would bind every interface (or the host's address), as for a
    node that others join. Ray puts a node on loopback only where it runs no cluster (macOS,
    Windows): `ray.init` turns a loopback `_node_ip_address` into the host's. Its switch is
    turned for the embedded Ray's start alone: a cluster joined later in the process is
    joined at this host's address."""
    cluster = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster


@contextmanager
def without_monitors() -> Iterator[None]:
    """A Ray that `ray.init` starts here, started without Ray's log monitor and autoscaler
    monitor, two Python processes that `ray.init` has no option for. The log monitor tails
    every worker's log files to send their lines to drivers, which get none (log_to_driver
    is off): it took a few percent of a core all the while, beside the ranks it timed. The
    autoscaler has no other node to start for a Ray of one machine. Each took a second of
    CPU to start, before the first rank could."""
    params = parameter.RayParams

    def quiet(**given: Any) -> parameter.RayParams:
        ray_params = params(**given, no_monitor=True)
        ray_params.include_log_monitor = False  # type: ignore[assignment]  # a flag (typed str)
        return ray_params

    parameter.RayParams = quiet  # type: ignore[misc,assignment]  # ray.init's only RayParams
    try:
        yield
    finally:
        parameter.RayParams = params  # type: ignore[misc]


@contextmanager
def _socket_paths_checked() -> Iterator[None]:
    """Ray's refusal of its session's socket paths as one line: an embedded Ray puts them
    under $RAY_TMPDIR (else the temporary directory), and one over the 107 bytes a Unix
    socket's path may have was a traceback from deep inside `ray.init`; so was a temporary
    directory that is none (TMPDIR=/dev/null), refused here before Ray starts."""
    named = "RAY_TMPDIR" if os.environ.get("RAY_TMPDIR") else "TMPDIR"
    session = os.environ.get(named) or "/tmp"
    if not os.path.isdir(session):
        raise BadInput(
            f"${named} {session[:200]!r} is not a directory: an embedded Ray keeps its session "
            f"there; set {named} to one"
        )
    try:
        yield
    except OSError as exc:
        if "validate_socket_filename" not in str(exc):
            raise
        where = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        raise BadInput(
            f"$RAY_TMPDIR {where[:200]!r} is too long for an embedded Ray: its session's socket "
            "paths would pass the 107 bytes a Unix socket's path may have; set RAY_TMPDIR "
            "to a shorter directory"
        ) from None


def _wait(refs: Sequence[Any], num_returns: int, timeout_s: float) -> list[Any]:
    """ray.wait in slices of at most SLICE_S, each with signals held: Ray's wait runs the
    driver's signal handlers and fails (SystemError) where one raises, so a signal is raised
    between slices instead, within SLICE_S of its coming; and HeadLost, once the head is."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        for watch in _WATCHES:
            if watch.lost:
                raise HeadLost(watch.address)
        left = deadline - time.monotonic()
        with stops.held():
            ready, _ = ray.wait(
                list(refs), num_returns=num_returns, timeout=max(0.0, min(SLICE_S, left))
            )
        if len(ready) >= num_returns or left <= SLICE_S:
            return list(ready)


def wait(refs: Sequence[Any], timeout_s: float) -> list[Any]:
    """The refs among `refs` whose results are in, waiting up to `timeout_s` for one."""
    if not refs:
        return []
    if _wait(refs, 1, timeout_s):  # and whatever else is in already
        return _wait(refs, len(refs), 0)
    return []


def wait_all(refs: Sequence[Any], timeout_s: float) -> dict[Any, Any]:
    """The results (or the exceptions raised) of those of `refs` that are in within
    `timeout_s`."""
    if not refs:
        return {}
    return {ref: result(ref) for ref in _wait(refs, len(refs), timeout_s)}


def get(refs: Sequence[Any], timeout_s: float) -> list[Any]:
    """ray.get of `refs`, waited for as `wait` does: the first call's error once it is in,
    GetTimeoutError where some are not in within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    pending = list(refs)
    while pending and (ready := wait(pending, deadline - time.monotonic())):
        failed = [value for value in map(result, ready) if isinstance(value, BaseException)]
        if failed:
            raise failed[0]
        pending = [ref for ref in pending if ref not in ready]
    with stops.held():
        return list(ray.get(list(refs), timeout=0))


def result(ref: Any) -> Any:
    """A call's result, or the exception it raised (a dead actor's: RayActorError)."""
    try:
        with stops.held():
            return ray.get(ref)
    except Exception as exc:
        return exc
