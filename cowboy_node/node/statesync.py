"""Node-to-node state sync of an empty data directory (issue 34 §1): ask the peers for their newest snapshot,
download its chunks one by one, verify each on its own against the finalized state root, install atomically.

- Offers are verified when they arrive (``verify_manifest``: certificate under the genesis group key, slots give the
  header's state root); a peer offering one that does not verify is penalized (``snapshot_bad_offer``). The highest
  verified height is chosen; every peer that offered the very same manifest is a source for it.
- A chunk is asked of one source at a time, rotating. A chunk that does not verify (``verify_chunk``) gets its sender
  penalized (``snapshot_bad_chunk``) and dropped as a source; a source that does not answer within
  ``chunk_timeout_s`` or refuses is dropped without penalty (a late or busy peer proves nothing). The chunk is then
  asked of another source; with none left the sync fails with ``no_source`` (nothing is installed).
- Verified chunks are kept in a staging directory; the install (``snapshot/install.py``) verifies them again and is
  atomic (``M/installing``; a crash restarts it).

Chunks are fetched one at a time (no pipelining yet: the join-time goal of issue 34 is not measured here).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cowboy_node.chain.genesis import Genesis
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.observability.logging import get_logger
from cowboy_node.snapshot.create import chunk_file
from cowboy_node.snapshot.install import Installed, install_snapshot
from cowboy_node.snapshot.manifest import SnapshotError, decode_manifest, encode_manifest
from cowboy_node.snapshot.messages import (
    CH_SNAPSHOT,
    Chunk,
    ChunkRequest,
    Offer,
    OfferRequest,
    Refused,
    decode_snapshot_message,
    encode_snapshot_message,
)
from cowboy_node.snapshot.verify import VerifiedManifest, verify_chunk, verify_manifest
from cowboy_node.state.store import StateStore
from cowboy_protocol.types.errors import DecodeError

log = get_logger("cowboy.statesync")


class SyncNet(Protocol):
    """What state sync needs of the validator peer layer."""

    def send(self, to: int, channel: int, payload: bytes) -> bool: ...

    def connected(self) -> frozenset[int]: ...

    def penalize(self, peer: int, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SyncLimits:
    """Timing of a state sync."""

    connect_s: float = 30.0
    """How long to wait for a first connected peer."""
    offers_s: float = 2.0
    """How long more offers are awaited after the first one (when not every connected peer answered)."""
    chunk_timeout_s: float = 20.0
    """How long one source has to answer one chunk request."""


class StateSync:
    """One state sync; feed it the channel-7 messages with :meth:`receive`, run :meth:`run`."""

    def __init__(self, net: SyncNet, genesis: Genesis, scheme: Scheme, *, limits: SyncLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._net = net
        self._genesis = genesis
        self._scheme = scheme
        self.limits = limits or SyncLimits()
        self._clock = clock
        self._offers: dict[int, bytes] = {}
        self._no_offer: set[int] = set()
        self._collecting = True
        self._answers: asyncio.Queue[tuple[int, Chunk | Refused]] = asyncio.Queue()
        self.penalized: list[tuple[int, str]] = []
        """Peers penalized, with the reason (tests, logs)."""

    def receive(self, peer: int, payload: bytes) -> None:
        """A message of channel 7 (on the event loop)."""
        try:
            m = decode_snapshot_message(payload)
        except DecodeError:
            return
        if isinstance(m, Offer):
            self._offers[peer] = m.manifest
        elif isinstance(m, Refused) and self._collecting:
            self._no_offer.add(peer)  # no snapshot there (or over budget): not a source
        elif isinstance(m, Chunk | Refused):
            self._answers.put_nowait((peer, m))

    def _penalize(self, peer: int, reason: str) -> None:
        self.penalized.append((peer, reason))
        log.warning("state sync peer penalized", peer=peer, reason=reason)
        self._net.penalize(peer, reason)

    async def choose(self) -> tuple[VerifiedManifest, list[int]]:
        """Collect and verify offers; the highest verified manifest and the peers offering it.

        The request is sent again every second to the connected peers that have not answered: a peer answers over
        its own connection to us, which it may still be redialling after our restart. Collecting ends once every
        connected peer answered (an offer or a refusal), ``offers_s`` after the first offer, or ``connect_s`` after
        the start."""
        start = self._clock()
        first_offer: float | None = None
        last_sent: float | None = None
        while True:
            now = self._clock()
            connected = self._net.connected()
            answered = set(self._offers) | self._no_offer
            if connected and connected <= answered:
                break
            if first_offer is None and self._offers:
                first_offer = now
            if first_offer is not None and now - first_offer >= self.limits.offers_s:
                break
            if now - start > self.limits.connect_s:
                if not connected:
                    raise SnapshotError("no_peer", "no validator connected to state-sync from")
                break
            if last_sent is None or now - last_sent >= 1.0:
                last_sent = now
                for peer in sorted(connected - answered):
                    self._net.send(peer, CH_SNAPSHOT, encode_snapshot_message(OfferRequest()))
            await asyncio.sleep(0.05)
        self._collecting = False
        best: tuple[int, bytes, VerifiedManifest] | None = None
        for peer, raw in sorted(self._offers.items()):
            try:
                verified = verify_manifest(decode_manifest(raw), self._genesis, self._scheme)
            except SnapshotError as e:
                self._penalize(peer, "snapshot_bad_offer")
                log.warning("snapshot offer refused", peer=peer, code=e.code, error=str(e))
                continue
            if best is None or verified.manifest.height > best[2].manifest.height:
                best = (peer, raw, verified)
        if best is None:
            raise SnapshotError("no_snapshot", "no peer offered a snapshot that verifies")
        sources = [p for p, raw in sorted(self._offers.items()) if raw == best[1]]
        return best[2], sources

    async def fetch(self, verified: VerifiedManifest, sources: list[int], staging: Path) -> None:
        """Download every chunk into ``staging``, each verified; raises ``no_source`` when no source is left."""
        m = verified.manifest
        staging.mkdir(parents=True, exist_ok=True)
        sources = list(sources)
        turn = 0
        for i in range(len(m.chunks)):
            while True:
                if not sources:
                    raise SnapshotError("no_source", f"no peer left to fetch chunk {i} of the snapshot at {m.height}")
                peer = sources[turn % len(sources)]
                turn += 1
                data = await self._ask(peer, m.height, i)
                if data is None:
                    sources.remove(peer)  # late or refusing: not a fault, just not asked again
                    continue
                try:
                    verify_chunk(m, i, data)
                except SnapshotError as e:
                    log.warning("snapshot chunk refused", peer=peer, index=i, code=e.code)
                    self._penalize(peer, "snapshot_bad_chunk")
                    sources.remove(peer)
                    continue
                (staging / chunk_file(i)).write_bytes(data)
                break

    async def _ask(self, peer: int, height: int, index: int) -> bytes | None:
        self._net.send(peer, CH_SNAPSHOT, encode_snapshot_message(ChunkRequest(height, index)))
        deadline = self._clock() + self.limits.chunk_timeout_s
        while True:
            left = deadline - self._clock()
            if left <= 0:
                return None
            try:
                sender, m = await asyncio.wait_for(self._answers.get(), left)
            except TimeoutError:
                return None
            if sender != peer:
                continue  # a late answer of a dropped source
            if isinstance(m, Refused):
                return None
            if m.height == height and m.index == index:
                return m.data

    async def run(self, store: StateStore, data_path: Path, staging: Path) -> Installed:
        """Choose, fetch and install; the data directory then holds the chain at the snapshot's height."""
        verified, sources = await self.choose()
        m = verified.manifest
        log.info("state sync: fetching a snapshot", height=m.height, chunks=len(m.chunks), sources=sources)
        await self.fetch(verified, sources, staging)
        raw = encode_manifest(m)  # canonical: the bytes the sources offered
        done = await asyncio.get_running_loop().run_in_executor(None, lambda: install_snapshot(
            store, data_path, self._genesis, self._scheme, raw, lambda i: (staging / chunk_file(i)).read_bytes(),
            chunks_verified=True))
        for p in staging.iterdir():
            with contextlib.suppress(OSError):
                p.unlink()
        log.info("state sync: installed", height=done.height, entries=done.entries)
        return done
