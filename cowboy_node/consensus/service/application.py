"""The application pipeline: build, verify and commit blocks over :class:`~cowboy_node.consensus.forks.Forks`.

- ``ProposalWanted``: build a block on the engine's parent (no earlier than ``block_time_ms`` after the parent's
  timestamp: the chain's cadence), broadcast its body, keep it durably, then propose its hash;
- ``VerifyBlock``: fetch the body if needed and check and execute it on its parent; a body the view's leader sends
  is executed as soon as it arrives (before its proposal vote is processed), so the verification usually finds it
  done (:meth:`Application.on_block`);
- ``Finalized``: commit the blocks in order with their seed and certificate, then hand each to the node's
  after-commit work (mempool, CIP-11 §10.1 pushes, metrics).

Everything touching the chain runs in the builder thread (:meth:`~cowboy_node.consensus.service.ports.Runtime.
in_builder`). Nothing here may stop the chain: a failed build, verification or commit is logged and counted, and
the engine's timers move the view on.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.forks import Candidate, Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.service.bodies import BodyCache
from cowboy_node.consensus.service.ports import Clock, ConsensusMetrics, EventLog, Network, Runtime, VoteOutbox
from cowboy_node.consensus.service.voter import AppMessage, Voter
from cowboy_node.consensus.simplex.engine import ConsensusFault, Finalized, ProposalWanted, VerifyBlock
from cowboy_node.consensus.simplex.types import Finalization, Proposal
from cowboy_node.consensus.sync_messages import CH_BLOCKS, CH_SYNC, BlockRequest, encode_sync
from cowboy_node.consensus.timeline import ViewTimeline
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.execution.validity_errors import InvalidBlock
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block, BlockHeader, KnownTransaction
from cowboy_protocol.types.transaction import Transaction

MAX_FUTURE_DRIFT_MS = 5_000
"""A proposal whose timestamp is further ahead of this validator's clock is not voted for."""
BODY_RETRY_S = 0.5
"""A body asked from the peers is asked again after this long without an answer."""
BODY_GIVE_UP_S = 10.0
"""A body not bound to a view (a notarized ancestor, a finalized block) is asked for this long at most."""


@dataclass(frozen=True, slots=True)
class CommittedBlock:
    """A finalized block this validator just committed, for the node's after-commit work."""

    prepared: PreparedBlock
    """The block and its execution result."""
    inspected: Any
    """What the node's inspect hook returned for it (job activity)."""
    own: bool
    """Whether this validator built it."""
    execution_s: float
    """Seconds the build or verification took (0 for a block executed at commit)."""
    commit_s: float
    """Seconds the commit (execution on the head when needed, plus the synced batch) took."""


@dataclass(frozen=True, slots=True)
class Producer:
    """What this validator builds blocks with (the node's keys, mempool and hooks)."""

    block_time_ms: int
    """Target interval between blocks (the proposer waits this long after the parent's timestamp)."""
    proposer_key: bytes
    """This validator's Ed25519 public key (the header's proposer)."""
    sign: Callable[[bytes], bytes]
    """Signs a header hash with that key."""
    fee_recipient: bytes
    """Where this validator's priority fees go."""
    take_transactions: Callable[[], list[Transaction]]
    """The mempool's transactions for the next block."""
    presence: Callable[[WorldState], bytes | None]
    """The block's ``PresenceInput`` on the parent's world."""
    inspect: Callable[[PreparedBlock, BlockEnv, Observe | None], Any]
    """The node's look at a block as it commits (job activity), in the builder thread."""
    on_commit: Callable[[CommittedBlock], None]
    """The node's after-commit work, on the event loop."""
    on_built: Callable[[int, float], None] | None = None
    """Called after each own build (transactions in the block, seconds the build took), nullified or not."""
    known_transaction: KnownTransaction | None = None
    """Transactions already decoded here, by full signed body: a block body received from a peer reuses them."""


class Application:
    """Builds, verifies and commits blocks for one validator (see the module docstring)."""

    def __init__(self, chain: Chain, *, forks: Forks, records: ConsensusRecords, voter: Voter, bodies: BodyCache,
                 producer: Producer, outbox: VoteOutbox, net: Network | None, clock: Clock, runtime: Runtime,
                 metrics: ConsensusMetrics, log: EventLog, timeline: ViewTimeline,
                 behind: Callable[[], None]) -> None:
        self.chain = chain
        self.forks = forks
        self.records = records
        self.voter = voter
        """The engine's driver: proposals and verdicts go back to it."""
        self.bodies = bodies
        self.producer = producer
        self.outbox = outbox
        self.net = net
        self.clock = clock
        self.runtime = runtime
        self.metrics = metrics
        self.log = log
        self.timeline = timeline
        self.behind = behind
        """Tells the resolver a finalized block's parent is missing here (sync even one block behind)."""
        self.finals: collections.deque[Finalized] = collections.deque()
        """Finalized blocks not yet committed, in order."""
        self.wanted: ProposalWanted | None = None
        """The newest proposal the engine asked of this validator."""
        self.applied = runtime.signal()
        """Raised each time a finalized block was committed and handed to the node (see :meth:`_parent_applied`)."""
        self.own_blocks: set[bytes] = set()
        self.preverified: set[int] = set()
        """Views whose leader's block started executing when its body arrived (:meth:`_maybe_preverify`)."""
        self.build_s: dict[bytes, float] = {}
        self.observed: dict[bytes, Observe] = {}

    def on_output(self, o: AppMessage) -> None:
        """What the engine asks of the application (through the voter)."""
        if isinstance(o, ProposalWanted):
            self.wanted = o
            if self.runtime.running:
                self.runtime.spawn(self.propose(o))
        elif isinstance(o, VerifyBlock):
            if self.runtime.running:
                self.runtime.spawn(self.verify(o.proposal))
        else:
            self.finals.append(o)

    def _validator_key(self, index: int) -> bytes:
        return self.chain.genesis.validators[index].ed25519_public_key

    # ------------------------------------------------------------------------------------------ proposing

    async def propose(self, want: ProposalWanted) -> None:
        """Build, broadcast and propose the block the engine wants, at the chain's cadence."""
        engine = self.voter.engine
        assert engine is not None
        parent = await self.known_header(want.parent)
        if parent is None or engine.view != want.round.view:
            return
        block_time_ms = self.producer.block_time_ms
        # The chain's cadence: no block before block_time after its parent (wall clock, like the timestamp).
        delay = (parent.timestamp_ms + block_time_ms - self.clock.wall_ms()) / 1000
        if delay > 0:
            await self.runtime.sleep(delay)
        await self._parent_applied(want.parent, block_time_ms / 1000)
        self.timeline.mark(want.round.view, "seen", self.clock.monotonic(), leader=True)
        cand = None
        while cand is None:  # a failed build is retried at the next slot while the view lasts
            if self.runtime.stopping or engine.view != want.round.view:
                return
            cand = await self.build(want)
            if cand is None:
                await self.runtime.sleep(block_time_ms / 1000)
        block = cand.prepared.block
        self.bodies.remember(block)
        if self.net is not None:
            self.net.broadcast(CH_BLOCKS, block.encode())
        self.voter.proposal_built(want.round.view, self.clock.monotonic())
        await self.propose_block(want, block)
        self.timeline.mark(want.round.view, "voted", self.clock.monotonic())

    async def _parent_applied(self, parent: bytes, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) while ``parent`` is finalized but not yet committed and handed to the node.

        Building on it then uses the head's own world and a mempool that no longer holds the parent's
        transactions, and the builder thread is free for the parent's commit, whose after-commit work takes the
        state lock on the event loop (a build queued first would hold the lock for its whole execution)."""
        deadline = self.clock.monotonic() + timeout_s
        while any(f.proposal.payload == parent for f in self.finals) and not self.runtime.stopping:
            left = deadline - self.clock.monotonic()
            if left <= 0:
                return
            self.applied.clear()
            await self.runtime.wait(self.applied, left)

    async def build(self, want: ProposalWanted) -> Candidate | None:
        """Build the wanted block in the builder thread (None, logged and counted, when the build raised)."""
        p = self.producer
        txs = p.take_transactions()
        observe = self.metrics.block_observer()
        t0 = self.clock.perf()
        try:
            cand: Candidate = await self.runtime.in_builder(lambda: self.forks.build(
                want.parent, want.round, txs, timestamp_ms=self.clock.wall_ms(), proposer=p.proposer_key,
                sign=p.sign, fee_recipient=p.fee_recipient, presence=p.presence, observe=observe),
                view=want.round.view)
        except Exception as e:  # nothing may stop the chain: the view times out and the next leader proposes
            self.metrics.block_production_failed()
            self.log.exception("block production failed; retrying at the next slot", view=want.round.view,
                               height=self.chain.height + 1, error=repr(e))
            return None
        digest = cand.prepared.block.hash()
        self.timeline.mark(want.round.view, "exec_end", self.clock.monotonic())
        self.own_blocks.add(digest)
        self.build_s[digest] = build_s = self.clock.perf() - t0
        if p.on_built is not None:
            p.on_built(len(cand.prepared.block.transactions), build_s)
        self.observed[digest] = observe
        return cand

    async def propose_block(self, want: ProposalWanted, block: Block) -> None:
        """Keep the block durably, then propose it: the engine journals the proposal vote, and after a crash
        that vote must name a body this validator still has. The synced store write runs on the journal's writer
        thread (off the loop) and is awaited before the engine even signs the vote (which it ignores if the view
        moved on meanwhile); a failed write raises here, as before: no vote, the view times out."""
        engine = self.voter.engine
        assert engine is not None
        digest, raw = block.hash(), block.encode()
        await self.outbox.run(lambda: self.records.put_proposal(digest, raw))
        self.voter.act(engine.propose(want.round, digest, self.voter.now()))

    async def produce_once(self) -> PreparedBlock:
        """Single validator, driven by hand (tests, benchmarks): build the wanted block now, propose it and
        commit what finalizes. Raises RuntimeError when this validator is not the one to propose."""
        if self.voter.engine is None:
            self.voter.start_engine()
        want = self.wanted
        engine = self.voter.engine
        if want is None or engine is None or engine.view != want.round.view:
            raise RuntimeError("no proposal is wanted from this validator now")
        cand = await self.build(want)
        if cand is None:
            raise RuntimeError("block build failed (see the log)")
        self.wanted = None
        await self.propose_block(want, cand.prepared.block)
        await self.outbox.flush()  # the votes journaled (off the loop) and Finalized acted on before committing
        await self.commit_ready()
        return cand.prepared

    # ------------------------------------------------------------------------------------------ verifying

    async def verify(self, proposal: Proposal) -> None:
        """Check and execute the proposed block on its parent, then tell the engine whether to vote for it."""
        engine = self.voter.engine
        assert engine is not None
        view = proposal.round.view
        block = await self.body(proposal.payload, until_view=view)
        if block is None:
            return  # the view timed out meanwhile; nothing to answer
        self.timeline.mark(view, "body", self.clock.monotonic(), leader=False)
        h = block.header
        ok = h.round == proposal.round and h.parent_hash == proposal.parent
        parent = await self.known_header(proposal.parent) if ok else None
        reason = "round_or_parent_mismatch"
        if ok and (parent is None or parent.round.view != proposal.parent_view):
            ok, reason = False, "unknown_parent" if parent is None else "parent_view_mismatch"
        if ok:
            leader = engine.leader_of(view)
            leader_key = None if leader is None else self._validator_key(leader)
            if leader_key is None:
                ok, reason = False, "unknown_leader"
            else:
                try:
                    await self.runtime.in_builder(lambda: self.forks.verify(
                        block, leader_key=leader_key, max_timestamp_ms=self.clock.wall_ms() + MAX_FUTURE_DRIFT_MS),
                        view=view)
                    self.timeline.mark(view, "exec_end", self.clock.monotonic())
                except InvalidBlock as e:
                    ok, reason = False, e.code
                except Exception as e:
                    ok, reason = False, "internal_error"
                    self.log.exception("block verification failed unexpectedly", view=view, error=repr(e))
        if not ok:
            self.metrics.consensus_invalid_block(reason)
            self.log.warning("proposal refused", view=view, reason=reason, hash="0x" + proposal.payload.hex()[:16])
        self.voter.act(engine.verified(proposal, ok, self.voter.now()))
        if ok:
            self.timeline.mark(view, "voted", self.clock.monotonic())

    def header(self, digest: bytes) -> BlockHeader | None:
        """:meth:`Forks.header`, the committed head's taken from memory: a stored block is read back whole (every
        transaction decoded, tens of ms for a full block), and the head is the parent asked for most views."""
        head = self.chain.head
        if digest == head.hash():
            return head.header
        return self.forks.header(digest)

    async def known_header(self, digest: bytes) -> Any:
        """The header of ``digest``, fetching and verifying its body (and, recursively, unknown ancestors'
        bodies) when it is notarized but was never seen here."""
        header = self.header(digest)
        if header is not None:
            return header
        block = await self.body(digest, until_view=None)
        if block is None:
            return None
        parent = self.header(block.header.parent_hash) or await self.known_header(block.header.parent_hash)
        if parent is None:
            return None
        try:  # notarized by a quorum: verified without the leader check (the certificate is the proof)
            await self.runtime.in_builder(lambda: self.forks.verify(block, leader_key=None, max_timestamp_ms=None))
        except InvalidBlock as e:
            self.log.warning("notarized block does not verify", hash="0x" + digest.hex()[:16], reason=e.code)
            return None
        return block.header

    async def body(self, digest: bytes, until_view: int | None) -> Block | None:
        """The body of block ``digest``: cached, known, or asked from peers (retried every 500 ms) while the
        engine is still at or below ``until_view`` (None: for up to 10 s)."""
        give_up = self.clock.monotonic() + BODY_GIVE_UP_S
        while not self.runtime.stopping:
            block = self.bodies.get(digest) or self.forks.block(digest)
            if block is not None:
                return block
            engine = self.voter.engine
            if engine is None or (until_view is not None and engine.view > until_view) or \
                    (until_view is None and self.clock.monotonic() > give_up):
                return None
            if self.net is not None:
                self.net.broadcast(CH_SYNC, encode_sync(BlockRequest(digest)))
            waiter = self.bodies.waiter(digest, self.runtime.signal)
            await self.runtime.wait(waiter, BODY_RETRY_S)
        return None

    # ------------------------------------------------------------------------------------------ peers' bodies

    def on_block(self, sender: int, payload: bytes) -> None:
        """A block body from a peer: kept only when awaited here or of a view still to commit (above the committed
        head's, at most the engine's vote window ahead) — unsolicited bodies of other views are dropped, counted."""
        block = Block.decode(payload, known=self.producer.known_transaction)
        engine = self.voter.engine
        digest = block.hash()
        view = block.header.round.view
        if digest not in self.bodies.waiters and engine is not None and \
                not self.chain.head.header.round.view < view <= engine.view + engine.cfg.window:
            self.metrics.consensus_bad_message("unsolicited_body")
            return
        self.bodies.remember(block, len(payload))
        self._maybe_preverify(sender, block)

    def _maybe_preverify(self, sender: int, block: Block) -> None:
        """Start executing the leader's block as soon as its body arrives, before its proposal vote (sent after
        the body) is processed: :meth:`verify` then finds the candidate ready. Only a body the elected leader of
        the current or next view sent itself, on a known parent, once per view. This is not a vote: voting still
        waits for the engine's ``VerifyBlock`` and :meth:`verify`'s checks of the proposal against the block."""
        engine = self.voter.engine
        if engine is None or not self.runtime.running:
            return
        view = block.header.round.view
        if not engine.view <= view <= engine.view + 1 or view in self.preverified:
            return
        leader = engine.leader_of(view)
        if leader is None or leader != sender or leader == self.voter.cfg.me or \
                self.header(block.header.parent_hash) is None:
            return
        for old in [w for w in self.preverified if w < engine.view]:
            self.preverified.discard(old)
        self.preverified.add(view)
        self.timeline.mark(view, "body", self.clock.monotonic(), leader=False)
        self.runtime.spawn(self._preverify(block, self._validator_key(leader)))

    async def _preverify(self, block: Block, leader_key: bytes) -> None:
        view = block.header.round.view
        try:
            await self.runtime.in_builder(lambda: self.forks.verify(
                block, leader_key=leader_key, max_timestamp_ms=self.clock.wall_ms() + MAX_FUTURE_DRIFT_MS),
                view=view)
            self.timeline.mark(view, "exec_end", self.clock.monotonic())
        except InvalidBlock:
            pass  # refused again (and counted) when the engine asks for its verification
        except Exception as e:
            self.log.exception("early block verification failed unexpectedly", view=view, error=repr(e))

    # ------------------------------------------------------------------------------------------ committing

    async def commit_ready(self) -> None:
        """Commit the queued finalized blocks that extend the head, in order."""
        while self.finals:
            f = self.finals[0]
            digest = f.proposal.payload
            committed_at = self.chain.blocks.height_of(digest)
            if committed_at is not None:  # already committed (by sync): skip
                self.finals.popleft()
                continue
            block = self.bodies.get(digest) or self.forks.block(digest)
            if block is not None and self.chain.beyond_halt(block.header.height):  # issue 34: --halt-height
                return
            if block is None:
                if self.runtime.running:
                    self.runtime.spawn(self._fetch_body_then_wake(digest))
                return
            if block.header.parent_hash != self.chain.head.hash():
                if self.chain.blocks.height_of(block.header.parent_hash) is not None:
                    raise ConsensusFault(f"finalized block 0x{digest.hex()[:16]} does not extend the head")
                self.behind()  # its parent is not here yet: behind
                return
            await self._commit_one(block, f.seed, f.certificate)
            self.finals.popleft()
            self.applied.set()

    async def _fetch_body_then_wake(self, digest: bytes) -> None:
        await self.body(digest, until_view=None)
        self.runtime.wake_commit()

    async def _commit_one(self, block: Block, seed: bytes, certificate: Finalization | None) -> None:
        digest = block.hash()
        own = digest in self.own_blocks
        observe = self.observed.pop(digest, None)
        t0 = self.clock.perf()
        view = block.header.round.view
        inspect = self.producer.inspect
        prepared, inspected = await self.runtime.in_builder(lambda: self.forks.commit(
            block, seed=seed, certificate=certificate, inspect=lambda p, env: inspect(p, env, observe)),
            view=view, stage="commit_start")
        commit_s = self.clock.perf() - t0
        self.own_blocks.discard(digest)
        build_s = self.build_s.pop(digest, 0.0)
        self.producer.on_commit(CommittedBlock(prepared, inspected, own, build_s, commit_s))
        self.timeline.mark(view, "committed", self.clock.monotonic())
        self.timeline.close(view)
        self.metrics.consensus_gauges(finalized_height=block.header.height)
        self.voter.compact_journal()

    def synced(self, committed: list[PreparedBlock]) -> None:
        """Blocks block sync committed: their candidates are dropped and each goes to the node's after-commit
        work."""
        for prepared in committed:
            self.forks.candidates.pop(prepared.block.hash(), None)
            self.producer.on_commit(CommittedBlock(prepared, None, False, 0.0, 0.0))


__all__ = ["MAX_FUTURE_DRIFT_MS", "Application", "CommittedBlock", "Producer"]
