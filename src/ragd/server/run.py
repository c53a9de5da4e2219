"""`ragd serve`: uvicorn in one process or several sharing one listening socket, an address checked before it
is bound, a graceful stop that does not wait forever on a stuck request."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import time
from collections.abc import Iterator

import uvicorn
from uvicorn.supervisors import Multiprocess

from ..errors import ConfigError

log = logging.getLogger("ragd.server")


class ServerConfig(uvicorn.Config):
    """uvicorn's config with a listening socket that says it is TCP. uvicorn binds the listener it shares between
    worker processes with protocol 0, and asyncio only sets TCP_NODELAY on connections accepted from a socket that
    says IPPROTO_TCP, so with --workers > 1 every keep-alive response waited ~40 ms for the client's delayed ACK
    (uvicorn issue 3149). Rebuilt from its descriptor, the socket reads its real protocol from the kernel."""

    def bind_socket(self) -> socket.socket:
        return socket.socket(fileno=super().bind_socket().detach())


def run_server(host: str, port: int, workers: int) -> None:
    """Serve `app_from_env` with uvicorn, in `workers` processes sharing one listening socket when more than one."""
    _check_address(host, port)
    config = ServerConfig("ragd.server:app_from_env", factory=True, host=host, port=port, workers=workers,
                          log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    try:
        if workers > 1:
            with _shared_metrics():
                Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server = uvicorn.Server(config)
            with contextlib.suppress(SystemExit):  # (uvicorn exits when it cannot start; it logged why)
                server.run()
            if not server.started:
                raise ConfigError(f"could not serve on {host}:{port}: see the error above")
    except KeyboardInterrupt:
        pass
    _exit_when_stuck()


@contextlib.contextmanager
def _shared_metrics() -> Iterator[None]:
    """A fresh PROMETHEUS_MULTIPROC_DIR for the worker processes (prometheus-client's multiprocess mode: each writes
    its counts there and a scrape of any of them sums all), removed when they have stopped."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    with tempfile.TemporaryDirectory(prefix="ragd-metrics-") as folder:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
        try:
            yield
        finally:
            if given is None:
                os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
            else:
                os.environ["PROMETHEUS_MULTIPROC_DIR"] = given


def _check_address(host: str, port: int) -> None:
    """ConfigError in one line when `host` names no address of this machine or `port` is taken there (uvicorn
    would log it with its own prefix and exit)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"cannot serve on host {host!r}: {getattr(exc, 'strerror', None) or exc}; give a name or "
                          "address of this machine (--host)") from None
    if port == 0:
        return
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(f"cannot serve on {host}:{port}: {exc.strerror} (another server on that port? choose "
                              "one with --port)") from None


# A server asked to stop lets requests in flight finish for this long, then cancels them and stops: a request's
# thread waiting on the database (up to RAGD_DB_LOCK_TIMEOUT_S) or anything else does not hold the process.
SHUTDOWN_GRACE_S = 5


def _exit_when_stuck(wait_s: float = 2.0) -> None:
    """End the process now when request threads outlive the shutdown (cancelled, they still wait on a lock or a
    statement): the interpreter would wait for them at exit. Their database sessions end with the process."""
    import threading

    deadline = time.monotonic() + wait_s
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon
             and t.is_alive()]
    if stuck:
        log.warning("stopping with %d request thread(s) still busy (%s): they are abandoned", len(stuck),
                    ", ".join(sorted(stuck)[:5]))
        logging.shutdown()
        os._exit(0)
