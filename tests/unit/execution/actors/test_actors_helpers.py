"""Shared harness for the actor tests: a dev chain's world and block context, deploy and call helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Receipt
from cowboy_protocol.types.instructions import CallActor, DeployActor
from tests.helpers import ALICE, ALICE_SK, CHAIN_ID, FEE_RECIPIENT, make_dev_genesis, make_tx

CYCLES = 2_000_000
CELLS = 200_000


@dataclass
class Env:
    """One block being executed on a fresh dev chain; ALICE sends every transaction."""

    world: WorldState
    ctx: BlockContext
    nonce: int = 0
    receipts: list[Receipt] = field(default_factory=list)

    def deploy(self, source: str, *, salt: bytes = b"", init: str = "", init_payload: bytes = b"",
               cycles: int = CYCLES, cells: int = CELLS) -> tuple[Receipt, bytes]:
        ins = DeployActor(source=source, salt=salt, init_handler=init, init_payload=init_payload)
        r = self._send(ins, cycles, cells)
        return r, derive_actor_address(ALICE, salt, source)

    def call(self, actor: bytes, handler: str, payload: bytes = b"", *, cycles: int = CYCLES,
             cells: int = CELLS) -> Receipt:
        return self._send(CallActor(actor=actor, handler=handler, payload=payload), cycles, cells)

    def _send(self, ins: DeployActor | CallActor, cycles: int, cells: int) -> Receipt:
        tx = make_tx(ALICE_SK, self.nonce, ins, cycles_limit=cycles, cells_limit=cells)
        self.nonce += 1
        # each transaction gets the whole block capacity (tests send many large-limit transactions)
        self.ctx.cycles_used = self.ctx.cells_used = 0
        r = execute_transaction(self.world, tx, self.ctx)
        self.receipts.append(r)
        return r


def make_env(height: int = 1) -> Env:
    """A fresh chain at genesis; the block being built is ``height``."""
    dev = make_dev_genesis()
    chain = Chain(MemoryStore(), dev.genesis)
    world = chain.world()
    env = BlockEnv(chain_id=CHAIN_ID, height=height, timestamp_ms=1_700_000_001_000, fee_recipient=FEE_RECIPIENT,
                   beacon=b"", parent_beacon=b"")
    return Env(world, begin_block(world, env))


def returned(r: Receipt) -> bytes:
    """The handler's return value from a CallActor receipt (the actor.returned event)."""
    from cowboy_protocol.codec import decode

    ev = [e for e in r.events if e.topic == "actor.returned"]
    assert len(ev) == 1, r
    value = decode(ev[0].data)
    assert isinstance(value, bytes)
    return value
