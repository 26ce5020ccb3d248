"""Node-to-node state sync of an empty data directory (issue 34 §1): ask the peers for their newest snapshot,
download its chunks several at a time from every peer offering it, verify each on its own against the finalized
state root, write it as it comes, install atomically.

- Offers are verified when they arrive (``verify_manifest``: certificate under the genesis group key, slots give the
  header's state root); a peer offering one that does not verify is penalized (``snapshot_bad_offer``). The highest
  verified height is chosen; every peer that offered the very same manifest is a source for it.
- Up to :attr:`SyncLimits.window` chunks are in flight at once (requested, or received and being verified or
  written: memory stays bounded by about ``window`` chunks), at most :attr:`SyncLimits.per_peer` requested of one
  source; each is asked of the least loaded source, ties rotating. A chunk that does not verify gets its sender
  penalized (``snapshot_bad_chunk``) and dropped as a source; a source that does not answer within
  ``chunk_timeout_s`` or refuses is dropped without penalty (a late or busy peer proves nothing), except that a
  source answering ``over_budget`` (its per-peer budget, ``node/snapshot_server.py``) is only rested for
  ``busy_retry_s``. The chunks it had in flight are asked of another source; with none left the sync fails with
  ``no_source`` (nothing is installed: the store stays marked ``M/installing``).
- A chunk is verified by building its slots' part of the state tree once (``snapshot/chunk_tree.py``), in
  :attr:`SyncLimits.verify_workers` worker processes (the node's other cores; 0: a thread), while the next ones
  download; its writes go to the store in one thread, in large batches, in whatever order chunks complete (their
  writes are disjoint). The install (``snapshot/install.py``) is atomic: ``M/installing`` is written first and
  removed by the synced final batch; a crash restarts it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import multiprocessing
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cowboy_node.chain.genesis import Genesis
from cowboy_node.chain.signature_pool import exit_with_parent
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.observability.logging import get_logger
from cowboy_node.snapshot.chunk_tree import ChunkWrites, verify_and_build
from cowboy_node.snapshot.install import Installed, begin_install, finish_install, write_chunk
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
from cowboy_node.snapshot.verify import VerifiedManifest, verify_manifest
from cowboy_node.state.kv_store import StateStore
from cowboy_protocol.types.validation_errors import DecodeError

log = get_logger("cowboy.statesync")


class SyncNet(Protocol):
    """What state sync needs of the validator peer layer."""

    def send(self, to: int, channel: int, payload: bytes) -> bool: ...

    def connected(self) -> frozenset[int]: ...

    def penalize(self, peer: int, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class SyncLimits:
    """Timing and concurrency of a state sync."""

    connect_s: float = 30.0
    """How long to wait for a first connected peer."""
    offers_s: float = 2.0
    """How long more offers are awaited after the first one (when not every connected peer answered)."""
    chunk_timeout_s: float = 20.0
    """How long one source has to answer one chunk request."""
    window: int = 4
    """Chunks in flight at once: requested, or received and not yet written."""
    per_peer: int = 2
    """Chunk requests in flight to one source."""
    verify_workers: int = 1
    """Worker processes verifying chunks (0: a thread of this process)."""
    busy_retry_s: float = 1.0
    """How long a source that answered ``over_budget`` rests before it is asked again."""


@dataclass(slots=True)
class _Fetch:
    """What one download has in flight."""

    sources: list[int]
    """Peers still asked, in rotation order."""
    todo: collections.deque[int] = field(default_factory=collections.deque)
    """Chunks to ask for, lowest first."""
    asked: dict[int, tuple[int, float]] = field(default_factory=dict)
    """Chunk index → (source asked, deadline)."""
    busy: int = 0
    """Chunks received and being verified or written."""
    rest_until: dict[int, float] = field(default_factory=dict)
    """Sources resting after ``over_budget``, until when."""
    turn: int = 0
    """Rotation of ties between equally loaded sources."""


def _warm() -> None:
    """Nothing: submitted first so that the verifying worker starts before the first chunk arrives."""


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
        self._answers: collections.deque[tuple[int, Chunk | Refused]] = collections.deque()
        self._wake = asyncio.Event()
        self.stages: dict[str, float] = {"verify_s": 0.0, "write_s": 0.0, "finish_s": 0.0}
        """Seconds spent verifying (summed over chunks, overlapping), writing, finishing (bench, logs)."""
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
            self._answers.append((peer, m))
            self._event()

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

    def _event(self) -> None:
        """Wake :meth:`fetch_and_install` (an answer arrived, or a chunk was verified or written)."""
        self._wake.set()

    def _pick(self, f: _Fetch, now: float) -> int | None:
        """The least loaded source that may be asked now (ties rotate), or None."""
        load = collections.Counter(peer for peer, _ in f.asked.values())
        free = [p for p in f.sources if load[p] < self.limits.per_peer and f.rest_until.get(p, 0.0) <= now]
        if not free:
            return None
        f.turn += 1
        least = min(load[p] for p in free)
        ties = [p for p in free if load[p] == least]
        return ties[f.turn % len(ties)]

    def _drop(self, f: _Fetch, peer: int) -> None:
        """``peer`` is no longer a source: what it had in flight is asked of another."""
        if peer in f.sources:
            f.sources.remove(peer)
        for i in sorted((i for i, (p, _) in f.asked.items() if p == peer), reverse=True):
            del f.asked[i]
            f.todo.appendleft(i)

    async def fetch_and_install(self, verified: VerifiedManifest, sources: list[int], store: StateStore,
                                data_path: Path) -> Installed:
        """Download, verify and write every chunk, then finish the install (see the module docstring); raises
        :class:`SnapshotError` (``no_source`` when no source is left; the install's codes)."""
        loop = asyncio.get_running_loop()
        m = verified.manifest
        self._collecting = False  # from here a refusal answers a chunk request
        writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="statesync-write")
        pool: concurrent.futures.Executor
        if self.limits.verify_workers > 0:
            pool = concurrent.futures.ProcessPoolExecutor(
                self.limits.verify_workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=exit_with_parent)
        else:
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="statesync-verify")
        raw = encode_manifest(m)  # canonical: the bytes the sources offered
        tasks: set[asyncio.Task[None]] = set()
        try:
            pool.submit(_warm)  # the worker starts (imports) while the first chunks download
            begun, restarted = await loop.run_in_executor(
                writer, lambda: begin_install(store, data_path, self._genesis, self._scheme, raw))
            f = _Fetch(list(sources), collections.deque(range(len(m.chunks))))
            leaf_keys: dict[int, bytes] = {}
            written = 0
            failure: list[BaseException] = []

            async def verify_and_write(peer: int, index: int, data: bytes) -> None:
                nonlocal written
                try:
                    t0 = time.perf_counter()
                    try:
                        chunk: ChunkWrites = await loop.run_in_executor(pool, verify_and_build, m, index, data)
                    except concurrent.futures.process.BrokenProcessPool:  # a worker died: verify here instead
                        chunk = await loop.run_in_executor(writer, verify_and_build, m, index, data)
                    self.stages["verify_s"] += time.perf_counter() - t0
                except SnapshotError as e:
                    log.warning("snapshot chunk refused", peer=peer, index=index, code=e.code)
                    if peer in f.sources:  # once: its other chunks in flight are the same fault
                        self._penalize(peer, "snapshot_bad_chunk")
                        self._drop(f, peer)
                    f.todo.appendleft(index)
                    f.busy -= 1
                    self._event()
                    return
                try:
                    t0 = time.perf_counter()
                    await loop.run_in_executor(writer, write_chunk, store, chunk)
                    self.stages["write_s"] += time.perf_counter() - t0
                except BaseException as e:  # a store error: the sync fails (the install restarts next time)
                    failure.append(e)
                    self._event()
                    return
                leaf_keys.update(chunk.leaf_keys)
                written += 1
                f.busy -= 1
                self._event()

            while written < len(m.chunks):
                self._wake.clear()  # first: an event from here on ends the wait below at once
                if failure:
                    raise failure[0]
                now = self._clock()
                for i, (peer, deadline) in list(f.asked.items()):
                    if deadline <= now:
                        log.warning("snapshot chunk not answered in time; source dropped", peer=peer, index=i)
                        self._drop(f, peer)
                while f.todo and len(f.asked) + f.busy < self.limits.window:
                    source = self._pick(f, now)
                    if source is None:
                        break
                    i = f.todo.popleft()
                    f.asked[i] = (source, now + self.limits.chunk_timeout_s)
                    self._net.send(source, CH_SNAPSHOT, encode_snapshot_message(ChunkRequest(m.height, i)))
                if not f.sources and f.todo:
                    raise SnapshotError("no_source", f"no peer left to fetch chunk {f.todo[0]} of the snapshot at "
                                                     f"{m.height}")
                progressed = bool(self._answers)
                while self._answers:
                    peer, msg = self._answers.popleft()
                    if isinstance(msg, Refused):
                        if peer in f.sources and msg.reason == "over_budget":
                            f.rest_until[peer] = now + self.limits.busy_retry_s  # its budget refills: ask later
                            for i in [i for i, (p, _) in f.asked.items() if p == peer]:
                                del f.asked[i]
                                f.todo.appendleft(i)
                        elif peer in f.sources:
                            log.warning("snapshot source refused", peer=peer, reason=msg.reason)
                            self._drop(f, peer)
                        continue
                    asked = f.asked.get(msg.index)
                    if asked is None or asked[0] != peer or msg.height != m.height:
                        continue  # a late answer of a dropped or re-asked request
                    del f.asked[msg.index]
                    f.busy += 1
                    t = loop.create_task(verify_and_write(peer, msg.index, msg.data))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                if progressed:
                    continue  # requests freed or answered: ask again before waiting
                waits = [d for _, d in f.asked.values()] + [r for r in f.rest_until.values() if r > now]
                timeout = max(0.0, min(waits) - now) if waits else 1.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(timeout, 1.0))
            if tasks:
                await asyncio.gather(*tasks)
            if failure:
                raise failure[0]
            t0 = time.perf_counter()
            done = await loop.run_in_executor(writer, finish_install, store, self._genesis, begun, leaf_keys,
                                              restarted)
            self.stages["finish_s"] = time.perf_counter() - t0
            return done
        finally:
            for t in tasks:  # a failed sync: the chunks still being verified or written are abandoned
                t.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            writer.shutdown(wait=True)

    async def run(self, store: StateStore, data_path: Path, staging: Path | None = None) -> Installed:
        """Choose, fetch and install; the data directory then holds the chain at the snapshot's height.
        ``staging``: where chunks were kept before this version streamed them into the store (removed if there)."""
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        verified, sources = await self.choose()
        m = verified.manifest
        log.info("state sync: fetching a snapshot", height=m.height, chunks=len(m.chunks), sources=sources)
        done = await self.fetch_and_install(verified, sources, store, data_path)
        log.info("state sync: installed", height=done.height, entries=done.entries, derived=done.derived)
        return done


__all__ = ["StateSync", "SyncLimits", "SyncNet"]
