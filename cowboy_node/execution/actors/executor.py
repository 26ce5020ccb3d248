"""Executors of the DeployActor (0x10) and CallActor (0x11) instructions.

Both run inside ``execute_transaction``'s checkpoint: raising ``TxFailed``
reverts everything the instruction wrote, and the sender still pays for what
the meter recorded.
"""

from __future__ import annotations

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.actor_record import ActorRecord, derive_actor_address
from cowboy_node.execution.actors.codecache import CODE_CACHE
from cowboy_node.execution.actors.invoke import invoke
from cowboy_node.execution.actors.rejection import rejection_failure
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.instructions import CallActor, DeployActor
from cowboy_protocol.types.transaction import Transaction

DEPLOY_BASE_CYCLES = 5_000
"""Cycles of every deployment, before the per-byte compile cost."""
DEPLOY_CYCLES_PER_SOURCE_BYTE = 50
"""Compile cost per UTF-8 source byte (charged whether or not the compile is cached).

Measured: policy + instrumentation + ``compile`` take about 4 µs per source byte, and
sandboxed code runs at about 80 ns per cycle, so 50 cycles/byte prices compiling like
executing."""
TOPIC_DEPLOYED = "actor.deployed"
"""Event of a deployment: data ``{0: address, 1: creator, 2: source_hash}``."""
TOPIC_RETURNED = "actor.returned"
"""Event of a successful CallActor: data is the CBOR byte string of the handler's return value (charged as cells)."""
def execute_deploy(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter, events: list[Event]) -> None:
    """DeployActor: compile, refuse an existing address, store record and source, run the init handler."""
    ins = tx.instruction
    assert isinstance(ins, DeployActor)
    source = ins.source.encode("utf-8", "surrogatepass")
    meter.charge_cycles(DEPLOY_BASE_CYCLES + DEPLOY_CYCLES_PER_SOURCE_BYTE * len(source))
    try:
        compiled = CODE_CACHE.compile(ins.source)
    except ActorRejected as e:
        raise rejection_failure(e) from None
    address = derive_actor_address(tx.sender, ins.salt, ins.source)
    if store.get_actor(world, address) is not None:
        raise TxFailed("actor_exists", f"an actor is already deployed at 0x{address.hex()}")
    record = ActorRecord(source_hash=compiled.source_hash, creator=tx.sender, deployed_at=ctx.env.height,
                         handlers=compiled.handlers, source_len=len(source))
    meta = record.encode()
    cells = len(store.meta_key(address)) + len(meta)
    if world.get(store.code_key(compiled.source_hash)) is None:
        cells += len(store.code_key(compiled.source_hash)) + len(source)
    meter.charge_cells(cells)
    store.put_source(world, compiled.source_hash, ins.source)
    store.put_actor(world, address, record)
    events.append(Event(address, TOPIC_DEPLOYED, encode({0: address, 1: tx.sender, 2: compiled.source_hash})))
    if ins.init_handler:
        invoke(world, ctx, actor=address, handler=ins.init_handler, payload=ins.init_payload, sender=tx.sender,
               tx_sender=tx.sender, tx_hash=tx.tx_hash(), meter=meter, events=events)


def execute_call(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter, events: list[Event]) -> None:
    """CallActor: run the handler as the sender; its return value goes into an ``actor.returned`` event."""
    ins = tx.instruction
    assert isinstance(ins, CallActor)
    out = invoke(world, ctx, actor=ins.actor, handler=ins.handler, payload=ins.payload, sender=tx.sender,
                 tx_sender=tx.sender, tx_hash=tx.tx_hash(), meter=meter, events=events)
    data = encode(out)
    meter.charge_cells(len(data))  # carried in the receipt
    events.append(Event(ins.actor, TOPIC_RETURNED, data))
