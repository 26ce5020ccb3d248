"""ActivateValidatorSet (0x48): CIP-11 reconfiguration by governance — ``ValidatorSetActivated(E+1, h)``.

A governed kind: on a chain with more than one validator it runs only inside a ValidatorApproved carrying the
approvals of ``n − ⌊(n − 1)/3⌋`` validators of ``ValidatorSetSnapshot(0)`` (``validator_governance.py``); sent
directly it needs a system deployer and a one-validator chain — where no list can pass the rules below.

What it may change on this node (docs/transport.md "Reconfiguration"): the consensus group — the proposers,
their Ed25519 p2p/proposer identities and the BLS threshold shares — is fixed at genesis and changing it needs a
resharing/DKG this node does not have (§5.4). So E+1 may only list genesis consensus participants, in genesis
order: governance chooses which of them serve runners (e.g. takes a validator out of the runner-facing set for
maintenance, or brings it back); consensus membership is unchanged. Refusals (failed receipt, nothing written):

* ``activation_too_soon``: ``activation_height < height + ACTIVATION_MIN_DELAY_BLOCKS``;
* ``validator_not_in_consensus``: a key that is no genesis validator's peer identity (a new identity would alter
  consensus membership);
* ``validator_set_not_canonical``: the keys are not in genesis order (§5.1 "ordered canonically");
* ``validator_set_unchanged``: the list equals the newest snapshot's (§5.4: such an advance "MUST NOT emit a
  CIP-11 ValidatorSetActivated");
* ``reconfiguration_in_progress``: the previous activation is not reached or its OVERLAP_BLOCKS window is still
  open (the transport honours at most two snapshots at once).
"""

from __future__ import annotations

from cowboy_node.execution import fees
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import GOVERNANCE, get_cip11_params
from cowboy_node.execution.validator_governance import require_direct_allowed
from cowboy_node.execution.validator_set import get_activation, get_snapshot, newest_epoch, put_activation
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.transport.preimages import validator_set_hash
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validator_set_instructions import ActivateValidatorSet

ACTIVATION_MIN_DELAY_BLOCKS = 2
"""``activation_height ≥ height + 2``: the block carrying the instruction is committed, and one more block is
built on it, before E+1 becomes valid — so every node applies the activation at the same height from committed
state, never in the block that creates it. Runners need no lead time: the OVERLAP_BLOCKS window from h is their
time to open the new sessions."""
EVENT_ACTIVATED = "validator_set.activated"
"""Event ``ValidatorSetActivated``; data ``{0: epoch, 1: activation_height, 2: validator_set_hash}``."""

E_UNAUTHORIZED = "unauthorized"
E_TOO_SOON = "activation_too_soon"
E_NOT_IN_CONSENSUS = "validator_not_in_consensus"
E_NOT_CANONICAL = "validator_set_not_canonical"
E_UNCHANGED = "validator_set_unchanged"
E_IN_PROGRESS = "reconfiguration_in_progress"


def activate_validator_set(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                           events: list[Event]) -> None:
    """ActivateValidatorSet (0x48): check the rules above, then write ``ValidatorSetSnapshot(E+1)``, the
    activation record ``(E+1, h)`` and the epoch pointer, and emit ``validator_set.activated``."""
    ins = tx.instruction
    assert isinstance(ins, ActivateValidatorSet)
    meter.charge_cycles(fees.SYSTEM_INSTRUCTION_CYCLES)
    if tx.sender != GOVERNANCE:  # not run by ValidatorApproved: a system deployer on a one-validator chain
        if tx.sender not in ctx.system_deployers:
            raise TxFailed(E_UNAUTHORIZED, "sender is not a system deployer")
        require_direct_allowed(world)
    height = ctx.env.height
    if ins.activation_height < height + ACTIVATION_MIN_DELAY_BLOCKS:
        raise TxFailed(E_TOO_SOON, f"activation height {ins.activation_height} is below the current height {height}"
                                   f" + {ACTIVATION_MIN_DELAY_BLOCKS}")
    genesis = get_snapshot(world, 0)
    order = {} if genesis is None else {k: i for i, k in enumerate(genesis.validators)}
    positions = []
    for k in ins.peer_pubkeys:
        if k not in order:
            raise TxFailed(E_NOT_IN_CONSENSUS, f"0x{k.hex()} is not the peer identity of a genesis validator; "
                                               "changing consensus membership needs a resharing this node lacks")
        positions.append(order[k])
    if positions != sorted(positions):
        raise TxFailed(E_NOT_CANONICAL, "peer keys must be listed in the genesis validators' order")
    epoch = newest_epoch(world)
    current = get_snapshot(world, epoch)
    if current is not None and current.validators == tuple(ins.peer_pubkeys):
        raise TxFailed(E_UNCHANGED, f"the list equals ValidatorSetSnapshot({epoch}): not a reconfiguration")
    last = get_activation(world, epoch)
    if last is not None:
        cutoff = last.activation_height + get_cip11_params(world).OVERLAP_BLOCKS
        if height < cutoff:
            raise TxFailed(E_IN_PROGRESS, f"epoch {epoch} activates at {last.activation_height}; its overlap "
                                          f"window closes at {cutoff}")
    meter.charge_cells(put_activation(world, ins.peer_pubkeys, ins.activation_height))
    events.append(Event(GOVERNANCE, EVENT_ACTIVATED,
                        encode({0: epoch + 1, 1: ins.activation_height,
                                2: validator_set_hash(ins.peer_pubkeys)})))
