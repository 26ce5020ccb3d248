"""Transaction validation and execution (the per-transaction state transition).

Order, as in the execution specs: static checks → signature → nonce → can
the sender afford its maximum fee → block capacity → run the instruction
under a checkpoint (revert on failure) → charge the fee for what was used,
bump the nonce → receipt. Anything before "run" failing makes the
transaction invalid (never included); failures while running are included,
charged, and get a failed receipt.

No transaction can stop the chain: an unexpected exception (a bug, not a
``TxFailed``) while its instruction runs fails that transaction like any
other failure, with the stable code ``internal_error``; its writes and its
effects on the block context are undone, and it is recorded in
``ctx.internal_errors`` for the node to log and count.
"""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.execution import fees, system_instructions
from cowboy_node.execution.actors.executor import execute_call, execute_deploy
from cowboy_node.execution.actors.ownership import execute_transfer_ownership
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs import executors as job_executors
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.presence_certificates import submit_presence_certificate
from cowboy_node.execution.records import put_account_fields, transfer_event_data
from cowboy_node.execution.runners import registry as runner_registry
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.transfer_tx import recover_signer
from cowboy_node.execution.validator_governance import execute_validator_approved
from cowboy_node.execution.validator_set_activation import activate_validator_set
from cowboy_node.execution.validity_errors import TxFailed, TxInvalid
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Event, Receipt, bounded_message
from cowboy_protocol.types.fields import U128_MAX
from cowboy_protocol.types.governance_instructions import GovernanceSetParam, GovernanceSetPhase
from cowboy_protocol.types.instructions import (
    CallActor,
    CancelTimer,
    DeployActor,
    ExtendTimer,
    Transfer,
    TransferActorOwnership,
    UpdateBasefeeConfig,
    UpdateTimerConfig,
    UpdateTimerPolicy,
    ValidatorApproved,
)
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit, JobSubmit
from cowboy_protocol.types.presence_instructions import SubmitPresenceCertificate
from cowboy_protocol.types.runner_instructions import (
    RunnerDeregister,
    RunnerHeartbeat,
    RunnerRegister,
    RunnerUpdateCapabilities,
    RunnerUpdateRateCard,
)
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_protocol.types.validator_set_instructions import ActivateValidatorSet

ACCOUNT_WRITE_CELLS = 64
"""Intrinsic cells for the sender's account update (nonce and fee debit)."""
INTERNAL_ERROR = "internal_error"
"""Receipt error code of a transaction failed by an unexpected exception in the node's own code."""
INTERNAL_ERROR_MESSAGE = "the node failed while executing this transaction"
"""Its receipt message: fixed, as the exception's text may differ between nodes (paths, versions)."""


def describe_exception(e: BaseException) -> str:
    """``Type: message`` of an unexpected exception, bounded (it goes into logs, never into state)."""
    return f"{type(e).__name__}: {e}"[:500]


class ContextMark:
    """What a transaction may add to the block context, kept to undo it when the transaction fails internally."""

    __slots__ = ("assigned", "burned", "cells", "cycles", "events", "finished", "jobs_per_tx", "tips")

    def __init__(self, ctx: BlockContext) -> None:
        self.assigned = len(ctx.jobs_assigned)
        self.finished = len(ctx.jobs_finished)
        self.events = len(ctx.events)
        self.jobs_per_tx = len(ctx.jobs_per_tx)
        self.cycles, self.cells, self.burned, self.tips = ctx.cycles_used, ctx.cells_used, ctx.burned, ctx.tips

    def restore(self, ctx: BlockContext, tx_hash: bytes) -> None:
        """Put the context back as it was when the mark was taken."""
        del ctx.jobs_assigned[self.assigned:]
        del ctx.jobs_finished[self.finished:]
        del ctx.events[self.events:]
        # Job ids derive from (tx hash, index): only this transaction's counter can have been added.
        if len(ctx.jobs_per_tx) > self.jobs_per_tx:
            ctx.jobs_per_tx.pop(tx_hash, None)
        ctx.cycles_used, ctx.cells_used, ctx.burned, ctx.tips = self.cycles, self.cells, self.burned, self.tips


def intrinsic_cost(tx: Transaction) -> tuple[int, int]:
    """(cycles, cells) every transaction pays before its instruction runs."""
    return fees.TX_BASE_CYCLES, len(tx.body()) + ACCOUNT_WRITE_CELLS


def check_static(tx: Transaction, ctx: BlockContext) -> None:
    """Checks that need no account state; raise :class:`TxInvalid` with a stable code."""
    if tx.chain_id != ctx.env.chain_id:
        raise TxInvalid("wrong_chain_id", f"transaction is for chain {tx.chain_id!r}, this is {ctx.env.chain_id!r}",
                        field="chain_id")
    if len(tx.body()) > ctx.limits.max_tx_bytes:
        raise TxInvalid("tx_too_large", f"transaction exceeds {ctx.limits.max_tx_bytes} bytes")
    cfg = ctx.basefee_config
    if tx.cycles_limit > cfg.block_max_cycles:
        raise TxInvalid("cycles_limit_too_high", f"cycles_limit {tx.cycles_limit} exceeds the block maximum "
                        f"{cfg.block_max_cycles}", field="cycles_limit")
    if tx.cells_limit > cfg.block_max_cells:
        raise TxInvalid("cells_limit_too_high", f"cells_limit {tx.cells_limit} exceeds the block maximum "
                        f"{cfg.block_max_cells}", field="cells_limit")
    cycles, cells = intrinsic_cost(tx)
    if tx.cycles_limit < cycles or tx.cells_limit < cells:
        raise TxInvalid("limits_below_intrinsic", f"limits must cover the intrinsic cost of {cycles} cycles "
                        f"and {cells} cells")
    if tx.max_priority_fee_per_cycle > tx.max_fee_per_cycle or tx.max_priority_fee_per_cell > tx.max_fee_per_cell:
        raise TxInvalid("priority_fee_above_max", "max priority fee exceeds max fee")
    if tx.max_fee_per_cycle < ctx.cycle_basefee:
        raise TxInvalid("fee_below_basefee", f"max_fee_per_cycle {tx.max_fee_per_cycle} is below the "
                        f"cycle basefee {ctx.cycle_basefee}", field="max_fee_per_cycle")
    if tx.max_fee_per_cell < ctx.cell_basefee:
        raise TxInvalid("fee_below_basefee", f"max_fee_per_cell {tx.max_fee_per_cell} is below the "
                        f"cell basefee {ctx.cell_basefee}", field="max_fee_per_cell")


def check_signature(tx: Transaction) -> None:
    """Raise TxInvalid(bad_signature) unless the signature recovers to ``tx.sender``.

    :meth:`Transaction.verify_signature`, with a Transfer's signing hash taken from its body
    (``execution/transfer_tx.py``: the same hash, the same errors).
    """
    try:
        if recover_signer(tx) != tx.sender:
            raise ValidationError("bad_signature", "signature is not by the sender", field="signature")
    except ValidationError as e:
        raise TxInvalid(e.code, e.message, field="signature") from e


def check_account(tx: Transaction, account: Account) -> None:
    """Nonce must be the account's next nonce; balance must cover the maximum fee."""
    if tx.nonce < account.nonce:
        raise TxInvalid("nonce_too_low", f"nonce {tx.nonce} already used (next is {account.nonce})", field="nonce")
    if tx.nonce > account.nonce:
        raise TxInvalid("nonce_too_high", f"nonce {tx.nonce} is ahead of the account (next is {account.nonce})",
                        field="nonce")
    if account.balance < tx.max_fee():
        raise TxInvalid("insufficient_funds", f"balance {account.balance} is below the maximum fee {tx.max_fee()}")


def execute_transaction(world: WorldState, tx: Transaction, ctx: BlockContext, *,
                        signature_checked: bool = False) -> Receipt:
    """Apply ``tx`` to ``world`` and return its receipt, or raise :class:`TxInvalid` leaving ``world`` unchanged."""
    check_static(tx, ctx)
    if not signature_checked:
        check_signature(tx)
    sender = get_account(world, tx.sender)
    check_account(tx, sender)
    cfg = ctx.basefee_config
    # As in Ethereum: what the block has used so far plus this transaction's whole limit must fit.
    if (ctx.cycles_used + tx.cycles_limit > cfg.block_max_cycles
            or ctx.cells_used + tx.cells_limit > cfg.block_max_cells):
        raise TxInvalid("block_full", "the block has no room left for this transaction's limits")

    meter = Meter(tx.cycles_limit, tx.cells_limit)
    cycles, cells = intrinsic_cost(tx)
    meter.charge_cycles(cycles)
    meter.charge_cells(cells)
    events: list[Event] = []
    error: str | None = None
    message: str | None = None
    cp = world.checkpoint()
    mark = ContextMark(ctx)
    # The sender's account once the instruction has run, when known without reading it again: after a revert it
    # is ``sender`` (nothing was written between that read and the checkpoint), after a Transfer the transfer
    # says. Otherwise (None) it is re-read below.
    after: Account | None = None
    try:
        if EXECUTORS.get(type(tx.instruction)) is _transfer:
            after = _transfer_from(world, tx, sender, meter, events)
        else:
            _run_instruction(world, tx, ctx, meter, events)
    except TxFailed as e:
        world.revert(cp)
        after = sender
        error, events, message = e.code, [], bounded_message(str(e))
    except Exception as e:  # a bug must fail this transaction, never the block (see the module docstring)
        world.revert(cp)
        after = sender
        mark.restore(ctx, tx.tx_hash())
        error, events, message = INTERNAL_ERROR, [], INTERNAL_ERROR_MESSAGE
        ctx.internal_errors.append((tx.tx_hash(), describe_exception(e)))
    else:
        world.release(cp)

    cycle_tip = fees.effective_tip(tx.max_fee_per_cycle, tx.max_priority_fee_per_cycle, ctx.cycle_basefee)
    cell_tip = fees.effective_tip(tx.max_fee_per_cell, tx.max_priority_fee_per_cell, ctx.cell_basefee)
    split = fees.split_fee(meter.cycles_used, meter.cells_used, cycle_basefee=ctx.cycle_basefee,
                           cell_basefee=ctx.cell_basefee, cycle_tip=cycle_tip, cell_tip=cell_tip)
    if after is None:  # re-read: the instruction may have changed the sender's balance
        after = get_account(world, tx.sender)
    put_account_fields(world, tx.sender, after.balance - split.total, after.nonce + 1)

    ctx.cycles_used += meter.cycles_used
    ctx.cells_used += meter.cells_used
    ctx.burned += split.burned
    ctx.tips += split.tip
    return Receipt(STATUS_SUCCESS if error is None else STATUS_FAILED, meter.cycles_used, meter.cells_used,
                   split.total, error, tuple(events), message)


def _transfer(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter, events: list[Event]) -> None:
    _transfer_from(world, tx, get_account(world, tx.sender), meter, events)


def _transfer_from(world: WorldState, tx: Transaction, sender: Account, meter: Meter, events: list[Event]) -> Account:
    """The Transfer instruction, given the sender's current account; returns the sender's account after it."""
    ins = tx.instruction
    assert isinstance(ins, Transfer)
    meter.charge_cycles(fees.TRANSFER_CYCLES)
    # The maximum fee stays reserved: the fee is settled after the instruction runs.
    if sender.balance - tx.max_fee() < ins.amount:
        raise TxFailed("insufficient_balance", "balance does not cover the amount plus the maximum fee")
    debited = sender.balance - ins.amount
    meter.charge_cells(put_account_fields(world, tx.sender, debited, sender.nonce))
    recipient = get_account(world, ins.to)  # after the debit: the recipient may be the sender
    credited = recipient.balance + ins.amount
    if credited > U128_MAX:
        raise TxFailed("balance_overflow", "recipient balance would exceed u128")
    meter.charge_cells(put_account_fields(world, ins.to, credited, recipient.nonce))
    events.append(Event(tx.sender, "transfer", transfer_event_data(ins.to, ins.amount)))
    return Account(credited, recipient.nonce) if ins.to == tx.sender else Account(debited, sender.nonce)


Executor = Callable[[WorldState, Transaction, BlockContext, Meter, list[Event]], None]
"""Runs one instruction: charges ``meter``, writes through ``world``, appends events; raises TxFailed."""

EXECUTORS: dict[type, Executor] = {
    Transfer: _transfer,
    UpdateBasefeeConfig: system_instructions.update_basefee_config,
    UpdateTimerConfig: system_instructions.update_timer_config,
    CancelTimer: system_instructions.cancel_timer,
    ExtendTimer: system_instructions.extend_timer,
    UpdateTimerPolicy: system_instructions.update_timer_policy,
    DeployActor: execute_deploy,
    CallActor: execute_call,
    TransferActorOwnership: execute_transfer_ownership,
    RunnerRegister: runner_registry.register,
    RunnerHeartbeat: runner_registry.heartbeat,
    RunnerUpdateCapabilities: runner_registry.update_capabilities,
    RunnerUpdateRateCard: runner_registry.update_rate_card,
    RunnerDeregister: runner_registry.deregister,
    JobSubmit: job_executors.execute_job_submit,
    JobResultCommit: job_executors.execute_result_commit,
    JobResultSubmit: job_executors.execute_result_submit,
    SubmitPresenceCertificate: submit_presence_certificate,
    GovernanceSetPhase: system_instructions.governance_set_phase,
    GovernanceSetParam: system_instructions.governance_set_param,
    ValidatorApproved: lambda world, tx, ctx, meter, events: execute_validator_approved(
        world, tx, ctx, meter, events, _run_governed),
    ActivateValidatorSet: activate_validator_set,
}
"""Instruction type → executor (one entry per instruction kind)."""


def _run_governed(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                  events: list[Event]) -> None:
    """The inner instruction of a ValidatorApproved (decoding already limited it to GOVERNED_KINDS)."""
    EXECUTORS[type(tx.instruction)](world, tx, ctx, meter, events)


def _run_instruction(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                     events: list[Event]) -> None:
    executor = EXECUTORS.get(type(tx.instruction))
    if executor is None:
        raise TxFailed("unknown_instruction", f"no executor for {type(tx.instruction).__name__}")
    executor(world, tx, ctx, meter, events)
