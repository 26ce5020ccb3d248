"""Governed system instructions: only senders in ``system_deployers`` may use them — and, on a chain with more
than one validator, only inside a ValidatorApproved (``execution/validator_governance.py``).

Each executor charges ``SYSTEM_INSTRUCTION_CYCLES`` and the bytes it writes,
checks the sender, applies the change and appends its event. An unauthorized
sender gets a failed receipt (``unauthorized``) and pays for the attempt.
"""

from __future__ import annotations

from cowboy_node.execution import fees, governance
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import BASEFEE_ACTOR, GOVERNANCE, set_basefee_config, stage_timer_config
from cowboy_node.execution.timers import schedule
from cowboy_node.execution.timers.policy import set_timer_policy
from cowboy_node.execution.validator_governance import require_direct_allowed
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.governance_instructions import GovernanceSetParam, GovernanceSetPhase
from cowboy_protocol.types.instructions import (
    CancelTimer,
    ExtendTimer,
    UpdateBasefeeConfig,
    UpdateTimerConfig,
    UpdateTimerPolicy,
)
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError

E_UNAUTHORIZED = "unauthorized"
"""Receipt error code: the sender is not in ``system_deployers``."""
E_INVALID_CONFIG = "invalid_config"
"""Receipt error code: the proposed configuration breaks one of its own rules."""


def _authorize(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter) -> None:
    meter.charge_cycles(fees.SYSTEM_INSTRUCTION_CYCLES)
    if tx.sender == GOVERNANCE:  # run by ValidatorApproved once the validator set approved it
        return
    if tx.sender not in ctx.system_deployers:
        raise TxFailed(E_UNAUTHORIZED, "sender is not a system deployer")
    require_direct_allowed(world)


def update_basefee_config(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                          events: list[Event]) -> None:
    """UpdateBasefeeConfig (0x40): replace the governed BasefeeConfig."""
    ins = tx.instruction
    assert isinstance(ins, UpdateBasefeeConfig)
    _authorize(world, tx, ctx, meter)
    body = encode(ins.config.to_cbor())
    meter.charge_cells(len(body))
    set_basefee_config(world, ins.config)
    events.append(Event(tx.sender, "basefee_config.updated", body))


def update_timer_config(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                        events: list[Event]) -> None:
    """UpdateTimerConfig (0x41): the only way TimerConfig changes (seeds/003 §6.4)."""
    ins = tx.instruction
    assert isinstance(ins, UpdateTimerConfig)
    _authorize(world, tx, ctx, meter)
    try:
        ins.config.validate()
    except ValidationError as e:
        raise TxFailed(E_INVALID_CONFIG, e.message) from None
    body = encode(ins.config.to_cbor())
    meter.charge_cells(len(body))
    # Staged: schedule, delivery and the mailbox keep this block's config; the new one applies from the next
    # block (seeds/003 §7), promoted at the end of this block (execution.block).
    stage_timer_config(world, ins.config)
    events.append(Event(BASEFEE_ACTOR, "timer_config.updated", body))


def cancel_timer(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                 events: list[Event]) -> None:
    """CancelTimer (0x42): idempotent removal of any actor's timer."""
    ins = tx.instruction
    assert isinstance(ins, CancelTimer)
    _authorize(world, tx, ctx, meter)
    schedule.system_cancel_timer(world, ctx, timer_id=ins.timer_id, events=events)


def extend_timer(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                 events: list[Event]) -> None:
    """ExtendTimer (0x43): raise a timer's TTL, clamped to current + max_ttl_blocks; idempotent."""
    ins = tx.instruction
    assert isinstance(ins, ExtendTimer)
    _authorize(world, tx, ctx, meter)
    schedule.system_extend_timer(world, ctx, timer_id=ins.timer_id, new_expires_at=ins.new_expires_at,
                                 events=events)


def update_timer_policy(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                        events: list[Event]) -> None:
    """UpdateTimerPolicy (0x44): switch FIFO / Globalbox and set the draft parameters (docs/timers.md §12)."""
    ins = tx.instruction
    assert isinstance(ins, UpdateTimerPolicy)
    _authorize(world, tx, ctx, meter)
    body = ins.policy.encode()  # validated when decoded
    meter.charge_cells(len(body))
    set_timer_policy(world, ins.policy)
    events.append(Event(BASEFEE_ACTOR, "timer_policy.updated", body))


def governance_set_phase(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                         events: list[Event]) -> None:
    """GovernanceSetPhase (0x45): schedule a CIP-11 phase step (§14) at a future height (execution/governance.py)."""
    ins = tx.instruction
    assert isinstance(ins, GovernanceSetPhase)
    _authorize(world, tx, ctx, meter)
    meter.charge_cells(governance.schedule(world, ctx, governance.PHASE, ins.phase, ins.activation_height, events))


def governance_set_param(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                         events: list[Event]) -> None:
    """GovernanceSetParam (0x46): schedule a change of a governed CIP-11 parameter (§13) at a future height."""
    ins = tx.instruction
    assert isinstance(ins, GovernanceSetParam)
    _authorize(world, tx, ctx, meter)
    meter.charge_cells(governance.schedule_param(world, ctx, ins.name, ins.value, ins.activation_height, events))
