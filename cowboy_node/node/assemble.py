"""The composition root: one :func:`assemble` builds every part of a validator by constructor arguments, in an
order where each part's dependencies exist already (the way CometBFT's ``node/setup.go`` builds its reactors).

Order, and why:

1. the stop signal, the state lock, the admission workers (nothing below them);
2. the peer router and the peer network (constructed, not started): consensus and the gossip send through it,
   and every part that serves a channel registers its handlers on the router (step 6);
3. the transaction gossip and the intake (admission of RPC submissions, runner results, gossiped transactions);
4. the transport link (the runner transport's ``NodeLink``) and the transport (constructed, not started);
5. presence/endpoint gossip, pruner, snapshots, the after-commit follower, then consensus (it calls the
   follower; the follower stops the node through the shared stop signal, not through consensus);
6. the peer channels registered on the router, the read API composed.

Start-up (``node/startup.py``) then starts the servers; nothing is attached to any part after this returns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from cowboy_node.chain.admission import head_context
from cowboy_node.chain.candidates import candidate_limit
from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.chain.mempool import Mempool
from cowboy_node.chain.mempool_journal import MempoolJournal
from cowboy_node.chain.signature_pool import SignaturePool
from cowboy_node.consensus.journal import VoteJournal
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.stop import StopSignal
from cowboy_node.consensus.sync_messages import CH_TX_BATCH
from cowboy_node.crypto import bls, threshold
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.node.after_commit import CommitFollower, account_nonces
from cowboy_node.node.api import ChainReads, NodeApi, StatusQueries
from cowboy_node.node.consensus_service import ConsensusService, ServiceConfig
from cowboy_node.node.intake import AdmissionWorkers, TxIntake, admit_gossiped
from cowboy_node.node.keys import ValidatorKey
from cowboy_node.node.node import Node
from cowboy_node.node.peer_gossip import ValidatorGossip
from cowboy_node.node.proposal_budget import ProposalBudget
from cowboy_node.node.pruner import Pruner
from cowboy_node.node.snapshot_server import SnapshotServer
from cowboy_node.node.snapshotter import Snapshotter
from cowboy_node.node.statesync_fallback import FallbackTrigger
from cowboy_node.node.transport_link import TransportLink
from cowboy_node.node.tx_gossip import TxGossip, TxGossipConfig
from cowboy_node.observability.job_activity import JobActivity, block_job_activity
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.p2p.peer_router import PeerRouter
from cowboy_node.p2p.peers import PeerNetwork
from cowboy_node.rpc.event_queries import EventQueries
from cowboy_node.rpc.job_queries import JobQueries
from cowboy_node.rpc.runner_queries import RunnerQueries
from cowboy_node.rpc.simulate import SimulateQueries
from cowboy_node.rpc.ui_queries import UiQueries
from cowboy_node.snapshot.messages import CH_SNAPSHOT
from cowboy_node.transport.service import TransportService
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction

_SELECTION_SECTIONS = frozenset({"job_filter", "job_draw"})
"""Sections execution reports through the same observer as the End-of-Block steps (job selection timing)."""

PeerFactory = Callable[[Callable[[int, int, bytes], None]], PeerNetwork]
"""Builds the (not yet started) peer network around the router's ``dispatch`` (start-up: from ``[p2p]``)."""
TransportFactory = Callable[[TransportLink], TransportService]
"""Builds the (not yet started) runner transport over the node's link (start-up: from ``[quic]``)."""


def validator_index(chain: Chain, key: ValidatorKey) -> int:
    """This key's position in the genesis validator list, its BLS share checked against the genesis record.
    Raises ValueError naming the mismatch."""
    validators = chain.genesis.validators
    ed_pub = ed25519.public_key_from_seed(key.ed25519_seed)
    me = next((i for i, v in enumerate(validators) if v.ed25519_public_key == ed_pub), None)
    if me is None:
        raise ValueError("validator key is not in the genesis validator set (ed25519 key mismatch)")
    validator = validators[me]
    if bls.public_key(bls.secret_key_from_bytes(key.bls_secret)) != validator.bls_public_key:
        raise ValueError("validator key's BLS share does not match genesis validators[].bls_public_key")
    if key.bls_share_index != validator.bls_share_index:
        raise ValueError(f"validator key's bls_share_index {key.bls_share_index} is not genesis "
                         f"validators[{me}].bls_share_index {validator.bls_share_index}")
    return me


def _inspect(chain: Chain, prepared: PreparedBlock, env: BlockEnv,
             observe: Observe | None) -> tuple[JobActivity, list[tuple[str, float]]]:
    """Job activity of a block about to be committed, and its End-of-Block step times (own blocks only)."""
    durations: list[tuple[str, float]] = list(getattr(observe, "durations", ()))
    selection = [(name, s) for name, s in durations if name in _SELECTION_SECTIONS]
    steps = [(name, s) for name, s in durations if name not in _SELECTION_SECTIONS]
    return block_job_activity(chain, prepared, env, selection), steps  # the parent is still the head


def assemble(chain: Chain, mempool: Mempool, key: ValidatorKey, *, block_time_ms: int,
             metrics: NodeMetrics | None = None, delta_ms: int = 0, election: Election = Election.RANDOM,
             skip_timeout_views: int = 10, journal: VoteJournal | None = None, admission_workers: int = 0,
             double_sign_check_views: int = 10, fresh_key: bool = False, sync_verify_workers: int = 0,
             retain_blocks: int = 0, prune_batch_blocks: int = 64, snapshotter: Snapshotter | None = None,
             snapshot_dir: Path | None = None,
             state_sync_fallback: Callable[[StopSignal], FallbackTrigger] | None = None,
             mempool_journal: MempoolJournal | None = None, peers: PeerFactory | None = None,
             transport: TransportFactory | None = None, quic_advertise: str | None = None,
             rpc_advertise: str = "", commit_listeners: Sequence[Callable[[int], None]] = (),
             local_presence: Callable[[], frozenset[int]] | None = None,
             signature_pool: SignaturePool | None = None, tx_gossip_flush_ms: int = 50) -> Node:
    """A validator over ``chain`` and ``mempool`` with ``key`` (see the module docstring for the order).

    ``peers``/``transport`` build the peer network and the runner transport (None: none); ``quic_advertise`` and
    ``rpc_advertise`` are what we announce (start-up gives them only with a transport). ``local_presence``
    replaces the transport's sessions as this validator's presence, ``signature_pool`` the one
    ``admission_workers`` would make (tests); ``tx_gossip_flush_ms`` is ``[p2p] tx_gossip_flush_ms``. Raises
    ValueError when ``key`` is not a genesis validator's."""
    me = validator_index(chain, key)
    validator = chain.genesis.validators[me]
    metrics = metrics or NodeMetrics()
    ed_pub = ed25519.public_key_from_seed(key.ed25519_seed)
    stop = StopSignal()
    tree_lock = threading.Lock()
    workers = AdmissionWorkers(admission_workers, signature_pool)
    # 2. the peer layer: a channel table filled in step 6, and the network around it (None: one validator).
    router = PeerRouter(metrics)
    net = peers(router.dispatch) if peers is not None else None
    # 3. transactions in.
    tx_gossip = TxGossip(
        broadcast=lambda: None if net is None else net.broadcast,
        admit=partial(admit_gossiped, chain, mempool, mempool_journal), pool=workers.current,
        max_body=lambda: head_context(chain).ctx.limits.max_tx_bytes,
        on_count=lambda result, n: metrics.tx_gossip.labels(result=result).inc(n),
        config=TxGossipConfig(flush_interval_s=tx_gossip_flush_ms / 1000))
    intake = TxIntake(chain, mempool, journal=mempool_journal, gossip=tx_gossip, workers=workers, metrics=metrics,
                      stopping=lambda: stop.requested)
    # 4. the runner transport over its link.
    link = TransportLink(chain, tree_lock, ed_pub, submit=intake.submit_transaction)
    link.genesis_snapshot()  # read (and checked) now, so later reads on the event loop never wait for the lock
    sessions = transport(link) if transport is not None else None
    presence = local_presence or (
        (lambda: frozenset()) if sessions is None else (lambda: sessions.local_presence(chain.height)))
    # 5. what follows a commit, then consensus.
    gossip = ValidatorGossip(chain, ed_seed=key.ed25519_seed, ed_pub=ed_pub, net=net, local_presence=presence,
                             sessions=sessions is not None, metrics=metrics,
                             quic_advertise=quic_advertise, rpc_advertise=rpc_advertise)
    pruner = Pruner(chain.store, retain_blocks=retain_blocks, batch_blocks=prune_batch_blocks)
    follower = CommitFollower(chain, mempool, journal=mempool_journal, push=sessions, gossip=gossip, metrics=metrics,
                              pruner=pruner, snapshotter=snapshotter, stop=stop, listeners=commit_listeners)
    n = len(chain.genesis.validators)
    # Δ: with one validator nobody else can take over, so the timers only guard against a stuck build.
    delta = delta_ms or (60_000 if n == 1 else block_time_ms + 500)
    budget = ProposalBudget(delta / 2000)

    def take_transactions() -> list[Transaction]:
        """The mempool's ready transactions for the next block (nonces against the committed head), no more
        than the block can include (``chain/candidates.py``) nor than fit our build time budget."""
        limit = budget.limit(candidate_limit(chain, chain.genesis.limits.max_block_txs))
        return mempool.ready(account_nonces(chain), limit)

    scheme = ThresholdScheme(chain.genesis.group_public_key, chain.genesis.share_public_keys(),
                             chain.genesis.threshold,
                             threshold.Share(key.bls_share_index, bls.secret_key_from_bytes(key.bls_secret)))
    consensus = ConsensusService(
        chain, config=ServiceConfig(me=me, block_time_ms=block_time_ms, delta_ms=delta, election=election,
                                    skip_timeout=skip_timeout_views, double_sign_check_views=double_sign_check_views,
                                    fresh_key=fresh_key, sync_verify_workers=sync_verify_workers,
                                    state_sync_fallback=state_sync_fallback(stop) if state_sync_fallback else None),
        scheme=scheme, tree_lock=tree_lock, proposer_key=ed_pub, sign=partial(ed25519.sign, key.ed25519_seed),
        fee_recipient=validator.fee_recipient, take_transactions=take_transactions,
        presence=gossip.presence_input, inspect=partial(_inspect, chain), on_commit=follower.after_commit,
        admit_gossip=tx_gossip.receive_single, metrics=metrics, journal=journal,
        signature_checked=mempool.signature_marks.checked, net=net, on_built=budget.observe,
        known_transaction=mempool.by_body, stop=stop)  # a leader's block reuses our pool's decoded txs
    snapshot_server = None if snapshot_dir is None else SnapshotServer(
        snapshot_dir, send=lambda to, ch, p: net is not None and net.send(to, ch, p))
    # 6. the peer channels, and the read API.
    router.register_all(consensus.peer_handlers())
    router.register_all(gossip.peer_handlers())
    router.register(CH_TX_BATCH, tx_gossip.receive)
    if snapshot_server is not None:
        router.register(CH_SNAPSHOT, snapshot_server.receive)
    reads = ChainReads(chain, mempool, tree_lock, finalization=consensus.records.finalization_bytes,
                       parent_seed=consensus.forks.parent_seed, fee_recipient=validator.fee_recipient)
    status = StatusQueries(chain, mempool, consensus=consensus, link=link, gossip=gossip, pruner=pruner,
                           ed_pub=ed_pub, fee_recipient=validator.fee_recipient, block_time_ms=block_time_ms)
    api = NodeApi(reads=reads, status=status, intake=intake, local_presence=presence,
                  runners=RunnerQueries(chain, tree_lock), jobs=JobQueries(chain, tree_lock),
                  events=EventQueries(chain), simulations=SimulateQueries(reads.next_block_view),
                  ui=UiQueries(chain))
    return Node(chain=chain, mempool=mempool, metrics=metrics, index=me, fee_recipient=validator.fee_recipient,
                block_time_ms=block_time_ms, ed25519_seed=key.ed25519_seed, stop=stop, tree_lock=tree_lock,
                workers=workers, tx_gossip=tx_gossip, intake=intake, link=link, transport=sessions, net=net,
                gossip=gossip,
                proposal_budget=budget, pruner=pruner, snapshotter=snapshotter, snapshot_server=snapshot_server,
                consensus=consensus, follower=follower, api=api)
