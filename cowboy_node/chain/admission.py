"""Mempool admission: the checks a transaction passes before it is pooled.

The same validation as execution (static checks, signature, nonce floor,
affordability of the maximum fee) against the committed head, so what the
RPC accepts is what a block can include. Bad input raises ``TxInvalid`` /
``MempoolError`` / ``DecodeError`` with a stable code and changes nothing.

A reveal (``JobResultSubmit``) of a multi-runner job is also checked against the
job's commit/reveal windows at head + 1 (:func:`check_reveal_window`): REST and
the CIP-11 transport share this path, so an early reveal is never pooled.

The governed configs the static checks read (basefees, limits, flags) are read once per committed head and
reused until the head moves (:func:`head_context`): they are state at the head, so every admission at that
head would read the same values. Decoding and signature recovery may have been done elsewhere (a worker
process, ``chain/signature_pool.py``): :func:`admit` then takes the result and gives the same accept/reject decision
and error as doing them here.

A pooled transaction's hash is then recorded in the pool's signature marks (``chain/signature_marks.py``): a block
carrying exactly these bytes is executed here without recovering its signer again. Nothing else records one.
"""

from __future__ import annotations

from dataclasses import dataclass
from weakref import WeakKeyDictionary

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool
from cowboy_node.chain.signature_pool import Prepared, Recovered
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.jobs.results import load_job
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.transactions import check_signature, check_static
from cowboy_node.execution.transfer_tx import decode_transfer
from cowboy_node.execution.validity_errors import TxInvalid
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Block
from cowboy_protocol.types.job_instructions import JobResultSubmit
from cowboy_protocol.types.jobspec import decode_job_spec
from cowboy_protocol.types.transaction import Transaction


@dataclass(frozen=True, slots=True)
class HeadContext:
    """The block context admission checks against, read once for one committed head."""

    head: Block
    """The head it was read at (compared by identity: a new head is a new object)."""
    ctx: BlockContext
    """``begin_block`` at head + 1 (never mutated: the static checks only read it)."""


_head_contexts: WeakKeyDictionary[Chain, HeadContext] = WeakKeyDictionary()


def head_context(chain: Chain) -> HeadContext:
    """The admission context at ``chain``'s current head (read again only when the head has moved)."""
    cached = _head_contexts.get(chain)
    head = chain.head
    if cached is not None and cached.head is head:
        return cached
    env = BlockEnv(chain_id=chain.genesis.chain_id, height=head.header.height + 1, timestamp_ms=0,
                   fee_recipient=bytes(20), beacon=b"", parent_beacon=b"")
    fresh = HeadContext(head, begin_block(chain.world(), env))
    _head_contexts[chain] = fresh
    return fresh


def check_recovered(tx: Transaction, recovered: Recovered) -> None:
    """:func:`check_signature` given the recovery result instead of recovering (same codes and messages)."""
    if isinstance(recovered, tuple):
        raise TxInvalid(recovered[0], recovered[1], field="signature")
    if recovered != tx.sender:
        raise TxInvalid("bad_signature", "signature is not by the sender", field="signature")


def admit(tx_bytes: bytes, chain: Chain, mempool: Mempool, *, prepared: Prepared | None = None) -> Transaction:
    """Decode, validate and pool ``tx_bytes``; returns the pooled transaction.

    ``prepared``: ``tx_bytes`` decoded, hashed and its signer recovered elsewhere (``chain/signature_pool.py``); used
    only if its body is exactly the body of ``tx_bytes`` within the head's size limit, else everything is
    computed here (the same decision and error either way).
    """
    head = head_context(chain)
    ctx = head.ctx
    limit = ctx.limits.max_tx_bytes
    body = prepared.tx.body() if prepared is not None else b""
    if prepared is None or len(body) > limit or len(tx_bytes) != len(body) + 4 or tx_bytes[4:] != body:
        prepared = None
        fast = decode_transfer(tx_bytes, limit)
        tx = Transaction.from_bytes(tx_bytes, max_body=limit) if fast is None else fast
    else:
        tx = prepared.tx
    check_static(tx, ctx)
    if prepared is None:
        check_signature(tx)
    else:
        check_recovered(tx, prepared.recovered)
    world = chain.world()
    check_reveal_window(world, tx, ctx.env.height)
    account = get_account(world, tx.sender)  # the fast decoder of execution/records.py
    if tx.nonce < account.nonce:
        raise TxInvalid("nonce_too_low", f"nonce {tx.nonce} already used (next is {account.nonce})", field="nonce")
    if account.balance < tx.max_fee():
        raise TxInvalid("insufficient_funds", f"balance {account.balance} is below the maximum fee {tx.max_fee()}")
    tx_hash = tx.tx_hash() if prepared is None else prepared.tx_hash
    mempool.add(tx, account.nonce, tx_hash=tx_hash)
    # Only now: the signature check above passed and the transaction is pooled (a refusal leaves no mark).
    mempool.signature_marks.record(tx_hash)
    return tx


def check_reveal_window(world: WorldState, tx: Transaction, height: int) -> None:
    """Refuse a JobResultSubmit that execution at ``height`` (head + 1) would certainly fail for its timing.

    CIP-11 §10.3: "A validator receiving JobResult for a multi-runner job before the commitment is included /
    reveal window opens MUST hold it or reject [...]; it MUST NOT submit an early reveal." For a job of M > 1
    runners (under-filled or not) the reveal phase is ``commit_end < h ≤ deadline`` (``execution/jobs/results.py``), so
    a reveal is refused with ``reveal_window_not_open`` while ``height ≤ commit_end``, and with
    ``reveal_without_commit`` once the window is open but the sender's commitment was never included (no
    commit can be included after ``commit_end``). Everything else (unknown job, not on the committee, too
    late, M == 1) is left to execution, which owns those codes.
    """
    ins = tx.instruction
    if not isinstance(ins, JobResultSubmit):
        return
    rec = load_job(world, ins.job_id)
    if rec is None or rec.status != JobStatus.ASSIGNED:
        return
    # The job's M, not the seats drawn, as execution decides: an under-filled committee (one seat of an M > 1
    # job, §9.2) still commits before it reveals.
    if decode_job_spec(rec.spec).verification.runners <= 1:
        return
    if tx.sender not in rec.committee:
        return
    if height <= rec.commit_end:
        raise TxInvalid("reveal_window_not_open",
                        f"reveals of job 0x{ins.job_id.hex()} open after block {rec.commit_end} "
                        f"(the next block is {height}); send the reveal once the window is open",
                        field="instruction")
    if rec.commitment_of(tx.sender) is None:
        raise TxInvalid("reveal_without_commit",
                        f"no commitment of the sender to job 0x{ins.job_id.hex()} was included before the commit "
                        f"phase ended at block {rec.commit_end}", field="instruction")
