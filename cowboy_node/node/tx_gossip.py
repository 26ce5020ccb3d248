"""Transaction gossip between validators: batched on send, admitted off the consensus hot path on receive.

Every validator may lead the next view, so each must hold the transactions the others admitted from RPC. One
peer message per transaction (the old way) put thousands of messages in each peer's send queue ahead of votes,
spent the receivers' per-peer message budget, and admitted every transaction (signature recovery ≈ 50 µs) inline
in the peer callback, before the consensus messages behind it were handled: under a flood, finalization stalled.

**Send.** :meth:`TxGossip.add` appends an admitted transaction to a pending batch; the batch is broadcast on
``CH_TX_BATCH`` as one :class:`~cowboy_node.consensus.sync_messages.TxBatch` at most
:attr:`TxGossipConfig.flush_interval_s` after its first transaction, or at once when it reaches
``max_batch_txs`` transactions or ``max_batch_bytes`` bytes (so pending is bounded). The peer layer sends it in
its lowest class (after consensus and gossip, dropped first when a peer's queue is full).

**Receive.** :meth:`TxGossip.receive` (a batch) and :meth:`TxGossip.receive_single` (the old ``CH_TXS`` message,
still accepted) only decode the envelope and queue the transactions: at most ``max_received`` transactions and
``max_received_bytes`` bytes; beyond that the NEWEST are dropped (counted ``queue_full``: the older ones carry the
lower nonces). One task admits the queue in slices of ``slice_txs``, their signers recovered by the signature
pool when the node has one, and yields to the event loop after every slice, so a consensus message waits for
at most one slice. A malformed batch or an invalid transaction changes nothing and is counted (``malformed``,
``rejected``); transactions are not forwarded again (full mesh).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cowboy_node.chain.signature_pool import PreparedOrUndecodable, SignaturePool
from cowboy_node.consensus.sync_messages import (
    CH_TX_BATCH,
    MAX_TX_BATCH_TXS,
    TxBatch,
    decode_tx_batch,
    encode_tx_batch,
)
from cowboy_node.observability.logging import get_logger
from cowboy_protocol.types.validation_errors import DecodeError

__all__ = ["RESULTS", "TxGossip", "TxGossipConfig"]

log = get_logger("cowboy.node")

RESULTS = ("sent", "batches_sent", "received", "admitted", "rejected", "malformed", "queue_full")
"""Counters of :meth:`TxGossip.stats` (transactions unless named batches; ``malformed`` counts messages)."""


@dataclass(frozen=True, slots=True)
class TxGossipConfig:
    """Bounds and timers of transaction gossip."""

    flush_interval_s: float = 0.05
    """A pending batch is sent at most this long after its first transaction. 50 ms (a tenth of a 500 ms block)
    rather than 5 ms: at ~1,300 transfers/s on 4 validators batches grow from ~7 to ~30 transactions, and the
    per-message peer and QUIC work per transfer drops (docs/performance.md, issue 33 §1: −12 % CPU per transfer
    with one transaction per ``/submit``). ``[p2p] tx_gossip_flush_ms`` sets it."""
    max_batch_txs: int = 512
    """A batch is sent as soon as it holds this many transactions (≤ MAX_TX_BATCH_TXS)."""
    max_batch_bytes: int = 512 * 1024
    """... or this many transaction bytes (well below the peer layer's message cap)."""
    max_received: int = 50_000
    """Received transactions waiting for admission, at most."""
    max_received_bytes: int = 32 * 1024 * 1024
    """Their bytes, at most."""
    slice_txs: int = 64
    """Transactions admitted between two yields to the event loop."""
    pool_batch_txs: int = 512
    """Transactions sent to the signature pool at once (when the node has one), then admitted slice by slice."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_batch_txs <= MAX_TX_BATCH_TXS:
            raise ValueError(f"max_batch_txs must be in 1..{MAX_TX_BATCH_TXS}")
        if min(self.slice_txs, self.max_received, self.pool_batch_txs) < 1:
            raise ValueError("slice_txs, pool_batch_txs and max_received must be ≥ 1")


Broadcast = Callable[[int, bytes], int]
"""``(channel, payload) -> peers queued to`` (the peer layer's ``broadcast``)."""
Admit = Callable[[bytes, PreparedOrUndecodable], str | None]
"""Admit one transaction (its signer recovered by the pool, or None); None when admitted, else the error code."""


class TxGossip:
    """The batching sender and the bounded, sliced receiver of one validator; see the module docstring."""

    def __init__(self, *, broadcast: Callable[[], Broadcast | None], admit: Admit,
                 pool: Callable[[], SignaturePool | None] = lambda: None,
                 max_body: Callable[[], int | None] = lambda: None, config: TxGossipConfig = TxGossipConfig(),
                 on_count: Callable[[str, int], None] | None = None) -> None:
        """``broadcast``/``pool``/``max_body`` are read when needed (the peer layer starts after the node);
        ``on_count(result, n)`` mirrors :meth:`stats` into metrics."""
        self.config = config
        self._broadcast = broadcast
        self._admit = admit
        self._pool = pool
        self._max_body = max_body
        self._on_count = on_count
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._received: deque[bytes] = deque()
        self._received_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._stats = dict.fromkeys(RESULTS, 0)

    # --- send -------------------------------------------------------------------------------------------

    def add(self, tx_bytes: bytes) -> None:
        """Gossip a transaction this validator admitted (from RPC); a no-op without peers. On the event loop."""
        if self._closed or self._broadcast() is None:
            return
        self._pending.append(tx_bytes)
        self._pending_bytes += len(tx_bytes)
        cfg = self.config
        if len(self._pending) >= cfg.max_batch_txs or self._pending_bytes >= cfg.max_batch_bytes:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(cfg.flush_interval_s, self.flush)

    def flush(self) -> None:
        """Broadcast the pending batch now (if any)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        txs, self._pending, self._pending_bytes = self._pending, [], 0
        broadcast = self._broadcast()
        if not txs or broadcast is None:
            return
        broadcast(CH_TX_BATCH, encode_tx_batch(TxBatch(tuple(txs))))
        self._count("sent", len(txs))
        self._count("batches_sent", 1)

    # --- receive ----------------------------------------------------------------------------------------

    def receive(self, sender: int, payload: bytes) -> None:
        """A TxBatch from validator ``sender``: queue its transactions for admission (a malformed one is counted
        and changes nothing)."""
        try:
            batch = decode_tx_batch(payload)
        except DecodeError as e:
            self._count("malformed", 1)
            log.debug("malformed tx batch", sender=sender, error=str(e))
            return
        self._queue(batch.txs)

    def receive_single(self, tx_bytes: bytes) -> None:
        """The old one-transaction message (``CH_TXS``, raw transaction bytes)."""
        self._queue((tx_bytes,))

    def _queue(self, txs: tuple[bytes, ...]) -> None:
        if self._closed:
            return
        cfg, q = self.config, self._received
        self._count("received", len(txs))
        dropped = 0
        for tx in txs:
            if len(q) >= cfg.max_received or self._received_bytes + len(tx) > cfg.max_received_bytes:
                dropped += 1
                continue
            q.append(tx)
            self._received_bytes += len(tx)
        if dropped:
            self._count("queue_full", dropped)
        if q and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="tx-gossip-admit")

    @property
    def backlog(self) -> int:
        """Received transactions not admitted yet."""
        return len(self._received)

    async def _drain(self) -> None:
        q, cfg = self._received, self.config
        while q and not self._closed:
            pool = self._pool()
            batch = [q.popleft() for _ in range(min(cfg.pool_batch_txs if pool else cfg.slice_txs, len(q)))]
            self._received_bytes -= sum(len(t) for t in batch)
            prepared: list[PreparedOrUndecodable] | None = None
            if pool is not None:
                try:
                    prepared = await pool.recover_async(batch, self._max_body())
                except Exception:  # closed or broken pool: admission recovers in-process, same decision
                    prepared = None
            for start in range(0, len(batch), cfg.slice_txs):
                if self._closed:
                    return
                admitted = rejected = 0
                for i in range(start, min(start + cfg.slice_txs, len(batch))):
                    try:
                        code = self._admit(batch[i], prepared[i] if prepared is not None else None)
                    except Exception:  # a bug in admission must not end gossip for the life of the process
                        log.exception("gossiped transaction admission raised")
                        code = "internal_error"
                    if code is None:
                        admitted += 1
                    else:
                        rejected += 1
                self._count("admitted", admitted)
                self._count("rejected", rejected)
                await asyncio.sleep(0)  # consensus messages that arrived meanwhile run now

    def close(self) -> None:
        """Stop: drop pending and queued transactions, cancel the timer and the admission task; idempotent."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()
        self._received.clear()
        self._received_bytes = 0
        if self._task is not None and not self._task.done():
            with contextlib.suppress(RuntimeError):  # its loop is already closed
                self._task.cancel()

    def stats(self) -> dict[str, int]:
        """Counters (see :data:`RESULTS`), a copy."""
        return dict(self._stats)

    def _count(self, key: str, n: int) -> None:
        if n:
            self._stats[key] += n
            if self._on_count is not None:
                self._on_count(key, n)
