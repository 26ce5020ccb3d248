"""Connection-level limits of the HTTP API (aiohttp), so idle or slow clients cannot exhaust file descriptors.

aiohttp alone keeps a connection that trickles its headers open indefinitely and has no connection cap, so
21,000 idle sockets took the API (and, through ``EMFILE``, the node's own LevelDB, QUIC and peer sockets) down.
Here, on the connection level, before any request is parsed:

* **Connection caps.** At most ``max_connections`` open connections in all and ``max_connections_per_ip``
  from one source address. A connection over a cap is answered at once with a JSON 503
  ``too_many_connections`` and closed; it never reaches the request parser.
* **Header timeout.** The request line and headers must be complete ``header_timeout_ms`` after the
  connection opened (first request) or after the first byte of a later request arrived (keep-alive);
  otherwise the node answers 408 ``header_timeout`` and closes the connection.
* **Idle timeout.** A keep-alive connection with no request in progress is closed after
  ``idle_timeout_ms`` (aiohttp's ``keepalive_timeout``).
* **A descriptor reserve.** :func:`fit_to_descriptors` raises the soft ``RLIMIT_NOFILE`` to the hard limit
  and lowers the global cap to ``soft − fd_reserve`` when that is smaller, so the API can never take the
  descriptors the node itself needs.
* **JSON errors.** Errors aiohttp produces itself (a malformed request, an over-long request line or header,
  too many headers) are JSON ``{"code", "message"}`` like every other API error: 400 ``header_too_large``,
  400 ``bad_request``.

Use :class:`LimitedAppRunner` in place of ``web.AppRunner``.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Any, cast

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_server import Server

from cowboy_protocol.netaddr import normalize_ip

__all__ = ["ConnLimits", "ConnectionGate", "DescriptorLimitError", "LimitedAppRunner", "fit_to_descriptors",
           "raise_nofile_limit"]

log = structlog.get_logger("cowboy.rpc")

DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_MAX_CONNECTIONS_PER_IP = 64
DEFAULT_HEADER_TIMEOUT_MS = 10_000
DEFAULT_IDLE_TIMEOUT_MS = 30_000
DEFAULT_FD_RESERVE = 256
REFUSAL_LOG_INTERVAL_S = 10.0
"""Refusals and header timeouts are logged at most this often (with counts), never once per connection."""
_NOFILE_FALLBACK = 1 << 20
"""Soft limit tried when the hard limit is unlimited (Linux's default ``nr_open``)."""


@dataclass(frozen=True, slots=True)
class ConnLimits:
    """Connection limits of one HTTP server (``[rpc]`` in config.toml)."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Most open connections in all (lowered by :func:`fit_to_descriptors` to leave ``fd_reserve`` free)."""
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP
    """Most open connections from one source address."""
    header_timeout_ms: int = DEFAULT_HEADER_TIMEOUT_MS
    """Time to receive a request's complete request line and headers."""
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    """Time a keep-alive connection may wait for its next request."""
    fd_reserve: int = DEFAULT_FD_RESERVE
    """File descriptors kept free of HTTP connections for the node's own files and sockets."""

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_connections_per_ip", "header_timeout_ms", "idle_timeout_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.fd_reserve, bool) or not isinstance(self.fd_reserve, int) or self.fd_reserve < 0:
            raise ValueError(f"fd_reserve must be a non-negative integer, got {self.fd_reserve!r}")


# -- file descriptors ----------------------------------------------------------------
class DescriptorLimitError(OSError):
    """The open-file limit leaves no descriptor for HTTP connections after ``fd_reserve`` (an OSError, so start-up
    reports it like a port that cannot be bound)."""


def raise_nofile_limit() -> tuple[int, int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit when it is lower.

    Returns ``(soft before, soft now, hard)``; ``resource.RLIM_INFINITY`` stands for unlimited. A refusal
    by the OS leaves the limit as it was.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    inf = resource.RLIM_INFINITY
    if soft == inf or (hard != inf and soft >= hard):
        return soft, soft, hard
    target = hard if hard != inf else _NOFILE_FALLBACK
    if target <= soft:
        return soft, soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft, hard
    return soft, target, hard


def fit_to_descriptors(limits: ConnLimits) -> ConnLimits:
    """``limits`` with ``max_connections`` = min(configured, soft RLIMIT_NOFILE − fd_reserve), after raising
    the soft limit to the hard one; logs what was chosen.

    Raises DescriptorLimitError when the soft limit leaves no descriptor for HTTP connections after the reserve.
    """
    before, soft, hard = raise_nofile_limit()
    inf = resource.RLIM_INFINITY
    if soft == inf:
        cap = limits.max_connections
    else:
        available = soft - limits.fd_reserve
        if available < 1:
            raise DescriptorLimitError(
                f"the open-file limit (ulimit -n) is {soft}, which leaves no descriptor for HTTP connections after "
                f"rpc.fd_reserve = {limits.fd_reserve}; raise the limit or lower rpc.fd_reserve")
        cap = min(limits.max_connections, available)
    log.info("rpc connection limits", max_connections=cap, configured_max_connections=limits.max_connections,
             max_connections_per_ip=limits.max_connections_per_ip, fd_reserve=limits.fd_reserve,
             nofile_soft=None if soft == inf else soft, nofile_soft_at_start=None if before == inf else before,
             nofile_hard=None if hard == inf else hard, header_timeout_ms=limits.header_timeout_ms,
             idle_timeout_ms=limits.idle_timeout_ms)
    if cap < limits.max_connections:
        log.warning("rpc.max_connections lowered to fit the open-file limit", configured=limits.max_connections,
                    chosen=cap, nofile_soft=soft, fd_reserve=limits.fd_reserve)
    return replace(limits, max_connections=cap)


# -- accounting ----------------------------------------------------------------------
def peer_ip(peername: Any) -> str:
    """The source address of a connection (IPv4-mapped IPv6 as IPv4); ``""`` when there is none (Unix socket)."""
    if not isinstance(peername, tuple) or not peername or not isinstance(peername[0], str):
        return ""
    return normalize_ip(peername[0])


class ConnectionGate:
    """Counts open connections (in all and per source address) and decides admission; reports metrics."""

    def __init__(self, max_connections: int, max_connections_per_ip: int, metrics: object | None = None) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.open = 0
        """Admitted connections not yet closed."""
        self._per_ip: dict[str, int] = {}
        self._metrics = metrics
        self._pending: dict[str, int] = {}
        self._last_log = 0.0

    def open_from(self, ip: str) -> int:
        """Admitted open connections from ``ip``."""
        return self._per_ip.get(ip, 0)

    def admit(self, ip: str) -> str | None:
        """Take a slot for a new connection from ``ip``; else the refusal reason (``global_cap``, ``per_ip_cap``)."""
        if self.open >= self.max_connections:
            reason = "global_cap"
        elif self._per_ip.get(ip, 0) >= self.max_connections_per_ip:
            reason = "per_ip_cap"
        else:
            self.open += 1
            self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
            self._set_gauge()
            return None
        counter = getattr(self._metrics, "rpc_connections_refused", None)
        if counter is not None:
            counter.labels(reason=reason).inc()
        self._note(reason)
        return reason

    def release(self, ip: str) -> None:
        """Give back the slot of a closed connection."""
        self.open -= 1
        left = self._per_ip.get(ip, 0) - 1
        if left > 0:
            self._per_ip[ip] = left
        else:
            self._per_ip.pop(ip, None)
        self._set_gauge()

    def header_timed_out(self) -> None:
        """Count one connection closed by the header timeout."""
        counter = getattr(self._metrics, "rpc_header_timeouts", None)
        if counter is not None:
            counter.inc()
        self._note("header_timeout")

    def _set_gauge(self) -> None:
        gauge = getattr(self._metrics, "rpc_connections", None)
        if gauge is not None:
            gauge.set(self.open)

    def _note(self, event: str) -> None:
        """Log refusals and timeouts with counts, at most once per REFUSAL_LOG_INTERVAL_S (an attack must not
        turn into a log flood)."""
        self._pending[event] = self._pending.get(event, 0) + 1
        now = time.monotonic()
        if now - self._last_log >= REFUSAL_LOG_INTERVAL_S:
            self._last_log = now
            log.warning("rpc connections refused or timed out", **self._pending, open=self.open,
                        max_connections=self.max_connections, max_connections_per_ip=self.max_connections_per_ip)
            self._pending = {}


# -- responses written by the connection layer ---------------------------------------
def raw_json_response(status: int, code: str, message: str, *, extra_headers: str = "") -> bytes:
    """A complete ``Connection: close`` HTTP/1.1 response with a JSON error body, for writing to a transport."""
    body = json.dumps({"code": code, "message": message}).encode()
    head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n{extra_headers}Connection: close\r\n\r\n")
    return head.encode("ascii") + body


def describe_error(status: int, exc: BaseException | None) -> tuple[str, str]:
    """``(code, message)`` of an error aiohttp's protocol layer answers itself (bad request, handler crash)."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the allowed number of"
        return "header_too_large", f"the request line or a header field is longer than {limit} bytes"
    if isinstance(exc, HttpProcessingError) and "too many headers" in (exc.message or "").lower():
        return "header_too_large", "the request has too many header fields"
    if status == 400:
        detail = exc.message if isinstance(exc, HttpProcessingError) else ""
        return "bad_request", f"malformed HTTP request: {detail[:200]}" if detail else "malformed HTTP request"
    if status == 504:
        return "timeout", "the request handler timed out"
    if status >= 500:
        return "internal_error", "internal server error"
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "HTTP error"
    return phrase.lower().replace(" ", "_").replace("-", "_"), phrase


# -- aiohttp server and protocol -----------------------------------------------------
class LimitedServer(Server):
    """aiohttp's low-level ``Server`` (the protocol factory) building :class:`LimitedRequestHandler`."""

    def __init__(self, handler: Any, *, gate: ConnectionGate, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.gate = gate
        self.header_timeout_s = header_timeout_s

    def __call__(self) -> RequestHandler:
        return LimitedRequestHandler(self, loop=self._loop, **self._kwargs)


class LimitedRequestHandler(RequestHandler):
    """One HTTP connection: admission by the gate, the header timeout, JSON error responses."""

    __slots__ = ("_answered", "_gate", "_header_count", "_header_timeout_s", "_header_timer", "_peer_ip")

    def __init__(self, manager: LimitedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._gate = manager.gate
        self._header_timeout_s = manager.header_timeout_s
        self._peer_ip: str | None = None
        """Source address while the connection holds a gate slot."""
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_count = 0
        """``_request_count`` when the header timer was armed: a new request since means its headers arrived."""
        self._answered = 0
        """Requests whose response is finished: ``_request_count == _answered`` means no request is in progress."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tr = cast(asyncio.Transport, transport)
        ip = peer_ip(tr.get_extra_info("peername"))
        if self._gate.admit(ip) is not None:
            # Never started: no parser task, not in the server's connection list. connection_lost and
            # data_received see _manager None / _force_close and do nothing.
            self._manager = None
            self._force_close = True
            tr.write(raw_json_response(503, "too_many_connections", "too many open connections; retry later",
                                       extra_headers="Retry-After: 1\r\n"))
            tr.close()
            return
        self._peer_ip = ip
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._peer_ip is not None:
            self._gate.release(self._peer_ip)
            self._peer_ip = None
        self._cancel_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if (data and self._header_timer is None and self._peer_ip is not None
                and self._request_count == self._answered and not self._force_close):
            self._arm_header_timer()  # first byte of the next request on a kept-alive connection
        super().data_received(data)
        if self._header_timer is not None and self._request_count != self._header_count:
            self._cancel_header_timer()

    async def finish_response(self, request: BaseRequest, resp: web.StreamResponse,
                              start_time: float | None) -> tuple[web.StreamResponse, bool]:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            self._answered += 1

    def _arm_header_timer(self) -> None:
        self._header_count = self._request_count
        self._header_timer = self._loop.call_later(self._header_timeout_s, self._on_header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        if self.transport is None or self._force_close or self._request_count != self._header_count:
            return
        self._gate.header_timed_out()
        ms = round(self._header_timeout_s * 1000)
        self.transport.write(raw_json_response(408, "header_timeout",
                                               f"request headers not complete within {ms} ms"))
        self.force_close()

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """aiohttp's own error responses (malformed request, over-long header, crash outside the API
        middleware), as JSON ``{"code", "message"}``; client errors are logged at debug level only."""
        if status >= 500:
            log.error("rpc request failed outside the API handlers", status=status, peer=self._peer_ip,
                      exc_info=exc)
        else:
            log.debug("malformed http request", status=status, peer=self._peer_ip,
                      error=f"{type(exc).__name__}: {exc}"[:300] if exc is not None else message)
        if request.writer.output_size > 0:  # part of a response went out: the connection is broken
            raise ConnectionError("Response is sent already, cannot send another response with the error message")
        code, text = describe_error(status, exc)
        resp = web.json_response({"code": code, "message": text}, status=status)
        resp.force_close()
        return resp


class LimitedAppRunner(web.AppRunner):
    """``web.AppRunner`` whose connections obey :class:`ConnLimits` (sites: ``web.TCPSite(runner, ...)``)."""

    __slots__ = ("_gate", "_limits")

    def __init__(self, app: web.Application, *, limits: ConnLimits, metrics: object | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("keepalive_timeout", limits.idle_timeout_ms / 1000)
        super().__init__(app, **kwargs)
        self._limits = limits
        self._gate = ConnectionGate(limits.max_connections, limits.max_connections_per_ip, metrics)

    @property
    def gate(self) -> ConnectionGate:
        """The connection accounting of this runner's server."""
        return self._gate

    @property
    def limits(self) -> ConnLimits:
        """The limits in force."""
        return self._limits

    async def _make_server(self) -> Server:
        base = await super()._make_server()
        return LimitedServer(base.request_handler, request_factory=base.request_factory,
                             handler_cancellation=base.handler_cancellation, loop=base._loop, gate=self._gate,
                             header_timeout_s=self._limits.header_timeout_ms / 1000, **base._kwargs)
