"""The node's side of the transport interface (:class:`cowboy_node.transport.service.NodeLink`).

Reads happen at the committed head under the node's state lock; the transport never touches execution.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cowboy_node.execution.jobs.model import JobRecord, JobStatus, job_key
from cowboy_node.execution.runners import store
from cowboy_node.rpc.facade import RpcError
from cowboy_node.transport.service import AssignmentInfo, TransactionRefused
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.errors import TransportError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import in_subset
from cowboy_protocol.transport.validator_session import Admission
from cowboy_protocol.types.runner import Health

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain


class TransportLink:
    """Mixin for a node holding ``chain`` and ``_tree_lock``: admission, assignments and the head height."""

    chain: Chain
    """The node's chain."""
    _tree_lock: threading.Lock
    """Held while a block is built."""
    _ed_pub: bytes
    """This validator's raw Ed25519 peer_pubkey."""

    @property
    def chain_id(self) -> str:
        """The chain's id."""
        return self.chain.genesis.chain_id

    def head_height(self) -> int:
        """Committed height."""
        return self.chain.height

    def submit_transaction(self, tx_bytes: bytes) -> dict[str, Any]:
        """The node's admission path (implemented by the node)."""
        raise NotImplementedError

    def forward_transaction(self, tx_bytes: bytes) -> None:
        """A runner's result transaction, admitted like any other (:meth:`submit_transaction`); a refusal is
        re-raised as the transport's :class:`TransactionRefused` with the same code."""
        try:
            self.submit_transaction(tx_bytes)
        except RpcError as e:
            raise TransactionRefused(e.code, e.message) from None

    def admission(self, runner: PubKey) -> Admission:
        """§6.2: a secp256k1 key whose address is a registered, not deregistered runner, and (§5.2) this
        validator is in the runner's ``Sub(R)`` over the genesis snapshot (always true with one validator)."""
        try:
            address = runner.address()
        except TransportError:
            return Admission(False, GoodbyeReason.NOT_REGISTERED)
        snapshot = [v.ed25519_public_key for v in self.chain.genesis.validators]
        if not in_subset(self._ed_pub, runner.key, snapshot):
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
