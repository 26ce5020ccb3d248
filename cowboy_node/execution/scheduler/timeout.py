"""``set_timeout`` / ``cancel_timeout``: scheduling a CIP-1 timer (seeds/004 §3 "Execute Transactions", §4.1).

``set_timeout`` checks, in this order (the first failure raises ``TxFailed(code)``; nothing is written before
every check passed):

1. charge :data:`SET_TIMEOUT_CYCLES` (a refused call costs them too);
2. the policy is CIP-1 (``TimerPolicy.mode == MODE_CIP1``), else ``timer_extension_disabled``;
3. ``height`` is a u64 above the current height (``timer_invalid_input`` / ``timer_height_not_future``);
4. ``gba`` is a 20-byte address (``timer_invalid_input``) of a deployed actor (``timer_gba_invalid``);
5. payload ≤ 1 MiB, handler 1..256 UTF-8 bytes, ``gas_limit`` 1..``max_cycles_per_fire``, ``expires_at``
   in ``(current, current + max_ttl_blocks]``, fewer than ``max_timers_per_actor`` pending CIP-1 timers —
   the seeds/003 codes (docs/timers.md §5);
6. charge cells = every byte written, then write (record, tier entry, counters, sequence; the first timer
   ever also starts the collection cursor at ``current + 1``).

The owner pays every execution and GBA call from its own balance (no ``fee_payer``: seeds/004 §4.1).
"""

from __future__ import annotations

from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.scheduler import queue
from cowboy_node.execution.scheduler import timer_layout as model
from cowboy_node.execution.scheduler.timer_layout import Cip1Timer
from cowboy_node.execution.system_state import get_timer_config
from cowboy_node.execution.timers import schedule as cip5
from cowboy_node.execution.timers.policy import E_EXTENSION_DISABLED, get_timer_policy
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import encode
from cowboy_protocol.types.fields import ADDRESS_LEN
from cowboy_protocol.types.timer_policy import MODE_CIP1

SET_TIMEOUT_CYCLES = 200
"""The fixed scheduling cost (seeds/004 §4.1 "a small, fixed cycle cost"; the seeds/003 figure)."""
CANCEL_TIMEOUT_CYCLES = 200
"""cancel_timeout."""
E_GBA_INVALID = "timer_gba_invalid"
"""``set_timeout`` naming a GBA address where no actor is deployed."""


def set_timeout(world: WorldState, ctx: BlockContext, meter: Meter, *, actor: bytes, height: object, gba: object,
                handler: object, payload: object, gas_limit: object | None = None,
                expires_at: object | None = None) -> bytes:
    """Schedule a CIP-1 timer (module docstring); returns its 32-byte id."""
    meter.charge_cycles(SET_TIMEOUT_CYCLES)
    if get_timer_policy(world).mode != MODE_CIP1:
        raise TxFailed(E_EXTENSION_DISABLED, "set_timeout needs the CIP-1 timer policy (TimerPolicy.mode = 2)")
    current = ctx.env.height
    cfg = get_timer_config(world)
    h = cip5._uint(height, "height")
    if h <= current:
        raise TxFailed(cip5.E_HEIGHT_NOT_FUTURE, f"timer height {h} must be above the current height {current}")
    if not isinstance(gba, bytes) or len(gba) != ADDRESS_LEN:
        raise TxFailed(cip5.E_INVALID_INPUT, "gba must be a 20-byte address")
    if actor_store.get_actor(world, gba) is None:
        raise TxFailed(E_GBA_INVALID, f"no actor is deployed at the GBA address 0x{gba.hex()}")
    payload, handler = cip5.check_payload_and_handler(payload, handler)
    gas, expiry = cip5.check_gas_and_expiry(cfg, current, gas_limit, expires_at)
    meta = queue.get_meta(world, actor)
    if meta.live >= cfg.max_timers_per_actor:
        raise TxFailed(cip5.E_ACTOR_CAP, f"actor already holds {meta.live} CIP-1 timers")
    timer_id = model.derive_timeout_id(actor, h, meta.next_nonce)
    timer = Cip1Timer(actor=actor, height=h, gba=gba, handler=handler, payload=payload, gas_limit=gas,
                      expires_at=expiry, seq=queue.next_seq(world))
    writes = queue.insert_writes(timer_id, timer, meta, current)
    if world.get(model.KEY_CURSOR) is None:  # the first timer: collection starts above the current height
        writes.append((model.KEY_CURSOR, encode(current + 1)))
    meter.charge_cells(sum(len(k) + len(v) for k, v in writes))
    for key, value in writes:
        world.set(key, value)
    return timer_id


def cancel_timeout(world: WorldState, meter: Meter, *, actor: bytes, timer_id: bytes) -> bool:
    """Remove the actor's pending CIP-1 timer: True if removed, False if there is none; another actor's
    timer raises ``timer_unauthorized``. 200 cycles, no cells."""
    meter.charge_cycles(CANCEL_TIMEOUT_CYCLES)
    timer = queue.get_timer(world, timer_id)
    if timer is None:
        return False
    if timer.actor != actor:
        raise TxFailed(cip5.E_UNAUTHORIZED, "the timer belongs to another actor")
    queue.remove(world, timer_id, timer)
    return True
