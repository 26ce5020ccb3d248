"""What follows each committed block, in order: the mempool (committed and permanently refused transactions
out, queued ones expired, the journal synced), the runners' pushes (CIP-11 §10.1: only once the block is final
and applied), presence and endpoint announcements, metrics and the log line, pruning and snapshots, the halt
height, and the subscription hub."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool
from cowboy_node.chain.mempool_journal import MempoolJournal
from cowboy_node.consensus.stop import StopSignal
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.transactions import INTERNAL_ERROR
from cowboy_node.node.consensus_service import CommittedBlock
from cowboy_node.node.peer_gossip import ValidatorGossip
from cowboy_node.node.pruner import Pruner
from cowboy_node.node.snapshotter import Snapshotter
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.rpc.event_queries import count_terminal

log = get_logger("cowboy.node")

_PERMANENT = frozenset({"nonce_too_low", "insufficient_funds", "bad_signature", "wrong_chain_id", "tx_too_large",
                        "cycles_limit_too_high", "cells_limit_too_high", "limits_below_intrinsic",
                        "priority_fee_above_max", INTERNAL_ERROR})
"""Rejections that cannot become valid later: drop the transaction from the pool."""


class CommitPush(Protocol):
    """What the runner transport needs after a commit (``TransportService`` implements it)."""

    def on_block_committed(self, jobs_assigned: Iterable[bytes], jobs_finished: Iterable[bytes]) -> None:
        """Push the block's new assignments to their runners; forget the finished jobs."""


def account_nonces(chain: Chain) -> Callable[[bytes], int]:
    """Account nonces at the committed head, each read once."""
    world = chain.world()
    cache: dict[bytes, int] = {}

    def nonce(addr: bytes) -> int:
        if addr not in cache:
            cache[addr] = get_account(world, addr).nonce
        return cache[addr]

    return nonce


class CommitFollower:
    """The consensus service's ``on_commit`` (see the module docstring)."""

    def __init__(self, chain: Chain, mempool: Mempool, *, journal: MempoolJournal | None, push: CommitPush | None,
                 gossip: ValidatorGossip, metrics: NodeMetrics, pruner: Pruner, snapshotter: Snapshotter | None,
                 stop: StopSignal, listeners: Sequence[Callable[[int], None]] = ()) -> None:
        self._chain = chain
        self._mempool = mempool
        self._journal = journal
        self._push = push
        self._gossip = gossip
        self._metrics = metrics
        self._pruner = pruner
        self._snapshotter = snapshotter
        self._stop = stop
        self.listeners = tuple(listeners)
        """Called with the height after each commit, on the event loop (the RPC's subscription hub: they must
        return at once)."""
        self._last_commit_monotonic: float | None = None
        self.halted = False
        """Set once the block at ``chain.halt_height`` is committed (the node then stops and exits 0)."""

    def after_commit(self, committed: CommittedBlock) -> None:
        """After a finalized block is committed: mempool, transport push, metrics and the log line."""
        prepared = committed.prepared
        block = prepared.block
        pool = self._mempool
        pool.remove_committed(block.transactions, account_nonces(self._chain))
        self._mempool_after_commit()
        if self._push is not None:  # push only once the assignment block is final and applied (CIP-11 §10.1)
            self._push.on_block_committed(prepared.result.jobs_assigned, prepared.result.jobs_finished)
        self._gossip.after_commit(block.header.height)
        for tx, err in prepared.result.rejected:
            if err.code in _PERMANENT:
                pool.remove(tx.tx_hash())
        self._record(committed)
        h = block.header
        self._pruner.after_commit(h.height)
        if self._snapshotter is not None:
            self._snapshotter.after_commit()
        halt = self._chain.halt_height
        if halt is not None and h.height >= halt and not self.halted:
            self.halted = True
            log.warning("halt height reached; stopping (exit 0): upgrade the binary, then start the node without "
                        "this halt height", height=h.height, halt_height=halt,
                        hash="0x" + block.hash().hex(), state_root="0x" + h.state_root.hex())
            self._stop.request()
        for listener in self.listeners:
            listener(h.height)

    def _record(self, committed: CommittedBlock) -> None:
        """Metrics and the log line of one committed block (recorded only now: a block that failed to build or
        commit adds nothing)."""
        prepared = committed.prepared
        block = prepared.block
        metrics = self._metrics
        for tx_hash, what in prepared.result.internal_errors:
            metrics.tx_internal_errors.inc()
            log.error("transaction failed with an internal error", tx_hash="0x" + tx_hash.hex(),
                      height=block.header.height, error=what)
        now = time.monotonic()
        interval = None if self._last_commit_monotonic is None else now - self._last_commit_monotonic
        self._last_commit_monotonic = now
        h = block.header
        metrics.observe_block(height=h.height, interval_s=interval, tx_count=len(block.transactions),
                              commit_s=committed.commit_s, execution_s=committed.execution_s,
                              basefee_cycles=h.cycle_basefee, basefee_cells=h.cell_basefee)
        metrics.observe_eob(prepared.result.eob)
        metrics.observe_presence_certificates(block.transactions, prepared.result.receipts)
        tx_events = (e for r in prepared.result.receipts for e in r.events)
        for reason, n in count_terminal(itertools.chain(tx_events, prepared.result.block_events)).items():
            metrics.timers_terminal.labels(reason=reason).inc(n)
        if committed.inspected is not None:
            jobs, steps = committed.inspected
            metrics.observe_eob_steps(steps)
            metrics.observe_jobs(jobs)
        metrics.observe_mempool(self._mempool)
        log.info("block committed", height=h.height, view=h.round.view, txs=len(block.transactions),
                 hash="0x" + block.hash().hex()[:16], own=committed.own,
                 exec_ms=round(committed.execution_s * 1000, 1), commit_ms=round(committed.commit_s * 1000, 1))

    def _mempool_after_commit(self) -> None:
        """After a block commit: expire old queued transactions, sync the mempool journal (compacting it once it
        holds more than twice the pool). A journal I/O error is logged, never stops the producer."""
        pool = self._mempool
        expired = pool.expire(time.monotonic())
        if expired:
            log.info("queued transactions expired", count=expired, queued=pool.queued_count)
        journal = self._journal
        if journal is None:
            return
        try:
            journal.sync()
            if journal.needs_compaction(pool.size_bytes):
                journal.compact(t.to_bytes() for t in pool.transactions())
        except OSError as e:
            log.error("mempool journal write failed", path=str(journal.path), error=str(e))
