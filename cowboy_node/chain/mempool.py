"""The mempool: pending transactions, admission, replacement, eviction and block ordering.

Rules (what an operator can rely on; ``bump`` is ``replacement_bump_percent``):

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
  as a new arrival; counts and bytes stay exact.
* **Per-sender cap.** A sender holds at most ``max_txs_per_sender`` pooled
  transactions (at or above its account nonce); one more is ``sender_limit``.
  Replacements never hit this cap.
* **Global caps** (``max_txs`` and ``max_bytes`` of bodies). When admitting would
  exceed either, the pool evicts *evictable* transactions — the highest-nonce
  transaction of some sender, so eviction never leaves a nonce gap — lowest
  fee priority first. Fee priority is ``(max_priority_fee_per_cycle,
  max_fee_per_cycle)`` compared lexicographically; among equal priorities the
  latest arrival is evicted first. A candidate is evicted only if the new
  transaction's priority is *strictly* higher; as many are evicted as needed.
  If room cannot be made that way nothing is evicted and the new transaction is
  rejected with ``mempool_full``. A sender's own transactions are never evicted
  to make room for it.
* **Block order** (:meth:`Mempool.ready`). Per sender, only the consecutive run
  of nonces starting at its account nonce is ready (a gap stops the run).
  Across senders the head with the highest ``max_priority_fee_per_cycle`` is
  taken first (ties: higher ``max_fee_per_cycle``, then earlier arrival), then
  that sender's next nonce becomes its head. Arrival is a counter, never a
  clock, so the order is deterministic given the same sequence of calls.

Every operation is O(log n) per transaction (plus O(max_txs_per_sender) list
moves within one sender); :meth:`Mempool.ready` is O(s + k log s) for ``s``
senders and ``k`` returned transactions.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cowboy_node.types.errors import ValidationError
from cowboy_node.types.transaction import Transaction


class MempoolError(ValidationError):
    """A transaction was refused by the pool; ``code`` is one of the stable codes in the module docstring."""


@dataclass(frozen=True)
class MempoolConfig:
    """Pool limits (see the module docstring for how each is enforced)."""

    max_txs: int = 10_000
    """Most transactions held."""
    max_bytes: int = 32 * 1024 * 1024
    """Most total body bytes held."""
    max_txs_per_sender: int = 64
    """Most transactions held per sender."""
    max_nonce_gap: int = 64
    """Highest admissible nonce is ``account_nonce + max_nonce_gap``."""
    replacement_bump_percent: int = 10
    """Minimum increase, in percent, of every fee field for a same-nonce replacement."""


@dataclass(slots=True, eq=False)
class _Entry:
    tx: Transaction
    hash: bytes
    size: int
    arrival: int
    tip: int = field(init=False)
    fee: int = field(init=False)

    def __post_init__(self) -> None:
        self.tip = self.tx.max_priority_fee_per_cycle
        self.fee = self.tx.max_fee_per_cycle


@dataclass(slots=True)
class _Sender:
    by_nonce: dict[int, _Entry] = field(default_factory=dict)
    nonces: list[int] = field(default_factory=list)
    """Pooled nonces, ascending."""


# Min-heap of eviction candidates: lowest priority first, latest arrival first among equals.
_EvictItem = tuple[int, int, int, _Entry]
_FEE_FIELDS = ("max_fee_per_cycle", "max_priority_fee_per_cycle", "max_fee_per_cell", "max_priority_fee_per_cell")


class Mempool:
    """Pending transactions keyed by hash and by (sender, nonce); not thread-safe."""

    def __init__(self, config: MempoolConfig) -> None:
        """Create an empty pool with the given limits."""
        self.config = config
        self._by_hash: dict[bytes, _Entry] = {}
        self._senders: dict[bytes, _Sender] = {}
        self._evict: list[_EvictItem] = []
        self._bytes = 0
        self._arrivals = 0

    # -- queries ---------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of pooled transactions."""
        return len(self._by_hash)

    def __contains__(self, tx_hash: object) -> bool:
        """Whether a transaction with this hash is pooled."""
        return tx_hash in self._by_hash

    @property
    def size_bytes(self) -> int:
        """Sum of ``len(tx.body())`` over pooled transactions."""
        return self._bytes

    def get(self, tx_hash: bytes) -> Transaction | None:
        """The pooled transaction with this hash, if any."""
        e = self._by_hash.get(tx_hash)
        return None if e is None else e.tx

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
        heap: list[tuple[int, int, int, _Entry, _Sender]] = []
        for sender, s in self._senders.items():
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
    def add(self, tx: Transaction, account_nonce: int, *, tx_hash: bytes | None = None) -> bool:
        """Pool ``tx``; True if added, False if it replaced the same sender+nonce. Raises MempoolError."""
        cfg = self.config
        h = tx.tx_hash() if tx_hash is None else tx_hash
        if h in self._by_hash:
            raise MempoolError("already_known", "transaction is already pooled")
        if tx.nonce < account_nonce:
            raise MempoolError("nonce_too_low", f"nonce {tx.nonce} already used (next is {account_nonce})",
                               field="nonce")
        if tx.nonce > account_nonce + cfg.max_nonce_gap:
            raise MempoolError("nonce_gap_too_large", f"nonce {tx.nonce} is more than {cfg.max_nonce_gap} "
                               f"ahead of the account nonce {account_nonce}", field="nonce")
        size = len(tx.body())
        if size > cfg.max_bytes:
            raise MempoolError("tx_too_large", f"body of {size} bytes exceeds the pool's {cfg.max_bytes} bytes")
        s = self._senders.get(tx.sender)
        old = None if s is None else s.by_nonce.get(tx.nonce)
        # The sender's pooled txs below account_nonce are stale (already executed): dropped on success.
        stale = [] if s is None else [s.by_nonce[n] for n in s.nonces[:bisect_left(s.nonces, account_nonce)]]
        if old is not None:
            self._check_bump(old.tx, tx)
        elif s is not None and len(s.nonces) - len(stale) >= cfg.max_txs_per_sender:
            raise MempoolError("sender_limit", f"sender already has {cfg.max_txs_per_sender} pooled transactions")
        gone = stale if old is None else [*stale, old]
        count = len(self._by_hash) + 1 - len(gone)
        total = self._bytes + size - sum(e.size for e in gone)
        victims = self._plan_eviction(tx, count, total) if count > cfg.max_txs or total > cfg.max_bytes else []
        for v in (*victims, *gone):
            self._unlink(v)
        self._arrivals += 1
        self._link(_Entry(tx, h, size, self._arrivals))
        self._compact()
        return old is None

    def _check_bump(self, old: Transaction, new: Transaction) -> None:
        pct = 100 + self.config.replacement_bump_percent
        for name in _FEE_FIELDS:
            before: int = getattr(old, name)
            need = (before * pct + 99) // 100
            if getattr(new, name) < need:
                raise MempoolError("replacement_underpriced", f"replacement {name} must be at least {need} "
                                   f"({self.config.replacement_bump_percent}% above {before})", field=name)

    def _plan_eviction(self, new: Transaction, count: int, total: int) -> list[_Entry]:
        """Victims making room for ``new`` (count/bytes as if admitted); raises mempool_full, changing nothing."""
        cfg, heap = self.config, self._evict
        sender, priority = new.sender, (new.max_priority_fee_per_cycle, new.max_fee_per_cycle)
        taken: dict[bytes, int] = {}  # victims planned per sender (always its top nonces)
        victims: list[_Entry] = []
        # Every popped item goes back on failure: a planned victim stays its sender's tail when nothing is evicted.
        popped: list[_EvictItem] = []
        skipped: list[_EvictItem] = []
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
            nonces = self._senders[vs].nonces
            if len(nonces) > k:  # that sender's next-highest becomes evictable once v is gone
                self._push_candidate(self._senders[vs].by_nonce[nonces[-1 - k]])
        for it in skipped:
            heapq.heappush(heap, it)
        return victims

    def _pop_candidate(self, taken: dict[bytes, int]) -> _EvictItem | None:
        """Pop the lowest-priority live tail (treating ``taken`` top nonces per sender as gone)."""
        heap = self._evict
        while heap:
            item = heapq.heappop(heap)
            e = item[3]
            if self._by_hash.get(e.hash) is not e:
                continue
            nonces = self._senders[e.tx.sender].nonces
            k = taken.get(e.tx.sender, 0)
            if len(nonces) > k and nonces[-1 - k] == e.tx.nonce:
                return item
        return None

    def _push_candidate(self, e: _Entry) -> None:
        heapq.heappush(self._evict, (e.tip, e.fee, -e.arrival, e))

    def _compact(self) -> None:
        """Rebuild the eviction heap from live tails once stale items dominate; amortised O(1)."""
        if len(self._evict) > 2 * len(self._by_hash) + 1024:
            self._evict = [(t.tip, t.fee, -t.arrival, t)
                           for t in (s.by_nonce[s.nonces[-1]] for s in self._senders.values())]
            heapq.heapify(self._evict)

    # -- removal ---------------------------------------------------------------------
    def remove(self, tx_hash: bytes) -> None:
        """Drop one transaction (the sender's higher nonces stay pooled); no-op if absent."""
        e = self._by_hash.get(tx_hash)
        if e is not None:
            self._unlink(e)
            self._compact()

    def remove_committed(self, txs: Iterable[Transaction], account_nonce: Callable[[bytes], int]) -> None:
        """Drop included ``txs`` and every pooled tx of their senders whose nonce is below the account nonce."""
        senders: dict[bytes, None] = {}
        for tx in txs:
            senders[tx.sender] = None
            s = self._senders.get(tx.sender)
            e = None if s is None else s.by_nonce.get(tx.nonce)
            if e is not None and e.tx == tx:
                self._unlink(e)
        for sender in senders:
            s = self._senders.get(sender)
            if s is None:
                continue
            floor = account_nonce(sender)
            while s.nonces and s.nonces[0] < floor:
                self._unlink(s.by_nonce[s.nonces[0]])
        self._compact()

    # -- bookkeeping -----------------------------------------------------------------
    def _link(self, e: _Entry) -> None:
        s = self._senders.get(e.tx.sender)
        if s is None:
            s = self._senders[e.tx.sender] = _Sender()
        n = e.tx.nonce
        s.by_nonce[n] = e
        self._by_hash[e.hash] = e
        self._bytes += e.size
        if not s.nonces or n > s.nonces[-1]:
            s.nonces.append(n)
            self._push_candidate(e)
        else:
            insort(s.nonces, n)

    def _unlink(self, e: _Entry) -> None:
        sender, n = e.tx.sender, e.tx.nonce
        s = self._senders[sender]
        del self._by_hash[e.hash]
        del s.by_nonce[n]
        self._bytes -= e.size
        nonces = s.nonces
        if nonces[-1] == n:
            nonces.pop()
            if not nonces:
                del self._senders[sender]
            else:
                self._push_candidate(s.by_nonce[nonces[-1]])
        else:
            del nonces[bisect_left(nonces, n)]
