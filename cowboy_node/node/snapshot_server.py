"""Serving state snapshots to peers (channel 7, ``snapshot/messages.py``), within a per-peer budget.

Each peer may send ``requests_per_s`` requests (burst twice that) and be sent ``bytes_per_s`` chunk bytes (burst
``bytes_burst``); beyond either it is answered ``Refused{over_budget}`` and nothing is read. Chunk files are read in
this server's thread, never on the event loop; the answer is sent from the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cowboy_node.node.peer_budgets import PeerBudgets
from cowboy_node.observability.logging import get_logger
from cowboy_node.snapshot.create import MANIFEST_FILE, chunk_file, list_snapshots
from cowboy_node.snapshot.manifest import encode_manifest
from cowboy_node.snapshot.messages import (
    CH_SNAPSHOT,
    Chunk,
    ChunkRequest,
    Offer,
    OfferRequest,
    Refused,
    SnapshotMessage,
    decode_snapshot_message,
    encode_snapshot_message,
)
from cowboy_protocol.types.validation_errors import DecodeError

log = get_logger("cowboy.snapshot")


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """Per-peer budgets of the snapshot server."""

    requests_per_s: float = 20.0
    """Requests a peer may send per second (burst twice that)."""
    bytes_per_s: float = 32 * 1024 * 1024
    """Chunk bytes a peer may be sent per second."""
    bytes_burst: float = 64 * 1024 * 1024
    """Chunk bytes banked at most."""


class SnapshotServer:
    """Answers OfferRequests and ChunkRequests from the snapshots in ``directory``."""

    def __init__(self, directory: Path, *, send: Callable[[int, int, bytes], bool],
                 limits: ServeLimits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = directory
        self.limits = lim = limits or ServeLimits()
        self._send = send
        self._clock = clock
        self._requests = PeerBudgets(lim.requests_per_s, 2 * lim.requests_per_s)
        self._bytes = PeerBudgets(lim.bytes_per_s, lim.bytes_burst)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-serve")
        self.refused: dict[str, int] = {}
        """Refusals sent, by reason (tests, logs)."""

    def close(self) -> None:
        """Wait for reads in progress."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _answer(self, peer: int, m: SnapshotMessage) -> None:
        if isinstance(m, Refused):
            self.refused[m.reason] = self.refused.get(m.reason, 0) + 1
        self._send(peer, CH_SNAPSHOT, encode_snapshot_message(m))

    def receive(self, peer: int, payload: bytes) -> None:
        """A message of channel 7 from authenticated validator ``peer`` (on the event loop)."""
        try:
            m = decode_snapshot_message(payload)
        except DecodeError:
            return
        if not isinstance(m, OfferRequest | ChunkRequest):
            return  # answers are the state-sync client's, not ours
        if not self._requests.take(peer, 1, self._clock()):
            self._answer(peer, Refused("over_budget"))
            return
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._pool, self._read, m)
        fut.add_done_callback(lambda f: self._done(peer, f))

    def _read(self, m: OfferRequest | ChunkRequest) -> SnapshotMessage:
        snaps = list_snapshots(self.directory)
        if isinstance(m, OfferRequest):
            if not snaps:
                return Refused("no_snapshot")
            newest = snaps[-1]
            return Offer(newest.height, encode_manifest(newest))
        match = next((s for s in snaps if s.height == m.height), None)
        if match is None:
            return Refused("unknown_snapshot")
        if m.index >= len(match.chunks):
            return Refused("unknown_chunk")
        return Chunk(m.height, m.index, (self.directory / str(m.height) / chunk_file(m.index)).read_bytes())

    def _done(self, peer: int, fut: asyncio.Future[SnapshotMessage]) -> None:
        try:
            m = fut.result()
        except (OSError, ValueError) as e:  # a snapshot deleted meanwhile (keep), a damaged file
            log.warning("serving a snapshot request failed", peer=peer, error=str(e))
            m = Refused("unknown_snapshot")
        if isinstance(m, Chunk) and not self._bytes.take(peer, len(m.data), self._clock()):
            m = Refused("over_budget")
        self._answer(peer, m)


__all__ = ["MANIFEST_FILE", "ServeLimits", "SnapshotServer"]
