"""Read-only views of actors and their timers for the HTTP API (JSON-ready dicts).

Each function reads one :class:`WorldState` (the caller holds the node's state lock so the view and
``height`` belong to the same head) and returns ``None`` when no actor is deployed at the address;
the RPC layer turns that into 404 ``actor_not_found``. Byte strings are ``0x`` hex, addresses EIP-55.
"""

from __future__ import annotations

from typing import Any

from cowboy_node.execution.actors import actor_state as actor_store
from cowboy_node.execution.actors.invoke import read_only_call
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import InterruptHandle
from cowboy_node.execution.scheduler import listing as cip1_listing
from cowboy_node.execution.system_state import get_account
from cowboy_node.execution.timers import timer_state as timer_store
from cowboy_node.execution.timers.policy import get_timer_policy
from cowboy_node.execution.timers.timer_record import Timer
from cowboy_node.state.world import WorldState
from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.timer_policy import MODE_CIP1

MAX_TIMERS_LISTED = 1000
"""Most timers ``/actor/{address}/timers`` returns (the default per-actor cap is 1,024)."""


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def actor_view(world: WorldState, address: bytes, *, height: int) -> dict[str, Any] | None:
    """``{"address", "creator", "source_hash", "deployed_at", "handlers", "balance", "height"}``."""
    record = actor_store.get_actor(world, address)
    if record is None:
        return None
    return {
        "address": to_checksum_address(address),
        "creator": to_checksum_address(record.creator),
        "source_hash": _hex(record.source_hash),
        "deployed_at": record.deployed_at,
        "handlers": list(record.handlers),
        "balance": str(get_account(world, address).balance),
        "height": height,
    }


def actor_state_view(world: WorldState, address: bytes, key: bytes, *, height: int) -> dict[str, Any] | None:
    """One storage entry: ``{"address", "key", "value" (hex or null when unset), "height"}``."""
    if actor_store.get_actor(world, address) is None:
        return None
    value = actor_store.get_state(world, address, key)
    return {"address": to_checksum_address(address), "key": _hex(key),
            "value": None if value is None else _hex(value), "height": height}


def actor_state_scan_view(world: WorldState, address: bytes, prefix: bytes, limit: int, *,
                          height: int) -> dict[str, Any] | None:
    """Up to ``limit`` entries under ``prefix`` in key order; ``truncated`` says more exist."""
    if actor_store.get_actor(world, address) is None:
        return None
    entries = actor_store.scan_state(world, address, prefix, limit + 1)
    return {"address": to_checksum_address(address), "prefix": _hex(prefix),
            "entries": [{"key": _hex(k), "value": _hex(v)} for k, v in entries[:limit]],
            "truncated": len(entries) > limit, "height": height}


def actor_timers_view(world: WorldState, address: bytes, *, height: int,
                      cip1_after: bytes | None = None) -> dict[str, Any] | None:
    """The actor's live timers, due order ``(height, seq)``; at most :data:`MAX_TIMERS_LISTED`; and under
    ``"cip1"`` its CIP-1 (``set_timeout``) timers, one bounded page continuing after ``cip1_after``
    (:func:`cip1_timers_view`).

    Reads the per-actor index (``timer/a/<actor>``) lazily, so the work is bounded by the cap
    whatever the governed ``max_timers_per_actor``.
    """
    if actor_store.get_actor(world, address) is None:
        return None
    prefix = timer_store.ACTOR_PREFIX + address
    timers: list[Timer] = []
    truncated = False
    for key, _height in world.iterate(prefix):
        if len(timers) == MAX_TIMERS_LISTED:
            truncated = True
            break
        timer = timer_store.get_timer(world, key[len(prefix):])
        if timer is not None:
            timers.append(timer)
    timers.sort(key=lambda t: (t.height, t.seq))
    return {
        "address": to_checksum_address(address),
        "count": timer_store.get_meta(world, address).live,
        "timers": [{"id": _hex(t.timer_id), "height": t.height, "seq": t.seq, "handler": t.handler,
                    "fee_payer": to_checksum_address(t.fee_payer), "gas_limit_per_fire": t.gas_limit_per_fire,
                    "expires_at": t.expires_at, "payload_size": len(t.payload)} for t in timers],
        "truncated": truncated,
        "height": height,
        "cip1": cip1_timers_view(world, address, height=height, after=cip1_after),
    }


def cip1_timers_view(world: WorldState, address: bytes, *, height: int, after: bytes | None) -> dict[str, Any]:
    """One page of the actor's CIP-1 timers (``scheduler/listing.py``: a scan bounded by records and bytes) and
    its scheduler state: ``{"active", "count", "next_nonce", "weight", "effective_weight", "weight_epoch",
    "starved_blocks", "starving", "timers": [...], "scanned", "next"}``. ``next`` (or null) is the
    ``cip1_after`` of the next page; the page's timers are in due order."""
    policy = get_timer_policy(world)
    summary = cip1_listing.actor_summary(world, address, policy, height=height)
    page = cip1_listing.scan_actor_timers(world, address, after=after)
    return {
        "active": policy.mode == MODE_CIP1,
        "count": summary.live,
        "next_nonce": summary.next_nonce,
        "weight": summary.weight.weight,
        "effective_weight": summary.effective_weight,
        "weight_epoch": summary.weight.epoch,
        "starved_blocks": summary.weight.starved_blocks,
        "starving": summary.starving,
        "timers": [_cip1_json(t) for t in page.timers],
        "scanned": page.scanned,
        "next": None if page.next_after is None else _hex(page.next_after),
    }


def _cip1_json(item: cip1_listing.ListedTimer) -> dict[str, Any]:
    t, where = item.timer, item.placement
    return {"id": _hex(item.timer_id), "scheduler": "cip1", "height": t.height, "gba": to_checksum_address(t.gba),
            "handler": t.handler, "gas_limit": t.gas_limit, "expires_at": t.expires_at,
            "payload_size": len(t.payload), "seq": t.seq, "tier": where.tier, "queued_at": where.queued_at,
            "carried_over": where.carried_over}


def read_only_view(world: WorldState, ctx: BlockContext, *, actor: bytes, handler: str, payload: bytes,
                   cycles_limit: int, height: int,
                   interrupt: InterruptHandle | None = None) -> dict[str, Any] | None:
    """Run ``handler(payload)`` on a checkpoint that is always discarded: ``{"result", "error", "cycles_used"}``.

    ``interrupt`` (optional) stops the run from another thread; its code is then the ``error``.
    """

    if actor_store.get_actor(world, actor) is None:
        return None
    result, error, cycles_used = read_only_call(world, ctx, actor=actor, handler=handler, payload=payload,
                                                cycles_limit=cycles_limit, interrupt=interrupt)
    return {"result": None if result is None else _hex(result), "error": error, "cycles_used": cycles_used,
            "height": height}
