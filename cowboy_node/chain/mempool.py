"""The mempool: pending and queued transactions, admission, replacement, eviction, expiry and block order.

Terms. The pool knows each sender's *account nonce* from the last ``add(tx, account_nonce)`` or
``remove_committed(txs, account_nonce)`` that named it (it never moves it backwards). A sender's **pending**
(executable) transactions are the consecutive run of pooled nonces starting at that account nonce; its other
pooled transactions are **queued** (future): a nonce gap separates them from the account nonce, so no block can
include them until the gap fills. A queued transaction is *promoted* to pending as soon as the run reaches it (a
transaction filling the gap is added, or the account nonce advances); removing a pending transaction with
:meth:`Mempool.remove` *demotes* the sender's higher pending ones to queued.

Rules (what an operator can rely on; ``bump`` is ``replacement_bump_percent``; *priority* is
``(max_priority_fee_per_cycle, max_fee_per_cycle)`` compared lexicographically):

* **Admission.** A transaction whose hash is already pooled is rejected with
  ``already_known``; ``nonce < account_nonce`` with ``nonce_too_low``;
  ``nonce > account_nonce + max_nonce_gap`` with ``nonce_gap_too_large``; a body
  larger than ``max_bytes`` with ``tx_too_large``. Pooled transactions of the
  same sender with a nonce below ``account_nonce`` are stale and are dropped
  when a new transaction of that sender is admitted.
* **Replacement.** A transaction with the same sender and nonce as a pooled one
  replaces it only if *every* one of ``max_fee_per_cycle``,
  ``max_priority_fee_per_cycle``, ``max_fee_per_cell`` and
  ``max_priority_fee_per_cell`` is at least ``ceil(old * (100 + bump) / 100)``
  (integer math); otherwise ``replacement_underpriced``. A replacement counts
  as a new arrival, is pending or queued as the transaction it replaces was, and
  counts and bytes stay exact.
* **Per-sender caps.** A sender holds at most ``max_txs_per_sender`` pooled
  transactions (at or above its account nonce); one more is ``sender_limit``. Of
  those, at most ``max_queued_per_sender`` may be queued; one more queued is
  ``sender_queue_full``. Replacements never hit these caps.
* **Queued cap.** At most ``max_queued`` queued transactions in total. A new
  queued transaction beyond it evicts the *lowest queued* transaction of another
  sender — lowest priority first, the oldest arrival first among equal
  priorities — if its own priority is strictly higher; otherwise it is rejected
  with ``queued_full``.
* **Global caps** (``max_txs`` and ``max_bytes`` of bodies). When admitting would
  exceed either:

  - a *pending* newcomer (or a pending replacement) first evicts queued
    transactions of other senders, lowest queued first, **whatever its
    priority**: a queued transaction never keeps out an executable one. If the
    pool is still over a cap, it evicts *evictable* pending transactions — the
    highest pending nonce of some sender, so eviction never leaves a gap in a
    pending run — lowest priority first; among equal priorities the latest
    arrival is evicted first. A candidate is evicted only if the new
    transaction's priority is *strictly* higher; as many are evicted as needed.
    If room cannot be made that way nothing is evicted and the new transaction
    is rejected with ``mempool_full``.
  - a *queued* newcomer may only evict queued transactions of other senders
    (lowest queued first) whose priority is strictly lower than its own, never a
    pending one; otherwise it is rejected with ``queued_full``.

  A sender's own transactions are never evicted to make room for it. A rejected
  transaction changes nothing.
* **Expiry.** :meth:`Mempool.expire` drops queued transactions whose age
  ``now - added_at`` is at least ``queued_lifetime_s``; pending ones never
  expire. ``added_at`` is the ``now`` passed to :meth:`Mempool.add`; without one
  it is the pool's clock: the latest ``now`` it was given (by ``expire`` or
  ``add``), so a caller running ``expire(now)`` once per block stamps arrivals to
  within a block. Transactions added before the pool was given any time are
  stamped by the first one. A demoted transaction keeps its ``added_at``. The
  pool never reads a clock.
* **Demotion limits.** When :meth:`Mempool.remove` demotes transactions beyond
  ``max_queued_per_sender``, the sender's highest queued nonces are dropped; beyond
  ``max_queued``, the lowest queued transactions are.
* **Eviction counters.** :attr:`Mempool.evicted` counts every transaction the
  pool dropped on its own, by reason: ``queued_expired`` (expiry),
  ``queued_for_pending`` (room for a pending newcomer), ``queued_cap`` (room for
  a queued newcomer, or a demotion beyond the queued caps), ``priority`` (a
  pending transaction outbid when the pool is full), ``stale`` (nonce below the
  account nonce, not the committed transaction itself). Committed, replaced and
  explicitly removed transactions are not counted.
* **Block order** (:meth:`Mempool.ready`). Only senders with pending
  transactions are considered; per sender, the consecutive run of nonces
  starting at the account nonce given to ``ready`` (a gap stops the run). Across
  senders the head with the highest ``max_priority_fee_per_cycle`` is taken first
  (ties: higher ``max_fee_per_cycle``, then earlier arrival), then that sender's
  next nonce becomes its head. Arrival is a counter, never a clock, so the order
  is deterministic given the same sequence of calls.

Every operation is O(log n) per transaction (plus O(max_txs_per_sender) list
moves within one sender); :meth:`Mempool.ready` is O(p + k log p) for ``p``
senders with pending transactions and ``k`` returned transactions.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Callable, Iterable

from cowboy_node.chain.mempool_config import MempoolConfig as MempoolConfig  # re-exported: the pool's public names
from cowboy_node.chain.mempool_config import MempoolError as MempoolError
from cowboy_node.chain.mempool_eviction import EvictionHeaps, PoolEntry, SenderNonces
from cowboy_node.chain.signature_marks import SignatureMarks
from cowboy_protocol.types.transaction import Transaction

EVICTED_MEMORY = 10_000
"""How many evicted transaction hashes the pool remembers with their reason (``GET /tx/{hash}`` says
``evicted`` with it); older ones are forgotten and answer 404 like any unknown hash."""
EVICTION_REASONS = ("queued_expired", "queued_for_pending", "queued_cap", "priority", "stale")
"""Keys of :attr:`Mempool.evicted` (see the module docstring)."""


_FEE_FIELDS = ("max_fee_per_cycle", "max_priority_fee_per_cycle", "max_fee_per_cell", "max_priority_fee_per_cell")


class Mempool:
    """Pending and queued transactions keyed by hash and by (sender, nonce); not thread-safe."""

    def __init__(self, config: MempoolConfig) -> None:
        """Create an empty pool with the given limits."""
        self.config = config
        self.evicted: dict[str, int] = dict.fromkeys(EVICTION_REASONS, 0)
        """Transactions the pool dropped on its own since it was created, by reason (module docstring)."""
        self._recently_evicted: OrderedDict[bytes, str] = OrderedDict()
        """The last :data:`EVICTED_MEMORY` transactions the pool dropped on its own: hash -> reason."""
        self._by_hash: dict[bytes, PoolEntry] = {}
        self._by_body: dict[bytes, PoolEntry] = {}
        """The same entries keyed by their transaction's full signed body (:meth:`by_body`)."""
        self._senders: dict[bytes, SenderNonces] = {}
        self._ready: dict[bytes, SenderNonces] = {}
        """Senders with at least one pending transaction."""
        self._heaps = EvictionHeaps(self._by_hash, self._senders, self._ready)
        """The eviction and expiry heaps over these same entries, and the eviction plans read from them."""
        self._queued = 0
        self._bytes = 0
        self._arrivals = 0
        self._now: float | None = None
        self.signature_marks = SignatureMarks(2 * config.max_txs)
        """Hashes of transactions admission pooled after their signature check passed (``chain/signature_marks.py``):
        a block's execution skips that check for them. Twice the pool's size, so a pooled transaction's mark
        outlives it until its block arrives; the pool itself never reads or removes marks."""

    # -- queries ---------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of pooled transactions (pending and queued)."""
        return len(self._by_hash)

    def __contains__(self, tx_hash: object) -> bool:
        """Whether a transaction with this hash is pooled."""
        return tx_hash in self._by_hash

    @property
    def size_bytes(self) -> int:
        """Sum of ``len(tx.body())`` over pooled transactions."""
        return self._bytes

    @property
    def pending_count(self) -> int:
        """Pooled transactions that continue their sender's account nonce without a gap."""
        return len(self._by_hash) - self._queued

    @property
    def queued_count(self) -> int:
        """Pooled transactions behind a nonce gap."""
        return self._queued

    def get(self, tx_hash: bytes) -> Transaction | None:
        """The pooled transaction with this hash, if any."""
        e = self._by_hash.get(tx_hash)
        return None if e is None else e.tx

    def by_body(self, body: bytes) -> Transaction | None:
        """The pooled transaction whose full signed body is exactly ``body``, if any: a follower decoding the
        leader's block takes it instead of decoding those bytes again (``Block.decode``)."""
        e = self._by_body.get(body)
        return None if e is None else e.tx

    def is_queued(self, tx_hash: bytes) -> bool | None:
        """Whether the pooled transaction is queued (False: pending; None: not pooled)."""
        e = self._by_hash.get(tx_hash)
        return None if e is None else e.queued

    def transactions(self) -> list[Transaction]:
        """Every pooled transaction, sender by sender in ascending nonce order (re-admitting them in this order
        recreates the same pending runs)."""
        return [s.by_nonce[n].tx for s in self._senders.values() for n in s.nonces]

    def pending_nonce(self, sender: bytes, account_nonce: int) -> int:
        """Next nonce after the sender's consecutive pooled run starting at ``account_nonce``."""
        s = self._senders.get(sender)
        n = account_nonce
        if s is not None:
            while n in s.by_nonce:
                n += 1
        return n

    def ready(self, account_nonce: Callable[[bytes], int], max_txs: int) -> list[Transaction]:
        """Up to ``max_txs`` executable transactions in block order; removes nothing."""
        heap: list[tuple[int, int, int, PoolEntry, SenderNonces]] = []
        for sender, s in self._ready.items():
            e = s.by_nonce.get(account_nonce(sender))
            if e is not None:
                heap.append((-e.tip, -e.fee, e.arrival, e, s))
        heapq.heapify(heap)
        out: list[Transaction] = []
        while heap and len(out) < max_txs:
            e, s = heap[0][3], heap[0][4]
            out.append(e.tx)
            nxt = s.by_nonce.get(e.tx.nonce + 1)
            if nxt is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (-nxt.tip, -nxt.fee, nxt.arrival, nxt, s))
        return out

    # -- admission -------------------------------------------------------------------
    def add(self, tx: Transaction, account_nonce: int, *, tx_hash: bytes | None = None,
            now: float | None = None) -> bool:
        """Pool ``tx``; True if added, False if it replaced the same sender+nonce. Raises MempoolError.

        ``now`` is the arrival time used for queued expiry (default: the pool's clock, see the module docstring).
        """
        cfg = self.config
        h = tx.tx_hash() if tx_hash is None else tx_hash
        if h in self._by_hash:
            raise MempoolError("already_known", "transaction is already pooled")
        sender, nonce = tx.sender, tx.nonce
        s = self._senders.get(sender)
        an = account_nonce if s is None or s.base <= account_nonce else s.base
        if nonce < an:
            raise MempoolError("nonce_too_low", f"nonce {nonce} already used (next is {an})", field="nonce")
        if nonce > an + cfg.max_nonce_gap:
            raise MempoolError("nonce_gap_too_large", f"nonce {nonce} is more than {cfg.max_nonce_gap} "
                               f"ahead of the account nonce {an}", field="nonce")
        body = tx.body()
        size = len(body)
        if size > cfg.max_bytes:
            raise MempoolError("tx_too_large", f"body of {size} bytes exceeds the pool's {cfg.max_bytes} bytes")
        old: PoolEntry | None = None
        stale: list[PoolEntry] = []
        run_end = an  # first nonce after the sender's pending run once its account nonce is ``an``
        queued_now = 0
        if s is not None:
            old = s.by_nonce.get(nonce)
            # The sender's pooled txs below account_nonce are stale (already executed): dropped on success.
            stale = [s.by_nonce[n] for n in s.nonces[:bisect_left(s.nonces, an)]]
            if an == s.base:
                run_end = an + s.pend
            else:
                while run_end in s.by_nonce:
                    run_end += 1
            queued_now = len(s.nonces) - s.pend
        kept = 0 if s is None else len(s.nonces) - len(stale)
        queued_then = kept - (run_end - an)  # the sender's queued txs once its account nonce is ``an``
        if old is not None:
            self._check_bump(old.tx, tx)
            pending = nonce < run_end
        else:
            pending = nonce == run_end
            if kept >= cfg.max_txs_per_sender:
                raise MempoolError("sender_limit", f"sender already has {cfg.max_txs_per_sender} pooled transactions")
            if not pending and queued_then >= cfg.max_queued_per_sender:
                raise MempoolError("sender_queue_full", f"sender already has {cfg.max_queued_per_sender} queued "
                                   f"transactions (nonce {nonce} leaves a gap after {run_end - 1})", field="nonce")
        gone = stale if old is None else [*stale, old]
        count = len(self._by_hash) + 1 - len(gone)
        total = self._bytes + size - sum(e.size for e in gone)
        priority = (tx.max_priority_fee_per_cycle, tx.max_fee_per_cycle)
        if pending:
            victims = (self._heaps.plan_for_pending(cfg, sender, priority, count, total)
                       if count > cfg.max_txs or total > cfg.max_bytes else [])
        else:
            over_queued = self._queued - queued_now + queued_then + (old is None) - cfg.max_queued
            victims = (self._heaps.plan_for_queued(cfg, sender, priority, count, total, over_queued)
                       if over_queued > 0 or count > cfg.max_txs or total > cfg.max_bytes else [])
        # Planning raised or changed nothing; from here on the admission happens.
        for v, reason in victims:
            self._remove_entry(v)
            self._note_evicted(v.hash, reason)
        if now is not None:
            self._set_clock(now)
        if s is not None and an > s.base:
            for dropped in self._advance(sender, s, an):
                self._note_evicted(dropped.hash, "stale")
        self._recently_evicted.pop(h, None)  # admitted (again): no longer "evicted"
        self._arrivals += 1
        e = PoolEntry(tx, h, body, size, self._arrivals, self._now)
        if old is not None:
            self._replace(old, e)
        else:
            self._insert(sender, an, e)
        self._heaps.compact(self._queued)
        return old is None

    def _check_bump(self, old: Transaction, new: Transaction) -> None:
        pct = 100 + self.config.replacement_bump_percent
        for name in _FEE_FIELDS:
            before: int = getattr(old, name)
            need = (before * pct + 99) // 100
            if getattr(new, name) < need:
                raise MempoolError("replacement_underpriced", f"replacement {name} must be at least {need} "
                                   f"({self.config.replacement_bump_percent}% above {before})", field=name)

    # -- time ------------------------------------------------------------------------
    def _set_clock(self, now: float) -> None:
        if self._now is None:
            for e in self._by_hash.values():  # arrivals before the pool knew any time
                if e.time is None:
                    e.time = now
                    if e.queued:
                        self._heaps.index_queued(e)
            self._now = now
        elif now > self._now:
            self._now = now

    def expire(self, now: float) -> int:
        """Drop queued transactions added at least ``queued_lifetime_s`` before ``now``; returns how many."""
        self._set_clock(now)
        cutoff = now - self.config.queued_lifetime_s
        heap = self._heaps.qexpire
        dropped = 0
        while heap and heap[0][0] <= cutoff:
            e = heapq.heappop(heap)[2]
            e.in_qexpire = False
            if e.queued and self._by_hash.get(e.hash) is e:
                self._remove_entry(e)
                self._note_evicted(e.hash, "queued_expired")
                dropped += 1
        self._heaps.compact(self._queued)
        return dropped

    # -- removal ---------------------------------------------------------------------
    def remove(self, tx_hash: bytes) -> None:
        """Drop one transaction (the sender's higher pending nonces become queued); no-op if absent."""
        e = self._by_hash.get(tx_hash)
        if e is None:
            return
        self._remove_entry(e)
        self._trim_queued(e.tx.sender)
        self._heaps.compact(self._queued)

    def remove_committed(self, txs: Iterable[Transaction], account_nonce: Callable[[bytes], int]) -> None:
        """Drop included ``txs`` and every pooled tx of their senders whose nonce is below the account nonce
        (the pool learns those account nonces: queued txs that now continue it become pending)."""
        matched: dict[bytes, list[PoolEntry]] = {}  # per sender: its pooled txs that were included
        senders = self._senders
        for tx in txs:
            s = senders.get(tx.sender)
            if s is not None:
                e = s.by_nonce.get(tx.nonce)
                mine = matched.get(tx.sender)
                if mine is None:
                    mine = matched[tx.sender] = []
                if e is not None and (e.tx is tx or e.tx == tx):
                    mine.append(e)
        for sender, mine in matched.items():
            s = senders.get(sender)
            if s is None:
                continue
            dropped = self._advance(sender, s, account_nonce(sender))
            included = {id(e) for e in mine}
            for e in mine:
                if self._by_hash.get(e.hash) is e:  # included yet at or above the account nonce (nonces lag)
                    self._remove_entry(e)
            for e in dropped:  # dropped by the advance: stale unless it is the committed transaction itself
                if id(e) not in included:
                    self._note_evicted(e.hash, "stale")
        self._heaps.compact(self._queued)

    def _note_evicted(self, tx_hash: bytes, reason: str) -> None:
        """Count a transaction the pool dropped on its own, and remember why (bounded, oldest forgotten first)."""
        self.evicted[reason] += 1
        memory = self._recently_evicted
        memory[tx_hash] = reason
        memory.move_to_end(tx_hash)
        while len(memory) > EVICTED_MEMORY:
            memory.popitem(last=False)

    def evicted_reason(self, tx_hash: bytes) -> str | None:
        """Why the pool dropped this transaction on its own (one of :data:`EVICTION_REASONS`), if it did recently
        and it was not admitted again since; None otherwise (unknown, pooled, included, or forgotten)."""
        return self._recently_evicted.get(tx_hash)

    def _trim_queued(self, sender: bytes) -> None:
        """Enforce the queued caps after a demotion (module docstring, *Demotion limits*)."""
        cfg = self.config
        s = self._senders.get(sender)
        while s is not None and len(s.nonces) - s.pend > cfg.max_queued_per_sender:
            e = s.by_nonce[s.nonces[-1]]
            self._remove_entry(e)
            self._note_evicted(e.hash, "queued_cap")
        while self._queued > cfg.max_queued:
            item = self._heaps.pop_queued()
            if item is None:  # pragma: no cover - the heap holds every queued entry
                break
            self._remove_entry(item[3])
            self._note_evicted(item[3].hash, "queued_cap")

    # -- bookkeeping -----------------------------------------------------------------
    def _enqueue(self, e: PoolEntry) -> None:
        e.queued = True
        self._queued += 1
        self._heaps.index_queued(e)

    def _extend(self, s: SenderNonces) -> None:
        """Promote the queued txs that now continue the pending run."""
        nonces, p, base = s.nonces, s.pend, s.base
        while p < len(nonces) and nonces[p] == base + p:
            e = s.by_nonce[nonces[p]]
            if e.queued:
                e.queued = False
                self._queued -= 1
            p += 1
        s.pend = p

    def _sync(self, sender: bytes, s: SenderNonces, tail_before: PoolEntry | None) -> None:
        """After a change to ``s``: drop it if empty, keep the ready index, push a new pending tail."""
        if not s.nonces:
            del self._senders[sender]
            self._ready.pop(sender, None)
        elif s.pend:
            self._ready[sender] = s
            tail = s.by_nonce[s.nonces[s.pend - 1]]
            if tail is not tail_before:
                self._heaps.push_candidate(tail)
        else:
            self._ready.pop(sender, None)

    @staticmethod
    def _tail(s: SenderNonces) -> PoolEntry | None:
        return s.by_nonce[s.nonces[s.pend - 1]] if s.pend else None

    def _insert(self, sender: bytes, account_nonce: int, e: PoolEntry) -> None:
        """Link a new (not replacing) entry; pending if it continues the run (then promotes what follows)."""
        s = self._senders.get(sender)
        if s is None:
            s = self._senders[sender] = SenderNonces(base=account_nonce)
        n = e.tx.nonce
        s.by_nonce[n] = e
        self._by_hash[e.hash] = e
        self._by_body[e.body] = e
        self._bytes += e.size
        nonces = s.nonces
        if not nonces or n > nonces[-1]:
            nonces.append(n)
            if n == s.base + s.pend:  # the common case: extends the pending run, nothing above it to promote
                s.pend += 1
                self._ready[sender] = s
                self._heaps.push_candidate(e)
                return
        else:
            insort(nonces, n)
        tail = self._tail(s)  # n went above the pending run: the tail's index is unchanged
        if n == s.base + s.pend:
            s.pend += 1
            self._extend(s)
        else:
            self._enqueue(e)
        self._sync(sender, s, tail)

    def _replace(self, old: PoolEntry, e: PoolEntry) -> None:
        sender = e.tx.sender
        s = self._senders[sender]
        tail = self._tail(s)
        s.by_nonce[e.tx.nonce] = e
        del self._by_hash[old.hash]
        del self._by_body[old.body]
        self._by_hash[e.hash] = e
        self._by_body[e.body] = e
        self._bytes += e.size - old.size
        if old.queued:
            e.queued = True
            self._heaps.index_queued(e)
        self._sync(sender, s, tail)

    def _advance(self, sender: bytes, s: SenderNonces, floor: int) -> list[PoolEntry]:
        """Move the sender's account nonce up to ``floor``: drop pooled txs below it, promote; returns dropped."""
        if floor <= s.base:
            return []
        tail = self._tail(s)
        k = bisect_left(s.nonces, floor)
        dropped = [s.by_nonce.pop(n) for n in s.nonces[:k]]
        del s.nonces[:k]
        for e in dropped:
            del self._by_hash[e.hash]
            del self._by_body[e.body]
            self._bytes -= e.size
            if e.queued:
                self._queued -= 1
            else:
                s.pend -= 1
        s.base = floor
        self._extend(s)
        self._sync(sender, s, tail)
        return dropped

    def _remove_entry(self, e: PoolEntry) -> None:
        """Unlink one entry; a pending one demotes the rest of its sender's run."""
        sender, n = e.tx.sender, e.tx.nonce
        s = self._senders[sender]
        tail = self._tail(s)
        nonces = s.nonces
        i = len(nonces) - 1 if nonces[-1] == n else bisect_left(nonces, n)
        del nonces[i]
        del s.by_nonce[n]
        del self._by_hash[e.hash]
        del self._by_body[e.body]
        self._bytes -= e.size
        if e.queued:
            self._queued -= 1
        else:
            for m in nonces[i:s.pend - 1]:
                self._enqueue(s.by_nonce[m])
            s.pend = i
        self._sync(sender, s, tail)
