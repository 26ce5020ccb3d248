"""Catching up: which peers to ask for finalized blocks, how many requests in flight, and applying what is proven.

Issue 30 §2/§3: the old requester always asked the peer announcing the highest Status height, never checked the
claim, never rotated (one lying peer held a validator in ``syncing`` forever), asked again for the same range every
2 s, and executed a whole run in one builder job. Here (:class:`SyncClient`):

- **Pipelined.** Up to :attr:`FetchLimits.window` SyncRequests are in flight at once, at most
  :attr:`FetchLimits.per_peer` unanswered per peer, each for the lowest heights not yet asked for or held, sized by
  the average block seen so far to fit one answer (the last stretch shared among the free slots). Answers are
  verified as they come, in any order, off the event loop (``node/sync_verify.py``, in worker processes: decoding
  a full block and recovering its signers cost as much as executing it); blocks are applied in height order.
- **Verified.** An answer must match a request in flight to its sender (by its first block's height, read on the
  loop from that header alone; from then on the request is not late, and heights a page cut by bytes did not
  bring are free to ask for at once), hold consecutive heights from the one asked, be linked by ``parent_hash``,
  and carry a finalization certificate (signature and seed verified under the group key) of a block at or above
  its last; a certificate inside the run must finalize that very block. A failure is the sender's own fault:
  refused (``cowboy_consensus_sync_refused_total{reason}``) and penalized.
- **Proven before applied.** Blocks wait (unexecuted, bounded by :attr:`FetchLimits.max_buffered_bytes`) until the
  chain linked from the head reaches a block whose hash a verified certificate names; everything below it is
  then final. Held blocks that stay unproven for :attr:`FetchLimits.stall_s` are dropped and asked again of
  other peers.
- **Peers rotate.** A peer is asked only for heights its Status claimed; peers that delivered recently are
  preferred, ties rotate. A peer that does not answer within :attr:`FetchLimits.timeout_s` is distrusted (not asked,
  its claim not counted for ``syncing``) for a doubling back-off — not penalized: lateness proves nothing, and a
  penalty would cut an honest loaded peer's consensus link too. A height nobody delivers cannot keep the node
  syncing.
- **Sliced.** Proven blocks are executed in the builder thread under the state lock, in slices of at most
  :attr:`FetchLimits.slice_s` of work: the engine's verifications and builds queued meanwhile run between slices.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.consensus.records import finalization_op, seed_op
from cowboy_node.consensus.simplex.types import Finalization
from cowboy_node.consensus.sync_messages import (
    CH_SYNC,
    MAX_SYNC_REQUEST,
    PackedPage,
    SyncRequest,
    encode_sync,
)
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.node.statesync_fallback import PeerSyncView
from cowboy_node.node.sync_server import MESSAGE_CAP, PAGE_HEADROOM, PeerSender
from cowboy_node.node.sync_verify import Answer, PageRefused, VerifiedPage
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.types.block import Block, BlockHeader
from cowboy_protocol.codec.cbor import CodecError, decode
from cowboy_protocol.types.validation_errors import DecodeError

log = get_logger("cowboy.sync")


@dataclass(frozen=True, slots=True)
class FetchLimits:
    """Tunables of catching up."""

    window: int = 6
    """SyncRequests in flight at once."""
    per_peer: int = 2
    """SyncRequests in flight to one peer (≤ the server's ``ServeLimits.per_peer``)."""
    timeout_s: float = 10.0
    """An answer not received by then counts as not delivered."""
    distrust_s: float = 5.0
    """First back-off of a peer that did not deliver (doubled on each failure, up to 300 s)."""
    stall_s: float = 15.0
    """Held blocks no certificate proves by then are dropped and asked again."""
    max_buffered_bytes: int = 96 * 1024 * 1024
    """Held (unapplied) block bytes beyond which no further request is sent."""
    slice_s: float = 0.1
    """Work of one builder job when applying (at least one block)."""
    page_bytes: int = MESSAGE_CAP - PAGE_HEADROOM
    """What a server fits in one answer (sizes the requests)."""
    packed: bool = True
    """Ask for answers as PackedPages (zlib: about half the bytes of full transfer blocks)."""


@dataclass(slots=True)
class _Peer:
    claimed: int = 0
    delivered_at: float = -1e18
    failures: int = 0
    distrusted_until: float = 0.0
    pruned_below: int = 0  # issue 34: the peer's SyncPruned earliest retained height (0: it never said)


@dataclass(frozen=True, slots=True)
class _Inflight:
    peer: int
    count: int
    sent_at: float
    answered: int = 0
    """Bytes of its answer, once one arrived (being verified: no longer late, no longer free to ask again)."""


@dataclass(slots=True)
class _Held:
    block: Block
    peer: int
    size: int


@dataclass(slots=True)
class _State:
    peers: dict[int, _Peer] = field(default_factory=dict)
    inflight: dict[int, _Inflight] = field(default_factory=dict)
    held: dict[int, _Held] = field(default_factory=dict)
    certs: dict[int, tuple[Finalization, int]] = field(default_factory=dict)


class SyncClient:
    """The requesting side of sync (see the module docstring). Everything but ``verify`` (a
    :class:`~cowboy_node.node.sync_verify.PageVerifier`'s) and the execution slices runs on the event loop;
    ``clock`` is monotonic seconds (tests move it by hand)."""

    def __init__(self, chain: Chain, *, net: Callable[[], PeerSender | None],
                 metrics: NodeMetrics, clock: Callable[[], float],
                 in_builder: Callable[[Callable[[], Any]], Awaitable[Any]],
                 verify: Callable[[Answer], Awaitable[VerifiedPage]],
                 spawn: Callable[[object], None], connected: Callable[[], frozenset[int]],
                 on_applied: Callable[[Block, bytes, list[PreparedBlock]], None],
                 signature_checked: Callable[[bytes], bool] | None = None,
                 limits: FetchLimits | None = None,
                 fallback: Callable[[int, dict[int, PeerSyncView]], None] | None = None) -> None:
        self.chain = chain
        self._fallback = fallback
        """Told the head and the connected peers' claims each tick (issue 34: ``node/statesync_fallback.py``)."""
        self.limits = limits or FetchLimits()
        self._net = net
        self._metrics = metrics
        self._clock = clock
        self._in_builder = in_builder
        self._verify = verify
        self._spawn = spawn
        self._connected = connected
        self._on_applied = on_applied
        self._signature_checked = signature_checked
        self._s = _State()
        self._applying = False
        self._rr = 0
        self._avg_block = 64 * 1024.0
        self._sig_ok: set[bytes] = set()
        self._progress_at = 0.0
        self.syncing = False
        """True while a trusted peer claims a finalized height two or more above ours."""

    # ------------------------------------------------------------------------------------------ peers' claims

    def on_status(self, peer: int, height: int) -> None:
        """A peer's announced finalized height (a claim: checked by asking for it)."""
        self._s.peers.setdefault(peer, _Peer()).claimed = height
        self.plan()

    def target(self) -> int:
        """The highest height claimed by a peer not distrusted."""
        now = self._clock()
        return max((p.claimed for p in self._s.peers.values() if p.distrusted_until <= now), default=0)

    # ------------------------------------------------------------------------------------------ requesting

    def plan(self, force: bool = False) -> None:
        """Expire late answers, drop stalled blocks, and send requests while the window allows. ``force``: one
        block behind is enough (a finalized block's parent is missing)."""
        now = self._clock()
        self._expire(now)
        head = self.chain.height
        if self._fallback is not None:
            connected_now = self._connected()
            self._fallback(head, {p: PeerSyncView(q.claimed, q.pruned_below) for p, q in self._s.peers.items()
                                  if p in connected_now})
        target = self.target()
        self.syncing = target - head >= 2
        if target - head < (1 if force else 2):
            return
        net = self._net()
        if net is None:
            return
        connected = self._connected()
        while len(self._s.inflight) < self.limits.window and self._buffered() < self.limits.max_buffered_bytes:
            gap = self._next_gap(head, target)
            if gap is None:
                return
            first, room = gap
            peer = self._pick(first, now, connected)
            if peer is None:
                return
            per_page = max(1, min(MAX_SYNC_REQUEST, int(0.9 * self.limits.page_bytes / self._avg_block)))
            # The last stretch is shared among the free slots, so several peers serve it at once.
            share = math.ceil((target - first + 1) / (self.limits.window - len(self._s.inflight)))
            count = max(1, min(per_page, share, room, self._s.peers[peer].claimed - first + 1))
            self._s.inflight[first] = _Inflight(peer, count, now)
            net.send(peer, CH_SYNC, encode_sync(SyncRequest(first, count, packed=self.limits.packed)))

    def _buffered(self) -> int:
        """Bytes of blocks held, and of answers being verified."""
        return sum(h.size for h in self._s.held.values()) + sum(r.answered for r in self._s.inflight.values())

    def _next_gap(self, head: int, target: int) -> tuple[int, int] | None:
        """The lowest height above the head neither held nor asked for, and how many follow it free."""
        spans = sorted([(f, f + r.count - 1) for f, r in self._s.inflight.items()])
        h = head + 1
        while h <= target:
            if h in self._s.held:
                h += 1
                continue
            covering = next((end for start, end in spans if start <= h <= end), None)
            if covering is not None:
                h = covering + 1
                continue
            nxt = min([s for s, _ in spans if s > h] + [min((k for k in self._s.held if k > h), default=target + 1),
                                                         target + 1])
            return h, nxt - h
        return None

    def _pick(self, first: int, now: float, connected: frozenset[int]) -> int | None:
        busy: dict[int, int] = {}  # requests a peer is still serving (an answered one is verified here)
        for r in self._s.inflight.values():
            if not r.answered:
                busy[r.peer] = busy.get(r.peer, 0) + 1
        able = [i for i, p in self._s.peers.items() if p.claimed >= first and p.distrusted_until <= now
                and i in connected and busy.get(i, 0) < self.limits.per_peer
                and p.pruned_below <= first]  # issue 34: not a peer that pruned these heights
        if not able:
            return None
        self._rr += 1
        n = max(self._s.peers) + 1
        recent = now - 2 * self.limits.timeout_s

        def key(i: int) -> tuple[int, int, int, int]:
            p = self._s.peers[i]
            return p.failures, 0 if p.delivered_at >= recent else 1, busy.get(i, 0), (i - self._rr) % n
        return min(able, key=key)

    def _expire(self, now: float) -> None:
        # Lateness ends when the answer arrives: the time its verification takes here is not the server's.
        late = {r.peer for r in self._s.inflight.values()
                if not r.answered and now - r.sent_at >= self.limits.timeout_s}
        for first, r in list(self._s.inflight.items()):
            if r.peer in late and not r.answered:  # all it still owes: it is distrusted now
                del self._s.inflight[first]
        for peer in sorted(late):
            self._fail(peer, "timeout", now)
        held = self._s.held
        if held and not self._applying and now - self._progress_at >= self.limits.stall_s:
            self._metrics.consensus_sync_refused.labels(reason="unproven").inc()
            log.warning("held sync blocks not proven by any certificate; asking again", blocks=len(held))
            held.clear()
            self._s.certs.clear()
            self._sig_ok.clear()

    def _fail(self, peer: int, reason: str, now: float) -> None:
        """``peer`` did not deliver or sent what does not verify: distrust it for a doubling back-off, and
        penalize it (disconnect) only for what proves it faulty — a timeout proves nothing (a loaded or refusing
        honest server is also late, and disconnecting it would cut its consensus messages too)."""
        self._metrics.consensus_sync_refused.labels(reason=reason).inc()
        p = self._s.peers.setdefault(peer, _Peer())
        p.failures += 1
        p.distrusted_until = now + min(300.0, self.limits.distrust_s * 2 ** (p.failures - 1))
        log.warning("sync peer failed", peer=peer, reason=reason, failures=p.failures)
        net = self._net()
        if net is not None and reason != "timeout":
            net.penalize(peer, f"sync_{reason}")

    # ------------------------------------------------------------------------------------------ pruned peers (issue 34)

    def on_pruned(self, peer: int, earliest: int) -> None:
        """``peer`` answered SyncPruned: it keeps no block below ``earliest``. Not a fault (no penalty, no failure
        counted): its requests below ``earliest`` are dropped and it is not asked for those heights again, so the
        range goes to another peer. With no peer holding them, the node needs a state snapshot to join."""
        p = self._s.peers.setdefault(peer, _Peer())
        if earliest <= p.pruned_below:
            return  # already known (an answer per request in flight)
        p.pruned_below = earliest
        for first, r in list(self._s.inflight.items()):
            if r.peer == peer and first < earliest:
                del self._s.inflight[first]
        self._metrics.consensus_sync_refused.labels(reason="pruned").inc()
        head = self.chain.height
        able = [i for i, q in self._s.peers.items() if q.pruned_below <= head + 1 and q.claimed > head]
        log.warning("sync peer pruned the blocks this node needs; asking others" if able else
                    "every sync peer pruned the blocks this node needs: join from a state snapshot "
                    "(docs/operations.md, Join)", peer=peer, earliest_retained=earliest, head=head)
        self.plan()

    # ------------------------------------------------------------------------------------------ answers

    def on_answer(self, sender: int, msg: Answer) -> None:
        """An answer arrived (on the event loop). Only the first answer to a request in flight to its sender is
        opened; it is matched by its first block's height (read from that block's header alone: ≈ 1 ms for a full
        block, against ≈ 100 ms to verify the page, which happens off the loop)."""
        if isinstance(msg, PackedPage):  # its height, count and size are outside the compressed bytes
            first, count, size = msg.first_height, msg.blocks, msg.raw_size
        else:
            try:
                first = _first_height(msg.blocks[0])
            except DecodeError as e:
                self._refused(sender, PageRefused("malformed", str(e)))
                return
            count, size = len(msg.blocks), sum(len(b) for b in msg.blocks)
        r = self._s.inflight.get(first)
        if r is None or r.peer != sender or r.answered:  # not asked of it, expired, or answered already
            self._metrics.consensus_sync_refused.labels(reason="unsolicited").inc()
            return
        # Answered: no longer late; heights it did not bring (a page cut by bytes) are free to ask for again now.
        self._s.inflight[first] = _Inflight(sender, count, r.sent_at, answered=size)
        self._avg_block = 0.7 * self._avg_block + 0.3 * (size / count)
        self._spawn(self._receive(sender, first, msg))
        self.plan()

    def _refused(self, sender: int, e: PageRefused) -> None:
        log.warning("sync answer refused", peer=sender, reason=e.reason, detail=str(e))
        for f in [f for f, r in self._s.inflight.items() if r.peer == sender]:
            del self._s.inflight[f]
        self._fail(sender, e.reason, self._clock())
        self.plan()

    async def _receive(self, sender: int, first: int, msg: Answer) -> None:
        try:
            page: VerifiedPage = await self._verify(msg)
        except PageRefused as e:
            self._refused(sender, e)
            return
        r = self._s.inflight.get(first)
        if r is None or r.peer != sender or page.first != first:
            return  # dropped meanwhile (another answer of the sender was refused)
        del self._s.inflight[first]
        now = self._clock()
        if not self._s.held:
            self._progress_at = now
        p = self._s.peers.setdefault(sender, _Peer())
        p.delivered_at, p.failures = now, 0
        head = self.chain.height
        for i, block in enumerate(page.blocks):
            h = first + i
            if h > head and h not in self._s.held:
                self._s.held[h] = _Held(block, sender, page.block_sizes[i])
        self._sig_ok |= page.signatures_ok
        c = page.certified_height
        if c > head and (c not in self._s.certs or c < first + len(page.blocks)):  # one inside its run was
            self._s.certs[c] = (page.certificate, sender)  # checked against its block: it replaces a claim
        self._advance()
        self.plan()

    # ------------------------------------------------------------------------------------------ applying

    def _proven(self) -> int:
        """The highest height up to which held blocks are linked from the head and end in a certified block."""
        head = self.chain.head
        for stale in [k for k in self._s.held if k <= head.header.height]:  # committed by consensus meanwhile
            del self._s.held[stale]
        for stale in [k for k in self._s.certs if k <= head.header.height]:
            del self._s.certs[stale]
        prev, h, best = head.hash(), head.header.height + 1, head.header.height
        held, certs = self._s.held, self._s.certs
        while h in held:
            b = held[h].block
            if b.header.parent_hash != prev:
                if h == head.header.height + 1:  # does not extend our final head: its sender lied
                    bad = held.pop(h)
                    self._fail(bad.peer, "unlinked", self._clock())
                break
            prev = b.hash()
            c = certs.get(h)
            if c is not None:
                if c[0].proposal.payload == prev:
                    best = h
                else:
                    del certs[h]
                    self._metrics.consensus_sync_refused.labels(reason="certificate_mismatch").inc()
            h += 1
        return best

    def _advance(self) -> None:
        if self._applying:
            return
        upto = self._proven()
        if upto <= self.chain.height:
            return
        self._applying = True
        self._spawn(self._apply(upto))

    async def _apply(self, upto: int) -> None:
        try:
            while self.chain.height < upto:
                start = self.chain.height + 1
                work = []
                for h in range(start, upto + 1):
                    block = self._s.held[h].block
                    cert = self._s.certs.get(h)
                    seed = cert[0].seed if cert is not None else self._s.held[h + 1].block.header.beacon
                    work.append((block, seed, None if cert is None else cert[0]))
                done: list[PreparedBlock] = await self._in_builder(functools.partial(self._slice, work))
                if not done:
                    break
                for prepared in done:
                    h = prepared.block.header.height
                    self._s.held.pop(h, None)
                    self._s.certs.pop(h, None)
                last = done[-1].block
                self._metrics.consensus_synced_blocks.inc(len(done))
                self._metrics.consensus_finalized_height.set(last.header.height)
                self._progress_at = self._clock()
                self._on_applied(last, work[len(done) - 1][1], done)
        except InvalidBlock as e:  # a certified chain that does not execute here: drop what is held
            self._metrics.consensus_sync_refused.labels(reason=e.code).inc()
            log.error("a certified synced block does not verify here", reason=e.code, error=str(e))
            self._s.held.clear()
            self._s.certs.clear()
            self._sig_ok.clear()
        finally:
            self._applying = False
        self._advance()
        self.plan()

    def _checked(self, tx_hash: bytes) -> bool:
        """Whether a transaction's signature already verified here (a synced page's, or the node's marks)."""
        if tx_hash in self._sig_ok:
            self._sig_ok.discard(tx_hash)
            return True
        return self._signature_checked is not None and self._signature_checked(tx_hash)

    def _slice(self, work: list[tuple[Block, bytes, Finalization | None]]) -> list[PreparedBlock]:
        """Execute and commit held proven blocks on the head for at most ``slice_s`` (builder thread, lock held)."""
        t0 = time.perf_counter()
        done: list[PreparedBlock] = []
        for block, seed, cert in work:
            if block.header.parent_hash != self.chain.head.hash():
                break  # committed meanwhile by consensus
            if self.chain.beyond_halt(block.header.height):  # issue 34: --halt-height, nothing above it
                break
            prepared = verify_and_prepare(self.chain, block, signature_checked=self._checked)
            extra = [seed_op(block.header.round, seed)]
            if cert is not None:
                extra.append(finalization_op(block.header.height, cert))
            self.chain.commit(prepared, extra)
            done.append(prepared)
            if time.perf_counter() - t0 >= self.limits.slice_s:
                break
        return done


def _first_height(raw: bytes) -> int:
    """The height in a block's header, without decoding its transactions (raises DecodeError)."""
    try:
        value = decode(raw)
    except CodecError as e:
        raise DecodeError(f"block is not canonical CBOR: {e}") from None
    if not isinstance(value, dict) or 0 not in value:
        raise DecodeError("block: expected a map with a header")
    return BlockHeader.from_cbor(value[0]).height


__all__ = ["FetchLimits", "SyncClient"]
