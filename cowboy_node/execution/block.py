"""Block-level state transition: begin, transactions, End of Block, roots.

Two entry points share the same code path:
 - :func:`build_block` (proposer): executes candidates, skipping the ones that
   are invalid at that point, and reports what it included.
 - :func:`execute_block` (verifier / replay): every transaction must be valid,
   and the computed roots must match the header, else :class:`InvalidBlock`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cowboy_node.execution.context import BlockContext, BlockEnv, EobReport, Observe
from cowboy_node.execution.end_of_block import run_end_of_block
from cowboy_node.execution.jobs.dispatch import process_pending
from cowboy_node.execution.presence_certificates import derive_presence, mode_a_active
from cowboy_node.execution.records import encode_receipt
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.execution.system_state import (
    apply_staged_timer_config,
    get_basefee_config,
    get_basefees,
    get_chain_limits,
    get_cip11_flags,
    get_system_deployers,
)
from cowboy_node.execution.transactions import INTERNAL_ERROR, ContextMark, describe_exception, execute_transaction
from cowboy_node.execution.validity_errors import InvalidBlock, TxInvalid
from cowboy_node.state.kv_store import WriteOp
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import BlockHeader
from cowboy_node.types.merkle import receipts_root, tx_root
from cowboy_node.types.presence import decode_presence
from cowboy_node.types.receipt import Event, Receipt
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.params import Cip11Flags
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import DecodeError


@dataclass(slots=True)
class BlockResult:
    """Outcome of executing a block body."""

    transactions: list[Transaction]
    """Included transactions in order."""
    receipts: list[Receipt]
    """One receipt per included transaction."""
    cycles_used: int
    """Total cycles charged."""
    cells_used: int
    """Total cells charged."""
    cycle_basefee: int
    """Basefee per cycle applied in the block."""
    cell_basefee: int
    """Basefee per cell applied in the block."""
    state_root: bytes
    """State root after End of Block."""
    state_ops: list[WriteOp]
    """State and tree writes to put in the block's commit batch."""
    tx_root: bytes
    """Merkle root of the included transaction hashes."""
    receipts_root: bytes
    """Merkle root of the receipts."""
    tx_hashes: list[bytes] = field(default_factory=list)
    """Hash of each included transaction, in order (the tx root's leaves; the commit indexes them)."""
    receipt_bytes: list[bytes] = field(default_factory=list)
    """Canonical encoding of each receipt, in order (the receipts root's leaves hash them; the commit stores
    them): encoded once here instead of again at commit."""
    rejected: list[tuple[Transaction, TxInvalid]] = field(default_factory=list)
    """(build mode) candidates left out and why."""
    eob: EobReport = field(default_factory=EobReport)
    """What End of Block did (``ctx.eob``): counters the node turns into metrics."""
    jobs_assigned: list[bytes] = field(default_factory=list)
    """Jobs given a committee in this block (new, pending or re-selected), in order: the node pushes these
    assignments to their runners once the block is committed (CIP-11 §10.1)."""
    jobs_finished: list[bytes] = field(default_factory=list)
    """Jobs that reached a terminal state in this block (their pushes are cancelled, §10.5)."""
    internal_errors: list[tuple[bytes, str]] = field(default_factory=list)
    """``(tx_hash, description)`` of transactions an unexpected exception failed or (build mode) left out with
    ``internal_error``: the node logs and counts them (execution itself never logs)."""
    block_events: list[Event] = field(default_factory=list)
    """Events of the block itself, not of a transaction (End of Block: timer fires and removals, Mailbox,
    jobs, governance), in order. Not committed in the header: the node indexes them (``chain/event_index``)."""


def decode_block_presence(world: WorldState, env: BlockEnv, flags: Cip11Flags, *,
                          strict: bool = True) -> tuple[frozenset[int], int]:
    """PresenceInput(H) decoded once against |registry(H−1)| (CIP-11 §7.2), and that size.

    Active Mode B (present-first on; Mode A is never effective on this node, its K_HARD_MIN guard needs ≥ 20
    validators): the field is required and must be well formed, else the block is invalid. Otherwise an
    absent or malformed field is an empty present set and live selection ignores presence. ``strict=False``
    (the proposer building its own block) degrades a bad field to the empty set instead of raising.
    """
    size = registry_size(world)
    if not flags.CIP11_PRESENT_FIRST_ENABLED:
        return frozenset(), size
    if not strict:
        try:
            return (frozenset() if env.presence_input is None else decode_presence(env.presence_input, size)), size
        except DecodeError:
            return frozenset(), size
    if env.presence_input is None:
        raise InvalidBlock("missing_presence_input", "PresenceInputV1 is required while present-first selection "
                           "is enabled", field="presence_input")
    try:
        return decode_presence(env.presence_input, size), size
    except DecodeError as e:
        raise InvalidBlock("invalid_presence_input", e.message, field="presence_input") from e


def begin_block(world: WorldState, env: BlockEnv) -> BlockContext:
    """Read the governed configs once for this block (mid-block changes apply from the next)."""
    cycle_bf, cell_bf = get_basefees(world)
    return BlockContext(
        env=env,
        basefee_config=get_basefee_config(world),
        limits=get_chain_limits(world),
        flags=get_cip11_flags(world),
        system_deployers=get_system_deployers(world),
        cycle_basefee=cycle_bf,
        cell_basefee=cell_bf,
    )


def start_block(world: WorldState, env: BlockEnv, *, strict_presence: bool = True,
                observe: Observe | None = None) -> BlockContext:
    """:func:`begin_block`, then decode the block's PresenceInput and run the pending-selection pass
    (CIP-11 §9.2: at the start of the block, before any transaction). ``observe`` is kept in the context."""
    ctx = begin_block(world, env)
    ctx.observe = observe
    if mode_a_active(world, ctx.flags, env.height):
        # Mode A (§8.3 point 3): PresenceInput(H) comes from parent-state proofs; the proposer's field is ignored.
        ctx.hard_exclude = True
        ctx.present, ctx.registry_size = derive_presence(world, env.height), registry_size(world)
    else:
        ctx.present, ctx.registry_size = decode_block_presence(world, env, ctx.flags, strict=strict_presence)
    process_pending(world, ctx)
    return ctx


def _finish(world: WorldState, ctx: BlockContext, txs: list[Transaction], receipts: list[Receipt],
            rejected: list[tuple[Transaction, TxInvalid]], observe: Observe | None = None,
            tx_hashes: list[bytes] | None = None) -> BlockResult:
    run_end_of_block(world, ctx, observe=observe)
    apply_staged_timer_config(world)  # an UpdateTimerConfig of this block applies from the next (seeds/003 §7)
    root, ops = world.prepare_commit()
    if tx_hashes is None:
        tx_hashes = [t.tx_hash() for t in txs]
    encoded = [encode_receipt(r) for r in receipts]
    return BlockResult(
        transactions=txs, receipts=receipts, cycles_used=ctx.cycles_used, cells_used=ctx.cells_used,
        cycle_basefee=ctx.cycle_basefee, cell_basefee=ctx.cell_basefee, state_root=root, state_ops=ops,
        tx_root=tx_root(tx_hashes), receipts_root=receipts_root([keccak256(b) for b in encoded]),
        tx_hashes=tx_hashes, receipt_bytes=encoded, rejected=rejected, eob=ctx.eob,
        jobs_assigned=list(ctx.jobs_assigned), jobs_finished=list(ctx.jobs_finished),
        internal_errors=list(ctx.internal_errors),
        block_events=[e for e in ctx.events if isinstance(e, Event)],
    )


def build_block(world: WorldState, env: BlockEnv, candidates: Iterable[Transaction], *,
                signatures_checked: bool = False, max_txs: int | None = None,
                observe: Observe | None = None) -> BlockResult:
    """Execute candidates in order, skipping invalid ones; stop when the block is full.

    ``observe`` (optional) wraps each End-of-Block step, see :func:`run_end_of_block`.
    """
    ctx = start_block(world, env, strict_presence=False, observe=observe)
    limit = ctx.limits.max_block_txs if max_txs is None else min(max_txs, ctx.limits.max_block_txs)
    txs: list[Transaction] = []
    receipts: list[Receipt] = []
    rejected: list[tuple[Transaction, TxInvalid]] = []
    for tx in candidates:
        if len(txs) >= limit:
            break
        # An unexpected exception outside the instruction (which execute_transaction already turns into an
        # internal_error receipt) leaves the candidate out instead of failing the whole block.
        cp, mark = world.checkpoint(), ContextMark(ctx)
        try:
            receipts.append(execute_transaction(world, tx, ctx, signature_checked=signatures_checked))
        except TxInvalid as e:
            world.release(cp)
            rejected.append((tx, e))
            continue
        except Exception as e:
            world.revert(cp)
            mark.restore(ctx, tx.tx_hash())
            ctx.internal_errors.append((tx.tx_hash(), describe_exception(e)))
            rejected.append((tx, TxInvalid(INTERNAL_ERROR, "unexpected error while executing the transaction")))
            continue
        world.release(cp)
        txs.append(tx)
    return _finish(world, ctx, txs, receipts, rejected, observe)


def execute_block(world: WorldState, env: BlockEnv, header: BlockHeader,
                  transactions: Iterable[Transaction], *,
                  signature_checked: Callable[[bytes], bool] | None = None) -> BlockResult:
    """Execute a received block and check every computed value against its header.

    ``signature_checked`` (optional, node-local): given a transaction's hash (keccak256 of its full signed body),
    whether this process already found that transaction's signature valid with :func:`check_signature`
    (``chain/signature_marks.py``); such a transaction's check is skipped. The hash covers every byte the check reads,
    so the outcome is the same with or without it; only the time differs.
    """
    ctx = start_block(world, env)
    txs = list(transactions)
    if len(txs) > ctx.limits.max_block_txs:
        raise InvalidBlock("too_many_txs", f"block has {len(txs)} transactions, limit {ctx.limits.max_block_txs}")
    tx_hashes: list[bytes] | None = None
    checked = [False] * len(txs)
    if signature_checked is not None:  # hashed once: the lookups and the tx root use the same hashes
        tx_hashes = [t.tx_hash() for t in txs]
        checked = [signature_checked(h) for h in tx_hashes]
    receipts: list[Receipt] = []
    for i, tx in enumerate(txs):
        try:
            receipts.append(execute_transaction(world, tx, ctx, signature_checked=checked[i]))
        except TxInvalid as e:
            raise InvalidBlock("invalid_transaction", f"transaction {i} is invalid: {e.code}: {e.message}") from e
    result = _finish(world, ctx, txs, receipts, [], tx_hashes=tx_hashes)
    checks = (
        ("tx_root", result.tx_root, header.tx_root),
        ("receipts_root", result.receipts_root, header.receipts_root),
        ("state_root", result.state_root, header.state_root),
        ("cycles_used", result.cycles_used, header.cycles_used),
        ("cells_used", result.cells_used, header.cells_used),
        ("cycle_basefee", result.cycle_basefee, header.cycle_basefee),
        ("cell_basefee", result.cell_basefee, header.cell_basefee),
    )
    for name, computed, claimed in checks:
        if computed != claimed:
            raise InvalidBlock(f"{name}_mismatch", f"header {name} does not match execution", field=name)
    return result
