"""Mempool admission: the checks a transaction passes before it is pooled.

The same validation as execution (static checks, signature, nonce floor,
affordability of the maximum fee) against the committed head, so what the
RPC accepts is what a block can include. Bad input raises ``TxInvalid`` /
``MempoolError`` / ``DecodeError`` with a stable code and changes nothing.

A reveal (``JobResultSubmit``) of a multi-runner job is also checked against the
job's commit/reveal windows at head + 1 (:func:`check_reveal_window`): REST and
the CIP-11 transport share this path, so an early reveal is never pooled.
"""

from __future__ import annotations

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.errors import TxInvalid
from cowboy_node.execution.jobs.model import JobStatus
from cowboy_node.execution.jobs.results import load_job
from cowboy_node.execution.system_state import get_account, get_chain_limits
from cowboy_node.execution.transactions import check_signature, check_static
from cowboy_node.state.world import WorldState
from cowboy_protocol.types.job_instructions import JobResultSubmit
from cowboy_protocol.types.transaction import Transaction


def admit(tx_bytes: bytes, chain: Chain, mempool: Mempool) -> Transaction:
    """Decode, validate and pool ``tx_bytes``; returns the pooled transaction."""
    world = chain.world()
    tx = Transaction.from_bytes(tx_bytes, max_body=get_chain_limits(world).max_tx_bytes)
    env = BlockEnv(chain_id=chain.genesis.chain_id, height=chain.height + 1, timestamp_ms=0,
                   fee_recipient=bytes(20), beacon=b"", parent_beacon=b"")
    ctx = begin_block(world, env)
    check_static(tx, ctx)
    check_signature(tx)
    check_reveal_window(world, tx, chain.height + 1)
    account = get_account(world, tx.sender)
    if tx.nonce < account.nonce:
        raise TxInvalid("nonce_too_low", f"nonce {tx.nonce} already used (next is {account.nonce})", field="nonce")
    if account.balance < tx.max_fee():
        raise TxInvalid("insufficient_funds", f"balance {account.balance} is below the maximum fee {tx.max_fee()}")
    mempool.add(tx, account.nonce)
    return tx


def check_reveal_window(world: WorldState, tx: Transaction, height: int) -> None:
    """Refuse a JobResultSubmit that execution at ``height`` (head + 1) would certainly fail for its timing.

    CIP-11 §10.3: "A validator receiving JobResult for a multi-runner job before the commitment is included /
    reveal window opens MUST hold it or reject [...]; it MUST NOT submit an early reveal." For a committee of
    more than one runner the reveal phase is ``commit_end < h ≤ deadline`` (``execution/jobs/results.py``), so
    a reveal is refused with ``reveal_window_not_open`` while ``height ≤ commit_end``, and with
    ``reveal_without_commit`` once the window is open but the sender's commitment was never included (no
    commit can be included after ``commit_end``). Everything else (unknown job, not on the committee, too
    late, M == 1) is left to execution, which owns those codes.
    """
    ins = tx.instruction
    if not isinstance(ins, JobResultSubmit):
        return
    rec = load_job(world, ins.job_id)
    if rec is None or rec.status != JobStatus.ASSIGNED or len(rec.committee) <= 1:
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
