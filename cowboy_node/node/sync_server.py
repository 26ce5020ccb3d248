"""Serving other validators' requests: sync runs, block bodies and certificate fetches, each within a budget.

Issue 30 §2/§3: a 32-byte BlockRequest made the node read, decode and re-encode a committed block on the event loop,
a SyncRequest made it read and re-encode 64–128 blocks synchronously in the message callback (93 % CPU, consensus
stalled), and runs of full blocks (9–24 MB) were over the 8 MiB message cap, so no answer ever left. Here:

- a sync answer is sized in bytes: consecutive stored blocks from the requested height while their total stays
  within :attr:`ServeLimits.page_bytes` (below the message cap, room left for the certificate and framing), at
  least one block. It ends at the highest block of the run with its own stored certificate (a
  :class:`~cowboy_node.consensus.sync_messages.SyncResponse`, as before) or, when the run holds none, carries the
  certificate of the nearest certified block above it (a :class:`~cowboy_node.consensus.sync_messages.SyncPage`);
- blocks are served as their stored bytes (``B/<height>``; never decoded or re-encoded), read in a pool of
  :data:`SERVE_THREADS` threads of their own (not the builder thread, which holds the state lock for executions);
  the event loop only checks budgets and hands the bytes to the peer layer;
- each peer has a request budget per kind (requests/s), a response byte budget (bytes/s) and at most
  :attr:`ServeLimits.per_peer` answers being read; the node reads at most :attr:`ServeLimits.total` at once;
- a Fetch (consensus channel 0) is charged per view asked for before the engine sees it (the engine answers each
  view with every certificate it holds);
- every refusal is typed (:class:`Refusal`) and counted in ``cowboy_consensus_requests_refused_total{kind,reason}``;
  a peer refused :attr:`ServeLimits.strikes` times within :attr:`ServeLimits.strike_window_s` for its own excess
  is penalized (``Network.penalize``: disconnected for a doubling back-off).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import enum
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cowboy_node.chain.blockstore import BlockStore
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.sync_messages import (
    CH_BLOCKS,
    CH_SYNC,
    PackedPage,
    SyncPage,
    SyncPruned,
    SyncRequest,
    SyncResponse,
    decode_sync,
    encode_sync,
)
from cowboy_node.node.peer_budgets import PeerBudgets
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics

log = get_logger("cowboy.sync")

SERVE_THREADS = 2
"""Threads reading stored blocks for peers (LevelDB reads are thread-safe and release the GIL)."""
MESSAGE_CAP = 8 * 1024 * 1024
"""The peer layer's default message cap (``PeerLimits.max_message_bytes``)."""
PAGE_HEADROOM = 64 * 1024
"""Room left under the message cap for the certificate (≈ 200 bytes), CBOR heads and the peer frame."""


class Refusal(enum.Enum):
    """Why a peer's request was not served (the ``reason`` label of the refusal metric)."""

    REQUEST_BUDGET = "request_budget"
    """The peer sent more requests of this kind than its budget allows."""
    BYTE_BUDGET = "byte_budget"
    """The answer would exceed the peer's response byte budget."""
    PEER_BUSY = "peer_busy"
    """The peer already has :attr:`ServeLimits.per_peer` answers being read (no strike: an honest node catching up
    asks every peer for each missing body every 500 ms, and each answer waits for a disk read)."""
    SERVER_BUSY = "server_busy"
    """This node already reads :attr:`ServeLimits.total` answers (not the peer's fault: no strike)."""
    FETCH_BUDGET = "fetch_budget"
    """The Fetch asks for more views than the peer's view budget allows."""
    NOT_FOUND = "not_found"
    """Nothing to serve (height not reached, body unknown): not the peer's fault, no strike."""
    PRUNED = "pruned"
    """Issue 34: a SyncRequest below this node's earliest retained height (``[storage] retain_blocks``); answered
    with a SyncPruned naming that height (not the peer's fault, no strike)."""


class RequestKind(enum.Enum):
    """Kinds of requests served (the ``kind`` label)."""

    SYNC = "sync"
    BLOCK = "block"
    FETCH = "fetch"


class PeerSender(Protocol):
    """What serving needs from the validator peer layer."""

    def send(self, to: int, channel: int, payload: bytes) -> bool: ...

    def penalize(self, peer: int, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """Budgets of serving, per peer unless said otherwise. The defaults leave honest full-speed sync far below
    them (``bench/sync_catchup.py`` reports the refusals of such a run: none)."""

    page_bytes: int = MESSAGE_CAP - PAGE_HEADROOM
    """Most bytes of blocks in one answer (one block is always sent, however large)."""
    sync_rate: float = 20.0
    """SyncRequests per second (a requester keeps at most 2 in flight per peer; a page of full blocks takes
    tens of ms to read and send, one of empty blocks holds 64)."""
    sync_burst: float = 40.0
    """SyncRequests banked."""
    block_rate: float = 50.0
    """BlockRequests per second (honest: one per missing body per 500 ms)."""
    block_burst: float = 100.0
    """BlockRequests banked."""
    bytes_rate: float = 48 * 1024 * 1024
    """Answer bytes per second (honest catch-up of full blocks: a few MB/s from each peer)."""
    bytes_burst: float = 96 * 1024 * 1024
    """Answer bytes banked (a dozen full pages)."""
    fetch_views_rate: float = 512.0
    """Fetch views per second (the engine asks each missing view at most once per Δ)."""
    fetch_views_burst: float = 2048.0
    """Fetch views banked (a validator back from a pause asks for every view it missed at once)."""
    per_peer: int = 2
    """Answers being read for one peer at once."""
    total: int = 8
    """Answers being read at once over all peers."""
    strikes: int = 8
    """Refusals for a peer's own excess within :attr:`strike_window_s` that get it penalized."""
    strike_window_s: float = 10.0
    """Window of :attr:`strikes`."""


def read_page(blocks: BlockStore, records: ConsensusRecords, req: SyncRequest, head: int,
              page_bytes: int) -> bytes | None:
    """The encoded answer to ``req`` from stored bytes (blocks and certificate are never decoded), or None when
    there is nothing to serve. Runs in a serving thread."""
    first = req.from_height
    if first < 1 or first > head:
        return None
    want_last = min(first + req.max_blocks - 1, head)
    run: list[bytes] = []
    size = 0
    for h in range(first, want_last + 1):
        raw = blocks.block_bytes(h)
        if raw is None:
            break
        cost = len(raw) + 9  # its CBOR byte-string head (≤ 9 bytes)
        if run and size + cost > page_bytes:
            break
        run.append(raw)
        size += cost
    if not run:
        return None
    last = first + len(run) - 1
    certified = records.certified_heights(first, last)
    if certified:  # end the run at its highest certified block: it proves itself
        c = certified[-1]
        cert = records.finalization_bytes(c)
        if cert is None:
            return None
        return encode_sync(SyncResponse(tuple(run[:c - first + 1]), cert))
    found = records.next_certified_bytes(last + 1, head)
    if found is None:
        return None
    c, cert = found
    return encode_sync(SyncPage(tuple(run), c, cert))


PACK_LEVEL = 1
"""zlib level of PackedPages: level 1 already halves full transfer blocks (level 6 gains under 1 %, at twice the
time: ≈ 9 against 19 ms per 220 KB block)."""


def pack_page(raw: bytes, first_height: int) -> bytes:
    """``raw`` (an encoded SyncResponse or SyncPage from :func:`read_page`) as an encoded PackedPage. Runs in a
    serving thread (zlib releases the GIL)."""
    inner = decode_sync(raw)  # its list of block byte strings only: the blocks themselves are not decoded
    assert isinstance(inner, SyncResponse | SyncPage)
    return encode_sync(PackedPage(first_height, len(inner.blocks), len(raw), zlib.compress(raw, PACK_LEVEL)))


class SyncServer:
    """Answers peers' SyncRequests and BlockRequests off the event loop, and budgets their Fetches."""

    def __init__(self, blocks: BlockStore, records: ConsensusRecords, *, head: Callable[[], int],
                 net: Callable[[], PeerSender | None], metrics: NodeMetrics, clock: Callable[[], float],
                 spawn: Callable[[object], None], limits: ServeLimits | None = None,
                 memory_body: Callable[[bytes], Callable[[], bytes] | None] | None = None,
                 earliest: Callable[[], int] | None = None) -> None:
        self.limits = lim = limits or ServeLimits()
        self._earliest = earliest  # issue 34: the earliest retained height (None: an archive, nothing pruned)
        self._blocks = blocks
        self._records = records
        self._head = head
        self._net = net
        self._metrics = metrics
        self._clock = clock
        self._spawn = spawn
        self._memory_body = memory_body
        self._sync = PeerBudgets(lim.sync_rate, lim.sync_burst)
        self._block = PeerBudgets(lim.block_rate, lim.block_burst)
        self._bytes = PeerBudgets(lim.bytes_rate, lim.bytes_burst)
        self._fetch = PeerBudgets(lim.fetch_views_rate, lim.fetch_views_burst)
        self._serving: collections.Counter[int] = collections.Counter()
        self._strikes: dict[int, collections.deque[float]] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=SERVE_THREADS, thread_name_prefix="sync-serve")

    def close(self) -> None:
        """Wait for the answers being read (before the store closes)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------------------------------ requests

    def on_sync_request(self, sender: int, req: SyncRequest) -> None:
        """A peer asks for finalized blocks (on the event loop: budgets only; the read happens in the pool)."""
        if not self._admit(sender, RequestKind.SYNC, self._sync):
            return
        earliest = self._earliest() if self._earliest is not None else 0
        if req.from_height < earliest:  # issue 34: tell the peer, so it asks another one (or state-syncs)
            self._refuse(sender, RequestKind.SYNC, Refusal.PRUNED, strike=False)
            net = self._net()
            if net is not None:
                net.send(sender, CH_SYNC, encode_sync(SyncPruned(earliest)))
            return
        head = self._head()
        page_bytes = self.limits.page_bytes

        def read() -> bytes | None:
            raw = read_page(self._blocks, self._records, req, head, page_bytes)
            return pack_page(raw, req.from_height) if raw is not None and req.packed else raw
        self._serve(sender, RequestKind.SYNC, CH_SYNC, read)

    def on_block_request(self, sender: int, digest: bytes) -> None:
        """A peer asks for one block body: a committed block's stored bytes, or a body held in memory."""
        if not self._admit(sender, RequestKind.BLOCK, self._block):
            return
        encode = self._memory_body(digest) if self._memory_body is not None else None
        blocks = self._blocks

        def read() -> bytes | None:  # a committed block's stored bytes first; a body only in memory is encoded
            raw = blocks.block_bytes_by_hash(digest)
            return encode() if raw is None and encode is not None else raw
        self._serve(sender, RequestKind.BLOCK, CH_BLOCKS, read)

    def allow_fetch(self, sender: int, views: int) -> bool:
        """Charge a Fetch of ``views`` views to ``sender``'s budget (before the engine answers it)."""
        if self._fetch.take(sender, views, self._clock()):
            return True
        self._refuse(sender, RequestKind.FETCH, Refusal.FETCH_BUDGET, strike=True)
        return False

    # ------------------------------------------------------------------------------------------ inside

    def _admit(self, sender: int, kind: RequestKind, budget: PeerBudgets) -> bool:
        if not budget.take(sender, 1, self._clock()):
            self._refuse(sender, kind, Refusal.REQUEST_BUDGET, strike=True)
            return False
        if self._serving[sender] >= self.limits.per_peer:
            self._refuse(sender, kind, Refusal.PEER_BUSY, strike=False)
            return False
        if sum(self._serving.values()) >= self.limits.total:
            self._refuse(sender, kind, Refusal.SERVER_BUSY, strike=False)
            return False
        return True

    def _serve(self, sender: int, kind: RequestKind, channel: int, read: Callable[[], bytes | None]) -> None:
        self._serving[sender] += 1
        self._spawn(self._read_and_send(sender, kind, channel, read))

    async def _read_and_send(self, sender: int, kind: RequestKind, channel: int,
                             read: Callable[[], bytes | None]) -> None:
        try:
            payload = await asyncio.get_running_loop().run_in_executor(self._pool, read)
        except Exception as e:  # a closed store at shutdown, a damaged record: nothing sent
            log.warning("serving a peer request failed", peer=sender, kind=kind.value, error=repr(e))
            payload = None
        finally:
            self._serving[sender] -= 1
            if self._serving[sender] <= 0:
                del self._serving[sender]
        if payload is None:
            self._refuse(sender, kind, Refusal.NOT_FOUND, strike=False)
            return
        if not self._bytes.take(sender, len(payload), self._clock()):
            self._refuse(sender, kind, Refusal.BYTE_BUDGET, strike=True)
            return
        net = self._net()
        if net is not None and net.send(sender, channel, payload) and kind is RequestKind.SYNC:
            self._metrics.consensus_sync_served_bytes.inc(len(payload))

    def _refuse(self, peer: int, kind: RequestKind, reason: Refusal, *, strike: bool) -> None:
        self._metrics.consensus_requests_refused.labels(kind=kind.value, reason=reason.value).inc()
        if not strike:
            return
        now = self._clock()
        times = self._strikes.setdefault(peer, collections.deque())
        times.append(now)
        while times and now - times[0] > self.limits.strike_window_s:
            times.popleft()
        if len(times) >= self.limits.strikes:
            times.clear()
            net = self._net()
            if net is not None:
                log.warning("peer crossed a request budget repeatedly", peer=peer, kind=kind.value,
                            reason=reason.value)
                net.penalize(peer, f"{kind.value}_{reason.value}")


__all__ = ["MESSAGE_CAP", "PAGE_HEADROOM", "Refusal", "RequestKind", "ServeLimits", "SyncServer", "read_page"]
