"""Async access to the validator's HTTP API (docs/api.md) for the runner daemon.

The node's synchronous :class:`~cowboy_protocol.http_client.RpcClient` (stdlib urllib, no proxies, size-capped
answers, ``ApiError``/``NodeUnreachable``) runs in a worker thread, so a slow validator never blocks the event
loop. Every method returns plain JSON documents or None for "not there (yet)" (404).
"""

from __future__ import annotations

import asyncio
from typing import Any

from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.http_client import ApiError, NodeUnreachable, RpcClient

__all__ = ["ApiError", "ChainClient", "NodeUnreachable", "PollDisabled"]


class PollDisabled(Exception):
    """``GET /runner/{address}/jobs`` answered 410 ``poll_disabled`` (CIP11_POLL_DISABLED)."""


class ChainClient:
    """The runner's view of one validator's HTTP API."""

    def __init__(self, base_url: str, *, timeout: float = 5.0) -> None:
        self.rpc = RpcClient(base_url, timeout=timeout)
        """Underlying synchronous client."""

    async def _get(self, path: str, *, missing_ok: bool = False) -> Any:
        try:
            return await asyncio.to_thread(self.rpc.get_json, path)
        except ApiError as e:
            if missing_ok and e.status == 404:
                return None
            raise

    async def status(self) -> dict[str, Any]:
        """``GET /status``: chain id, head height, basefees, the validator's ed25519 key."""
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
        return await asyncio.to_thread(self.rpc.post_tx, tx_bytes)
