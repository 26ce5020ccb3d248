"""Gathers the transactions submitted in one event-loop iteration into one signature-pool batch.

A round trip to a worker process has a fixed cost in the node's process (pickling, a pipe, a thread hand-off),
so transactions should travel in batches, and RPC submissions arrive one per request. Every
:meth:`SignatureBatcher.prepare` call made before the loop next runs its callbacks joins the same batch (at most
``max_batch``), so a quiet node sends batches of one and a busy one sends large batches, with no added wait
either way. If the pool fails (a worker died), every caller of that batch gets ``None`` and admission decodes
and recovers in-process: the same decision either way.
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import Future

from cowboy_node.chain.signature_pool import PreparedOrUndecodable, SignaturePool

_Waiter = tuple[bytes, "asyncio.Future[PreparedOrUndecodable]"]


class SignatureBatcher:
    """Batches :meth:`prepare` calls of one event loop onto a :class:`SignaturePool`."""

    def __init__(self, pool: SignaturePool, *, max_batch: int = 512) -> None:
        """``max_batch``: a batch is sent as soon as it holds this many transactions."""
        self.pool = pool
        self.max_batch = max_batch
        self._pending: list[_Waiter] = []
        self._max_body: int | None = None
        self._scheduled = False
        self.batches = 0
        """Batches sent so far."""

    async def prepare(self, tx_bytes: bytes, max_body: int | None = None) -> PreparedOrUndecodable:
        """``tx_bytes`` decoded, hashed and its signer recovered, as
        :func:`~cowboy_node.chain.signature_pool.prepare_one` gives it (or ``None``)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[PreparedOrUndecodable] = loop.create_future()
        self._pending.append((tx_bytes, waiter))
        self._max_body = max_body
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await waiter

    def _flush(self) -> None:
        self._scheduled = False
        items, self._pending = self._pending, []
        if not items:
            return
        self.batches += 1
        try:
            done = self.pool.submit([raw for raw, _ in items], self._max_body)
        except Exception:  # closed or broken pool: admission recovers in-process
            self._resolve(items, None)
            return
        loop = items[0][1].get_loop()

        def back_to_loop(f: Future[list[PreparedOrUndecodable]]) -> None:  # runs in the pool's thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(self._deliver, items, f)

        done.add_done_callback(back_to_loop)

    def _deliver(self, items: list[_Waiter], done: Future[list[PreparedOrUndecodable]]) -> None:
        try:
            results: list[PreparedOrUndecodable] = done.result()
        except Exception:
            self._resolve(items, None)
            return
        for (_, waiter), result in zip(items, results, strict=True):
            if not waiter.done():  # a caller that gave up (client went away) is skipped
                waiter.set_result(result)

    @staticmethod
    def _resolve(items: list[_Waiter], value: PreparedOrUndecodable) -> None:
        for _, waiter in items:
            if not waiter.done():
                waiter.set_result(value)
