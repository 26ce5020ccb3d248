"""Async access to the validator's HTTP API (docs/api.md) for the runner daemon.

The node's synchronous :class:`~cowboy_protocol.http_client.RpcClient` (stdlib urllib, no proxies, size-capped
answers, ``ApiError``/``NodeUnreachable``) runs in a worker thread, so a slow validator never blocks the event
loop. Every method returns the typed answer of its contract operation (``cowboy_protocol/api_types.py``) or None
for "not there (yet)" (404).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import structlog

from cowboy_protocol import api_types as api
from cowboy_protocol.http_client import ApiError, NodeUnreachable, RpcClient

__all__ = ["ApiError", "ChainClient", "NodeUnreachable", "PollDisabled"]

log = structlog.get_logger("cowboy.runner.chain")

T = TypeVar("T")


class PollDisabled(Exception):
    """``GET /runner/{address}/jobs`` answered 410 ``poll_disabled`` (CIP11_POLL_DISABLED)."""


class ChainClient:
    """The runner's view of the chain through its validator's HTTP API, failing over to the other validators'.

    ``base_url`` (``runner.validator_rpc``) is the primary. :meth:`add_fallbacks` adds the RPC URLs the
    validators announced (``GET /validators``): when the validator in use is unreachable, a read or a
    submission is retried on the next one, which then stays in use (CIP-11 §10.3: a runner's result must still
    land when the validator that dispatched the job is down). ``status()`` always asks the primary: its answer
    names *that* validator (the session plan's anchor).
    """

    def __init__(self, base_url: str, *, timeout: float = 5.0) -> None:
        self.rpc = RpcClient(base_url, timeout=timeout)
        """The primary validator's client."""
        self._timeout = timeout
        self._clients: list[RpcClient] = [self.rpc]
        self._current = 0

    @property
    def current_url(self) -> str:
        """The RPC URL in use."""
        return self._clients[self._current].base_url

    def add_fallbacks(self, urls: list[str]) -> int:
        """Add validators' RPC URLs to fail over to (unknown ones only); returns how many were added."""
        known = {c.base_url for c in self._clients}
        added = 0
        for url in urls:
            try:
                client = RpcClient(url, timeout=self._timeout)
            except ValueError:
                continue
            if client.base_url not in known:
                self._clients.append(client)
                known.add(client.base_url)
                added += 1
        return added

    async def _call(self, fn: Callable[[RpcClient], T]) -> T:
        """``fn`` on the client in use; on NodeUnreachable, on each other client in turn (the first that answers
        becomes the one in use). Raises the last NodeUnreachable when none answers."""
        n = len(self._clients)
        last: NodeUnreachable | None = None
        for step in range(n):
            i = (self._current + step) % n
            try:
                out = await asyncio.to_thread(fn, self._clients[i])
            except NodeUnreachable as e:
                last = e
                continue
            if i != self._current:
                log.warning("validator RPC unreachable; failed over", to=self._clients[i].base_url,
                            previous=self._clients[self._current].base_url)
                self._current = i
            return out
        assert last is not None
        raise last

    async def _get(self, fn: Callable[[RpcClient], T], *, missing_ok: bool = False) -> T | None:
        try:
            return await self._call(fn)
        except ApiError as e:
            if missing_ok and e.status == 404:
                return None
            raise

    async def _read(self, fn: Callable[[RpcClient], T]) -> T:
        return await self._call(fn)

    async def status(self) -> api.Status:
        """``GET /status`` of the primary validator: chain id, head height, basefees, its ed25519 key."""
        return await asyncio.to_thread(self.rpc.status)

    async def head_status(self) -> api.Status:
        """``GET /status`` of the validator in use (failing over like every read): the head height, basefees and
        block time, which any validator of the chain answers alike."""
        return await self._read(RpcClient.status)

    async def validators(self) -> api.Validators | None:
        """``GET /validators`` (None from a node that does not serve it): the snapshot with each validator's
        announced QUIC endpoint."""
        try:
            return await self._get(RpcClient.validators, missing_ok=True)
        except ApiError as e:
            if e.status == 501:
                return None
            raise

    async def height(self) -> int:
        """``GET /height``: the head height (the runner's view of finality: the chain is single-slot final)."""
        return int((await self._read(RpcClient.height))["height"])

    async def params(self) -> api.Params:
        """``GET /params``: governed parameters (``runners.min_runner_stake``, ``limits``…)."""
        return await self._read(RpcClient.params)

    async def next_nonce(self, address: bytes) -> int:
        """``next_pending_nonce`` of ``GET /account/{address}`` (counts this sender's mempool txs)."""
        doc = await self._read(lambda c: c.account(address))
        return int(doc["next_pending_nonce"])

    async def runner(self, address: bytes) -> api.Runner | None:
        """``GET /runner/{address}``; None if the address never registered."""
        return await self._get(lambda c: c.runner(address), missing_ok=True)

    async def job(self, job_id: bytes) -> api.Job | None:
        """``GET /job/{id}``; None when the job does not exist."""
        return await self._get(lambda c: c.job(job_id), missing_ok=True)

    async def receipt(self, tx_hash: bytes) -> api.Receipt | None:
        """``GET /tx/{hash}/receipt``; None while the transaction is unknown or pending."""
        return await self._get(lambda c: c.receipt(tx_hash), missing_ok=True)

    async def runner_jobs(self, address: bytes, *, after: bytes | None = None, limit: int = 100) -> api.RunnerJobs:
        """``GET /runner/{address}/jobs`` (poll fallback, CIP-11 §14); raises :class:`PollDisabled` on 410."""
        try:
            return await self._read(lambda c: c.runner_jobs(address, limit=limit, after=after))
        except ApiError as e:
            if e.status == 410:
                raise PollDisabled(e.message) from None
            raise

    async def submit(self, tx_bytes: bytes) -> api.Submitted:
        """``POST /submit`` with raw transaction bytes; returns ``{"tx_hash", "status"}``."""
        return await self._read(lambda c: c.submit(tx_bytes))
