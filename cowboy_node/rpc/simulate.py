"""Dry runs: ``POST /simulate`` executes a CallActor or DeployActor against the head state and discards it.

The ``eth_call`` / ``estimateGas`` of this chain. The instruction runs exactly as in a transaction of the next
block (same executor, same intrinsic charge for a transaction of that size, the next block's environment and
basefees), on a buffered view of a store snapshot that is thrown away: nothing is written, nothing is charged,
no nonce moves. Not checked, unlike a real transaction: the signature, the nonce and whether the sender can
afford the fee — so a developer can simulate from any address (the zero address by default).

Bounded: the request is parsed and checked before anything runs (typed 400 errors: size of the source and
payload through the transaction size limit, ``cycles_limit`` ≤ :data:`MAX_SIMULATE_CYCLES`, ``cells_limit`` ≤
the block's), and the run happens in the RPC read pool (``rpc/read_pool.py``: one worker, a queue, a
wall-clock watchdog that interrupts the meter, an execution-time budget and a per-client rate), like
``POST /actor/read``. The state lock is held only to capture the head (header, snapshot, environment).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cowboy_node.chain.blockstore import STATE_PREFIX, TREE_PREFIX
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.executor import TOPIC_RETURNED
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import InterruptHandle, Meter
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.transactions import EXECUTORS, INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, intrinsic_cost
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.rpc.facade import RpcError
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event, bounded_message
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.address import parse_address, to_checksum_address
from cowboy_protocol.types.fields import ADDRESS_LEN
from cowboy_protocol.types.instructions import (
    CallActor,
    DeployActor,
    instruction_from_cbor,
    instruction_to_cbor,
)
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError

if TYPE_CHECKING:
    from cowboy_node.execution.context import BlockEnv
    from cowboy_node.state.kv_store import StateStore
    from cowboy_node.types.block import BlockHeader

MAX_SIMULATE_CYCLES = 10_000_000
"""Largest ``cycles_limit`` of a dry run (the default too): what ``POST /actor/read`` allows. A transaction may
ask for up to the block's maximum, but a dry run must finish inside the read pool's wall-clock limit."""
FAKE_SIGNATURE = bytes(65)
"""Stands in for the signature so the transaction body — hence the intrinsic cells charge — has the size of the
real, signed transaction."""
_HEX_RE = re.compile(r"(?:[0-9a-fA-F]{2})*")
_FIELDS = frozenset({"sender", "call", "deploy", "cycles_limit", "cells_limit"})
_CALL_FIELDS = frozenset({"actor", "handler", "payload"})
_DEPLOY_FIELDS = frozenset({"source", "salt", "init_handler", "init_payload"})


@dataclass(frozen=True, slots=True)
class SimulateRequest:
    """A checked ``POST /simulate`` body."""

    sender: bytes
    """Who runs it (``tx_sender`` and ``sender`` of the call, the deployer of a deployment)."""
    instruction: CallActor | DeployActor
    """What runs."""
    cycles_limit: int
    """Cycles the run may use (1..:data:`MAX_SIMULATE_CYCLES`)."""
    cells_limit: int | None
    """Cells the run may use; None: the block's maximum."""


def _hex(value: object, name: str) -> bytes:
    if not isinstance(value, str):
        raise RpcError(400, "invalid_body", f"{name} must be a 0x-hex string")
    text = value[2:] if value[:2] in ("0x", "0X") else value
    if _HEX_RE.fullmatch(text) is None:
        raise RpcError(400, "invalid_body", f"{name} must be 0x-hex with an even number of digits")
    return bytes.fromhex(text)


def _object(value: object, name: str, fields: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RpcError(400, "invalid_body", f"{name} must be a JSON object with fields {sorted(fields)}")
    unknown = sorted(str(k) for k in value if k not in fields)
    if unknown:
        raise RpcError(400, "invalid_body", f"{name}: unknown fields {unknown}; expected {sorted(fields)}")
    return value


def _limit(doc: dict[str, Any], name: str, default: int | None, maximum: int) -> int | None:
    value = doc.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise RpcError(400, f"invalid_{name}", f"{name} must be an integer in 1..{maximum}")
    return value


def parse_simulate_request(doc: object) -> SimulateRequest:
    """Check a ``POST /simulate`` body: ``{"sender"?, "call": {"actor", "handler", "payload"?}}`` or
    ``{"sender"?, "deploy": {"source", "salt"?, "init_handler"?, "init_payload"?}}``, plus ``"cycles_limit"?``
    and ``"cells_limit"?``. Every problem is an :class:`RpcError` 400 with a stable code; nothing runs."""
    body = _object(doc, "body", _FIELDS)
    if ("call" in body) == ("deploy" in body):
        raise RpcError(400, "invalid_body", 'give exactly one of "call" or "deploy"')
    sender = bytes(ADDRESS_LEN)
    if "sender" in body:
        if not isinstance(body["sender"], str):
            raise RpcError(400, "invalid_address", "sender must be 0x + 40 hex digits")
        try:
            sender = parse_address(body["sender"])
        except ValueError as e:
            raise RpcError(400, "invalid_address", f"sender: {e}") from None
    ins: CallActor | DeployActor
    if "call" in body:
        call = _object(body["call"], "call", _CALL_FIELDS)
        if not isinstance(call.get("actor"), str):
            raise RpcError(400, "invalid_address", "call.actor is required: 0x + 40 hex digits")
        try:
            actor = parse_address(call["actor"])
        except ValueError as e:
            raise RpcError(400, "invalid_address", f"call.actor: {e}") from None
        handler = call.get("handler")
        if not isinstance(handler, str):
            raise RpcError(400, "invalid_handler", "call.handler is required: a handler name")
        ins = CallActor(actor=actor, handler=handler, payload=_hex(call.get("payload", ""), "call.payload"))
    else:
        dep = _object(body["deploy"], "deploy", _DEPLOY_FIELDS)
        source, init = dep.get("source"), dep.get("init_handler", "")
        if not isinstance(source, str) or not isinstance(init, str):
            raise RpcError(400, "invalid_body", "deploy.source (text) is required; deploy.init_handler is text")
        ins = DeployActor(source=source, salt=_hex(dep.get("salt", ""), "deploy.salt"), init_handler=init,
                          init_payload=_hex(dep.get("init_payload", ""), "deploy.init_payload"))
    try:  # the instruction rules a transaction's decoder applies (sizes, names, salt, init payload)
        checked = instruction_from_cbor(decode_roundtrip(ins))
    except (ValidationError, UnicodeError) as e:
        code = getattr(e, "code", "invalid_body")
        raise RpcError(400, "invalid_instruction", f"{code}: {e}") from None
    assert isinstance(checked, CallActor | DeployActor)
    cycles = _limit(body, "cycles_limit", MAX_SIMULATE_CYCLES, MAX_SIMULATE_CYCLES)
    assert cycles is not None
    cells = _limit(body, "cells_limit", None, 2**64 - 1)
    return SimulateRequest(sender, checked, cycles, cells)


def decode_roundtrip(ins: CallActor | DeployActor) -> object:
    """The instruction's canonical map, as a transaction's decoder would receive it."""
    return decode(encode(instruction_to_cbor(ins)))


def simulate_view(world: WorldState, ctx: BlockContext, req: SimulateRequest, *, height: int,
                  interrupt: InterruptHandle | None = None) -> dict[str, Any]:
    """Run ``req`` on ``world`` (thrown away by the caller) in the block context ``ctx``.

    Returns ``{"status", "error_code", "error_message", "result", "address" (deploy), "events", "cycles_used",
    "cells_used", "cycles_limit", "cells_limit", "fee_estimate", "basefees", "height"}``. Raises RpcError 400
    ``tx_too_large`` / ``cells_limit_too_high`` for what no transaction could carry.
    """
    block_cells = ctx.basefee_config.block_max_cells
    cells_limit = block_cells if req.cells_limit is None else req.cells_limit
    if cells_limit > block_cells:
        raise RpcError(400, "cells_limit_too_high",
                       f"cells_limit {cells_limit} exceeds the block maximum {block_cells}")
    tx = Transaction(chain_id=ctx.env.chain_id, nonce=get_account(world, req.sender).nonce, sender=req.sender,
                     instruction=req.instruction, cycles_limit=req.cycles_limit, cells_limit=cells_limit,
                     max_fee_per_cycle=ctx.cycle_basefee, max_priority_fee_per_cycle=0,
                     max_fee_per_cell=ctx.cell_basefee, max_priority_fee_per_cell=0, signature=FAKE_SIGNATURE)
    if len(tx.body()) > ctx.limits.max_tx_bytes:
        raise RpcError(400, "tx_too_large", f"as a transaction this would exceed {ctx.limits.max_tx_bytes} bytes")
    meter = Meter(req.cycles_limit, cells_limit)
    if interrupt is not None:
        interrupt.bind(meter)
    events: list[Event] = []
    error: str | None = None
    message: str | None = None
    try:
        cycles, cells = intrinsic_cost(tx)
        meter.charge_cycles(cycles)
        meter.charge_cells(cells)
        EXECUTORS[type(req.instruction)](world, tx, ctx, meter, events)
    except TxFailed as e:
        error, message, events = e.code, bounded_message(str(e)), []
    except Exception:  # a node bug: answered like the receipt would be (the RPC layer does not log it)
        error, message, events = INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE, []
    result = next((e.data for e in events if e.topic == TOPIC_RETURNED), None)
    out: dict[str, Any] = {
        "status": "success" if error is None else "failed",
        "error_code": error,
        "error_message": message,
        "result": None if result is None else "0x" + _returned_bytes(result).hex(),
        "events": [e.to_json() for e in events],
        "cycles_used": meter.cycles_used,
        "cells_used": meter.cells_used,
        "cycles_limit": req.cycles_limit,
        "cells_limit": cells_limit,
        "fee_estimate": str(meter.cycles_used * ctx.cycle_basefee + meter.cells_used * ctx.cell_basefee),
        "basefees": {"cycle": ctx.cycle_basefee, "cell": ctx.cell_basefee},
        "height": height,
    }
    if isinstance(req.instruction, DeployActor):
        ins = req.instruction
        out["address"] = to_checksum_address(derive_actor_address(req.sender, ins.salt, ins.source))
    return out


def _returned_bytes(data: bytes) -> bytes:
    """The handler's return value: the ``actor.returned`` event's data is its CBOR byte string."""
    value = decode(data)
    return value if isinstance(value, bytes) else data


class SimulateQueries:
    """``simulate`` given the node's ``next_block_view`` (composed into ``node/api.py``'s ``NodeApi``): the head
    is captured under the state lock, the run happens on the snapshot without it (as ``read_actor``)."""

    def __init__(self, next_block_view: Callable[[], tuple[BlockHeader, StateStore, BlockEnv]]) -> None:
        self.next_block_view = next_block_view
        """``(head header, store snapshot, next block's environment)`` captured together; the caller closes the
        snapshot."""

    def simulate(self, req: SimulateRequest, *, interrupt: InterruptHandle | None = None) -> dict[str, Any]:
        """Run ``req`` in the context the next block would give it, on the head state; see :func:`simulate_view`."""
        head, snapshot, env = self.next_block_view()
        try:
            # Its own uncached tree over the snapshot: nothing is shared with the head's.
            world = WorldState(snapshot, StateTree(snapshot, TREE_PREFIX, cache_size=0), data_prefix=STATE_PREFIX)
            return simulate_view(world, begin_block(world, env), req, height=head.height, interrupt=interrupt)
        finally:
            snapshot.close()
