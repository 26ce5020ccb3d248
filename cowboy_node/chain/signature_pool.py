"""Signature recovery for admission in worker processes.

Recovering a transaction's signer (secp256k1, ≈ 50 µs) is the largest single cost of admitting a transfer and
needs no chain state, so a :class:`SignaturePool` does it for batches of ``tx_bytes`` in a
``ProcessPoolExecutor`` while the node's own process admits, executes and commits. A worker also decodes the
transaction and hashes its body (:class:`Prepared`), which the node's process would otherwise do again
(unpickling the decoded transaction costs it about a third of decoding it). What a worker returns is a pure
function of the bytes it was given (:func:`prepare_batch`); the admission decision itself — static checks,
nonce, balance, the mempool's rules — stays in the caller's process (``chain/admission.py``), which checks that
the decoded body is the one it was given and compares the recovered address with the sender. So the
accept/reject decision, its error code and message, and every block built from the pool do not depend on which
worker recovered what, or whether one did.

Bounded: at most ``max_inflight`` batches are queued to the workers; :meth:`SignaturePool.submit` beyond that
recovers in the calling process instead of queueing more (never an unbounded backlog, never a refusal).
``workers = 0`` recovers in-process (no child processes).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from cowboy_node.execution.transfer_tx import decode_transfer, recover_signer
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

Recovered = bytes | tuple[str, str]
"""Result for one transaction: the recovered 20-byte address, or ``(code, message)`` of the
:class:`ValidationError` :meth:`Transaction.recover_sender` raised."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a worker computed for one ``tx_bytes`` that decodes."""

    tx: Transaction
    """``Transaction.from_bytes(tx_bytes)`` (its cached body is the body of ``tx_bytes``)."""
    tx_hash: bytes
    """``tx.tx_hash()``."""
    recovered: Recovered
    """The signer, or the recovery error."""

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickled (worker -> node) as plain fields for a Transfer: unpickling a dataclass field by field cost the
        node's process about 18 µs per transaction, rebuilding it from a tuple about 5."""
        tx = self.tx
        ins = tx.instruction
        if type(ins) is not Transfer:
            return (Prepared, (tx, self.tx_hash, self.recovered))
        return (_transfer_prepared, (tx.chain_id, tx.nonce, tx.sender, ins.to, ins.amount, tx.cycles_limit,
                                     tx.cells_limit, tx.max_fee_per_cycle, tx.max_priority_fee_per_cycle,
                                     tx.max_fee_per_cell, tx.max_priority_fee_per_cell, tx.signature, tx.body(),
                                     self.tx_hash, self.recovered))


def _transfer_prepared(chain_id: str, nonce: int, sender: bytes, to: bytes, amount: int, cycles_limit: int,
                       cells_limit: int, max_fee_per_cycle: int, max_priority_fee_per_cycle: int,
                       max_fee_per_cell: int, max_priority_fee_per_cell: int, signature: bytes, body: bytes,
                       tx_hash: bytes, recovered: Recovered) -> Prepared:
    """Unpickle a :class:`Prepared` Transfer (the same fields and cached body it was pickled with)."""
    return Prepared(Transaction(chain_id, nonce, sender, Transfer(to, amount), cycles_limit, cells_limit,
                                max_fee_per_cycle, max_priority_fee_per_cycle, max_fee_per_cell,
                                max_priority_fee_per_cell, signature, body), tx_hash, recovered)


PreparedOrUndecodable = Prepared | None
"""``None``: the bytes do not decode (admission's own decode then raises the error it always did)."""

MAX_WORKERS = 64
"""Largest accepted pool size (the ``mempool.admission_workers`` config range)."""


def prepare_one(tx_bytes: bytes, max_body: int | None = None) -> PreparedOrUndecodable:
    """Decode ``tx_bytes``, hash it and recover its signer (what admission computes before its state checks).

    A Transfer takes the fast paths of ``execution/transfer_tx.py`` (same transaction, same signer or error).
    """
    tx = decode_transfer(tx_bytes, max_body)
    if tx is None:
        try:
            tx = Transaction.from_bytes(tx_bytes, max_body=max_body)
        except (DecodeError, ValidationError):
            return None
    try:
        recovered: Recovered = recover_signer(tx)
    except ValidationError as e:
        recovered = (e.code, e.message)
    return Prepared(tx, tx.tx_hash(), recovered)


def prepare_batch(batch: Sequence[bytes], max_body: int | None = None) -> list[PreparedOrUndecodable]:
    """:func:`prepare_one` for each item, in order (the function the workers run)."""
    return [prepare_one(b, max_body) for b in batch]


def _warm() -> int:
    return 0


def exit_with_parent() -> None:
    """Worker initializer: exit when the node's process is gone, even killed with SIGKILL (a worker blocked on
    its task queue would otherwise wait forever: it holds that queue's write end itself)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class SignaturePool:
    """Recovers transaction signers in ``workers`` processes (or in-process when ``workers == 0``)."""

    def __init__(self, workers: int, *, max_inflight: int = 64) -> None:
        """Start the workers (``spawn``: a forked child would inherit the node's threads and open files)."""
        if not 0 <= workers <= MAX_WORKERS:
            raise ValueError(f"workers must be in 0..{MAX_WORKERS}, got {workers}")
        if max_inflight < 1:
            raise ValueError(f"max_inflight must be ≥ 1, got {max_inflight}")
        self.workers = workers
        self.max_inflight = max_inflight
        self._lock = threading.Lock()
        self._inflight = 0
        self._closed = False
        self._executor: ProcessPoolExecutor | None = None
        if workers:
            self._executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=exit_with_parent)

    def warm_up(self) -> None:
        """Start every worker now (the executor starts processes lazily) and wait until each answered."""
        if self._executor is not None:
            for f in [self._executor.submit(_warm) for _ in range(self.workers)]:
                f.result()

    @property
    def inflight(self) -> int:
        """Batches queued to or running in the workers."""
        return self._inflight

    def submit(self, batch: Sequence[bytes], max_body: int | None = None) -> Future[list[PreparedOrUndecodable]]:
        """Recover a batch; in-process (already done) when there are no workers or ``max_inflight`` are busy.

        ``max_body``: a body longer than this is not decoded (``None`` for it; admission refuses it anyway).
        """
        items = list(batch)
        with self._lock:
            if self._closed:
                raise RuntimeError("signature pool is closed")
            queued = self._executor is not None and self._inflight < self.max_inflight
            if queued:
                self._inflight += 1
        if not queued or self._executor is None:
            done: Future[list[PreparedOrUndecodable]] = Future()
            done.set_result(prepare_batch(items, max_body))
            return done
        fut = self._executor.submit(prepare_batch, items, max_body)
        fut.add_done_callback(self._finished)
        return fut

    def _finished(self, _: object) -> None:
        with self._lock:
            self._inflight -= 1

    def recover(self, batch: Sequence[bytes], max_body: int | None = None) -> list[PreparedOrUndecodable]:
        """:meth:`submit` and wait."""
        return self.submit(batch, max_body).result()

    async def recover_async(self, batch: Sequence[bytes],
                            max_body: int | None = None) -> list[PreparedOrUndecodable]:
        """:meth:`submit` and await without blocking the event loop."""
        return await asyncio.wrap_future(self.submit(batch, max_body))

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (empty in-process)."""
        ex = self._executor
        procs = getattr(ex, "_processes", None) if ex is not None else None
        return sorted(procs) if procs else []

    def close(self) -> None:
        """Stop the workers and wait for them to exit (queued batches are cancelled); idempotent."""
        with self._lock:
            self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
