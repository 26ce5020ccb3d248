"""The runner's per-head duties on chain: the §6.6 on-chain heartbeat and, while the chain requests Mode A, the
CIP-11 §8.3 presence certificate. The daemon's head loop calls both at every new head (``daemon.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from cowboy_protocol.http_client import ApiError, NodeUnreachable
from cowboy_runner.chain_client import ChainClient
from cowboy_runner.config import HeartbeatSettings
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.link import Link
from cowboy_runner.metrics import RunnerMetrics
from cowboy_runner.presence_certificates import PresenceCertifier, certificate_cycles, mode_a_requested
from cowboy_runner.schedule import effective_cadence, heartbeat_due
from cowboy_runner.txbuild import Fees, build_heartbeat, build_tx

log = structlog.get_logger("cowboy.runner.daemon")

HEARTBEAT_RETRY_BLOCKS = 5
"""Blocks to wait for a submitted on-chain heartbeat to show in the registry before sending another."""


class ChainDuties:
    """The heartbeat's and the presence certificate's state between heads."""

    def __init__(self, chain: ChainClient, key: RunnerKey, heartbeat: HeartbeatSettings,
                 metrics: RunnerMetrics) -> None:
        self.chain = chain
        self.key = key
        self.heartbeat_settings = heartbeat
        self.metrics = metrics
        self.hb_sent_at: int | None = None
        """Height the last on-chain heartbeat was submitted at (one in flight at a time)."""
        self.presence = PresenceCertifier(key.address)
        """Mode A receipts and certificates (CIP-11 §8.3); idle unless the chain sets PRESENCE_HARD_EXCLUDE_ENABLED."""
        self.chain_capabilities: dict[str, Any] | None = None
        """The capabilities the chain last showed for this runner (None: not read yet, or not registered)."""

    async def heartbeat(self, height: int, *, chain_id: str, params: Mapping[str, Any], fees: Fees,
                        draining: bool) -> str | None:
        """§6.6 on-chain heartbeat: phase-staggered, forced refresh before the floor lapses. Returns what keeps the
        runner from heartbeating (for ``status``'s ``last_error``), or None."""
        record = await self.chain.runner(self.key.address)
        self.chain_capabilities = None if record is None else record.get("capabilities")
        if record is None:
            return "not registered: run `cowboy-runner register`"
        if record.get("health") == "deregistered":
            # A heartbeat would only fail on chain (runner_deregistered) and cost fees.
            return "deregistered on chain: no on-chain heartbeats, no new sessions (register again)"
        last = int(record.get("last_heartbeat", 0))
        if self.hb_sent_at is not None and last < self.hb_sent_at and height - self.hb_sent_at < \
                HEARTBEAT_RETRY_BLOCKS:
            return None  # one heartbeat in flight at a time
        timeout = int(params.get("limits", {}).get("heartbeat_timeout_blocks", 100))
        hb = self.heartbeat_settings
        try:
            cadence = effective_cadence(timeout, min(hb.safety_margin_blocks, timeout - 1), hb.onchain_cadence_blocks)
        except ValueError as e:
            return f"heartbeat: {e}"
        if cadence >= timeout or not heartbeat_due(height, last, self.key.address, chain_id, cadence, timeout):
            return None
        try:
            # The nonce comes from the node (next pending), not from the result transactions' counter: a heartbeat
            # lost with a killed validator's mempool must not leave a nonce gap that stalls every later result
            # transaction. A collision with a lost result transaction is repaired by JobManager (re-signed with a
            # fresh nonce after nonce_too_low without a receipt).
            nonce = await self.chain.next_nonce(self.key.address)
            # accepting=False pauses the registration on chain for a whole cadence; being momentarily full is
            # signalled off chain instead (BackpressureSignal, §6.4), so only draining says "not accepting".
            tx = build_heartbeat(self.key, chain_id, accepting=not draining, nonce=nonce, fees=fees)
            await self.chain.submit(tx.to_bytes())
            self.hb_sent_at = height
            self.metrics.heartbeats.labels(outcome="ok").inc()
            log.info("on-chain heartbeat submitted", height=height, last_heartbeat=last)
        except (ApiError, NodeUnreachable) as e:
            self.metrics.heartbeats.labels(outcome="error").inc()
            log.warning("on-chain heartbeat not submitted", error=str(e))
        return None

    async def presence_certificate(self, height: int, *, chain_id: str, params: Mapping[str, Any], fees: Fees,
                                   links: Iterable[Link]) -> None:
        """Mode A (CIP-11 §8.3): while the chain requests it, ask every validator for PresenceReceipts and submit a
        SubmitPresenceCertificate once half the last proof's TTL has passed (docs/protocol.md §8.5)."""
        want = mode_a_requested(params)
        for lk in links:
            lk.set_want_receipts(want)
        if not want:
            return
        p = params.get("cip11_params") or {}
        cert = self.presence.next_certificate(height, t_hard=int(p.get("T_HARD", 0)),
                                              freshness=int(p.get("RECEIPT_FRESHNESS_BLOCKS", 30)),
                                              ttl=int(p.get("PRESENCE_PROOF_TTL_BLOCKS", 60)))
        if cert is None:
            return
        try:
            nonce = await self.chain.next_nonce(self.key.address)
            tx = build_tx(self.key, chain_id, cert, nonce=nonce, fees=fees,
                          cycles_limit=certificate_cycles(len(cert.receipts)))
            await self.chain.submit(tx.to_bytes())
            self.presence.submitted(cert)
            log.info("presence certificate submitted", height=height, receipts=len(cert.receipts),
                     anchor=self.presence.last_anchor)
        except (ApiError, NodeUnreachable) as e:
            log.warning("presence certificate not submitted", error=str(e))
