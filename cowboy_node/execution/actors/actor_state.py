"""State layout of actors (docs/actors.md §State layout).

* ``actor/<addr20>/meta``        → :class:`ActorRecord` (canonical CBOR)
* ``actor/<addr20>/kv/<user key>`` → the value the actor stored (raw bytes)
* ``code/<source_hash32>``       → UTF-8 source, shared by every actor deployed from it

The ``actor/<addr>/kv/`` namespace is the one system actors already use
(``system_state``), so an actor's storage is one contiguous, ordered key range.
"""

from __future__ import annotations

from cowboy_node.execution.actors.actor_record import HASH_LEN, ActorRecord
from cowboy_node.state.world import WorldState
from cowboy_protocol.types.fields import ADDRESS_LEN

ACTOR_PREFIX = b"actor/"
"""Prefix of every actor's record and storage."""
CODE_PREFIX = b"code/"
"""Prefix of stored sources, keyed by source hash."""
META_SUFFIX = b"/meta"
"""Suffix of the record key after the address."""
KV_INFIX = b"/kv/"
"""Separator between the address and a storage key."""


def _check_address(address: bytes) -> None:
    if len(address) != ADDRESS_LEN:
        raise ValueError("actor address must be 20 bytes")


def meta_key(address: bytes) -> bytes:
    """``actor/<addr>/meta``."""
    _check_address(address)
    return ACTOR_PREFIX + address + META_SUFFIX


def kv_prefix(address: bytes) -> bytes:
    """``actor/<addr>/kv/``: the actor's storage range."""
    _check_address(address)
    return ACTOR_PREFIX + address + KV_INFIX


def kv_key(address: bytes, key: bytes) -> bytes:
    """``actor/<addr>/kv/<key>``."""
    return kv_prefix(address) + key


def code_key(source_hash: bytes) -> bytes:
    """``code/<source_hash>``."""
    if len(source_hash) != HASH_LEN:
        raise ValueError("source hash must be 32 bytes")
    return CODE_PREFIX + source_hash


def get_actor(world: WorldState, address: bytes) -> ActorRecord | None:
    """The record of the actor at ``address``, or None if nothing is deployed there."""
    raw = world.get(meta_key(address))
    return None if raw is None else ActorRecord.decode(raw)


def put_actor(world: WorldState, address: bytes, record: ActorRecord) -> int:
    """Store ``record``; returns the bytes written (key + value, for cell metering)."""
    key = meta_key(address)
    raw = record.encode()
    world.set(key, raw)
    return len(key) + len(raw)


def get_source(world: WorldState, source_hash: bytes) -> str | None:
    """The source stored under ``source_hash``, or None."""
    raw = world.get(code_key(source_hash))
    return None if raw is None else raw.decode("utf-8", "surrogatepass")


def put_source(world: WorldState, source_hash: bytes, source: str) -> int:
    """Store ``source`` unless already present; returns the bytes written (0 when shared)."""
    key = code_key(source_hash)
    if world.get(key) is not None:
        return 0
    raw = source.encode("utf-8", "surrogatepass")
    world.set(key, raw)
    return len(key) + len(raw)


def get_state(world: WorldState, address: bytes, key: bytes) -> bytes | None:
    """Value the actor at ``address`` stored under ``key``, or None."""
    return world.get(kv_key(address, key))


def set_state(world: WorldState, address: bytes, key: bytes, value: bytes) -> None:
    """Write one storage entry of the actor at ``address``."""
    world.set(kv_key(address, key), value)


def delete_state(world: WorldState, address: bytes, key: bytes) -> None:
    """Delete one storage entry (absent keys are fine)."""
    world.delete(kv_key(address, key))


def scan_state(world: WorldState, address: bytes, prefix: bytes, limit: int) -> list[tuple[bytes, bytes]]:
    """Up to ``limit`` ``(user key, value)`` pairs whose key starts with ``prefix``, ascending key order."""
    out: list[tuple[bytes, bytes]] = []
    if limit <= 0:
        return out
    base = kv_prefix(address)
    cut = len(base)
    for k, v in world.iterate(base + prefix):
        out.append((k[cut:], v))
        if len(out) >= limit:
            break
    return out
