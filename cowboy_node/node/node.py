"""The running validator: the parts wired together, and the RPC facade.

One asyncio process. The consensus service (:mod:`cowboy_node.node.consensus_service`) drives the
threshold-Simplex engine: when this validator leads a view it takes the ready transactions from the mempool
and builds the block in a worker thread (the event loop keeps serving RPC); blocks are committed once
finalized, each in one synced batch, and the node then updates the mempool, pushes assignments and records
metrics. With one validator every proposed block is final at once; with several, blocks and votes travel
over the validator peer layer. Stopping (SIGTERM/SIGINT) lets the block in progress finish and commit, then
closes the servers and the store.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cowboy_node.chain.admission import admit, head_context
from cowboy_node.chain.blockstore import STATE_PREFIX, TREE_PREFIX
from cowboy_node.chain.candidates import candidate_limit
from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.chain.mempool import Mempool, MempoolError
from cowboy_node.chain.mempool_journal import MempoolJournal
from cowboy_node.chain.signature_batcher import SignatureBatcher
from cowboy_node.chain.signature_pool import Prepared, SignaturePool
from cowboy_node.consensus.journal import VoteJournal
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.sync_messages import CH_TX_BATCH
from cowboy_node.crypto import bls, threshold
from cowboy_node.execution.actors.actor_state import kv_key
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.execution.meter import InterruptHandle
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.execution.system_state import get_account, get_basefees, get_cip11_flags
from cowboy_node.execution.transactions import INTERNAL_ERROR
from cowboy_node.execution.validity_errors import TxInvalid
from cowboy_node.node.consensus_service import CommittedBlock, ConsensusService, ServiceConfig
from cowboy_node.node.keys import ValidatorKey
from cowboy_node.node.proposal_budget import ProposalBudget
from cowboy_node.node.pruner import Pruner
from cowboy_node.node.snapshot_server import SnapshotServer
from cowboy_node.node.snapshotter import Snapshotter
from cowboy_node.node.statesync_fallback import FallbackTrigger
from cowboy_node.node.transport_link import TransportLink
from cowboy_node.node.tx_gossip import TxGossip
from cowboy_node.observability.job_activity import JobActivity, block_job_activity
from cowboy_node.observability.logging import get_logger
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.p2p.endpoint_gossip import (
    CH_ENDPOINTS,
    EndpointBook,
    EndpointRefused,
    make_endpoint_announcement,
)
from cowboy_node.p2p.peer_frames import PROTOCOL_VERSION as P2P_PROTOCOL_VERSION
from cowboy_node.p2p.peer_frames import SOFTWARE_VERSION
from cowboy_node.p2p.presence_gossip import CH_PRESENCE, GossipRefused, PresenceGossip, make_announcement
from cowboy_node.rpc import actor_queries
from cowboy_node.rpc.event_queries import EventQueries, count_terminal
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.job_queries import JobQueries
from cowboy_node.rpc.runner_queries import RunnerQueries
from cowboy_node.rpc.simulate import SimulateQueries
from cowboy_node.rpc.ui_queries import UiQueries
from cowboy_node.rpc.verified import certified_fields
from cowboy_node.snapshot.messages import CH_SNAPSHOT
from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_node.transport.service import TransportService
from cowboy_node.types.account import account_key
from cowboy_node.types.block import BlockHeader
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.transport.preimages import ValidatorKey as TransportValidatorKey
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError

log = get_logger("cowboy.node")

# Rejections that cannot become valid later: drop the transaction from the pool.
ENDPOINT_ANNOUNCE_S = 5.0
"""How often a validator re-announces its QUIC endpoint to the others."""
_PERMANENT = frozenset({"nonce_too_low", "insufficient_funds", "bad_signature", "wrong_chain_id", "tx_too_large",
                        "cycles_limit_too_high", "cells_limit_too_high", "limits_below_intrinsic",
                        "priority_fee_above_max", INTERNAL_ERROR})
# Sections execution reports through the same observer as the End-of-Block steps (job selection timing).
_SELECTION_SECTIONS = frozenset({"job_filter", "job_draw"})


class Node(RunnerQueries, JobQueries, EventQueries, SimulateQueries, UiQueries, TransportLink):
    """A validator: owns the chain, the mempool and the consensus service."""

    def __init__(self, chain: Chain, mempool: Mempool, key: ValidatorKey, *, block_time_ms: int,
                 metrics: NodeMetrics | None = None, delta_ms: int = 0, election: Election = Election.RANDOM,
                 skip_timeout_views: int = 10, journal: VoteJournal | None = None,
                 admission_workers: int = 0, double_sign_check_views: int = 10, fresh_key: bool = False,
                 sync_verify_workers: int = 0,
                 retain_blocks: int = 0, prune_batch_blocks: int = 64,
                 snapshotter: Snapshotter | None = None, snapshot_dir: Path | None = None,
                 state_sync_fallback: FallbackTrigger | None = None) -> None:
        self.chain = chain
        self.mempool = mempool
        self.metrics = metrics or NodeMetrics()
        self._ed_seed = key.ed25519_seed
        self._ed_pub = ed25519.public_key_from_seed(key.ed25519_seed)
        self._bls_secret = bls.secret_key_from_bytes(key.bls_secret)
        validators = chain.genesis.validators
        me = next((i for i, v in enumerate(validators) if v.ed25519_public_key == self._ed_pub), None)
        if me is None:
            raise ValueError("validator key is not in the genesis validator set (ed25519 key mismatch)")
        validator = validators[me]
        if bls.public_key(self._bls_secret) != validator.bls_public_key:
            raise ValueError("validator key's BLS share does not match genesis validators[].bls_public_key")
        if key.bls_share_index != validator.bls_share_index:
            raise ValueError(f"validator key's bls_share_index {key.bls_share_index} is not genesis "
                             f"validators[{me}].bls_share_index {validator.bls_share_index}")
        self.index = me
        """This validator's position in the genesis validator list."""
        self.fee_recipient = validator.fee_recipient
        self._tree_lock = threading.Lock()
        n = len(validators)
        scheme = ThresholdScheme(chain.genesis.group_public_key, chain.genesis.share_public_keys(),
                                 chain.genesis.threshold, threshold.Share(key.bls_share_index, self._bls_secret))
        # Δ: with one validator nobody else can take over, so the timers only guard against a stuck build.
        auto_delta = 60_000 if n == 1 else block_time_ms + 500
        self.consensus = ConsensusService(
            chain, config=ServiceConfig(me=me, block_time_ms=block_time_ms, delta_ms=delta_ms or auto_delta,
                                        election=election, skip_timeout=skip_timeout_views,
                                        double_sign_check_views=double_sign_check_views, fresh_key=fresh_key,
                                        sync_verify_workers=sync_verify_workers,
                                        state_sync_fallback=state_sync_fallback),
            scheme=scheme, tree_lock=self._tree_lock, proposer_key=self._ed_pub,
            sign=lambda d: ed25519.sign(self._ed_seed, d), fee_recipient=self.fee_recipient,
            take_transactions=self._take_transactions, presence=self._presence_input, inspect=self._inspect,
            on_commit=self._after_commit, admit_gossip=self._admit_gossip, metrics=self.metrics, journal=journal,
            signature_checked=mempool.signature_marks.checked)
        """Runs the consensus engine: proposes, verifies, commits finalized blocks."""
        self.block_time_ms = block_time_ms
        """Target interval between two blocks."""
        self._last_commit_monotonic: float | None = None
        self.commit_listeners: list[Callable[[int], None]] = []
        """Called with the height after each commit, on the event loop (the RPC's subscription hub: it must
        return at once)."""
        self.mempool_journal: MempoolJournal | None = None
        """The on-disk journal of the pool's transactions (``[mempool] journal``), attached at start-up; admission
        appends to it and every block commit syncs it."""
        self.transport: TransportService | None = None
        """The CIP-11 transport, attached by the runner when ``CIP11_TRANSPORT_ENABLED`` (None: no sessions)."""
        self.signature_pool: SignaturePool | None = SignaturePool(admission_workers) if admission_workers else None
        """Worker processes recovering RPC submissions' signers (``[mempool] admission_workers``; None: in-process).
        Workers start on the first submission; :meth:`run` and :meth:`close` stop them."""
        self._signature_batcher: SignatureBatcher | None = None
        self.genesis_snapshot()  # read (and checked) now, so later reads on the event loop never wait for the lock
        self._genesis_hash = chain.genesis.hash()
        self.presence_gossip = PresenceGossip(
            self._genesis_hash, tuple(v.ed25519_public_key for v in validators), self._ed_pub,
            on_refused=lambda reason: self.metrics.presence_gossip.labels(result=reason).inc())
        """Other validators' presence announcements (CIP-11 §8.2), merged into the PresenceInput we propose."""
        self.consensus.handlers[CH_PRESENCE] = self._on_presence_gossip
        self.endpoints = EndpointBook(self._genesis_hash, tuple(v.ed25519_public_key for v in validators), self._ed_pub)
        """The other validators' runner-facing QUIC endpoints, as they announced them."""
        self.consensus.handlers[CH_ENDPOINTS] = self._on_endpoint_announcement
        self.tx_gossip = TxGossip(
            broadcast=lambda: None if self.consensus.net is None else self.consensus.net.broadcast,
            admit=self._admit_gossiped, pool=lambda: self.signature_pool,
            max_body=lambda: head_context(self.chain).ctx.limits.max_tx_bytes,
            on_count=lambda result, n: self.metrics.tx_gossip.labels(result=result).inc(n))
        """Batched transaction gossip to the other validators, and the bounded admission of theirs."""
        self.consensus.handlers[CH_TX_BATCH] = self.tx_gossip.receive
        self.proposal_budget = ProposalBudget(self.consensus.cfg.delta_ms / 2000)
        """Caps our proposals' candidates so a build takes about Δ/2 (a flood must not make views time out)."""
        self.consensus.on_built = self.proposal_budget.observe
        self.consensus.known_transaction = mempool.by_body  # a leader's block reuses our pool's decoded txs
        self.quic_advertise: str | None = None
        """Our runner-facing QUIC endpoint (set at start-up when the transport runs)."""
        self.rpc_advertise = ""
        """Our HTTP API URL as announced to the other validators ("" when none)."""
        self._endpoint_seq = 0
        self._endpoint_announced_at: float | None = None
        self.pruner = Pruner(chain.store, retain_blocks=retain_blocks, batch_blocks=prune_batch_blocks)
        """``[storage] retain_blocks`` pruning, one bounded step after each commit in its own thread."""
        self.halted = False
        """Set once the block at ``chain.halt_height`` is committed (the node then stops and exits 0)."""
        self.snapshotter = snapshotter
        """``[snapshot] interval_blocks`` snapshots (None: not configured)."""
        self.snapshot_server = None if snapshot_dir is None else SnapshotServer(
            snapshot_dir, send=lambda to, ch, p: self.consensus.net is not None and self.consensus.net.send(to, ch, p))
        """Serves this home's snapshots to validators that state-sync (channel 7), within per-peer budgets."""
        if self.snapshot_server is not None:
            self.consensus.handlers[CH_SNAPSHOT] = self.snapshot_server.receive

    # -- production -----------------------------------------------------------------
    def local_presence(self) -> frozenset[int]:
        """Registry indices of runners with a live authenticated, accepting session (CIP-11 §7.4): none without
        transport."""
        if self.transport is None:
            return frozenset()
        return self.transport.local_presence(self.chain.height)

    def _presence_input(self, parent_world: WorldState) -> bytes | None:
        """The PresenceInput of a block built on ``parent_world``: the local presence encoded over
        |registry(H−1)| whenever the field is required or shadowed (CIP-11 §7.4)."""
        flags = get_cip11_flags(parent_world)
        if not (flags.CIP11_PRESENT_FIRST_ENABLED or flags.CIP11_PRESENCE_SHADOW_ENABLED):
            return None
        size = registry_size(parent_world)
        # Mode B (§8.2): our own sessions plus what the other validators announced (fail-open: no gossip, no harm).
        present = {i for i in self.local_presence() if i < size} | self.presence_gossip.union(self.chain.height, size)
        return encode_presence(present, size)

    def _on_presence_gossip(self, sender: int, payload: bytes) -> None:
        """A presence announcement from validator ``sender`` (refusals are counted by the gossip book)."""
        try:
            self.presence_gossip.receive(sender, payload, self.chain.height)
        except GossipRefused as e:
            log.debug("presence announcement refused", sender=sender, reason=e.reason, error=str(e))
            return
        self.metrics.presence_gossip.labels(result="accepted").inc()

    def _on_endpoint_announcement(self, sender: int, payload: bytes) -> None:
        try:
            self.endpoints.receive(sender, payload)
        except EndpointRefused as e:
            log.debug("endpoint announcement refused", sender=sender, reason=e.reason, error=str(e))

    def _announce_endpoint(self) -> None:
        """Every ENDPOINT_ANNOUNCE_S: tell the other validators where runners reach us (peers that connect
        later hear it at the next round)."""
        net = self.consensus.net
        now = time.monotonic()
        if net is None or self.quic_advertise is None or (
                self._endpoint_announced_at is not None and now - self._endpoint_announced_at < ENDPOINT_ANNOUNCE_S):
            return
        self._endpoint_announced_at = now
        self._endpoint_seq = max(self._endpoint_seq + 1, int(time.time() * 1000))
        a = make_endpoint_announcement(self._ed_seed, self._genesis_hash, self.quic_advertise, self._endpoint_seq,
                                       self.rpc_advertise)
        net.broadcast(CH_ENDPOINTS, a.encode())

    def _announce_presence(self, height: int) -> None:
        """Tell the other validators which runners we hold sessions to (after each committed block)."""
        net = self.consensus.net
        if net is None or self.transport is None:
            return
        present = self.local_presence()
        basis = max(present) + 1 if present else 0  # any basis holding every index; receivers cut to theirs
        a = make_announcement(self._ed_seed, self._genesis_hash, height, basis, present)
        net.broadcast(CH_PRESENCE, a.encode())

    def validator_transport_key(self) -> TransportValidatorKey:
        """This validator's Ed25519 peer key as the transport signs with it (HelloAck, pongs, assignments)."""
        return TransportValidatorKey(self._ed_seed)

    def request_stop(self) -> None:
        """Ask the consensus service to stop after the block in progress."""
        self.consensus.request_stop()

    def close(self) -> None:
        """Release the builder thread of a node whose :meth:`run` was never started (tests), and the signature
        pool's workers."""
        self.consensus.close()
        self.tx_gossip.close()
        self._close_signature_pool()
        self.pruner.close()
        if self.snapshotter is not None:
            self.snapshotter.close()
        if self.snapshot_server is not None:
            self.snapshot_server.close()

    def _close_signature_pool(self) -> None:
        pool, self.signature_pool, self._signature_batcher = self.signature_pool, None, None
        if pool is not None:
            pool.close()

    @property
    def _stopping(self) -> bool:
        return self.consensus.stopping

    async def run(self) -> None:
        """Run consensus (propose, vote, commit) until stopped; then stop the signature pool's workers."""
        try:
            await self.consensus.run()
        finally:
            self.tx_gossip.close()
            self._close_signature_pool()
            self.pruner.close()
            if self.snapshotter is not None:
                self.snapshotter.close()
            if self.snapshot_server is not None:
                self.snapshot_server.close()

    async def produce_block(self) -> None:
        """Single validator driven by hand (tests, benchmarks): propose and commit the next block now."""
        await self.consensus.produce_once()

    def _account_nonce(self) -> Any:
        world = self.chain.world()
        cache: dict[bytes, int] = {}

        def nonce(addr: bytes) -> int:
            if addr not in cache:
                cache[addr] = get_account(world, addr).nonce
            return cache[addr]

        return nonce

    def _take_transactions(self) -> list[Transaction]:
        """The mempool's ready transactions for the next block (nonces against the committed head), no more than
        the block can include (``chain/candidates.py``) nor than fit our build time budget
        (``node/proposal_budget.py``)."""
        limit = self.proposal_budget.limit(candidate_limit(self.chain, self.chain.genesis.limits.max_block_txs))
        return self.mempool.ready(self._account_nonce(), limit)

    def _inspect(self, prepared: PreparedBlock, env: BlockEnv,
                 observe: Observe | None) -> tuple[JobActivity, list[tuple[str, float]]]:
        """Job activity of a block about to be committed, and its End-of-Block step times (own blocks only)."""
        durations: list[tuple[str, float]] = list(getattr(observe, "durations", ()))
        selection = [(name, s) for name, s in durations if name in _SELECTION_SECTIONS]
        steps = [(name, s) for name, s in durations if name not in _SELECTION_SECTIONS]
        return block_job_activity(self.chain, prepared, env, selection), steps  # the parent is still the head

    def _admit_gossip(self, tx_bytes: bytes) -> None:
        """A single transaction another validator received (old ``CH_TXS`` message): queued like a batch's."""
        self.tx_gossip.receive_single(tx_bytes)

    def _admit_gossiped(self, tx_bytes: bytes, prepared: Prepared | None) -> str | None:
        """Admit one gossiped transaction here too (not forwarded again: full mesh); None, or the error code."""
        try:
            admit(tx_bytes, self.chain, self.mempool, prepared=prepared)
        except (TxInvalid, MempoolError, ValidationError) as e:
            return e.code
        if self.mempool_journal is not None:
            self.mempool_journal.append(tx_bytes)
        return None

    def _after_commit(self, committed: CommittedBlock) -> None:
        """After a finalized block is committed: mempool, transport push, metrics and the log line."""
        prepared = committed.prepared
        block = prepared.block
        self.mempool.remove_committed(block.transactions, self._account_nonce())
        self._mempool_after_commit()
        if self.transport is not None:  # push only once the assignment block is final and applied (CIP-11 §10.1)
            self.transport.on_block_committed(prepared.result.jobs_assigned, prepared.result.jobs_finished)
        self._announce_presence(block.header.height)
        self._announce_endpoint()
        for tx, err in prepared.result.rejected:
            if err.code in _PERMANENT:
                self.mempool.remove(tx.tx_hash())
        for tx_hash, what in prepared.result.internal_errors:
            self.metrics.tx_internal_errors.inc()
            log.error("transaction failed with an internal error", tx_hash="0x" + tx_hash.hex(),
                      height=block.header.height, error=what)
        now = time.monotonic()
        interval = None if self._last_commit_monotonic is None else now - self._last_commit_monotonic
        self._last_commit_monotonic = now
        h = block.header
        self.metrics.observe_block(height=h.height, interval_s=interval, tx_count=len(block.transactions),
                                   commit_s=committed.commit_s, execution_s=committed.execution_s,
                                   basefee_cycles=h.cycle_basefee, basefee_cells=h.cell_basefee)
        # Recorded only now: a block that failed to build or commit adds nothing.
        self.metrics.observe_eob(prepared.result.eob)
        self.metrics.observe_presence_certificates(block.transactions, prepared.result.receipts)
        tx_events = (e for r in prepared.result.receipts for e in r.events)
        for reason, n in count_terminal(itertools.chain(tx_events, prepared.result.block_events)).items():
            self.metrics.timers_terminal.labels(reason=reason).inc(n)
        if committed.inspected is not None:
            jobs, steps = committed.inspected
            self.metrics.observe_eob_steps(steps)
            self.metrics.observe_jobs(jobs)
        self.metrics.observe_mempool(self.mempool)
        log.info("block committed", height=h.height, view=h.round.view, txs=len(block.transactions),
                 hash="0x" + block.hash().hex()[:16], own=committed.own,
                 exec_ms=round(committed.execution_s * 1000, 1), commit_ms=round(committed.commit_s * 1000, 1))
        self.pruner.after_commit(h.height)
        if self.snapshotter is not None:
            self.snapshotter.after_commit()
        if self.chain.halt_height is not None and h.height >= self.chain.halt_height and not self.halted:
            self.halted = True
            log.warning("halt height reached; stopping (exit 0): upgrade the binary, then start the node without "
                        "this halt height", height=h.height, halt_height=self.chain.halt_height,
                        hash="0x" + block.hash().hex(), state_root="0x" + h.state_root.hex())
            self.request_stop()
        for listener in self.commit_listeners:
            listener(h.height)

    # -- RPC facade -----------------------------------------------------------------
    def submit_transaction(self, tx_bytes: bytes, prepared: Prepared | None = None) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`; ``prepared``: decoded and recovered elsewhere."""
        if self._stopping:
            raise RpcError(503, "shutting_down", "node is shutting down")
        try:
            tx = admit(tx_bytes, self.chain, self.mempool, prepared=prepared)
        except (TxInvalid, MempoolError, ValidationError) as e:
            self.metrics.txs_rejected.labels(code=e.code).inc()
            if e.code in ("mempool_full", "queued_full") and self.metrics.mempool_refused_full():
                pool = self.mempool  # rate-limited: one line every few seconds however many are refused
                log.warning("mempool full", code=e.code, txs=len(pool), pending=pool.pending_count,
                            queued=pool.queued_count, bytes=pool.size_bytes, max_txs=pool.config.max_txs,
                            max_queued=pool.config.max_queued, evicted=dict(pool.evicted))
            raise RpcError(400, e.code, e.message) from None
        if self.mempool_journal is not None:
            self.mempool_journal.append(tx_bytes)  # written with the next block's journal sync
        self.tx_gossip.add(tx_bytes)  # every validator may lead the next view: each must have the transaction
        self.metrics.observe_mempool(self.mempool)
        return {"tx_hash": "0x" + tx.tx_hash().hex(), "status": "pending"}

    async def submit_transaction_async(self, tx_bytes: bytes) -> dict[str, Any]:
        """:meth:`submit_transaction`, the signer recovered by the signature pool first when there is one
        (submissions of one loop iteration share a batch); same answers and errors as without the pool."""
        pool = self.signature_pool
        if pool is None or self._stopping:
            return self.submit_transaction(tx_bytes)
        if self._signature_batcher is None:
            self._signature_batcher = SignatureBatcher(pool)
        prepared = await self._signature_batcher.prepare(tx_bytes, head_context(self.chain).ctx.limits.max_tx_bytes)
        return self.submit_transaction(tx_bytes, prepared)

    def _mempool_after_commit(self) -> None:
        """After a block commit: expire old queued transactions, sync the mempool journal (compacting it once it
        holds more than twice the pool). A journal I/O error is logged, never stops the producer."""
        pool = self.mempool
        expired = pool.expire(time.monotonic())
        if expired:
            log.info("queued transactions expired", count=expired, queued=pool.queued_count)
        journal = self.mempool_journal
        if journal is None:
            return
        try:
            journal.sync()
            if journal.needs_compaction(pool.size_bytes):
                journal.compact(t.to_bytes() for t in pool.transactions())
        except OSError as e:
            log.error("mempool journal write failed", path=str(journal.path), error=str(e))

    def health(self) -> dict[str, Any]:
        """Healthy while blocks keep coming (within 10 block times)."""
        age_ms = int(time.time() * 1000) - self.chain.head.header.timestamp_ms
        ok = not self._stopping and age_ms < 10 * self.block_time_ms + 1000
        return {"ok": ok, "height": self.chain.height, "last_block_age_ms": age_ms}

    def status(self) -> dict[str, Any]:
        """Chain and node summary."""
        h = self.chain.head.header
        world = self.chain.world()
        cycle_bf, cell_bf = get_basefees(world)
        return {
            "chain_id": h.chain_id, "height": h.height, "hash": "0x" + self.chain.head.hash().hex(),
            "state_root": "0x" + h.state_root.hex(), "timestamp_ms": h.timestamp_ms,
            "basefee": {"cycle": cycle_bf, "cell": cell_bf},
            "mempool": {"txs": len(self.mempool), "bytes": self.mempool.size_bytes,
                        "pending": self.mempool.pending_count, "queued": self.mempool.queued_count},
            "validator": {"ed25519_public_key": "0x" + self._ed_pub.hex(),
                          "fee_recipient": to_checksum_address(self.fee_recipient)},
            "validator_set": self._validator_set_json(),
            **self._reconfiguration_json(),
            "block_time_ms": self.block_time_ms,
            "pvm_version": self.chain.genesis.pvm_version,
            "version": {"software": SOFTWARE_VERSION, "p2p_protocol": P2P_PROTOCOL_VERSION},
            "storage": {"earliest_retained_height": self.chain.earliest_height(),
                        "retain_blocks": self.pruner.retain_blocks, "halt_height": self.chain.halt_height},
            "consensus": self.consensus.status_json(),
            "cip11": get_cip11_flags(world).to_json(),
        }

    def _validator_set_json(self) -> dict[str, Any]:
        """The CIP-11 §5.4 snapshot runners compute ``Sub(R)`` from: the newest valid at the head (the genesis
        set, epoch 0, until an ActivateValidatorSet's ``ValidatorSetActivated`` height is reached)."""
        return self._snapshot_json(self.newest_snapshot())

    def validators(self) -> dict[str, Any]:
        """``GET /validators``: every consensus participant in ``ValidatorSetSnapshot(0)`` order (the positions
        governance approvals are indexed by) with its genesis record, endpoints and ``in_snapshot`` (member of the
        newest CIP-11 snapshot valid at the head, whose epoch and hash head the document); and (§5.3) the
        ``reconfiguration`` that governs the head, with the same entries for both of its snapshots, so a runner
        learns where the members of ``Sub_E ∪ Sub_{E+1}`` are."""
        snap = self.newest_snapshot()
        records = {v.ed25519_public_key: (i, v) for i, v in enumerate(self.chain.genesis.validators)}
        genesis = self.genesis_snapshot().validators
        out = [{**self._validator_entry(key, records), "in_snapshot": key in snap.validators}
               for key in (*genesis, *(k for k in snap.validators if k not in genesis))]
        doc: dict[str, Any] = {"subset_epoch": snap.epoch, "validator_set_hash": "0x" + snap.set_hash.hex(),
                               "height": self.chain.height, "threshold": self.chain.genesis.threshold,
                               "group_public_key": "0x" + self.chain.genesis.group_public_key.hex(),
                               "validators": out}
        rc = self._reconfiguration_json().get("reconfiguration")
        if rc is not None:
            for side in ("old", "new"):
                rc[side]["validators"] = [self._validator_entry(bytes.fromhex(e["ed25519_public_key"][2:]), records)
                                          for e in rc[side]["validators"]]
            doc["reconfiguration"] = rc
        return doc

    def _validator_entry(self, key: bytes, records: dict[bytes, tuple[int, Any]]) -> dict[str, Any]:
        i, v = records.get(key, (None, None))
        entry: dict[str, Any] = {"ed25519_public_key": "0x" + key.hex(), "self": key == self._ed_pub,
                                 "quic_endpoint": self.quic_advertise if key == self._ed_pub
                                 else self.endpoints.endpoint(key),
                                 "rpc_url": (self.rpc_advertise or None) if key == self._ed_pub
                                 else self.endpoints.rpc_url(key)}
        if v is not None:
            entry.update(index=i, name=v.name, bls_share_index=v.bls_share_index,
                         bls_public_key="0x" + v.bls_public_key.hex(),
                         fee_recipient=to_checksum_address(v.fee_recipient))
        return entry

    def consensus_evidence(self, limit: int) -> dict[str, Any]:
        """``GET /consensus/evidence``: the newest ``limit`` evidence records, newest last."""
        return {"count": self.consensus.evidence.count, "evidence": self.consensus.evidence_json(limit)}

    def _snapshot_json(self, snap: EpochSnapshot) -> dict[str, Any]:
        names = {v.ed25519_public_key: v.name for v in self.chain.genesis.validators}
        return {"subset_epoch": snap.epoch, "validator_set_hash": "0x" + snap.set_hash.hex(),
                "validators": [{"name": names.get(k, f"0x{k.hex()[:16]}"), "ed25519_public_key": "0x" + k.hex()}
                               for k in snap.validators]}

    def _reconfiguration_json(self) -> dict[str, Any]:
        """§5.3: the last ``ValidatorSetActivated(E+1, h)`` with the governed OVERLAP_BLOCKS at the head, so a
        runner plans ``Sub_E ∪ Sub_{E+1}`` during the window (empty while the chain has only the genesis set)."""
        params = self.cip11_params()
        rc = self.reconfiguration(params)
        if rc is None:
            return {}
        overlap = params.OVERLAP_BLOCKS
        return {"reconfiguration": {"old": self._snapshot_json(rc.old), "new": self._snapshot_json(rc.new),
                                    "activation_height": rc.activation_height, "overlap_blocks": overlap,
                                    "cutoff_height": rc.cutoff(overlap)}}

    def height(self) -> int:
        """Committed height."""
        return self.chain.height

    def earliest_retained_height(self) -> int:
        """Lowest height still stored (``rpc/pruned_reads.py``: 410 for unknown transactions once above 0)."""
        return self.chain.earliest_height()

    def block(self, height: int) -> dict[str, Any] | None:
        """Header JSON plus transaction hashes."""
        if height > self.chain.height:
            return None
        b = self.chain.blocks.block(height)
        if b is None:  # read the pointer after the block: a prune step moves it in the batch that deletes
            earliest = self.chain.earliest_height()
            if height < earliest:
                raise RpcError(410, "pruned", f"block {height} was pruned ([storage] retain_blocks); the earliest "
                                              f"retained height is {earliest}",
                               details={"earliest_retained_height": earliest})
            return None
        out = b.header.to_json()
        out["transactions"] = ["0x" + t.tx_hash().hex() for t in b.transactions]
        out["signature"] = "0x" + b.signature.hex()
        return out

    def transaction(self, tx_hash: bytes) -> dict[str, Any] | None:
        """Committed or pending transaction, or ``{"status": "evicted", "reason"}`` for one the pool dropped."""
        loc = self.chain.blocks.tx_location(tx_hash)
        if loc is not None:
            b = self.chain.blocks.block(loc[0])
            if b is not None:
                out = b.transactions[loc[1]].to_json()
                out.update(status="committed", height=loc[0], index=loc[1])
                return out
        pending = self.mempool.get(tx_hash)
        if pending is None:
            reason = self.mempool.evicted_reason(tx_hash)
            return None if reason is None else {"tx_hash": "0x" + tx_hash.hex(), "status": "evicted", "reason": reason}
        pending_json: dict[str, Any] = pending.to_json()
        pending_json["status"] = "pending"
        return pending_json

    def receipt(self, tx_hash: bytes) -> dict[str, Any] | None:
        """Receipt of a committed transaction."""
        loc = self.chain.blocks.tx_location(tx_hash)
        if loc is None:
            return None
        receipts = self.chain.blocks.receipts(loc[0])
        if receipts is None:
            return None
        out = receipts[loc[1]].to_json()
        out.update(tx_hash="0x" + tx_hash.hex(), height=loc[0], index=loc[1])
        return out

    def account(self, address: bytes) -> dict[str, Any]:
        """Balance and nonces at the head."""
        acct = get_account(self.chain.world(), address)
        return {"address": to_checksum_address(address), "balance": str(acct.balance), "nonce": acct.nonce,
                "next_pending_nonce": self.mempool.pending_nonce(address, acct.nonce)}

    def state_proof(self, key: bytes) -> dict[str, Any]:
        """Proof for a logical state key against the head state root, with the head header and its
        finalization certificate (``rpc/verified.py``)."""
        with self._tree_lock:
            proof = self.chain.tree.prove(key)
            root = self.chain.tree.root()
            height, certified = self._certified_head()
        return {"root": "0x" + root.hex(), "height": height, "proof": proof.to_json(), **certified}

    def _certified_head(self) -> tuple[int, dict[str, Any]]:
        """The head's height and :func:`~cowboy_node.rpc.verified.certified_fields` (caller holds the state lock,
        so the head's state root is the tree's root)."""
        header = self.chain.head.header
        return header.height, certified_fields(header, self.consensus.records.finalization_bytes(header.height))

    def account_proof(self, address: bytes) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.verified.VerifiedFacade`."""
        with self._tree_lock:
            out = self.account(address)
            proof = self.chain.tree.prove(account_key(address))
            _, certified = self._certified_head()
        return {**out, "proof": proof.to_json(), **certified}

    def actor_state_proof(self, address: bytes, key: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.verified.VerifiedFacade`."""
        with self._tree_lock:
            out = actor_queries.actor_state_view(self.chain.world(), address, key, height=self.chain.height)
            if out is None:
                return None
            proof = self.chain.tree.prove(kv_key(address, key))
            _, certified = self._certified_head()
        return {**out, "proof": proof.to_json(), **certified}

    # -- actors (read under the state lock: the view and its height belong to one head) ----------
    def actor(self, address: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        with self._tree_lock:
            return actor_queries.actor_view(self.chain.world(), address, height=self.chain.height)

    def actor_state(self, address: bytes, key: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        with self._tree_lock:
            return actor_queries.actor_state_view(self.chain.world(), address, key, height=self.chain.height)

    def actor_state_scan(self, address: bytes, prefix: bytes, limit: int) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        with self._tree_lock:
            return actor_queries.actor_state_scan_view(self.chain.world(), address, prefix, limit,
                                                       height=self.chain.height)

    def actor_timers(self, address: bytes, cip1_after: bytes | None = None) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        with self._tree_lock:
            return actor_queries.actor_timers_view(self.chain.world(), address, height=self.chain.height,
                                                   cip1_after=cip1_after)

    def next_block_view(self) -> tuple[BlockHeader, StateStore, BlockEnv]:
        """``(head header, store snapshot, environment of the next block)``, captured together under the state
        lock (held only for that): read-only calls and dry runs run on the snapshot without the lock, as the
        next block would (height = head + 1, the seed of the head's round as its beacon). The caller closes
        the snapshot."""
        with self._tree_lock:
            chain = self.chain
            head = chain.head.header
            snapshot = chain.store.snapshot()
            seed = self.consensus.forks.parent_seed(head) or head.beacon  # the next block's R_{S-1}
            env = chain.env_for(timestamp_ms=max(int(time.time() * 1000), head.timestamp_ms + 1),
                                fee_recipient=self.fee_recipient, beacon=seed, presence_input=None)
        return head, snapshot, env

    def read_actor(self, actor: bytes, handler: str, payload: bytes, cycles_limit: int, *,
                   interrupt: InterruptHandle | None = None) -> dict[str, Any] | None:
        """Read-only call in the context the next block would give it (height = head + 1, as built by
        :meth:`Chain.env_for`); it sees the seed of the head's round, as the next block would.

        The state lock is held only to capture the head: its header, a store snapshot and the environment.
        The call itself runs on the snapshot, so blocks keep committing meanwhile and the answer (``height``
        included) still describes that one head. ``interrupt`` stops the call from another thread (the RPC
        read pool's deadline): its code, e.g. ``read_timeout``, is then the answer's ``error``.
        """
        head, snapshot, env = self.next_block_view()
        try:
            world = _snapshot_world(snapshot)
            return actor_queries.read_only_view(world, begin_block(world, env), actor=actor, handler=handler,
                                                payload=payload, cycles_limit=cycles_limit, height=head.height,
                                                interrupt=interrupt)
        finally:
            snapshot.close()


def _snapshot_world(snapshot: StateStore) -> WorldState:
    """A buffered view over a store snapshot (its own uncached tree: nothing is shared with the head's)."""
    return WorldState(snapshot, StateTree(snapshot, TREE_PREFIX, cache_size=0), data_prefix=STATE_PREFIX)
