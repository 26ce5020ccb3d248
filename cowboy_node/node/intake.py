"""The node's transaction intake: RPC submissions, runners' result transactions and gossiped transactions, all
admitted to the mempool the same way (``chain/admission.py``) and appended to the mempool journal.

:class:`AdmissionWorkers` owns the signature pool (``[mempool] admission_workers``) shared by the RPC path and the
gossip path; :func:`admit_gossiped` is the gossip path's admission; :class:`TxIntake` the RPC and runner path
(which also hands each admitted transaction to the transaction gossip).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from cowboy_node.chain.admission import admit, head_context
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolError
from cowboy_node.chain.mempool_journal import MempoolJournal
from cowboy_node.chain.signature_batcher import SignatureBatcher
from cowboy_node.chain.signature_pool import Prepared, SignaturePool
from cowboy_node.execution.validity_errors import TxInvalid
from cowboy_node.node.tx_gossip import TxGossip
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.submit_batch import item_error
from cowboy_protocol.types.validation_errors import ValidationError

log = get_logger("cowboy.node")

BATCH_SLICE = 64
"""Transactions of one ``POST /submit/batch`` admitted between two returns to the event loop."""


class AdmissionWorkers:
    """The worker processes recovering submissions' signers (None workers: everything in-process)."""

    def __init__(self, workers: int, pool: SignaturePool | None = None) -> None:
        self.pool: SignaturePool | None = pool if pool is not None else SignaturePool(workers) if workers else None
        """Worker processes recovering RPC submissions' signers (``[mempool] admission_workers``; None:
        in-process; ``pool``: one made elsewhere, tests). Workers start on the first submission; :meth:`close` stops
        them."""
        self.batcher: SignatureBatcher | None = None
        """Groups one loop iteration's submissions into one batch for the pool (made on first use)."""

    def batcher_for(self, pool: SignaturePool) -> SignatureBatcher:
        """The batcher over ``pool`` (made on first use)."""
        if self.batcher is None:
            self.batcher = SignatureBatcher(pool)
        return self.batcher

    def current(self) -> SignaturePool | None:
        """The pool while open (None once closed or when not configured)."""
        return self.pool

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        pool, self.pool, self.batcher = self.pool, None, None
        if pool is not None:
            pool.close()


def admit_gossiped(chain: Chain, mempool: Mempool, journal: MempoolJournal | None, tx_bytes: bytes,
                   prepared: Prepared | None) -> str | None:
    """Admit one gossiped transaction here too (not forwarded again: full mesh); None, or the error code."""
    try:
        admit(tx_bytes, chain, mempool, prepared=prepared)
    except (TxInvalid, MempoolError, ValidationError) as e:
        return e.code
    if journal is not None:
        journal.append(tx_bytes)
    return None


class TxIntake:
    """``POST /submit`` and runners' result transactions (``TransportLink.forward_transaction``)."""

    def __init__(self, chain: Chain, mempool: Mempool, *, journal: MempoolJournal | None, gossip: TxGossip,
                 workers: AdmissionWorkers, metrics: NodeMetrics, stopping: Callable[[], bool]) -> None:
        self._chain = chain
        self._mempool = mempool
        self.journal = journal
        """The on-disk journal of the pool's transactions (``[mempool] journal``; None: off); admission appends
        to it and every block commit syncs it."""
        self._gossip = gossip
        self._workers = workers
        self._metrics = metrics
        self._stopping = stopping

    def submit_transaction(self, tx_bytes: bytes, prepared: Prepared | None = None) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`; ``prepared``: decoded and recovered elsewhere."""
        if self._stopping():
            raise RpcError(503, "shutting_down", "node is shutting down")
        metrics = self._metrics
        try:
            tx = admit(tx_bytes, self._chain, self._mempool, prepared=prepared)
        except (TxInvalid, MempoolError, ValidationError) as e:
            metrics.txs_rejected.labels(code=e.code).inc()
            if e.code in ("mempool_full", "queued_full") and metrics.mempool_refused_full():
                pool = self._mempool  # rate-limited: one line every few seconds however many are refused
                log.warning("mempool full", code=e.code, txs=len(pool), pending=pool.pending_count,
                            queued=pool.queued_count, bytes=pool.size_bytes, max_txs=pool.config.max_txs,
                            max_queued=pool.config.max_queued, evicted=dict(pool.evicted))
            raise RpcError(400, e.code, e.message) from None
        if self.journal is not None:
            self.journal.append(tx_bytes)  # written with the next block's journal sync
        self._gossip.add(tx_bytes)  # every validator may lead the next view: each must have the transaction
        metrics.observe_mempool(self._mempool)
        return {"tx_hash": "0x" + tx.tx_hash().hex(), "status": "pending"}

    async def submit_transaction_async(self, tx_bytes: bytes) -> dict[str, Any]:
        """:meth:`submit_transaction`, the signer recovered by the signature pool first when there is one
        (submissions of one loop iteration share a batch); same answers and errors as without the pool."""
        workers = self._workers
        pool = workers.pool
        if pool is None or self._stopping():
            return self.submit_transaction(tx_bytes)
        prepared = await workers.batcher_for(pool).prepare(tx_bytes, head_context(self._chain).ctx.limits.max_tx_bytes)
        return self.submit_transaction(tx_bytes, prepared)

    async def submit_batch_async(self, txs: list[bytes]) -> list[dict[str, Any]]:
        """``POST /submit/batch``: each of ``txs`` admitted in order, as :meth:`submit_transaction_async` would
        admit it at that moment; one answer each, ``{"tx_hash", "status"}`` or ``{"error": {"code", "message"}}``.

        With a signature pool every signer is recovered first, all in one pool batch. Admission then runs in
        order on the event loop, giving the loop back every :data:`BATCH_SLICE` transactions so that a large
        batch (in-process recovery is ≈ 70 µs each) does not hold consensus and other requests up for its whole
        length. Raises RpcError 503 ``shutting_down`` when the node is stopping before the first is admitted.
        """
        if self._stopping():
            raise RpcError(503, "shutting_down", "node is shutting down")
        workers = self._workers
        pool = workers.pool
        prepared: list[Any] = [None] * len(txs)
        if pool is not None:
            batcher = workers.batcher_for(pool)
            max_body = head_context(self._chain).ctx.limits.max_tx_bytes
            prepared = list(await asyncio.gather(*(batcher.prepare(raw, max_body) for raw in txs)))
        results: list[dict[str, Any]] = []
        for i, raw in enumerate(txs):
            if i and i % BATCH_SLICE == 0:
                await asyncio.sleep(0)
            try:
                results.append(self.submit_transaction(raw, prepared[i]))
            except RpcError as e:
                results.append(item_error(e))
        return results
