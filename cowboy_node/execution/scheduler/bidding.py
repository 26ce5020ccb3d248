"""The Gas Bidding Agent call (seeds/004 §3 "Deliver Timers" b–c, §4.2).

The producer calls ``<gba>.get_gas_bid(context)`` read-only (every write reverted) with a hard cycle cap
(``TimerPolicy.cip1_gba_cycles``). ``context`` is compact JSON with the §4.2 fields in this order::

    {"trigger_block_height":H,"current_block_height":h,"basefee_cycle":b,"basefee_cell":c,
     "last_block_cycle_usage":u,"owner_actor_balance":a}

The GBA returns the JSON object ``{"max_fee_per_cycle": int, "tip_per_cycle": int}`` (exactly these keys,
u64 integers; strict JSON). Anything else is a typed refusal (:data:`BAD_GBA_CODES`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cowboy_node.execution.context import BlockContext
from cowboy_node.state.world import WorldState
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.fields import U64_MAX
from cowboy_protocol.types.validation_errors import ValidationError

GBA_HANDLER = "get_gas_bid"
"""The standard GBA interface (the draft's ``getGasBid``), a handler of the GBA actor."""
MAX_BID_BYTES = 1_024
"""Longest bid a GBA may return."""

E_GBA_OUT_OF_CYCLES = "gba_out_of_cycles"
"""The GBA hit the cycle cap (e.g. it loops)."""
E_GBA_FAILED = "gba_failed"
"""The GBA raised, halted, or the GBA actor / its ``get_gas_bid`` does not exist."""
E_GBA_BAD_BID = "gba_bad_bid"
"""The GBA returned something that is not a bid (not strict JSON, wrong keys, not u64 integers, too long)."""
E_BID_BELOW_BASEFEE = "gba_bid_below_basefee"
"""``max_fee_per_cycle`` is below this block's cycle basefee."""
E_BID_EXCEEDS_BALANCE = "gba_bid_exceeds_balance"
"""The owner's balance (after paying the GBA call) cannot cover the bid's maximum cost."""
E_INSUFFICIENT_BALANCE = "cip1_insufficient_balance"
"""The owner cannot pay for the GBA call at the cap (the GBA is not asked)."""
BAD_GBA_CODES = frozenset({E_GBA_OUT_OF_CYCLES, E_GBA_FAILED, E_GBA_BAD_BID})
"""A broken GBA: the timer is dropped (its attempt is charged)."""
DEFER_CODES = frozenset({E_BID_BELOW_BASEFEE, E_BID_EXCEEDS_BALANCE, E_INSUFFICIENT_BALANCE})
"""A market refusal: the timer stays due and is bid again next block."""

BidCall = Callable[[WorldState, BlockContext, bytes, bytes, int], tuple[bytes | None, str | None, int]]
"""``(world, ctx, gba, context, cycles_cap) -> (result, error_code, cycles_used)``: the read-only call
(``actors.invoke.read_only_call`` in the node, fakes in the tests). It must revert every write."""


@dataclass(frozen=True, slots=True)
class Bid:
    """A parsed GBA bid (the draft's ``TxFeeParams``)."""

    max_fee_per_cycle: int
    """Most the owner pays per cycle (basefee + tip)."""
    tip_per_cycle: int
    """Tip per cycle offered to the proposer."""

    def effective_tip(self, cycle_basefee: int) -> int:
        """``min(tip, max_fee − basefee)`` (requires ``max_fee ≥ basefee``)."""
        return min(self.tip_per_cycle, self.max_fee_per_cycle - cycle_basefee)


def context_bytes(*, trigger: int, current: int, basefee_cycle: int, basefee_cell: int, last_usage: int,
                  balance: int) -> bytes:
    """The §4.2 context as compact JSON (fixed key order, integers in decimal)."""
    return (f'{{"trigger_block_height":{trigger},"current_block_height":{current},'
            f'"basefee_cycle":{basefee_cycle},"basefee_cell":{basefee_cell},'
            f'"last_block_cycle_usage":{last_usage},"owner_actor_balance":{balance}}}').encode()


_BID_KEYS = ("max_fee_per_cycle", "tip_per_cycle")


def parse_bid(raw: object) -> Bid | None:
    """The bid in a GBA's return value, or None if it is not exactly a bid."""
    if not isinstance(raw, bytes) or len(raw) > MAX_BID_BYTES:
        return None
    try:
        value = parse_json(raw)
    except ValidationError:
        return None
    if not isinstance(value, dict) or sorted(value) != list(_BID_KEYS):
        return None
    fields: list[int] = []
    for k in _BID_KEYS:
        v = value[k]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= U64_MAX:
            return None
        fields.append(v)
    return Bid(fields[0], fields[1])


def classify_call(result: bytes | None, error_code: str | None) -> Bid | str:
    """A bid, or the typed refusal of a failed / garbage call."""
    if error_code is not None:
        return E_GBA_OUT_OF_CYCLES if error_code == "out_of_cycles" else E_GBA_FAILED
    bid = parse_bid(result)
    return E_GBA_BAD_BID if bid is None else bid


def default_bid_call() -> BidCall:
    """``actors.invoke.read_only_call`` of ``get_gas_bid`` (imported on use: the actor runtime imports timers)."""
    from cowboy_node.execution.actors.invoke import read_only_call

    def call(world: WorldState, ctx: BlockContext, gba: bytes, context: bytes, cap: int
             ) -> tuple[bytes | None, str | None, int]:
        return read_only_call(world, ctx, actor=gba, handler=GBA_HANDLER, payload=context, cycles_limit=cap)

    return call
