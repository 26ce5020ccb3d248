"""Mempool admission: the checks a transaction passes before it is pooled.

The same validation as execution (static checks, signature, nonce floor,
affordability of the maximum fee) against the committed head, so what the
RPC accepts is what a block can include. Bad input raises ``TxInvalid`` /
``MempoolError`` / ``DecodeError`` with a stable code and changes nothing.
"""

from __future__ import annotations

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.errors import TxInvalid
from cowboy_node.execution.system_state import get_account, get_chain_limits
from cowboy_node.execution.transactions import check_signature, check_static
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
    account = get_account(world, tx.sender)
    if tx.nonce < account.nonce:
        raise TxInvalid("nonce_too_low", f"nonce {tx.nonce} already used (next is {account.nonce})", field="nonce")
    if account.balance < tx.max_fee():
        raise TxInvalid("insufficient_funds", f"balance {account.balance} is below the maximum fee {tx.max_fee()}")
    mempool.add(tx, account.nonce)
    return tx
