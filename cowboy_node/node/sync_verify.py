"""Verifying sync answers: decode, shape, links, certificate and every transaction signature — in worker processes.

Issue 30 §3: checking one full block (1,200 transfers) costs about 35 ms to decode and 65–80 ms to recover its
signers, as much again as executing it. Done on the validator's own process, verification and execution share one
core (and the GIL), so a validator catches up no faster than it builds. A :class:`PageVerifier` with workers runs
:func:`verify_page` in ``spawn``ed processes (the node's other cores) and sends the verified, decoded page back
(unpickling costs about half of decoding it again); with ``workers = 0`` it runs in one thread of the node's process.

What a worker returns is a pure function of the message and the genesis group key (:func:`verify_page`), so which
worker verified a page, or whether one did, changes nothing but the time it took.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import multiprocessing
from dataclasses import dataclass

from cowboy_node.chain.signature_pool import exit_with_parent
from cowboy_node.consensus.simplex.scheme import Scheme, ThresholdScheme
from cowboy_node.consensus.simplex.types import Finalization, decode_message, finalize_message, seed_message
from cowboy_node.consensus.sync_messages import PackedPage, SyncPage, SyncResponse, unpack_page
from cowboy_node.execution.transactions import check_signature
from cowboy_node.execution.validity_errors import TxInvalid
from cowboy_node.types.block import Block
from cowboy_protocol.types.validation_errors import DecodeError

MAX_VERIFY_WORKERS = 16
"""Upper bound of ``[consensus] sync_verify_workers``."""


class PageRefused(Exception):
    """An answer that does not verify; ``reason`` is the metric label, the sender is at fault."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        """Raised in a worker process, re-raised in the node's (both fields survive)."""
        return (PageRefused, (self.reason, str(self)))


@dataclass(frozen=True, slots=True)
class VerifiedPage:
    """A decoded answer whose shape, links and certificate verified (built off the event loop)."""

    first: int
    """Height of its first block."""
    blocks: tuple[Block, ...]
    """Consecutive blocks from ``first``."""
    certified_height: int
    """Height of the block its certificate finalizes (≥ the last block's)."""
    certificate: Finalization
    """A finalization certificate verified under the group key."""
    size: int
    """Bytes of its encoded blocks."""
    block_sizes: tuple[int, ...] = ()
    """Bytes of each encoded block."""
    signatures_ok: frozenset[bytes] = frozenset()
    """Hashes of its transactions whose signature verified here (``execution.transactions.check_signature``), so
    the builder thread skips that check when it executes them."""


def verify_page(msg: SyncResponse | SyncPage, scheme: Scheme) -> VerifiedPage:
    """Decode and check one answer (raises :class:`PageRefused`); its first block's height says which request it
    answers (the caller checks that). Pure: runs in a thread or a worker process."""
    try:
        blocks = tuple(Block.decode(b) for b in msg.blocks)
        cert = decode_message(msg.finalization)
    except DecodeError as e:
        raise PageRefused("malformed", str(e)) from None
    first = blocks[0].header.height
    last = first + len(blocks) - 1
    certified = last if isinstance(msg, SyncResponse) else msg.certified_height
    if not isinstance(cert, Finalization):
        raise PageRefused("bad_certificate", "not a finalization")
    for i, b in enumerate(blocks):
        if b.header.height != first + i:
            raise PageRefused("bad_heights", f"block {i} has height {b.header.height}, not {first + i}")
    for a, b in itertools.pairwise(blocks):
        if b.header.parent_hash != a.hash():
            raise PageRefused("unlinked", f"block at {b.header.height} does not link to its predecessor")
    if certified < last:
        raise PageRefused("bad_certificate", "the certificate is below the run")
    p = cert.proposal
    if certified <= last:
        b = blocks[certified - first]
        if p.payload != b.hash() or p.round != b.header.round:
            raise PageRefused("bad_certificate", "the certificate does not finalize the run's block")
    if not scheme.verify_certificate(finalize_message(p), cert.signature) or \
            not scheme.verify_certificate(seed_message(p.round), cert.seed):
        raise PageRefused("bad_certificate", "the certificate does not verify")
    ok = set()
    for b in blocks:
        for tx in b.transactions:
            try:
                check_signature(tx)
            except TxInvalid:
                continue  # refused again, with its error, when the block is executed
            ok.add(tx.tx_hash())
    return VerifiedPage(first, blocks, certified, cert, sum(len(b) for b in msg.blocks),
                        tuple(len(b) for b in msg.blocks), frozenset(ok))


Answer = SyncResponse | SyncPage | PackedPage
"""What a SyncRequest is answered with."""


def verify_answer(msg: Answer, scheme: Scheme) -> VerifiedPage:
    """:func:`verify_page` of ``msg``, unpacked first when it is a PackedPage (whose declared first height and
    block count must be the page's). Pure: runs in a thread or a worker process."""
    if not isinstance(msg, PackedPage):
        return verify_page(msg, scheme)
    try:
        inner = unpack_page(msg)
    except DecodeError as e:
        raise PageRefused("malformed", str(e)) from None
    page = verify_page(inner, scheme)
    if page.first != msg.first_height:
        raise PageRefused("malformed", f"packed page declares height {msg.first_height}, holds {page.first}")
    return page


_WORKER_SCHEME: Scheme | None = None


def _worker_init(parts: tuple[bytes, tuple[bytes, ...], int]) -> None:
    global _WORKER_SCHEME
    exit_with_parent()
    _WORKER_SCHEME = ThresholdScheme(parts[0], parts[1], parts[2], None)


def _worker_verify(msg: Answer) -> VerifiedPage:
    assert _WORKER_SCHEME is not None, "worker initializer did not run"
    return verify_answer(msg, _WORKER_SCHEME)


class PageVerifier:
    """Runs :func:`verify_page` in ``workers`` processes (started on first use), or in one thread when ``workers``
    is 0 or the scheme is not a :class:`ThresholdScheme` (tests' schemes)."""

    def __init__(self, scheme: Scheme, workers: int) -> None:
        if not 0 <= workers <= MAX_VERIFY_WORKERS:
            raise ValueError(f"workers must be in 0..{MAX_VERIFY_WORKERS}, got {workers}")
        self._scheme = scheme
        self.workers = workers if isinstance(scheme, ThresholdScheme) else 0
        """Worker processes verifying pages (0: a thread of this process)."""
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sync-verify")
        self._procs: concurrent.futures.ProcessPoolExecutor | None = None

    def _processes(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._procs is None:
            assert isinstance(self._scheme, ThresholdScheme)
            self._procs = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init,
                initargs=(self._scheme.public_parts(),))
        return self._procs

    async def verify(self, msg: Answer) -> VerifiedPage:
        """The verified page, or raises :class:`PageRefused` (never blocks the event loop)."""
        loop = asyncio.get_running_loop()
        if self.workers:
            try:
                return await loop.run_in_executor(self._processes(), _worker_verify, msg)
            except concurrent.futures.process.BrokenProcessPool:
                self._procs = None  # a worker died (killed, out of memory): verify here, restart on next use
        scheme = self._scheme
        return await loop.run_in_executor(self._thread, lambda: verify_answer(msg, scheme))

    def close(self) -> None:
        """Stop the workers and the thread (verifications queued are cancelled)."""
        self._thread.shutdown(wait=True, cancel_futures=True)
        if self._procs is not None:
            self._procs.shutdown(wait=True, cancel_futures=True)
            self._procs = None


__all__ = ["MAX_VERIFY_WORKERS", "Answer", "PageRefused", "PageVerifier", "VerifiedPage", "verify_answer",
           "verify_page"]
