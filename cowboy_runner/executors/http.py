"""HTTP job executor (job kind 0x01): one request with the job's method, headers and body, within the runner's
domain allow-list, a response size cap, optional JSON-path extraction and freshness checks."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from multidict import CIMultiDict
from yarl import URL

from cowboy_protocol.jobs.hosts import host_matches
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.jobspec import HttpJob, JobType, ResourceBounds
from cowboy_protocol.types.jobspec_checks import parse_http_url
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_runner.executors.addresses import is_global_address
from cowboy_runner.executors.base import (
    ExecutionResult,
    ExecutorError,
    canonical_json,
    check_output_size,
    with_deadline,
)
from cowboy_runner.executors.config import HttpConfig, operator_deadline
from cowboy_runner.executors.extract import extract, parse_timestamp

T = TypeVar("T")

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
"""Statuses followed as redirects (when they carry a Location)."""
CHUNK_BYTES = 64 * 1024
"""Read size while streaming a body."""
PRIVATE_KEY = "runner.toml executors.http.allow_private_addresses"
"""The setting that lets HTTP jobs reach loopback/private addresses, named in every refusal it causes."""


class BlockedAddressError(OSError):
    """A host resolved only to non-global addresses while ``allow_private_addresses`` is off."""


def origin(url: URL) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the default port filled in: two URLs share credentials only when equal."""
    return url.scheme.lower(), (url.host or "").lower().rstrip("."), url.port


def strip_credentials(headers: CIMultiDict[str], names: tuple[str, ...]) -> list[str]:
    """Remove every header named in ``names`` (case-insensitive) from ``headers``; returns the names removed."""
    dropped = []
    for name in names:
        if name in headers:
            dropped.append(name)
            headers.popall(name)
    return dropped


class PublicOnlyResolver(AbstractResolver):
    """Resolver that drops non-global addresses, so an allowed name cannot point the runner at its own
    network (checked on the addresses actually connected to, which also defeats DNS rebinding)."""

    def __init__(self) -> None:
        self._inner = DefaultResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        """Resolve through the default resolver and keep only global addresses."""
        found = [r for r in await self._inner.resolve(host, port, family) if is_global_address(r["host"])]
        if not found:
            raise BlockedAddressError(f"{host} resolves only to non-public addresses")
        return found

    async def close(self) -> None:
        """Close the wrapped resolver."""
        await self._inner.close()


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def with_operator_limit(work: Awaitable[T], deadline_s: float, limit_s: float | None, key: str) -> T:
    """:func:`with_deadline` with ``min(deadline_s, limit_s)``: the job's wall-time bound and the operator's
    ``runner.toml`` limit ``key``, whichever is shorter. A ``timeout`` says which one hit in its detail
    (``limited_by``: ``job`` or ``operator`` naming ``key``; ``limit_s``)."""
    effective = operator_deadline(deadline_s, limit_s)
    try:
        return await with_deadline(work, effective)
    except ExecutorError as e:
        if e.code == "timeout":
            by_operator = effective < deadline_s
            e.detail.setdefault("limited_by", "operator" if by_operator else "job")
            e.detail.setdefault("limit_s", effective)
            if by_operator:
                e.message = f"{e.message} (operator limit {key} = {effective:g} s)"
                e.args = (f"{e.code}: {e.message}",)
        raise


async def read_limited(resp: aiohttp.ClientResponse, cap: int) -> bytes:
    """The whole body of ``resp``, or ``ExecutorError("response_too_large")`` as soon as it exceeds ``cap`` bytes
    (a declared Content-Length over the cap is refused before reading; the connection is then dropped)."""
    declared = resp.content_length
    if declared is not None and declared > cap:
        resp.close()  # never read a body we already know is too large
        raise ExecutorError("response_too_large", f"Content-Length {declared} is over {cap} bytes",
                            detail={"limit": cap, "declared": declared})
    parts: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_chunked(CHUNK_BYTES):
        total += len(chunk)
        if total > cap:
            resp.close()  # drop the connection instead of draining the rest
            raise ExecutorError("response_too_large", f"response body is over {cap} bytes", detail={"limit": cap})
        parts.append(chunk)
    return b"".join(parts)


class HttpExecutor:
    """Executes :class:`~cowboy_protocol.types.jobspec.HttpJob`; see docs/runner-executors.md §HTTP."""

    def __init__(self, config: HttpConfig, *, max_output_bytes: int,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        """Settings."""
        self.max_output_bytes = max_output_bytes
        """Largest result returned."""
        self._clock = clock  # wall clock for freshness; injectable for tests

    async def execute(self, job: JobType, bounds: ResourceBounds | None, *, deadline_s: float) -> ExecutionResult:
        """Run the request within ``deadline_s`` seconds."""
        if not isinstance(job, HttpJob):
            raise ExecutorError("unsupported_job_type", f"HTTP executor cannot run {type(job).__name__}")
        return await with_operator_limit(self._run(job), deadline_s, self.config.request_timeout_s,
                                         "executors.http.request_timeout_s")

    def _check_method(self, method: str) -> None:
        if method.upper() not in self.config.allowed_methods:
            raise ExecutorError("method_not_allowed", f"method {method} is not allowed by this runner "
                                f"(executors.http.allowed_methods)", detail={"method": method})

    def _check_target(self, url: URL) -> None:
        if url.scheme not in ("http", "https") or not url.host:
            raise ExecutorError("domain_not_allowed", f"not an http(s) URL with a host: {str(url)[:200]}")
        host = url.host.lower().rstrip(".")
        if not host_matches(host, self.config.allowed_domains):
            raise ExecutorError("domain_not_allowed", f"host {host!r} is not in the runner's allow-list "
                                f"(runner.toml capabilities.http_domains; `cowboy-runner capabilities --home HOME "
                                f"--http-domain {host}` adds it here and on chain)", detail={"host": host})
        if not self.config.allow_private_addresses and _is_ip_literal(host) and not is_global_address(host):
            raise ExecutorError("address_not_allowed", f"{host} is not a public address ({PRIVATE_KEY} = false)",
                                detail={"host": host})

    def _headers(self, job: HttpJob) -> CIMultiDict[str]:
        headers: CIMultiDict[str] = CIMultiDict(job.headers)
        headers.setdefault("User-Agent", self.config.user_agent)
        if job.freshness is not None and job.freshness.cache_control is not None:
            headers["Cache-Control"] = job.freshness.cache_control  # the freshness requirement wins
        return headers

    async def _run(self, job: HttpJob) -> ExecutionResult:
        if parse_http_url(job.url) is None:
            raise ExecutorError("invalid_job", "http.url is not a valid http(s) URL")
        url = URL(job.url, encoded=True)  # sent exactly as written (the job's URL is already percent-encoded)
        method, body, headers = job.method, job.body, self._headers(job)
        first_origin = origin(url)
        resolver = None if self.config.allow_private_addresses else PublicOnlyResolver()
        connector = aiohttp.TCPConnector(resolver=resolver, force_close=True)
        # The whole-request limit is the deadline around _run; aiohttp only bounds each connection attempt.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.config.connect_timeout_s)
        try:
            async with aiohttp.ClientSession(connector=connector, auto_decompress=True, timeout=timeout) as session:
                for hop in range(self.config.max_redirects + 1):
                    self._check_method(method)
                    self._check_target(url)
                    async with session.request(method, url, headers=headers, data=body,
                                               allow_redirects=False) as resp:
                        location = resp.headers.get("Location")
                        if resp.status in REDIRECT_STATUSES and location is not None:
                            if hop == self.config.max_redirects:
                                raise ExecutorError("too_many_redirects",
                                                    f"more than {self.config.max_redirects} redirects")
                            url = url.join(URL(location))
                            if resp.status == 303 or (resp.status in (301, 302) and method == "POST"):
                                method, body = ("HEAD" if method == "HEAD" else "GET"), None
                            if origin(url) != first_origin:
                                # The job's credentials were meant for the first origin only (as curl and the
                                # Fetch standard do); once dropped they stay dropped, even back on that origin.
                                strip_credentials(headers, self.config.credential_headers)
                            continue
                        if not 200 <= resp.status < 300:
                            raise ExecutorError("http_status", f"HTTP {resp.status} from {url.host}",
                                                detail={"status": resp.status})
                        data = await self._read_capped(resp)
                        return self._result(job, resp, data, url)
        except aiohttp.ConnectionTimeoutError:
            limit = self.config.connect_timeout_s
            raise ExecutorError("timeout", f"no connection to {url.host} within {limit:g} s (operator limit "
                                           "executors.http.connect_timeout_s)",
                                detail={"phase": "connect", "limited_by": "operator", "limit_s": limit}) from None
        except aiohttp.ClientConnectorError as e:
            if isinstance(e.os_error, BlockedAddressError):
                raise ExecutorError("address_not_allowed", f"{e.os_error} ({PRIVATE_KEY} = false)") from None
            raise ExecutorError("upstream_error", f"cannot connect: {e}") from None
        except aiohttp.ClientError as e:
            raise ExecutorError("upstream_error", f"HTTP error: {e}") from None
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _read_capped(self, resp: aiohttp.ClientResponse) -> bytes:
        return await read_limited(resp, self.config.max_response_bytes)

    def _result(self, job: HttpJob, resp: aiohttp.ClientResponse, data: bytes, url: URL) -> ExecutionResult:
        doc: Any = None
        needs_json = job.extraction is not None or (job.freshness is not None and job.freshness.timestamp_field)
        if needs_json:
            try:
                doc = parse_json(data)
            except ValidationError as e:
                raise ExecutorError("bad_extraction", f"response body is not JSON: {e.message}") from None
        if job.freshness is not None:
            self._check_freshness(job, resp, doc)
        output = data if job.extraction is None else canonical_json(extract(doc, job.extraction))
        detail: dict[str, object] = {"status": resp.status, "url": str(url), "bytes": len(data),
                                     "content_type": resp.headers.get("Content-Type", "")}
        return ExecutionResult(check_output_size(output, self.max_output_bytes), len(data), detail)

    def _check_freshness(self, job: HttpJob, resp: aiohttp.ClientResponse, doc: Any) -> None:
        fresh = job.freshness
        assert fresh is not None
        if fresh.timestamp_field:
            try:
                stamp = parse_timestamp(extract(doc, fresh.timestamp_field))
            except ExecutorError as e:
                raise ExecutorError("bad_timestamp", f"freshness timestamp: {e.message}") from None
            except ValueError as e:
                raise ExecutorError("bad_timestamp", f"freshness timestamp: {e}") from None
            age = self._clock() - stamp
        else:
            # Without a timestamp field the best evidence is a cache's Age header (RFC 9111 §5.1).
            age_header = resp.headers.get("Age", "")
            age = int(age_header) if age_header.isascii() and age_header.isdigit() else 0
        if age > fresh.max_age_seconds:
            raise ExecutorError("stale_data", f"data is {age:.0f} s old, over max_age_seconds "
                                              f"{fresh.max_age_seconds}", detail={"age_seconds": age})
