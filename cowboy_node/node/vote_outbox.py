"""The consensus service's ordered outbox: the engine's outputs acted on in order, the durable writes off the loop.

Why (issue 36 §2): a vote's journal fsync and the synced store write that keeps an own proposal each wait 100 ms
to 1.8 s on a slow disk. Done on the event loop, nothing else is served meanwhile: not the peers' votes, not RPC,
not subscriptions (most late blocks of ``bench/subscriptions.py`` were these waits, ``bench/node_loop_probe.py``).

The rule kept (a validator's safety invariant, ``docs/consensus.md`` "Vote journal and the double-sign guard"):
the engine's outputs are acted on in exactly the order it produced them, within one list and across calls, and
nothing after a ``Journal`` output is acted on before that vote is durable. So a vote's ``Broadcast`` never
leaves before its journal write returned; after a failed write nothing more is acted on; a crash between the
write and the send leaves a journaled vote that was never sent (safe: the restarted engine knows it signed it),
never a sent vote the journal lacks.

How: :meth:`OrderedOutbox.push` appends the outputs to one FIFO and acts on them at once, up to the first
``Journal`` whose vote is not durable yet. There the votes of *every* ``Journal`` queued at that moment are
written with one fsync (group commit: journaling a later vote early only makes it durable sooner than needed; its
send still waits for its turn in the FIFO) on a single writer thread (one thread: writes stay in order, and the
journal is only ever touched by it). The FIFO waits; outputs of later calls queue behind it. When the write
returns, its done callback (on the loop) resumes acting on the FIFO. Other durable work goes to the same thread:
the proposal's store write (:meth:`OrderedOutbox.run`, awaited before the engine is told of the proposal, so its
block is durable before its vote is even signed) and journal compaction (:meth:`OrderedOutbox.background`).

Why not one drain task consuming a queue: acting inline up to the first pending write keeps the common case (no
vote of ours in the list: peers' votes, certificates, timers) exactly as immediate as before, callers still see
those effects when ``push`` returns, and there is no task to start, cancel and restart with the service.

Without a running event loop (the engine driven by hand in unit tests) the writes are done inline, in the same
order and with the same grouping. :meth:`OrderedOutbox.stop` drops what is queued and refuses more (at shutdown:
a vote queued behind a write is not sent; one journaled and not sent is safe); :meth:`OrderedOutbox.close` also
waits for the write in flight, so the caller may close the journal after it.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
from collections.abc import Callable
from typing import TypeVar

from cowboy_node.consensus.journal import JournalWriteError, VoteJournal
from cowboy_node.consensus.simplex.engine import Journal, Output
from cowboy_node.consensus.simplex.types import Vote

T = TypeVar("T")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class OrderedOutbox:
    """Acts on the engine's outputs in order; every ``Journal`` vote durable (off the loop) before what follows it.

    ``journal`` returns the vote journal (None: no journal, ``Journal`` outputs are no-ops); ``act`` acts on one
    output that is not a ``Journal``; ``halted`` is true once the validator stopped on a journal error (nothing
    more is acted on); ``failed`` is told of a failed write; ``journaling`` is told of each vote as its write
    starts; ``resumed`` is called after outputs were acted on from a write's completion (not from :meth:`push`,
    whose caller does its own follow-up)."""

    def __init__(self, *, journal: Callable[[], VoteJournal | None], act: Callable[[Output], None],
                 halted: Callable[[], bool], failed: Callable[[JournalWriteError], None],
                 journaling: Callable[[Vote], None], resumed: Callable[[], None]) -> None:
        self._journal = journal
        self._act = act
        self._halted = halted
        self._failed = failed
        self._journaling = journaling
        self._resumed = resumed
        self._queue: collections.deque[Output] = collections.deque()
        self._durable_ahead = 0
        """How many of the first ``Journal`` outputs in the queue are already durable (written by the last group
        commit, which took every ``Journal`` queued then; the queue only grows at its tail)."""
        self._writing: asyncio.Future[None] | None = None
        """The journal write in flight (the queue waits for it)."""
        self._acting = False
        self._stopped = False
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="vote-journal")

    @property
    def pending(self) -> int:
        """Outputs queued, not acted on yet."""
        return len(self._queue)

    @property
    def writing(self) -> bool:
        """True while a journal write is in flight (everything queued waits for it)."""
        return self._writing is not None

    def push(self, outputs: list[Output]) -> None:
        """Queue ``outputs`` behind any earlier ones and act on as many as the durable writes allow."""
        if self._stopped:
            return
        self._queue.extend(outputs)
        self._drain()

    async def flush(self) -> None:
        """Wait until every output queued so far was acted on (or dropped: a failed write, :meth:`stop`)."""
        while self._writing is not None:
            # asyncio.wait neither raises the write's error (its callback handles it) nor cancels the write when
            # this task is cancelled; the write's done callback (registered first) has run when it returns
            await asyncio.wait([self._writing])

    async def run(self, fn: Callable[[], T]) -> T:
        """Run durable work ``fn`` on the writer thread (after the writes submitted before it) and return its
        result; it completes even if the caller is cancelled."""
        return await asyncio.shield(asyncio.get_running_loop().run_in_executor(self._writer, fn))

    def background(self, fn: Callable[[], None]) -> None:
        """Run journal maintenance ``fn`` (compaction) on the writer thread, in turn with the writes; a
        :class:`JournalWriteError` it raises is reported like a failed write. Inline without a running loop."""
        loop = _running_loop()
        if loop is None:
            try:
                fn()
            except JournalWriteError as e:
                self._fail(e)
            return
        if self._stopped:
            return
        fut = loop.run_in_executor(self._writer, fn)
        fut.add_done_callback(self._background_done)

    def stop(self) -> None:
        """Drop what is queued and act on nothing more (idempotent). A write in flight still completes."""
        self._stopped = True
        self._queue.clear()
        self._durable_ahead = 0

    def close(self) -> None:
        """:meth:`stop`, then wait for the writer thread to finish what it runs (idempotent)."""
        self.stop()
        self._writer.shutdown(wait=True)

    # ------------------------------------------------------------------------------------------ internals

    def _drain(self) -> None:
        if self._acting:  # re-entered from an output's action: the outer loop goes on, in order
            return
        self._acting = True
        try:
            while self._queue and self._writing is None:
                if self._stopped or self._halted():
                    self._queue.clear()
                    self._durable_ahead = 0
                    return
                o = self._queue[0]
                if isinstance(o, Journal):
                    journal = self._journal()
                    if journal is not None and self._durable_ahead == 0:
                        if not self._write(journal):
                            return  # in flight (resumed by its callback) or failed (queue dropped)
                        continue
                    self._queue.popleft()
                    self._durable_ahead = max(0, self._durable_ahead - 1)
                    continue
                self._queue.popleft()
                self._act(o)
        finally:
            self._acting = False

    def _write(self, journal: VoteJournal) -> bool:
        """Write every queued ``Journal`` vote with one fsync. True when done inline (go on), False when it is in
        flight or failed."""
        votes = [o.vote for o in self._queue if isinstance(o, Journal)]
        for vote in votes:
            self._journaling(vote)
        loop = _running_loop()
        if loop is None:
            try:
                journal.append_many(votes)
            except JournalWriteError as e:
                self._fail(e)
                return False
            self._durable_ahead = len(votes)
            return True
        fut = loop.run_in_executor(self._writer, journal.append_many, votes)
        self._writing = fut
        fut.add_done_callback(functools.partial(self._written, len(votes), journal))
        return False

    def _written(self, count: int, journal: VoteJournal, fut: asyncio.Future[None]) -> None:
        self._writing = None
        error = _write_error(journal, fut)
        if error is not None:
            self._fail(error)
            return
        if self._stopped:
            return
        self._durable_ahead = count
        self._drain()
        self._resumed()

    def _background_done(self, fut: asyncio.Future[None]) -> None:
        journal = self._journal()
        if journal is not None:
            error = _write_error(journal, fut)
            if error is not None:
                self._fail(error)

    def _fail(self, error: JournalWriteError) -> None:
        self._queue.clear()
        self._durable_ahead = 0
        self._failed(error)


def _write_error(journal: VoteJournal, fut: asyncio.Future[None]) -> JournalWriteError | None:
    """The error of a finished write (anything but a :class:`JournalWriteError`, or a cancelled write, counts as
    one: the vote may not be durable, so it must not leave)."""
    if fut.cancelled():
        return JournalWriteError(journal.path, "journal write cancelled")
    exc = fut.exception()
    if exc is None:
        return None
    if isinstance(exc, JournalWriteError):
        return exc
    return JournalWriteError(journal.path, f"journal write failed unexpectedly: {exc!r}")


__all__ = ["OrderedOutbox"]
