"""Runner Registry state (system actor 0x…01) and the functions the dispatcher calls.

Layout, under ``NS = b"actor/" + RUNNER_REGISTRY + b"/kv/"`` (docs/runners.md §3)::

    NS + b"runner/" + <address 20>                 -> RunnerRecord canonical CBOR
    NS + b"active_runners"                          -> CBOR array of 20-byte addresses (ACTIVE_RUNNERS_KEY)
    NS + b"unbond/" + <height u64 BE> + <address>   -> b"" (ordered unbonding index)

``ACTIVE_RUNNERS_KEY`` is the CIP-11 §7.2 PresenceInput index basis: the append-order array of every
address that ever registered. It is never reordered, compacted or renumbered; a new address is appended
and its position is its registry index (also kept in ``RunnerRecord.index``); health changes, staleness,
pausing and deregistration leave it untouched, and an address registering again keeps its index.

The stakes are held in the Runner Registry account's balance (``acct/`` + RUNNER_REGISTRY).
Every function reads and writes through the :class:`WorldState`, so writes made inside a transaction
sit in its journal and are undone by a revert.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from cowboy_node.execution.system_state import RUNNER_REGISTRY, get_account, put_account
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_bytes
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import Health, RunnerRecord
from cowboy_protocol.types.validation_errors import DecodeError

NS = b"actor/" + RUNNER_REGISTRY + b"/kv/"
"""Key namespace of the Runner Registry."""
RECORD_PREFIX = NS + b"runner/"
"""``RECORD_PREFIX + address`` -> RunnerRecord."""
ACTIVE_RUNNERS_KEY = NS + b"active_runners"
"""The append-order CBOR array of runner addresses (CIP-11 §7.2 registry index basis)."""
UNBOND_PREFIX = NS + b"unbond/"
"""``UNBOND_PREFIX + height u64 BE + address`` -> b"": stakes due back at ``height``, in key order."""
PERMILLE = 1_000


def record_key(address: bytes) -> bytes:
    """State key of a runner's record."""
    return RECORD_PREFIX + address


def unbond_key(height: int, address: bytes) -> bytes:
    """State key of an unbonding-index entry."""
    return UNBOND_PREFIX + height.to_bytes(8, "big") + address


def parse_unbond_key(key: bytes) -> tuple[int, bytes]:
    """``(height, address)`` of an unbonding-index key."""
    body = key[len(UNBOND_PREFIX):]
    if not key.startswith(UNBOND_PREFIX) or len(body) != 8 + ADDRESS_LEN:
        raise DecodeError(f"runner registry: malformed unbonding key {key.hex()}")
    return int.from_bytes(body[:8], "big"), body[8:]


# -- reads --------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1 << 16)
def _decode_record(raw: bytes) -> RunnerRecord:
    # Records are immutable and decoding is a pure function of the bytes, so memoising it cannot change a
    # result; it turns the per-job registry scan (strict CBOR decode, ~70 µs a record) into dictionary lookups.
    return RunnerRecord.decode(raw)


@functools.lru_cache(maxsize=8)
def _decode_active_array(raw: bytes) -> tuple[bytes, ...]:
    value = decode(raw)
    if not isinstance(value, list):
        raise DecodeError("active_runners: expected an array")
    return tuple(expect_bytes(a, "active_runners[]", ADDRESS_LEN) for a in value)


def get_runner(world: WorldState, address: bytes) -> RunnerRecord | None:
    """The registration of ``address`` (also a deregistered one), or None if it never registered."""
    raw = world.get(record_key(address))
    return None if raw is None else _decode_record(raw)


def active_runner_addresses(world: WorldState) -> list[bytes]:
    """The active-runner array: element ``i`` is the runner with registry index ``i`` (CIP-11 §7.2)."""
    raw = world.get(ACTIVE_RUNNERS_KEY)
    if raw is None:
        return []
    return list(_decode_active_array(raw))


def registry_size(world: WorldState) -> int:
    """``|registry|``: the length of the active-runner array (the PresenceInput domain size)."""
    return len(active_runner_addresses(world))


def runners_in_index_order(world: WorldState) -> list[RunnerRecord]:
    """Every record, element ``i`` being the runner with registry index ``i``."""
    out: list[RunnerRecord] = []
    for i, address in enumerate(active_runner_addresses(world)):
        rec = get_runner(world, address)
        if rec is None or rec.index != i:
            raise DecodeError(f"runner registry: index {i} ({address.hex()}) has no matching record")
        out.append(rec)
    return out


def registry_balance(world: WorldState) -> int:
    """Stake held by the Runner Registry account."""
    return get_account(world, RUNNER_REGISTRY).balance


# -- writes ---------------------------------------------------------------------------------------

def put_runner(world: WorldState, rec: RunnerRecord) -> int:
    """Store ``rec`` under its address; returns the bytes written (for cell metering)."""
    key = record_key(rec.address)
    raw = rec.encode()
    world.set(key, raw)
    return len(key) + len(raw)


def append_active_runner(world: WorldState, address: bytes) -> tuple[int, int]:
    """Append ``address`` to the active-runner array; returns ``(its index, bytes added to the array)``.

    The caller checks that the address is not already in the array (the record tells: a registration
    that exists keeps its index).
    """
    old = world.get(ACTIVE_RUNNERS_KEY)
    addresses = active_runner_addresses(world)
    addresses.append(address)
    raw = encode(addresses)
    world.set(ACTIVE_RUNNERS_KEY, raw)
    return len(addresses) - 1, len(raw) - (0 if old is None else len(old))


def _require(world: WorldState, address: bytes) -> RunnerRecord:
    rec = get_runner(world, address)
    if rec is None:
        raise LookupError(f"no runner registered at {address.hex()}")
    return rec


def adjust_active_jobs(world: WorldState, address: bytes, delta: int) -> int:
    """Add ``delta`` (may be negative) to the runner's active-job count; returns the bytes written.

    Raises LookupError for an unknown runner and ValueError if the count would go below zero (the
    dispatcher released a job it never assigned: a bug, not a state to clamp away).
    """
    rec = _require(world, address)
    count = rec.active_jobs + delta
    if count < 0:
        raise ValueError(f"runner {address.hex()}: active_jobs {rec.active_jobs} + {delta} < 0")
    return put_runner(world, replace(rec, active_jobs=count))


def adjust_reputation(world: WorldState, address: bytes, delta_x1e9: int, cfg: RunnerConfig) -> int:
    """Add ``delta_x1e9`` to the runner's reputation, clamped to ``[0, cfg.max_reputation_x1e9]``;
    returns the bytes written."""
    rec = _require(world, address)
    rep = min(max(rec.reputation_x1e9 + delta_x1e9, 0), cfg.max_reputation_x1e9)
    return put_runner(world, replace(rec, reputation_x1e9=rep))


def mark_unhealthy(world: WorldState, address: bytes) -> int:
    """Set the runner UNHEALTHY (its next heartbeat lifts it); a deregistered runner stays deregistered.

    Leaves the active-runner array untouched (CIP-11 §7.2). Returns the bytes written (0 if nothing changed).
    """
    rec = _require(world, address)
    if rec.health in (Health.UNHEALTHY, Health.DEREGISTERED):
        return 0
    return put_runner(world, replace(rec, health=Health.UNHEALTHY))


def slash_stake(world: WorldState, address: bytes, permille: int) -> int:
    """Remove ``stake · permille / 1000`` (rounded down) from the runner's stake and from the registry's
    balance; returns the amount removed. The caller decides where it goes (it is no longer in any balance)."""
    if not 0 <= permille <= PERMILLE:
        raise ValueError(f"permille {permille} out of 0..{PERMILLE}")
    rec = _require(world, address)
    amount = rec.stake * permille // PERMILLE
    if amount == 0:
        return 0
    registry = get_account(world, RUNNER_REGISTRY)
    if registry.balance < amount:
        raise ValueError("runner registry balance is below a runner's stake")
    put_account(world, RUNNER_REGISTRY, Account(registry.balance - amount, registry.nonce))
    put_runner(world, replace(rec, stake=rec.stake - amount))
    return amount
