"""``pvm_host.fork_actor`` and ``pvm_host.upgrade_self`` (cowboy_sdk ``fork()`` / ``mock_host``; docs/actors.md §8).

**fork** (CIP-27 as ``cowboy_sdk.fork`` documents it): the calling actor creates a byte-exact clone of itself
— same code, a full copy of its storage — at ``parent[:2] ‖ keccak256("cip27.fork.addr.v1" ‖ parent ‖
fork_count u64 BE ‖ code_hash)[14:32]``, where ``fork_count`` is the parent's own counter
(``actor/<parent>/forks``, reverted with the frame). There is no ``init``: if the code has an ``on_fork``
handler it runs on the child right after the copy, with the parent's address as payload and the child
itself as sender (the SDK's ``@callable_by(SELF)``); its failure fails the fork. ``endowment`` moves from
the parent to the child. The child's protocol owner (record ``creator``) is the parent.

**upgrade_self**: replaces the calling actor's code with ``new_code`` (UTF-8 source, compiled and checked
like a deployment — a refused source halts with ``actor_rejected:<rule>:<line>``) from its next run on;
the running frame keeps its code. Storage, balance, owner and address stay. Manifests, routes and route
sponsorship (CIP-15) have no meaning on this node: passing one is a ``ValueError``.

Neither has the SDK's entitlement checks (``exec.fork``, ``max_children``): this node has no manifests.
"""

from __future__ import annotations

from collections.abc import Callable

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.actor_record import ActorRecord
from cowboy_node.execution.actors.codecache import CODE_CACHE
from cowboy_node.execution.actors.rejection import rejection_failure
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected
from cowboy_node.execution.system_state import get_account, put_account
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import U128_MAX, encode_u128, expect_uint

FORK_DOMAIN = b"cip27.fork.addr.v1"
"""Domain tag of a fork child's address preimage (``cowboy_sdk.fork``)."""
FORKS_SUFFIX = b"/forks"
"""``actor/<addr>/forks`` -> CBOR uint: forks made so far (absent = 0)."""
FORK_CYCLES = 20_000
"""fork_actor base cost, before the storage copy and ``on_fork``."""
FORK_COPY_CYCLES_PER_ENTRY = 100
"""Per storage entry copied to the child (its bytes are charged as cells)."""
ON_FORK_HANDLER = "on_fork"
"""Handler run on the child right after the copy, if the code has one."""
UPGRADE_BASE_CYCLES = 5_000
"""upgrade_self base cost (as a deployment's)."""
UPGRADE_CYCLES_PER_SOURCE_BYTE = 50
"""upgrade_self per source byte (as a deployment's compile cost)."""
TOPIC_FORKED = "actor.forked"
"""Event of the parent: ``{0: child, 1: endowment (u128)}``."""
TOPIC_UPGRADED = "actor.upgraded"
"""Event of the actor: ``{0: old source_hash, 1: new source_hash}``."""

RunChild = Callable[[bytes, str, bytes], bytes]
"""``run_child(child, handler, payload)``: runs a handler of the child in a nested frame (the host's)."""


def forks_key(address: bytes) -> bytes:
    """State key of an actor's fork counter."""
    return store.ACTOR_PREFIX + address + FORKS_SUFFIX


def child_address(parent: bytes, fork_count: int, code_hash: bytes) -> bytes:
    """The address of a parent's ``fork_count``-th child (``cowboy_sdk.fork``)."""
    return parent[:2] + keccak256(FORK_DOMAIN + parent + fork_count.to_bytes(8, "big") + code_hash)[14:32]


def _move(world: WorldState, meter: Meter, source: bytes, dest: bytes, amount: int) -> None:
    payer = get_account(world, source)
    if payer.balance < amount:
        raise TxFailed("insufficient_balance", f"actor balance {payer.balance} is below the endowment {amount}")
    meter.charge_cells(put_account(world, source, Account(payer.balance - amount, payer.nonce)))
    payee = get_account(world, dest)
    if payee.balance + amount > U128_MAX:
        raise TxFailed("balance_overflow", "child balance would exceed u128")
    meter.charge_cells(put_account(world, dest, Account(payee.balance + amount, payee.nonce)))


def fork(world: WorldState, height: int, meter: Meter, *, parent: bytes, endowment: int, events: list[Event],
         run_child: RunChild) -> bytes:
    """Clone ``parent`` (code and storage) at its next child address; returns the child's address."""
    meter.charge_cycles(FORK_CYCLES)
    record = store.get_actor(world, parent)
    if record is None:  # only a running actor forks itself
        raise TxFailed("actor_not_found", f"no actor at 0x{parent.hex()}")
    raw = world.get(forks_key(parent))
    count = 0 if raw is None else expect_uint(decode(raw), "actor.forks")
    child = child_address(parent, count, record.source_hash)
    if store.get_actor(world, child) is not None:
        raise TxFailed("actor_exists", f"an actor is already deployed at 0x{child.hex()}")
    counter = encode(count + 1)
    meter.charge_cells(len(forks_key(parent)) + len(counter))
    world.set(forks_key(parent), counter)
    clone = ActorRecord(record.source_hash, parent, height, record.handlers, record.source_len)
    meter.charge_cells(store.put_actor(world, child, clone))
    base = store.kv_prefix(parent)
    for key, value in list(world.iterate(base)):
        meter.charge_cycles(FORK_COPY_CYCLES_PER_ENTRY)
        meter.charge_cells(len(key) + len(value))
        store.set_state(world, child, key[len(base):], value)
    if endowment:
        _move(world, meter, parent, child, endowment)
    if ON_FORK_HANDLER in record.handlers:
        run_child(child, ON_FORK_HANDLER, parent)
    events.append(Event(parent, TOPIC_FORKED, encode({0: child, 1: encode_u128(endowment)})))
    return child


def upgrade(world: WorldState, meter: Meter, *, actor: bytes, new_code: bytes, events: list[Event]) -> None:
    """Replace ``actor``'s code with ``new_code`` (UTF-8 source) for its later runs."""
    meter.charge_cycles(UPGRADE_BASE_CYCLES + UPGRADE_CYCLES_PER_SOURCE_BYTE * len(new_code))
    try:
        source = new_code.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("upgrade_self: new_code is not UTF-8 source") from None
    try:
        compiled = CODE_CACHE.compile(source)
    except ActorRejected as e:
        raise rejection_failure(e) from None
    record = store.get_actor(world, actor)
    if record is None:
        raise TxFailed("actor_not_found", f"no actor at 0x{actor.hex()}")
    meter.charge_cells(store.put_source(world, compiled.source_hash, source))
    new = ActorRecord(compiled.source_hash, record.creator, record.deployed_at, compiled.handlers, len(new_code))
    meter.charge_cells(store.put_actor(world, actor, new))
    events.append(Event(actor, TOPIC_UPGRADED, encode({0: record.source_hash, 1: compiled.source_hash})))


__all__ = ["FORK_DOMAIN", "child_address", "fork", "forks_key", "upgrade"]
