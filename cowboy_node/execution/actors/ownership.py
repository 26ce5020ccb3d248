"""TransferActorOwnership (0x12): the current protocol owner of an actor hands it to another account.

The owner is the actor record's ``creator`` (``pvm_host.actor_owner()``, the SDK's ``OWNER`` principal).
Only a transaction signed by the current owner changes it — actor code cannot (cowboy_sdk.runtime,
permissions). Codes: ``actor_not_found``, ``not_actor_owner``, ``invalid_new_owner`` (the zero address).
"""

from __future__ import annotations

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.actor_record import ActorRecord
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.fields import ADDRESS_LEN
from cowboy_protocol.types.instructions import TransferActorOwnership
from cowboy_protocol.types.transaction import Transaction

OWNERSHIP_CYCLES = 5_000
"""Cost of the instruction (a record read and write)."""
TOPIC_OWNER_TRANSFERRED = "actor.owner_transferred"
"""Event of the actor: ``{0: previous owner, 1: new owner}``."""


def execute_transfer_ownership(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                               events: list[Event]) -> None:
    """TransferActorOwnership: the sender must own the actor; the record's ``creator`` becomes ``new_owner``."""
    ins = tx.instruction
    assert isinstance(ins, TransferActorOwnership)
    meter.charge_cycles(OWNERSHIP_CYCLES)
    record = store.get_actor(world, ins.actor)
    if record is None:
        raise TxFailed("actor_not_found", f"no actor at 0x{ins.actor.hex()}")
    if tx.sender != record.creator:
        raise TxFailed("not_actor_owner", "only the actor's current owner can transfer its ownership")
    if ins.new_owner == bytes(ADDRESS_LEN):
        raise TxFailed("invalid_new_owner", "the zero address cannot own an actor")
    new = ActorRecord(record.source_hash, ins.new_owner, record.deployed_at, record.handlers, record.source_len)
    meter.charge_cells(store.put_actor(world, ins.actor, new))
    events.append(Event(ins.actor, TOPIC_OWNER_TRANSFERRED, encode({0: record.creator, 1: ins.new_owner})))


__all__ = ["OWNERSHIP_CYCLES", "TOPIC_OWNER_TRANSFERRED", "execute_transfer_ownership"]
