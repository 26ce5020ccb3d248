"""The node's read side, as the RPC and the CLI see it: :class:`NodeApi`, composed of query objects that are
each given what they read (the chain, the mempool, the state lock), never the node itself.

- :class:`ChainReads`: blocks, transactions, receipts, accounts, actors, proofs and read-only calls;
- :class:`StatusQueries`: ``/health``, ``/status``, ``/validators``, ``/consensus/evidence``;
- the RPC package's query classes: runners and parameters, jobs, events, dry runs, the UI's block activity.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from cowboy_node.chain.blockstore import STATE_PREFIX, TREE_PREFIX
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool
from cowboy_node.execution.actors.actor_state import kv_key
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.meter import InterruptHandle
from cowboy_node.execution.system_state import get_account, get_basefees, get_cip11_flags
from cowboy_node.node.consensus_service import ConsensusService
from cowboy_node.node.intake import TxIntake
from cowboy_node.node.peer_gossip import ValidatorGossip
from cowboy_node.node.pruner import Pruner
from cowboy_node.node.transport_link import TransportLink
from cowboy_node.p2p.peer_frames import PROTOCOL_VERSION as P2P_PROTOCOL_VERSION
from cowboy_node.p2p.peer_frames import SOFTWARE_VERSION
from cowboy_node.rpc import actor_queries
from cowboy_node.rpc.event_queries import EventQueries
from cowboy_node.rpc.facade import RpcError
from cowboy_node.rpc.job_queries import JobQueries
from cowboy_node.rpc.runner_queries import RunnerQueries
from cowboy_node.rpc.simulate import SimulateQueries, SimulateRequest
from cowboy_node.rpc.ui_queries import UiQueries
from cowboy_node.rpc.verified import certified_fields
from cowboy_node.state.kv_store import StateStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import account_key
from cowboy_node.types.block import BlockHeader
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.transport.subset import EpochSnapshot


class ChainReads:
    """Reads at the committed head: the chain's blocks and state (under the state lock where a view and its
    height must belong to one head), the mempool's pending transactions, the head's finalization certificate
    (``finalization``) and the seed the next block would see (``parent_seed``)."""

    def __init__(self, chain: Chain, mempool: Mempool, tree_lock: threading.Lock, *,
                 finalization: Callable[[int], bytes | None], parent_seed: Callable[[BlockHeader], bytes | None],
                 fee_recipient: bytes) -> None:
        self.chain = chain
        """The node's chain."""
        self.mempool = mempool
        """The node's transaction pool."""
        self._tree_lock = tree_lock
        self._finalization = finalization
        self._parent_seed = parent_seed
        self._fee_recipient = fee_recipient

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
        return header.height, certified_fields(header, self._finalization(header.height))

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
            seed = self._parent_seed(head) or head.beacon  # the next block's R_{S-1}
            env = chain.env_for(timestamp_ms=max(int(time.time() * 1000), head.timestamp_ms + 1),
                                fee_recipient=self._fee_recipient, beacon=seed, presence_input=None)
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


class StatusQueries:
    """``/health``, ``/status``, ``/validators`` and ``/consensus/evidence``: the chain and the node's parts,
    each read where it lives (consensus, pool, pruner, gossip books, the transport link's snapshots)."""

    def __init__(self, chain: Chain, mempool: Mempool, *, consensus: ConsensusService, link: TransportLink,
                 gossip: ValidatorGossip, pruner: Pruner, ed_pub: bytes, fee_recipient: bytes,
                 block_time_ms: int) -> None:
        self._chain = chain
        self._mempool = mempool
        self._consensus = consensus
        self._link = link
        self._gossip = gossip
        self._pruner = pruner
        self._ed_pub = ed_pub
        self._fee_recipient = fee_recipient
        self._block_time_ms = block_time_ms

    def health(self) -> dict[str, Any]:
        """Healthy while blocks keep coming (within 10 block times)."""
        age_ms = int(time.time() * 1000) - self._chain.head.header.timestamp_ms
        ok = not self._consensus.stopping and age_ms < 10 * self._block_time_ms + 1000
        return {"ok": ok, "height": self._chain.height, "last_block_age_ms": age_ms}

    def status(self) -> dict[str, Any]:
        """Chain and node summary."""
        h = self._chain.head.header
        world = self._chain.world()
        cycle_bf, cell_bf = get_basefees(world)
        return {
            "chain_id": h.chain_id, "height": h.height, "hash": "0x" + self._chain.head.hash().hex(),
            "state_root": "0x" + h.state_root.hex(), "timestamp_ms": h.timestamp_ms,
            "basefee": {"cycle": cycle_bf, "cell": cell_bf},
            "mempool": {"txs": len(self._mempool), "bytes": self._mempool.size_bytes,
                        "pending": self._mempool.pending_count, "queued": self._mempool.queued_count},
            "validator": {"ed25519_public_key": "0x" + self._ed_pub.hex(),
                          "fee_recipient": to_checksum_address(self._fee_recipient)},
            "validator_set": self._validator_set_json(),
            **self._reconfiguration_json(),
            "block_time_ms": self._block_time_ms,
            "pvm_version": self._chain.genesis.pvm_version,
            "version": {"software": SOFTWARE_VERSION, "p2p_protocol": P2P_PROTOCOL_VERSION},
            "storage": {"earliest_retained_height": self._chain.earliest_height(),
                        "retain_blocks": self._pruner.retain_blocks, "halt_height": self._chain.halt_height},
            "consensus": self._consensus.status_json(),
            "cip11": get_cip11_flags(world).to_json(),
        }

    def _validator_set_json(self) -> dict[str, Any]:
        """The CIP-11 §5.4 snapshot runners compute ``Sub(R)`` from: the newest valid at the head (the genesis
        set, epoch 0, until an ActivateValidatorSet's ``ValidatorSetActivated`` height is reached)."""
        return self._snapshot_json(self._link.newest_snapshot())

    def validators(self) -> dict[str, Any]:
        """``GET /validators``: every consensus participant in ``ValidatorSetSnapshot(0)`` order (the positions
        governance approvals are indexed by) with its genesis record, endpoints and ``in_snapshot`` (member of the
        newest CIP-11 snapshot valid at the head, whose epoch and hash head the document); and (§5.3) the
        ``reconfiguration`` that governs the head, with the same entries for both of its snapshots, so a runner
        learns where the members of ``Sub_E ∪ Sub_{E+1}`` are."""
        snap = self._link.newest_snapshot()
        records = {v.ed25519_public_key: (i, v) for i, v in enumerate(self._chain.genesis.validators)}
        genesis = self._link.genesis_snapshot().validators
        out = [{**self._validator_entry(key, records), "in_snapshot": key in snap.validators}
               for key in (*genesis, *(k for k in snap.validators if k not in genesis))]
        doc: dict[str, Any] = {"subset_epoch": snap.epoch, "validator_set_hash": "0x" + snap.set_hash.hex(),
                               "height": self._chain.height, "threshold": self._chain.genesis.threshold,
                               "group_public_key": "0x" + self._chain.genesis.group_public_key.hex(),
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
                                 "quic_endpoint": self._gossip.quic_advertise if key == self._ed_pub
                                 else self._gossip.endpoints.endpoint(key),
                                 "rpc_url": (self._gossip.rpc_advertise or None) if key == self._ed_pub
                                 else self._gossip.endpoints.rpc_url(key)}
        if v is not None:
            entry.update(index=i, name=v.name, bls_share_index=v.bls_share_index,
                         bls_public_key="0x" + v.bls_public_key.hex(),
                         fee_recipient=to_checksum_address(v.fee_recipient))
        return entry

    def consensus_evidence(self, limit: int) -> dict[str, Any]:
        """``GET /consensus/evidence``: the newest ``limit`` evidence records, newest last."""
        return {"count": self._consensus.evidence.count, "evidence": self._consensus.evidence_json(limit)}

    def _snapshot_json(self, snap: EpochSnapshot) -> dict[str, Any]:
        names = {v.ed25519_public_key: v.name for v in self._chain.genesis.validators}
        return {"subset_epoch": snap.epoch, "validator_set_hash": "0x" + snap.set_hash.hex(),
                "validators": [{"name": names.get(k, f"0x{k.hex()[:16]}"), "ed25519_public_key": "0x" + k.hex()}
                               for k in snap.validators]}

    def _reconfiguration_json(self) -> dict[str, Any]:
        """§5.3: the last ``ValidatorSetActivated(E+1, h)`` with the governed OVERLAP_BLOCKS at the head, so a
        runner plans ``Sub_E ∪ Sub_{E+1}`` during the window (empty while the chain has only the genesis set)."""
        params = self._link.cip11_params()
        rc = self._link.reconfiguration(params)
        if rc is None:
            return {}
        overlap = params.OVERLAP_BLOCKS
        return {"reconfiguration": {"old": self._snapshot_json(rc.old), "new": self._snapshot_json(rc.new),
                                    "activation_height": rc.activation_height, "overlap_blocks": overlap,
                                    "cutoff_height": rc.cutoff(overlap)}}



class NodeApi:
    """What the HTTP API (and the in-process CLI tests) call: every method of the RPC facades
    (``rpc/facade.py`` and the route modules' Protocols), each delegated to the query object that owns it."""

    def __init__(self, *, reads: ChainReads, status: StatusQueries, intake: TxIntake,
                 local_presence: Callable[[], frozenset[int]], runners: RunnerQueries, jobs: JobQueries,
                 events: EventQueries, simulations: SimulateQueries, ui: UiQueries) -> None:
        self.reads = reads
        """Blocks, transactions, receipts, accounts, actors, proofs, read-only calls."""
        self.status_queries = status
        """Health, status, validators, evidence."""
        self.intake = intake
        """Transaction submission."""
        self._local_presence = local_presence
        self.runners = runners
        """Runner Registry and parameters."""
        self.jobs = jobs
        """Jobs and the runner poll fallback."""
        self.event_queries = events
        """Actor events and terminal timers."""
        self.simulations = simulations
        """Dry runs."""
        self.ui = ui
        """The network page's block activity."""

    # -- submission
    def submit_transaction(self, tx_bytes: bytes) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.facade.NodeFacade`."""
        return self.intake.submit_transaction(tx_bytes)

    async def submit_transaction_async(self, tx_bytes: bytes) -> dict[str, Any]:
        """See :meth:`cowboy_node.node.intake.TxIntake.submit_transaction_async`."""
        return await self.intake.submit_transaction_async(tx_bytes)

    async def submit_batch_async(self, txs: list[bytes]) -> list[dict[str, Any]]:
        """See :meth:`cowboy_node.node.intake.TxIntake.submit_batch_async`."""
        return await self.intake.submit_batch_async(txs)

    # -- status
    def health(self) -> dict[str, Any]:
        """See :meth:`StatusQueries.health`."""
        return self.status_queries.health()

    def status(self) -> dict[str, Any]:
        """See :meth:`StatusQueries.status`."""
        return self.status_queries.status()

    def validators(self) -> dict[str, Any]:
        """See :meth:`StatusQueries.validators`."""
        return self.status_queries.validators()

    def consensus_evidence(self, limit: int) -> dict[str, Any]:
        """See :meth:`StatusQueries.consensus_evidence`."""
        return self.status_queries.consensus_evidence(limit)

    def local_presence(self) -> frozenset[int]:
        """Registry indices of runners with a live authenticated, accepting session here (none without
        transport)."""
        return self._local_presence()

    # -- chain reads
    def height(self) -> int:
        """Committed height."""
        return self.reads.height()

    def earliest_retained_height(self) -> int:
        """See :meth:`ChainReads.earliest_retained_height`."""
        return self.reads.earliest_retained_height()

    def block(self, height: int) -> dict[str, Any] | None:
        """See :meth:`ChainReads.block`."""
        return self.reads.block(height)

    def transaction(self, tx_hash: bytes) -> dict[str, Any] | None:
        """See :meth:`ChainReads.transaction`."""
        return self.reads.transaction(tx_hash)

    def receipt(self, tx_hash: bytes) -> dict[str, Any] | None:
        """See :meth:`ChainReads.receipt`."""
        return self.reads.receipt(tx_hash)

    def account(self, address: bytes) -> dict[str, Any]:
        """See :meth:`ChainReads.account`."""
        return self.reads.account(address)

    def state_proof(self, key: bytes) -> dict[str, Any]:
        """See :meth:`ChainReads.state_proof`."""
        return self.reads.state_proof(key)

    def account_proof(self, address: bytes) -> dict[str, Any]:
        """See :meth:`ChainReads.account_proof`."""
        return self.reads.account_proof(address)

    def actor_state_proof(self, address: bytes, key: bytes) -> dict[str, Any] | None:
        """See :meth:`ChainReads.actor_state_proof`."""
        return self.reads.actor_state_proof(address, key)

    def actor(self, address: bytes) -> dict[str, Any] | None:
        """See :meth:`ChainReads.actor`."""
        return self.reads.actor(address)

    def actor_state(self, address: bytes, key: bytes) -> dict[str, Any] | None:
        """See :meth:`ChainReads.actor_state`."""
        return self.reads.actor_state(address, key)

    def actor_state_scan(self, address: bytes, prefix: bytes, limit: int) -> dict[str, Any] | None:
        """See :meth:`ChainReads.actor_state_scan`."""
        return self.reads.actor_state_scan(address, prefix, limit)

    def actor_timers(self, address: bytes, cip1_after: bytes | None = None) -> dict[str, Any] | None:
        """See :meth:`ChainReads.actor_timers`."""
        return self.reads.actor_timers(address, cip1_after)

    def next_block_view(self) -> tuple[BlockHeader, StateStore, BlockEnv]:
        """See :meth:`ChainReads.next_block_view`."""
        return self.reads.next_block_view()

    def read_actor(self, actor: bytes, handler: str, payload: bytes, cycles_limit: int, *,
                   interrupt: InterruptHandle | None = None) -> dict[str, Any] | None:
        """See :meth:`ChainReads.read_actor`."""
        return self.reads.read_actor(actor, handler, payload, cycles_limit, interrupt=interrupt)

    # -- runners, jobs, events, dry runs, UI
    def params(self) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.facade.RunnerFacade`."""
        return self.runners.params()

    def runners_active(self, offset: int, limit: int) -> dict[str, Any]:
        """See :class:`cowboy_node.rpc.facade.RunnerFacade`."""
        return self.runners.runners_active(offset, limit)

    def runner(self, address: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.RunnerFacade`."""
        return self.runners.runner(address)

    def job(self, job_id: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""
        return self.jobs.job(job_id)

    def job_status(self, job_id: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""
        return self.jobs.job_status(job_id)

    def job_results(self, job_id: bytes) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""
        return self.jobs.job_results(job_id)

    def runner_jobs(self, runner: bytes, limit: int, after: bytes | None) -> dict[str, Any] | None:
        """See :class:`cowboy_node.rpc.facade.JobFacade`."""
        return self.jobs.runner_jobs(runner, limit, after)

    def events(self, actor: bytes, topic: str | None, from_height: int, to_height: int | None,
               after: tuple[int, int] | None, limit: int) -> dict[str, Any]:
        """See :meth:`cowboy_node.rpc.event_queries.EventQueries.events`."""
        return self.event_queries.events(actor, topic, from_height, to_height, after, limit)

    def timer_history(self, actor: bytes, limit: int) -> dict[str, Any]:
        """See :meth:`cowboy_node.rpc.event_queries.EventQueries.timer_history`."""
        return self.event_queries.timer_history(actor, limit)

    def simulate(self, req: SimulateRequest, *, interrupt: InterruptHandle | None = None) -> dict[str, Any]:
        """See :meth:`cowboy_node.rpc.simulate.SimulateQueries.simulate`."""
        return self.simulations.simulate(req, interrupt=interrupt)

    def block_activity(self, height: int, limit: int) -> dict[str, Any] | None:
        """See :meth:`cowboy_node.rpc.ui_queries.UiQueries.block_activity`."""
        return self.ui.block_activity(height, limit)
