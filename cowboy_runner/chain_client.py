"""Async access to the validator's HTTP API (docs/api.md) for the runner daemon.

The node's synchronous :class:`~cowboy_protocol.http_client.RpcClient` (stdlib urllib, no proxies, size-capped
answers, ``ApiError``/``NodeUnreachable``) runs in a worker thread, so a slow validator never blocks the event
loop. Every method returns plain JSON documents or None for "not there (yet)" (404).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import structlog

from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import ApiError, NodeUnreachable, RpcClient

__all__ = ["ApiError", "ChainClient", "NodeUnreachable", "PollDisabled"]

log = structlog.get_logger("cowboy.runner.chain")


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

    async def _call(self, fn: Callable[[RpcClient], Any]) -> Any:
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

    async def _get(self, path: str, *, missing_ok: bool = False) -> Any:
        try:
            return await self._call(lambda c: c.get_json(path))
        except ApiError as e:
            if missing_ok and e.status == 404:
                return None
            raise

    async def status(self) -> dict[str, Any]:
        """``GET /status`` of the primary validator: chain id, head height, basefees, its ed25519 key."""
        out: dict[str, Any] = await asyncio.to_thread(self.rpc.get_json, "/status")
        return out

    async def head_status(self) -> dict[str, Any]:
        """``GET /status`` of the validator in use (failing over like every read): the head height, basefees and
        block time, which any validator of the chain answers alike."""
        out: dict[str, Any] = await self._get("/status")
        return out

    async def validators(self) -> dict[str, Any] | None:
        """``GET /validators`` (None from a node that does not serve it): the snapshot with each validator's
        announced QUIC endpoint."""
        try:
            out: dict[str, Any] | None = await self._get("/validators", missing_ok=True)
        except ApiError as e:
            if e.status == 501:
                return None
            raise
        return out

    async def height(self) -> int:
        """``GET /height``: the head height (the runner's view of finality: the chain is single-slot final)."""
        return int((await self._get("/height"))["height"])

    async def params(self) -> dict[str, Any]:
        """``GET /params``: governed parameters (``runners.min_runner_stake``, ``limits``…)."""
        out: dict[str, Any] = await self._get("/params")
        return out

    async def next_nonce(self, address: bytes) -> int:
        """``next_pending_nonce`` of ``GET /account/{address}`` (counts this sender's mempool txs)."""
        doc = await self._get(f"/account/{to_checksum_address(address)}")
        return int(doc["next_pending_nonce"])

    async def runner(self, address: bytes) -> dict[str, Any] | None:
        """``GET /runner/{address}``; None if the address never registered."""
        out: dict[str, Any] | None = await self._get(f"/runner/{to_checksum_address(address)}", missing_ok=True)
        return out

    async def job(self, job_id: bytes) -> dict[str, Any] | None:
        """``GET /job/{id}``; None when the job does not exist."""
        out: dict[str, Any] | None = await self._get(f"/job/0x{job_id.hex()}", missing_ok=True)
        return out

    async def receipt(self, tx_hash: bytes) -> dict[str, Any] | None:
        """``GET /tx/{hash}/receipt``; None while the transaction is unknown or pending."""
        out: dict[str, Any] | None = await self._get(f"/tx/0x{tx_hash.hex()}/receipt", missing_ok=True)
        return out

    async def runner_jobs(self, address: bytes, *, after: bytes | None = None, limit: int = 100) -> dict[str, Any]:
        """``GET /runner/{address}/jobs`` (poll fallback, CIP-11 §14); raises :class:`PollDisabled` on 410."""
        path = f"/runner/{to_checksum_address(address)}/jobs?limit={limit}"
        if after is not None:
            path += f"&after=0x{after.hex()}"
        try:
            out: dict[str, Any] = await self._get(path)
        except ApiError as e:
            if e.status == 410:
                raise PollDisabled(e.message) from None
            raise
        return out

    async def submit(self, tx_bytes: bytes) -> dict[str, Any]:
        """``POST /submit`` with raw transaction bytes; returns ``{"tx_hash", "status"}``."""
        out: dict[str, Any] = await self._call(lambda c: c.post_tx(tx_bytes))
        return out
