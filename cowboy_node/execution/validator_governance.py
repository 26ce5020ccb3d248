"""Governance by the validator set: :class:`~cowboy_protocol.types.instructions.ValidatorApproved` (0x47).

On a chain whose ``ValidatorSetSnapshot(0)`` holds more than one validator, one account key must not be able to
flip protocol flags or rewrite the fee and timer configuration on its own. The governed system instructions
(``GOVERNED_KINDS``: 0x40–0x46, 0x48) then run only inside a ValidatorApproved carrying Ed25519 approvals, over
:func:`~cowboy_protocol.types.instructions.approval_preimage`, from at least ``n − ⌊(n − 1)/3⌋`` (2f + 1)
distinct validators of the snapshot; sent directly they fail with ``validator_approval_required``. With one
validator the direct form keeps working (the system deployers are the authority, as before).

Why individual signatures rather than one threshold signature: approvals are gathered off-chain, by whatever
channel the operators use, one file each (``cowboy-node governance approve``), with no interactive signing
round; the cost is one Ed25519 check per approval (charged), at most 64 of them.

Replay: each executed ValidatorApproved raises the chain's approval nonce (``sys/governance_approval_nonce``),
which every approval signs, so an approval works once. A ValidatorApproved whose inner instruction fails
reverts with it, nonce included: the same approvals can be submitted again when the failure was transient.
The inner instruction runs as the Governance system address (``0x…09``), which no key can sign for; an
activation height, where the inner instruction has one (CIP-11 phase and parameters), is checked by its own
rules.

Approvals stay counted against ``ValidatorSetSnapshot(0)`` after a reconfiguration: an ActivateValidatorSet only
changes which genesis consensus participants serve runners (``validator_set_activation.py``), never consensus
membership, so the governing body — the consensus validators — is still the genesis set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cowboy_node.execution import fees
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import GOVERNANCE
from cowboy_node.execution.validator_set import get_snapshot
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.instructions import ValidatorApproved, approval_preimage
from cowboy_protocol.types.transaction import Transaction

KEY_APPROVAL_NONCE = b"sys/governance_approval_nonce"
"""State key of the approval nonce (CBOR uint; absent = 0)."""
APPROVAL_VERIFY_CYCLES = 10_000
"""Cycles charged per approval checked: one Ed25519 verification, priced like the intrinsic signature check."""
E_APPROVAL_REQUIRED = "validator_approval_required"
"""A governed instruction sent directly on a multi-validator chain."""
E_INSUFFICIENT = "insufficient_approvals"
"""Fewer approvals than the quorum of the validator set."""
E_BAD_APPROVAL = "bad_approval"
"""An approval names no validator of the snapshot, or its signature does not verify."""

RunInner = Callable[[WorldState, Transaction, BlockContext, Meter, list[Event]], None]


def validator_count(world: WorldState) -> int:
    """Validators in ``ValidatorSetSnapshot(0)`` (1 when the state has none: unit-test worlds)."""
    snap = get_snapshot(world, 0)
    return 1 if snap is None else len(snap.validators)


def quorum(n: int) -> int:
    """Approvals needed among ``n`` validators: ``n − ⌊(n − 1)/3⌋`` (2f + 1 when n = 3f + 1)."""
    return n - (n - 1) // 3


def get_approval_nonce(world: WorldState) -> int:
    """The nonce the next approval must sign."""
    raw = world.get(KEY_APPROVAL_NONCE)
    if raw is None:
        return 0
    value = decode(raw)
    assert isinstance(value, int)
    return value


def require_direct_allowed(world: WorldState) -> None:
    """Refuse a governed instruction sent directly when the validator set has more than one member."""
    n = validator_count(world)
    if n > 1:
        raise TxFailed(E_APPROVAL_REQUIRED, f"with {n} validators this instruction needs the approval of "
                                            f"{quorum(n)} of them (ValidatorApproved)")


def execute_validator_approved(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                               events: list[Event], run_inner: RunInner) -> None:
    """ValidatorApproved (0x47): check the approvals, raise the nonce, run the inner instruction as Governance."""
    ins = tx.instruction
    assert isinstance(ins, ValidatorApproved)
    meter.charge_cycles(fees.SYSTEM_INSTRUCTION_CYCLES + APPROVAL_VERIFY_CYCLES * len(ins.approvals))
    snap = get_snapshot(world, 0)
    keys = snap.validators if snap is not None else ()
    need = quorum(max(len(keys), 1))
    if not keys or len(ins.approvals) < need:
        raise TxFailed(E_INSUFFICIENT, f"{len(ins.approvals)} approval(s); {need} of {len(keys)} validators needed")
    nonce = get_approval_nonce(world)
    message = approval_preimage(ctx.env.chain_id, nonce, ins.instruction)
    for index, signature in ins.approvals:
        if index >= len(keys):
            raise TxFailed(E_BAD_APPROVAL, f"approval {index}: no such validator ({len(keys)} in the set)")
        if not ed25519.verify(keys[index], message, signature):
            raise TxFailed(E_BAD_APPROVAL, f"approval of validator {index} does not verify for approval nonce "
                                           f"{nonce}")
    body = encode(nonce + 1)
    world.set(KEY_APPROVAL_NONCE, body)
    meter.charge_cells(len(KEY_APPROVAL_NONCE) + len(body))
    events.append(Event(GOVERNANCE, "governance.approved",
                        encode({0: nonce, 1: ins.instruction.KIND, 2: [i for i, _ in ins.approvals]})))
    run_inner(world, replace(tx, instruction=ins.instruction, sender=GOVERNANCE), ctx, meter, events)
