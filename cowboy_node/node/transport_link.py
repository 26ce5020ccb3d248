"""The node's side of the transport interface (:class:`cowboy_node.transport.service.NodeLink`).

Reads happen at the committed head under the node's state lock; the transport never touches execution.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cowboy_node.chain.chain import ChainError
from cowboy_node.execution.jobs.job_record import JobRecord, JobStatus, job_key
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import get_cip11_params
from cowboy_node.execution.validator_set import get_snapshot, newest_epoch, reconfiguration_at, snapshots_at
from cowboy_node.rpc.facade import RpcError
from cowboy_node.transport.service import AssignmentInfo, TransactionRefused
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.protocol_errors import TransportError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import (
    EpochSnapshot,
    Reconfiguration,
    epoch_paired_valid,
    select_snapshot,
    valid_snapshots,
)
from cowboy_protocol.transport.validator_session import Admission
from cowboy_protocol.types.params import Cip11Params
from cowboy_protocol.types.runner import Health

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain


class TransportLink:
    """The transport's :class:`~cowboy_node.transport.service.NodeLink`: admission, assignments and the head
    height, read from ``chain`` under the state lock; runners' result transactions go to ``submit`` (the node's
    admission path, :class:`cowboy_node.node.intake.TxIntake`)."""

    def __init__(self, chain: Chain, tree_lock: threading.Lock, ed_pub: bytes,
                 submit: Callable[[bytes], dict[str, Any]]) -> None:
        self.chain = chain
        """The node's chain."""
        self._tree_lock = tree_lock
        """Held while a block is built."""
        self._ed_pub = ed_pub
        """This validator's raw Ed25519 peer_pubkey."""
        self._submit = submit
        self._reconfiguration: Reconfiguration | None = None
        """A ``ValidatorSetActivated`` given to :meth:`activate_validator_set` (tests); None: follow the chain's
        activation records (ActivateValidatorSet, ``execution/validator_set.py``)."""
        self._valid_cache: tuple[tuple[int, int, int], tuple[EpochSnapshot, ...]] | None = None
        """``((head, height, OVERLAP_BLOCKS), snapshots)`` of the last chain read: the records change only with a
        new head (a committed block), so admissions at one head share one read."""
        self._genesis_snapshot: EpochSnapshot | None = None
        """``ValidatorSetSnapshot(0)`` once read from state (:meth:`genesis_snapshot`)."""

    @property
    def chain_id(self) -> str:
        """The chain's id."""
        return self.chain.genesis.chain_id

    def head_height(self) -> int:
        """Committed height."""
        return self.chain.height

    def forward_transaction(self, tx_bytes: bytes) -> None:
        """A runner's result transaction, admitted like any other (``submit``); a refusal is
        re-raised as the transport's :class:`TransactionRefused` with the same code."""
        try:
            self._submit(tx_bytes)
        except RpcError as e:
            raise TransactionRefused(e.code, e.message) from None

    def cip11_params(self) -> Cip11Params:
        """The governed CIP-11 §13 constants active at the committed head (read under the state lock)."""
        with self._tree_lock:
            return get_cip11_params(self.chain.world())

    # --- §5.3 / §5.4 validator-set snapshots ---
    def genesis_snapshot(self) -> EpochSnapshot:
        """``ValidatorSetSnapshot(0)``: the genesis validators' peer keys (§5.4 static topology), read from the
        genesis-anchored chain state (it never changes, so it is read once)."""
        snap = self._genesis_snapshot
        if snap is None:
            with self._tree_lock:
                snap = get_snapshot(self.chain.world(), 0)
            if snap is None:
                raise ChainError("the chain state has no ValidatorSetSnapshot(0); the data directory was made by "
                                 "an older version — re-initialise it from genesis")
            self._genesis_snapshot = snap
        return snap

    def activate_validator_set(self, snapshot: EpochSnapshot, activation_height: int) -> None:
        """Override the chain's activation records with a local ``ValidatorSetActivated(E+1, activation_height)``
        (tests of the transport with snapshots that no genesis could hold). The node itself follows the chain:
        an executed ActivateValidatorSet (0x48) is picked up at the next read, no call needed."""
        prior = self._reconfiguration.new if self._reconfiguration is not None else self.genesis_snapshot()
        self._reconfiguration = Reconfiguration(prior, snapshot, activation_height)

    def reconfiguration(self, params: Cip11Params | None = None) -> Reconfiguration | None:
        """The ``ValidatorSetActivated(E+1, h)`` that governs the head (§5.3): the pending one before ``h``, the
        active epoch's own during and after its window; None while the chain has only the genesis epoch."""
        if self._reconfiguration is not None:
            return self._reconfiguration
        with self._tree_lock:
            world = self.chain.world()
            overlap = (params or get_cip11_params(world)).OVERLAP_BLOCKS
            return reconfiguration_at(world, self.chain.height, overlap)

    def valid_snapshots(self, height: int | None = None,
                        params: Cip11Params | None = None) -> tuple[EpochSnapshot, ...]:
        """The snapshots valid at ``height`` (default: the head), oldest first, with the governed OVERLAP_BLOCKS
        active at the head: from the chain's ValidatorSetSnapshot / activation records
        (:func:`cowboy_node.execution.validator_set.snapshots_at`)."""
        params = params or self.cip11_params()
        h = self.chain.height if height is None else height
        if self._reconfiguration is not None:
            return valid_snapshots(self.genesis_snapshot(), self._reconfiguration, h, params.OVERLAP_BLOCKS)
        key = (self.chain.height, h, params.OVERLAP_BLOCKS)
        cached = self._valid_cache
        if cached is not None and cached[0] == key:  # one state read per head, not one per Hello
            return cached[1]
        with self._tree_lock:
            world = self.chain.world()
            valid = snapshots_at(world, h, params.OVERLAP_BLOCKS) if newest_epoch(world) > 0 else None
        valid = valid or (self.genesis_snapshot(),)
        self._valid_cache = (key, valid)
        return valid

    def newest_snapshot(self, height: int | None = None) -> EpochSnapshot:
        """The newest snapshot valid at ``height`` (what this validator offers when it must pick one)."""
        return self.valid_snapshots(height)[-1]

    def admission(self, runner: PubKey, subset_epoch: int | None = None,
                  offered_hash: bytes | None = None) -> Admission:
        """§6.2: a secp256k1 key whose address is a registered, not deregistered runner, and (§5.2, §5.3) this
        validator is in the runner's ``Sub_epoch(R)`` for the snapshot the Hello's ``(subset_epoch,
        validator_set_hash)`` selects among those valid at the head (omitted: the newest valid snapshot). A pair
        selecting no valid snapshot — e.g. ``validator_set_hash(E)`` past the overlap cutoff — is
        ``WrongValidatorSet``. Sub(R) uses the governed MIN_SUBSET/MAX_SUBSET at the head."""
        try:
            address = runner.address()
        except TransportError:
            return Admission(False, GoodbyeReason.NOT_REGISTERED)
        params = self.cip11_params()
        valid = self.valid_snapshots(params=params)
        if subset_epoch is None or offered_hash is None:
            subset_epoch, offered_hash = valid[-1].epoch, valid[-1].set_hash
        if select_snapshot(valid, subset_epoch, offered_hash) is None:
            return Admission(False, GoodbyeReason.WRONG_VALIDATOR_SET)
        if not epoch_paired_valid(self._ed_pub, runner.key, valid, subset_epoch, offered_hash,
                                  min_subset=params.MIN_SUBSET, max_subset=params.MAX_SUBSET):
            return Admission(False, GoodbyeReason.NOT_IN_SUBSET)
        with self._tree_lock:
            rec = store.get_runner(self.chain.world(), address)
        if rec is None:
            return Admission(False, GoodbyeReason.NOT_REGISTERED)
        if rec.health == Health.DEREGISTERED:
            return Admission(False, GoodbyeReason.DEREGISTERED)
        return Admission(True, runner_index=rec.index, address=address)

    def runner_health(self, addresses: Sequence[bytes]) -> list[Health | None]:
        """Registry health of each address at the head (None: never registered), read under one lock."""
        with self._tree_lock:
            world = self.chain.world()
            records = [store.get_runner(world, a) for a in addresses]
        return [None if r is None else r.health for r in records]

    def assignment_for(self, job_id: bytes) -> AssignmentInfo | None:
        """The job's current assignment at the head."""
        with self._tree_lock:
            world = self.chain.world()
            raw = world.get(job_key(job_id))
            if raw is None:
                return None
            rec = JobRecord.decode(raw)
            records = [store.get_runner(world, address) for address in rec.committee]
        return AssignmentInfo(job_spec=rec.spec, assignment_height=rec.assignment_height,
                              deadline_block=rec.deadline_block,
                              committee=tuple(r.index for r in records if r is not None),
                              live=rec.status == JobStatus.ASSIGNED, failed=rec.status == JobStatus.FAILED,
                              commit_end=rec.commit_end)
