"""The mempool's eviction and expiry heaps, and the eviction plans read from them (:mod:`cowboy_node.chain.mempool`).

Three min-heaps with lazy deletion over the pool's entries: pending eviction candidates (each sender's pending
tail), queued transactions by priority, queued transactions by arrival time. An item whose entry was removed,
promoted or replaced stays in its heap until popped (then skipped) or until :meth:`EvictionHeaps.compact`
rebuilds the heap. The rules the plans implement are the module docstring of :mod:`cowboy_node.chain.mempool`
(*Queued cap*, *Global caps*); a plan that raises leaves every heap as it found it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TypeVar

from cowboy_node.chain.mempool_config import MempoolConfig, MempoolError
from cowboy_protocol.types.transaction import Transaction


@dataclass(slots=True, eq=False)
class PoolEntry:
    """One pooled transaction and where the pool's indexes hold it."""

    tx: Transaction
    """The transaction."""
    hash: bytes
    """Its hash (the pool's primary key)."""
    body: bytes
    """``tx.body()``, the key of the body index."""
    size: int
    """``len(body)``: what it counts against ``max_bytes``."""
    arrival: int
    """The pool's arrival counter at its admission (never a clock: the tie-break of every order)."""
    time: float | None
    """``added_at`` (None until the pool has been given a time)."""
    tip: int = field(init=False)
    """``max_priority_fee_per_cycle``, the first part of its priority."""
    fee: int = field(init=False)
    """``max_fee_per_cycle``, the second part of its priority."""
    queued: bool = False
    """Behind a nonce gap (not executable) rather than pending."""
    in_qevict: bool = False
    """An item for this entry sits in the queued-eviction heap (pushed at most once while it stays there)."""
    in_qexpire: bool = False
    """An item for this entry sits in the expiry heap."""

    def __post_init__(self) -> None:
        self.tip = self.tx.max_priority_fee_per_cycle
        self.fee = self.tx.max_fee_per_cycle


@dataclass(slots=True)
class SenderNonces:
    """One sender's pooled transactions by nonce, and how many of them are pending."""

    base: int
    """Account nonce, as last told to the pool; every pooled nonce is at or above it."""
    by_nonce: dict[int, PoolEntry] = field(default_factory=dict)
    """Pooled entries by nonce."""
    nonces: list[int] = field(default_factory=list)
    """Pooled nonces, ascending; ``nonces[:pend] == range(base, base + pend)`` are pending, the rest queued."""
    pend: int = 0
    """How many of ``nonces`` are pending."""


# Min-heap of pending eviction candidates: lowest priority first, latest arrival first among equals.
EvictItem = tuple[int, int, int, PoolEntry]
# Min-heap of queued transactions: lowest priority first, oldest arrival first among equals.
QueuedItem = tuple[int, int, int, PoolEntry]
# Min-heap of queued transactions by added_at (then arrival).
ExpireItem = tuple[float, int, PoolEntry]
_H = TypeVar("_H", QueuedItem, ExpireItem)


class EvictionHeaps:
    """The heaps over one pool's entries; it reads (never changes) the pool's indexes it is given. The plans take
    the pool's limits as an argument (``Mempool.config`` may be replaced on a live pool)."""

    def __init__(self, by_hash: dict[bytes, PoolEntry], senders: dict[bytes, SenderNonces],
                 ready: dict[bytes, SenderNonces]) -> None:
        """Empty heaps over the pool's ``by_hash``, ``senders`` and ``ready`` indexes (the same dicts)."""
        self._by_hash = by_hash
        self._senders = senders
        self._ready = ready
        self.evict: list[EvictItem] = []
        """Pending eviction candidates: lowest priority first, latest arrival first among equals."""
        self.qevict: list[QueuedItem] = []
        """Queued transactions: lowest priority first, oldest arrival first among equals."""
        self.qexpire: list[ExpireItem] = []
        """Queued transactions by ``added_at`` (then arrival)."""

    def plan_for_pending(self, cfg: MempoolConfig, sender: bytes, priority: tuple[int, int], count: int,
                         total: int) -> list[tuple[PoolEntry, str]]:
        """Victims making room for a pending newcomer: queued ones of other senders first, whatever their
        priority, then outbid pending tails. Raises mempool_full, changing nothing."""
        planned: list[QueuedItem] = []
        skipped: list[QueuedItem] = []
        while count > cfg.max_txs or total > cfg.max_bytes:
            item = self.pop_queued()
            if item is None:
                break
            if item[3].tx.sender == sender:
                skipped.append(item)
                continue
            planned.append(item)
            count -= 1
            total -= item[3].size
        try:
            outbid = self._plan_eviction(cfg, sender, priority, count, total)
        except MempoolError:
            skipped += planned
            raise
        finally:
            for it in skipped:
                heapq.heappush(self.qevict, it)
        return [(it[3], "queued_for_pending") for it in planned] + [(v, "priority") for v in outbid]

    def plan_for_queued(self, cfg: MempoolConfig, sender: bytes, priority: tuple[int, int], count: int, total: int,
                        over_queued: int) -> list[tuple[PoolEntry, str]]:
        """Victims making room for a queued newcomer: lower-priority queued ones of other senders only. Raises
        queued_full, changing nothing."""
        planned: list[QueuedItem] = []
        skipped: list[QueuedItem] = []
        while over_queued > 0 or count > cfg.max_txs or total > cfg.max_bytes:
            item = self.pop_queued()
            if item is not None and item[3].tx.sender == sender:
                skipped.append(item)
                continue
            if item is None or (item[0], item[1]) >= priority:
                for it in (*planned, *skipped, *(() if item is None else (item,))):
                    heapq.heappush(self.qevict, it)
                why = (f"{cfg.max_queued} queued transactions are held" if over_queued > 0
                       else "the mempool is full")
                raise MempoolError("queued_full", f"{why} and this nonce-gapped transaction's fee priority does "
                                   "not beat the lowest queued one; send the missing nonces first", field="nonce")
            planned.append(item)
            over_queued -= 1
            count -= 1
            total -= item[3].size
        for it in skipped:
            heapq.heappush(self.qevict, it)
        return [(it[3], "queued_cap") for it in planned]

    def _plan_eviction(self, cfg: MempoolConfig, sender: bytes, priority: tuple[int, int], count: int,
                       total: int) -> list[PoolEntry]:
        """Pending tails to evict for a newcomer (count/bytes as if admitted); raises mempool_full, changing
        nothing."""
        heap = self.evict
        taken: dict[bytes, int] = {}  # victims planned per sender (always the top of its pending run)
        victims: list[PoolEntry] = []
        # Every popped item goes back on failure: a planned victim stays its sender's tail when nothing is evicted.
        popped: list[EvictItem] = []
        skipped: list[EvictItem] = []
        while count > cfg.max_txs or total > cfg.max_bytes:
            item = self._pop_candidate(taken)
            if item is None or (item[0], item[1]) >= priority:
                if item is not None:
                    popped.append(item)
                for it in popped:
                    heapq.heappush(heap, it)
                raise MempoolError("mempool_full", "mempool is full and the transaction's fee priority "
                                   "does not beat the lowest evictable transaction")
            popped.append(item)
            v = item[3]
            vs = v.tx.sender
            if vs == sender:
                skipped.append(item)
                continue
            victims.append(v)
            count -= 1
            total -= v.size
            k = taken[vs] = taken.get(vs, 0) + 1
            s = self._senders[vs]
            if s.pend > k:  # that sender's next-highest pending tx becomes evictable once v is gone
                self.push_candidate(s.by_nonce[s.nonces[s.pend - 1 - k]])
        for it in skipped:
            heapq.heappush(heap, it)
        return victims

    def _pop_candidate(self, taken: dict[bytes, int]) -> EvictItem | None:
        """Pop the lowest-priority live pending tail (treating ``taken`` top pending nonces per sender as gone)."""
        heap = self.evict
        while heap:
            item = heapq.heappop(heap)
            e = item[3]
            if e.queued or self._by_hash.get(e.hash) is not e:
                continue
            s = self._senders[e.tx.sender]
            k = taken.get(e.tx.sender, 0)
            if s.pend > k and s.nonces[s.pend - 1 - k] == e.tx.nonce:
                return item
        return None

    def pop_queued(self) -> QueuedItem | None:
        """Pop the lowest live queued transaction's item (items of promoted or gone entries are discarded)."""
        heap = self.qevict
        while heap:
            item = heapq.heappop(heap)
            e = item[3]
            if e.queued and self._by_hash.get(e.hash) is e:
                return item
            e.in_qevict = False
        return None

    def push_candidate(self, e: PoolEntry) -> None:
        heapq.heappush(self.evict, (e.tip, e.fee, -e.arrival, e))

    def compact(self, queued: int) -> None:
        """Rebuild a heap once stale items dominate it; amortised O(1)."""
        if len(self.evict) > 2 * len(self._by_hash) + 1024:
            self.evict = [(t.tip, t.fee, -t.arrival, t)
                           for t in (s.by_nonce[s.nonces[s.pend - 1]] for s in self._ready.values())]
            heapq.heapify(self.evict)
        if len(self.qevict) > 2 * queued + 1024:
            self.qevict = self._live_queued(self.qevict, "in_qevict")
        if len(self.qexpire) > 2 * queued + 1024:
            self.qexpire = self._live_queued(self.qexpire, "in_qexpire")

    def _live_queued(self, heap: list[_H], flag: str) -> list[_H]:
        """The heap's items whose entries are still pooled and queued (the others' ``flag`` is cleared)."""
        live: list[_H] = []
        for item in heap:
            e = item[-1]
            if e.queued and self._by_hash.get(e.hash) is e:
                live.append(item)
            else:
                setattr(e, flag, False)
        heapq.heapify(live)
        return live

    def index_queued(self, e: PoolEntry) -> None:
        if not e.in_qevict:
            e.in_qevict = True
            heapq.heappush(self.qevict, (e.tip, e.fee, e.arrival, e))
        if not e.in_qexpire and e.time is not None:
            e.in_qexpire = True
            heapq.heappush(self.qexpire, (e.time, e.arrival, e))
