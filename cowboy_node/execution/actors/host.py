"""The ``pvm_host`` module one actor frame sees (docs/actors.md §Host API).

A :class:`Host` is built for every handler run (transaction call, nested
``call_actor``, timer fire, mailbox message, read-only call) and handed to the
sandbox as ``modules={"pvm_host": host}``. The sandbox exposes its public
attributes only (``pvm.stdlib.host_view``), so every public name here is part
of the actor-facing API and all state lives in ``_``-prefixed slots.

Error policy (one rule per kind, documented in docs/actors.md):

* a wrong argument *type* raises ``TypeError`` and a bad argument *value*
  (size limit, reserved key, unsupported algorithm) raises ``ValueError`` —
  both catchable, as the SDK's mock host does;
* a host-side condition the actor cannot pre-check (callee failed, actor not
  found, depth exceeded) raises :class:`HostError` — catchable;
* resource exhaustion (``out_of_cycles``/``out_of_cells``), every timer
  constraint (``timer_*``) and ``insufficient_balance`` / ``balance_overflow``
  raise ``TxFailed``, which halts the actor with that code (the sandbox turns it
  into a ``PvmHalt``, which actor code cannot catch).

Every method charges its cycles before doing any work and its cells before
writing. Values returned are fresh builtins (bytes, int, str, bool, None, and
lists/tuples/dicts of those).
"""

from __future__ import annotations

from cowboy_node.execution import fees, mailbox
from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors import host_timers, lifecycle, subscriptions
from cowboy_node.execution.actors.frame import CallFrame, RunFrame, TxScope
from cowboy_node.execution.actors.host_timers import GET_TIMERS_CYCLES_PER_TIMER as GET_TIMERS_CYCLES_PER_TIMER
from cowboy_node.execution.actors.host_timers import MAX_WATCH_KEY_PREFIX_BYTES as MAX_WATCH_KEY_PREFIX_BYTES
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs import sdk_jobs
from cowboy_node.execution.jobs.executors import submit_request
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.system_state import JOB_DISPATCHER, get_account, put_account
from cowboy_node.execution.timers.timer_record import DEFAULT_HANDLER
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import Account
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519, secp256k1
from cowboy_protocol.crypto.keccak import keccak256 as _keccak256
from cowboy_protocol.jobs.json_strict import parse_json
from cowboy_protocol.types.fields import ADDRESS_LEN, U64_MAX, U128_MAX, encode_u128
from cowboy_protocol.types.jobspec import decode_job_request
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.validation_errors import DecodeError, ValidationError

# --- costs (cycles; cells are always the bytes written) ---------------------------------------
HOST_CALL_CYCLES = 100
"""Floor charged by every host call (context, current_block, self_address, actor_owner...)."""
GET_STATE_CYCLES = 200
"""get_state, plus ``(len(key) + len(value)) // 16`` for the bytes read."""
SET_STATE_CYCLES = 500
"""set_state / set_reserved_state; cells ``len(key) + len(value)``."""
DELETE_STATE_CYCLES = 300
"""delete_state / delete_reserved_state; cells ``len(key)`` (the deletion is a write)."""
SCAN_BASE_CYCLES = 500
"""scan_state_prefix base; plus ``SCAN_CYCLES_PER_LIMIT × limit`` and cells for the returned bytes."""
SCAN_CYCLES_PER_LIMIT = 50
"""Charged per requested entry (by ``limit``, not by the number returned, as the SDK specifies)."""
MAX_SCAN_LIMIT = 1000
"""``limit`` is clamped to this (SDK ``MAX_PREFIX_SCAN_LIMIT``)."""
KECCAK_BASE_CYCLES = 30
"""keccak256 base; plus ``KECCAK_CYCLES_PER_WORD`` per 32-byte word of input."""
KECCAK_CYCLES_PER_WORD = 6
"""keccak256 per 32-byte input word."""
VERIFY_ED25519_CYCLES = 3_000
"""verify_signature with algorithm 2, plus keccak-like per-word cost of the message."""
VERIFY_SECP256K1_CYCLES = 3_000
"""verify_signature with algorithm 1, plus the keccak256 of the message."""
EMIT_EVENT_CYCLES = 300
"""emit_event; cells ``len(name) + len(payload)``."""
CALL_ACTOR_CYCLES = 700
"""call_actor, on top of what the callee uses (charged to the caller)."""
SEND_MESSAGE_CYCLES = 1_000
SUBMIT_JOB_CYCLES = 1_000
"""Host-call overhead of ``submit_job`` (the dispatcher then charges its own submission and selection cost)."""
MAX_JOB_REQUEST_BYTES = 64 * 1024
"""Largest ``submit_job`` payload (the canonical request limit of docs/jobs.md)."""
"""send_message; cells ``MESSAGE_OVERHEAD_CELLS + len(payload)``."""
MESSAGE_OVERHEAD_CELLS = 72
"""Cells of a Mailbox entry besides its payload (sender, target, sequence number)."""
TRANSFER_BALANCE_CYCLES = fees.TRANSFER_CYCLES
"""transfer_balance (same as a Transfer transaction); cells are the account writes."""

# --- limits -------------------------------------------------------------------------------------
MAX_KEY_BYTES = 1024
"""Longest storage key."""
MAX_VALUE_BYTES = 1 << 20
"""Largest stored value (1 MiB)."""
MAX_EVENT_NAME_BYTES = 64
"""Longest event name (UTF-8 bytes)."""
MAX_EVENT_PAYLOAD_BYTES = 64 * 1024
"""Largest event payload."""
MAX_MESSAGE_PAYLOAD_BYTES = 1 << 20
"""Largest ``send_message`` payload."""
MAX_METHOD_BYTES = 256
"""Longest handler name for ``call_actor``."""
MAX_VERIFY_MESSAGE_BYTES = 1 << 20
"""Largest message ``verify_signature`` accepts (larger: HostError invalid_input)."""

INITIALIZED_KEY = b"__INITIALIZED__"
"""The SDK's initialization flag: writable only through ``set_reserved_state``."""
OFFCHAIN_IMAGE_KEY = b"cowboy.offchain.image.v1"
"""Reserved by the SDK for the off-chain image API (not implemented here): never writable."""
RESERVED_KEYS = (INITIALIZED_KEY, OFFCHAIN_IMAGE_KEY)
"""Keys ``set_state`` / ``delete_state`` refuse."""

ALG_SECP256K1 = 1
"""verify_signature: secp256k1 recoverable (65-byte r‖s‖v over keccak256(message); key = address or SEC1 key)."""
ALG_ED25519 = 2
"""verify_signature: strict Ed25519 (the SDK's CIP-40 algorithm 2; 32-byte key, 64-byte signature)."""

# pvm-host compact error codes the SDK reads off HostError.code (cowboy_sdk.errors / call.py).
HOST_CODE_RESOURCE = 1
HOST_CODE_INVALID_INPUT = 2
HOST_CODE_NOT_FOUND = 3
HOST_CODE_FORBIDDEN = 5
HOST_CODE_INTERNAL = 6
_HOST_CODES = {
    "out_of_cycles": HOST_CODE_RESOURCE,
    "out_of_cells": HOST_CODE_RESOURCE,
    "invalid_input": HOST_CODE_INVALID_INPUT,
    "actor_not_found": HOST_CODE_NOT_FOUND,
    "call_depth_exceeded": HOST_CODE_FORBIDDEN,
}


class HostError(RuntimeError):
    """A host call failed for a reason the actor may handle (``pvm_host.HostError``).

    ``code`` is the pvm-host compact integer code the SDK reads (1 resource,
    2 invalid input, 3 not found, 5 forbidden, 6 internal/callee failure);
    ``name`` is the node's stable string code (e.g. ``actor_not_found``,
    ``call_depth_exceeded``, or the failed callee's code such as ``handler_error``).
    """

    def __init__(self, message: str = "", code: int | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.name = name


def host_error(name: str, message: str = "") -> HostError:
    """HostError for the stable string code ``name`` (integer code from the SDK's table)."""
    return HostError(message or name, _HOST_CODES.get(name, HOST_CODE_INTERNAL), name)


def _utf8(text: str, what: str) -> bytes:
    """Strict UTF-8 (a lone surrogate is refused: it could not be encoded into a receipt or key)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid UTF-8 text") from None


def _key(value: object, what: str = "key") -> bytes:
    """A storage key: bytes (bytearray copied) or str (UTF-8, as the SDK mock accepts), 1..MAX_KEY_BYTES."""
    if isinstance(value, str):
        value = _utf8(value, what)
    if not isinstance(value, bytes | bytearray):
        raise TypeError(f"{what} must be bytes")
    out = bytes(value)
    if not 1 <= len(out) <= MAX_KEY_BYTES:
        raise ValueError(f"{what} must be 1..{MAX_KEY_BYTES} bytes")
    return out


def _bytes(value: object, what: str, max_len: int) -> bytes:
    if not isinstance(value, bytes | bytearray):
        raise TypeError(f"{what} must be bytes")
    if len(value) > max_len:
        raise ValueError(f"{what} is {len(value)} bytes, the maximum is {max_len}")
    return bytes(value)


def _address(value: object, what: str) -> bytes:
    if not isinstance(value, bytes | bytearray):
        raise TypeError(f"{what} must be a 20-byte address (bytes)")
    if len(value) != ADDRESS_LEN:
        raise ValueError(f"{what} must be 20 bytes, got {len(value)}")
    return bytes(value)


def _int(value: object, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int")
    if not lo <= value <= hi:
        raise ValueError(f"{what} must be in {lo}..{hi}")
    return int(value)


def _word_cost(n: int) -> int:
    return (n + 31) // 32


class Host:
    """The ``pvm_host`` functions for one frame (one actor executing one handler).

    The public methods are the SDK host contract (``cowboy_sdk.mock_host``) plus the node's
    draft timer calls the SDK has no primitive for (``set_state_watch``, ``set_interval``,
    ``cancel_watch``, ``cancel_interval``: docs/timers.md §12.4); ``HostError`` is exposed
    as an attribute because the SDK looks it up as ``pvm_host.HostError``.
    """

    __slots__ = ("_closed", "_ctx", "_events", "_frame", "_meter", "_owner", "_run_frame", "_scope", "_world")

    HostError = HostError

    def __init__(self, world: WorldState, ctx: BlockContext, frame: CallFrame, meter: Meter, events: list[Event],
                 scope: TxScope, owner: bytes, run_frame: RunFrame) -> None:
        self._run_frame = run_frame  # runs a nested call_actor frame (injected by the invoker: no import back)
        self._world = world
        self._ctx = ctx
        self._frame = frame
        self._meter = meter
        self._events = events
        self._scope = scope
        self._owner = owner
        self._closed = False

    def _close(self) -> None:
        """Called when the frame ends: later calls (from a leaked reference) are refused."""
        self._closed = True

    def _enter(self, cycles: int) -> None:
        if self._closed:
            raise TxFailed("forbidden", "host call after the frame ended")
        self._meter.charge_cycles(cycles)

    def _caller(self) -> host_timers.Caller:
        return host_timers.Caller(self._world, self._ctx, self._meter, self._frame)

    def _open(self) -> host_timers.Caller:
        """The frame's caller for a timer call that charges its own cycles (refused once the frame ended)."""
        if self._closed:
            raise TxFailed("forbidden", "host call after the frame ended")
        return self._caller()

    # --- context ----------------------------------------------------------------------------
    def context(self) -> dict[str, object]:
        """Execution context: tx_hash, sender, actor_addr, block_height, chain_id, chain_instance_id, timestamp_ms."""
        self._enter(HOST_CALL_CYCLES)
        env = self._ctx.env
        f = self._frame
        return {
            "tx_hash": f.tx_hash,
            "sender": f.sender,
            "actor_addr": f.actor,
            "block_height": env.height,
            "chain_id": env.chain_id,
            "chain_instance_id": chain_instance_id(env.chain_id),
            "timestamp_ms": env.timestamp_ms,
        }

    def current_block(self) -> int:
        """Height of the block being executed."""
        self._enter(HOST_CALL_CYCLES)
        return self._ctx.env.height

    def self_address(self) -> bytes:
        """The executing actor's address."""
        self._enter(HOST_CALL_CYCLES)
        return self._frame.actor

    def actor_owner(self) -> bytes:
        """The protocol owner (deployer) of the executing actor, from its protected record."""
        self._enter(HOST_CALL_CYCLES)
        return self._owner

    # --- state ------------------------------------------------------------------------------
    def get_state(self, key: object) -> bytes | None:
        """Value stored under ``key`` by this actor, or None."""
        self._enter(GET_STATE_CYCLES)
        k = _key(key)
        value = store.get_state(self._world, self._frame.actor, k)
        self._meter.charge_cycles((len(k) + (0 if value is None else len(value))) // 16)
        return value

    def set_state(self, key: object, value: object) -> None:
        """Store ``value`` under ``key`` (reserved SDK keys refused with ValueError)."""
        self._enter(SET_STATE_CYCLES)
        k = _key(key)
        if k in RESERVED_KEYS:
            raise ValueError(f"set_state: key {k!r} is reserved by the cowboy_sdk")
        self._write(k, _bytes(value, "value", MAX_VALUE_BYTES))

    def delete_state(self, key: object) -> None:
        """Delete ``key`` (absent keys are fine; reserved SDK keys refused with ValueError)."""
        self._enter(DELETE_STATE_CYCLES)
        k = _key(key)
        if k in RESERVED_KEYS:
            raise ValueError(f"delete_state: key {k!r} is reserved by the cowboy_sdk")
        self._delete(k)

    def set_reserved_state(self, key: object, value: object) -> None:
        """SDK-only: write the reserved ``__INITIALIZED__`` key (any other key: ValueError)."""
        self._enter(SET_STATE_CYCLES)
        k = _key(key)
        if k != INITIALIZED_KEY:
            raise ValueError(f"set_reserved_state: key {k!r} is not reserved")
        self._write(k, _bytes(value, "value", MAX_VALUE_BYTES))

    def delete_reserved_state(self, key: object) -> None:
        """SDK-only: delete the reserved ``__INITIALIZED__`` key (any other key: ValueError)."""
        self._enter(DELETE_STATE_CYCLES)
        k = _key(key)
        if k != INITIALIZED_KEY:
            raise ValueError(f"delete_reserved_state: key {k!r} is not reserved")
        self._delete(k)

    def _write(self, key: bytes, value: bytes) -> None:
        self._meter.charge_cells(len(key) + len(value))
        store.set_state(self._world, self._frame.actor, key, value)

    def _delete(self, key: bytes) -> None:
        self._meter.charge_cells(len(key))
        store.delete_state(self._world, self._frame.actor, key)

    def scan_state_prefix(self, prefix: object, limit: object = 100) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` (clamped to 1000) ``(key, value)`` pairs under ``prefix``, ascending.

        Costs ``500 + limit × 50`` cycles (by the clamped limit) plus the returned bytes as cells.
        """
        if self._closed:
            raise TxFailed("forbidden", "host call after the frame ended")
        if isinstance(prefix, str):
            prefix = _utf8(prefix, "prefix")
        pfx = _bytes(prefix, "prefix", MAX_KEY_BYTES)
        n = min(_int(limit, "limit", 0, U64_MAX), MAX_SCAN_LIMIT)
        self._meter.charge_cycles(SCAN_BASE_CYCLES + SCAN_CYCLES_PER_LIMIT * n)
        entries = store.scan_state(self._world, self._frame.actor, pfx, n)
        self._meter.charge_cells(sum(len(k) + len(v) for k, v in entries))
        return entries

    # --- crypto -----------------------------------------------------------------------------
    def keccak256(self, data: object) -> bytes:
        """Keccak-256 (Ethereum's) of ``data``."""
        if not isinstance(data, bytes | bytearray):
            raise TypeError("keccak256: data must be bytes")
        self._enter(KECCAK_BASE_CYCLES + KECCAK_CYCLES_PER_WORD * _word_cost(len(data)))
        return _keccak256(bytes(data))

    def verify_signature(self, algorithm: object, public_key: object, message: object, signature: object) -> bool:
        """True iff ``signature`` is valid; only a well-formed invalid signature returns False.

        Algorithm 2 (Ed25519, the SDK's): 32-byte key, 64-byte signature over ``message``.
        Algorithm 1 (secp256k1 recoverable): 65-byte ``r‖s‖v`` (v ∈ {0,1}, low s) over
        ``keccak256(message)``; ``public_key`` is the signer's 20-byte address or its 33/65-byte
        SEC1 key. Unsupported algorithm or wrong lengths: ValueError; message over 1 MiB or a
        malformed public key: HostError(invalid_input).
        """
        if isinstance(algorithm, bool) or not isinstance(algorithm, int) or algorithm not in (ALG_SECP256K1,
                                                                                                ALG_ED25519):
            raise ValueError("unsupported signature algorithm")
        for name, value in (("public_key", public_key), ("message", message), ("signature", signature)):
            if not isinstance(value, bytes | bytearray):
                raise TypeError(f"verify_signature: {name} must be bytes")
        assert isinstance(public_key, bytes | bytearray) and isinstance(message, bytes | bytearray)
        assert isinstance(signature, bytes | bytearray)
        base = VERIFY_ED25519_CYCLES if algorithm == ALG_ED25519 else VERIFY_SECP256K1_CYCLES
        self._enter(base + KECCAK_CYCLES_PER_WORD * _word_cost(len(message)))
        if algorithm == ALG_ED25519:
            if len(public_key) != 32 or len(signature) != 64:
                raise ValueError("invalid signature length")
        elif len(public_key) not in (20, 33, 65) or len(signature) != 65:
            raise ValueError("invalid signature length")
        if len(message) > MAX_VERIFY_MESSAGE_BYTES:
            raise host_error("invalid_input", "message too large")
        if algorithm == ALG_ED25519:
            return ed25519.verify(bytes(public_key), bytes(message), bytes(signature))
        return _verify_secp256k1(bytes(public_key), bytes(message), bytes(signature))

    # --- events -----------------------------------------------------------------------------
    def emit_event(self, name: object, payload: object, schema: object = None) -> dict[str, object]:
        """Append ``Event(actor, name, payload)``; returns the SDK's EmitResult dict."""
        if not isinstance(name, str):
            raise TypeError("emit_event: name must be a str")
        raw_name = _utf8(name, "emit_event name")
        if not 1 <= len(raw_name) <= MAX_EVENT_NAME_BYTES:
            raise ValueError(f"emit_event: name must be 1..{MAX_EVENT_NAME_BYTES} UTF-8 bytes")
        data = _bytes(payload, "emit_event payload", MAX_EVENT_PAYLOAD_BYTES)
        if schema is not None and (not isinstance(schema, bytes | bytearray) or len(schema) != 32):
            raise ValueError("event schema must be a 32-byte identifier or None")
        self._enter(EMIT_EVENT_CYCLES)
        self._meter.charge_cells(len(raw_name) + len(data))
        self._events.append(Event(self._frame.actor, name, data))
        self._scope.emit_count += 1
        served = subscriptions.deliver(self._world, self._ctx, self._meter, emitter=self._frame.actor, topic=raw_name,
                                       payload=data)
        return {"emit_id": self._scope.emit_count, "sync_outcomes": [], "deferred_subs": served}

    # --- event subscriptions (actors/subscriptions.py) -------------------------------------
    def subscribe_event(self, emitter: object, topic: object, handler: object, gas_prepaid: object,
                        bid: object = 0, schema: object = None) -> bytes:
        """Deliver ``emitter``'s events named ``topic`` to this actor's ``handler`` (via the Mailbox) while
        ``gas_prepaid`` cycles last; ``bid`` cycles are burned now and order deliveries. Returns the 33-byte
        subscription id. ``schema`` (a 32-byte identifier) is accepted; emitters declare none on this node."""
        if schema is not None and (not isinstance(schema, bytes | bytearray) or len(schema) != 32):
            raise ValueError("event schema must be a 32-byte identifier or None")
        addr = _address(emitter, "emitter")
        if isinstance(topic, str):
            topic = _utf8(topic, "topic")
        name = _bytes(topic, "topic", subscriptions.MAX_TOPIC_BYTES)
        if not name:
            raise ValueError("topic must not be empty")
        if not isinstance(handler, str):
            raise TypeError("handler must be a str")
        if not 1 <= len(_utf8(handler, "handler")) <= subscriptions.MAX_HANDLER_BYTES:
            raise ValueError(f"handler must be 1..{subscriptions.MAX_HANDLER_BYTES} UTF-8 bytes")
        gas = _int(gas_prepaid, "gas_prepaid", 0, U128_MAX)
        price = _int(bid, "bid", 0, U128_MAX)
        self._enter(HOST_CALL_CYCLES)
        try:
            return subscriptions.subscribe(self._world, self._ctx, self._meter, subscriber=self._frame.actor,
                                           emitter=addr, topic=name, handler=handler, gas_prepaid=gas, bid=price)
        except OverflowError as e:
            raise HostError(str(e), HOST_CODE_RESOURCE, "too_many_subscribers") from None

    def unsubscribe_event(self, sub_id: object) -> int:
        """End this actor's subscription; returns its unused cycle budget (0 if there is none)."""
        sid = _bytes(sub_id, "sub_id", subscriptions.SUB_ID_LEN)
        self._enter(HOST_CALL_CYCLES)
        return subscriptions.unsubscribe(self._world, self._meter, sub_id=sid, subscriber=self._frame.actor)

    def force_unsubscribe_event(self, sub_id: object) -> None:
        """End a subscription to this actor's events (or its own); a missing one is a no-op."""
        sid = _bytes(sub_id, "sub_id", subscriptions.SUB_ID_LEN)
        self._enter(HOST_CALL_CYCLES)
        try:
            subscriptions.force_unsubscribe(self._world, self._meter, sub_id=sid, caller=self._frame.actor)
        except PermissionError as e:
            raise HostError(str(e), HOST_CODE_FORBIDDEN, "forbidden") from None

    def update_bid(self, sub_id: object, additional_bid: object) -> int:
        """Raise this actor's subscription bid; returns the new bid (HostError not_found if it has none)."""
        sid = _bytes(sub_id, "sub_id", subscriptions.SUB_ID_LEN)
        more = _int(additional_bid, "additional_bid", 0, U128_MAX)
        self._enter(HOST_CALL_CYCLES)
        try:
            return subscriptions.update_bid(self._world, self._meter, sub_id=sid, subscriber=self._frame.actor,
                                            additional=more)
        except LookupError:
            raise HostError("EventSubNotFound", HOST_CODE_NOT_FOUND, "not_found") from None

    def topup_subscription(self, sub_id: object, additional_gas: object) -> int:
        """Add cycles to this actor's subscription budget; returns the new budget (HostError not_found)."""
        sid = _bytes(sub_id, "sub_id", subscriptions.SUB_ID_LEN)
        more = _int(additional_gas, "additional_gas", 0, U128_MAX)
        self._enter(HOST_CALL_CYCLES)
        try:
            return subscriptions.topup(self._world, self._meter, sub_id=sid, subscriber=self._frame.actor,
                                       additional=more)
        except LookupError:
            raise HostError("EventSubNotFound", HOST_CODE_NOT_FOUND, "not_found") from None

    # --- calls and messages -----------------------------------------------------------------
    def call_actor(self, target: object, method: object, payload: object, cycles_limit: object,
                   access_limit: object = 0) -> bytes:
        """Synchronously run ``target.method(payload)`` with at most ``cycles_limit`` of this frame's cycles.

        The callee's failure reverts its writes and raises HostError (``name`` = its code);
        what it used is charged to this frame either way. ``access_limit`` is accepted
        (0 = default) and not metered by this node.
        """
        addr = _address(target, "target")
        if not isinstance(method, str):
            raise TypeError("call_actor: method must be a str")
        if not 1 <= len(_utf8(method, "method")) <= MAX_METHOD_BYTES:
            raise ValueError(f"call_actor: method must be 1..{MAX_METHOD_BYTES} UTF-8 bytes")
        data = _bytes(payload, "payload", MAX_MESSAGE_PAYLOAD_BYTES)
        limit = _int(cycles_limit, "cycles_limit", 1, U64_MAX)
        _int(access_limit, "access_limit", 0, U64_MAX)
        self._enter(CALL_ACTOR_CYCLES)
        meter = self._meter
        child = meter.child(min(limit, meter.cycles_limit - meter.cycles_used), meter.cells_limit - meter.cells_used)
        f = self._frame
        frame = CallFrame(actor=addr, sender=f.actor, tx_sender=f.tx_sender, tx_hash=f.tx_hash, depth=f.depth + 1)
        failure: TxFailed | None = None
        try:
            result = self._run_frame(self._world, self._ctx, frame, method, data, child, self._events, self._scope)
        except TxFailed as e:
            failure = e
        meter.charge_cycles(child.cycles_used)
        meter.charge_cells(child.cells_used)
        if failure is not None:
            raise host_error(failure.code, f"call to 0x{addr.hex()}.{method} failed: {failure}")
        return result

    def send_message(self, target: object, payload: object) -> None:
        """Queue ``payload`` for ``target``'s ``handle_message`` in the Mailbox (executed in End of Block).

        A message to the Job Dispatcher is a cowboy_sdk ``runner_job`` request: it is submitted as a job
        now, paid by this actor (``jobs/sdk_jobs.py``); a refusal halts the actor with its code.
        """
        addr = _address(target, "target")
        data = _bytes(payload, "payload", MAX_MESSAGE_PAYLOAD_BYTES)
        self._enter(SEND_MESSAGE_CYCLES)
        if addr == JOB_DISPATCHER:
            self._enter(SUBMIT_JOB_CYCLES)
            f = self._frame
            sdk_jobs.submit_runner_job(self._world, self._ctx, self._meter, actor=f.actor, payload=data,
                                       tx_hash=f.tx_hash, events=self._events)
            return
        self._meter.charge_cells(MESSAGE_OVERHEAD_CELLS + len(data))
        mailbox.enqueue(self._world, self._ctx, sender=self._frame.actor, target=addr, payload=data)

    def transfer_balance(self, to: object, amount: object) -> None:
        """Move ``amount`` native units from this actor's account to ``to`` (halts on insufficient_balance)."""
        dest = _address(to, "to")
        value = _int(amount, "amount", 0, U128_MAX)
        self._enter(TRANSFER_BALANCE_CYCLES)
        me = self._frame.actor
        source = get_account(self._world, me)
        if source.balance < value:
            raise TxFailed("insufficient_balance", f"actor balance {source.balance} is below {value}")
        self._meter.charge_cells(put_account(self._world, me, Account(source.balance - value, source.nonce)))
        recipient = get_account(self._world, dest)
        if recipient.balance + value > U128_MAX:
            raise TxFailed("balance_overflow", "recipient balance would exceed u128")
        self._meter.charge_cells(put_account(self._world, dest, Account(recipient.balance + value, recipient.nonce)))
        self._events.append(Event(me, "transfer", encode({0: dest, 1: encode_u128(value)})))

    def fork_actor(self, endowment: object = 0) -> bytes:
        """Clone this actor (code and storage) at its next child address, moving ``endowment`` to it; runs the
        code's ``on_fork(parent)`` on the child. Returns the child's address (``actors/lifecycle.py``)."""
        value = _int(endowment, "endowment", 0, U128_MAX)
        self._enter(HOST_CALL_CYCLES)
        f = self._frame

        def run_child(child: bytes, handler: str, payload: bytes) -> bytes:
            frame = CallFrame(actor=child, sender=child, tx_sender=f.tx_sender, tx_hash=f.tx_hash, depth=f.depth + 1)
            return self._run_frame(self._world, self._ctx, frame, handler, payload, self._meter, self._events,
                                   self._scope)

        return lifecycle.fork(self._world, self._ctx.env.height, self._meter, parent=f.actor, endowment=value,
                              events=self._events, run_child=run_child)

    def upgrade_self(self, new_code: object, new_manifest: object = None, routes: object = None,
                     route_sponsorship: object = None) -> None:
        """Replace this actor's code with ``new_code`` (UTF-8 source) from its next run on; manifests, routes and
        route sponsorship (CIP-15) are not supported here and must be None (``actors/lifecycle.py``)."""
        code = _bytes(new_code, "new_code", MAX_VALUE_BYTES)
        for name, value in (("new_manifest", new_manifest), ("routes", routes),
                            ("route_sponsorship", route_sponsorship)):
            if value is not None:
                raise ValueError(f"upgrade_self: {name} is not supported on this node (no manifests or CIP-15 routes)")
        self._enter(HOST_CALL_CYCLES)
        lifecycle.upgrade(self._world, self._meter, actor=self._frame.actor, new_code=code, events=self._events)

    def submit_job(self, payload: object) -> bytes:
        """Submit an off-chain job paid from this actor's balance; returns its job id (docs/jobs.md).

        ``payload`` is the canonical CBOR ``JobRequest`` or its JSON form (UTF-8, parsed strictly); the
        callback names the actor and handler that receive the result in End of Block.
        """
        data = _bytes(payload, "payload", MAX_JOB_REQUEST_BYTES)
        self._enter(SUBMIT_JOB_CYCLES)
        try:
            request = (parse_job_request_json(parse_json(data)) if data[:1] == b"{" else decode_job_request(data))
        except (DecodeError, ValidationError) as e:
            raise TxFailed("invalid_job_spec", e.message) from None
        return submit_request(self._world, self._ctx, self._meter, request, submitter=self._frame.actor,
                              tx_hash=sdk_jobs.job_tx_hash(self._ctx, self._frame.tx_hash), events=self._events)

    # --- timers (host_timers.py; schedule.py charges the 200 cycles of §6.1 and raises timer_* codes) --
    def schedule_timer(self, height: object, payload: object) -> bytes:
        """Timer at ``height`` delivering ``payload`` to ``handle_timer``, protocol defaults; returns its id."""
        return self.schedule_timer_ex(height, payload)

    def schedule_timer_ex(self, height: object, payload: object, fee_payer: object = b"", gas_limit: object = 0,
                          access_limit: object = 0, expires_at: object = 0) -> bytes:
        """schedule_timer with overrides; the SDK sentinels ``b""`` / ``0`` mean "protocol default"."""
        return host_timers.schedule_timer_ex(self._open(), height, payload, fee_payer, gas_limit, access_limit,
                                             expires_at)

    def extend_timer(self, timer_id: object, new_expires_at: object) -> None:
        """Renew this actor's timer; a missing timer is a silent no-op (SDK semantics)."""
        host_timers.extend_timer(self._open(), timer_id, new_expires_at)

    def get_timers(self) -> dict[bytes, dict[str, object]]:
        """This actor's live timers, ``{timer_id: {height, payload, fee_payer, gas_limit, access_limit,
        expires_at}}`` in timer-id order (the shape of ``cowboy_sdk.mock_host.get_timers``; ``access_limit``
        is not metered by this node and is always None; ``payload`` is the stored payload, the SDK's
        routing envelope for ``timer.schedule``)."""
        self._enter(SCAN_BASE_CYCLES)
        return host_timers.get_timers(self._caller())

    def cancel_timer(self, timer_id: object) -> None:
        """Cancel this actor's timer; a missing timer is a no-op, another actor's halts with timer_unauthorized."""
        host_timers.cancel_timer(self._open(), timer_id)

    # --- draft timer extensions (docs/timers.md §12.2-§12.3; refused while the policy disables them) -----
    def set_state_watch(self, watch_keys: object, handler: object = DEFAULT_HANDLER, data: object = b"",
                        fee_payer: object = b"", gas_limit: object = 0, expires_at: object = 0) -> bytes:
        """Run ``handler(data)`` in End of Block of every later block whose transactions change a watched key.

        ``watch_keys`` is a list of ``(actor_address, key_prefix)`` pairs: a key ``k`` of actor ``a``'s storage
        is watched when it starts with ``key_prefix`` (``b""`` watches all of ``a``'s storage). The sentinels
        ``b""`` / ``0`` mean "protocol default" as in ``schedule_timer_ex``; returns the watch timer's id.
        """
        return host_timers.set_state_watch(self._open(), watch_keys, handler, data, fee_payer, gas_limit, expires_at)

    def set_interval(self, every_n_blocks: object, handler: object = DEFAULT_HANDLER, data: object = b"",
                     fee_payer: object = b"", gas_limit: object = 0, expires_at: object = 0) -> bytes:
        """Run ``handler(data)`` every ``every_n_blocks`` blocks (first at current + every_n_blocks) until
        cancelled or ``expires_at``; the argument order of ``cowboy_sdk.runtime.set_interval`` plus the
        ``schedule_timer_ex`` overrides (``b""`` / ``0`` = default). Returns the timer id (kept by every roll)."""
        return host_timers.set_interval(self._open(), every_n_blocks, handler, data, fee_payer, gas_limit,
                                        expires_at)

    def cancel_watch(self, timer_id: object) -> bool:
        """Remove this actor's state-watch timer: True if removed, False if there is none; another actor's
        halts with ``timer_unauthorized``."""
        return host_timers.cancel_watch(self._open(), timer_id)

    def cancel_interval(self, timer_id: object) -> bool:
        """Stop this actor's interval timer (also from its own handler): True if stopped, False if it is no
        live interval timer; another actor's halts with ``timer_unauthorized``."""
        return host_timers.cancel_interval(self._open(), timer_id)

    # --- CIP-1 (docs/timers.md §15; refused with timer_extension_disabled unless TimerPolicy.mode is CIP-1) --
    def set_timeout(self, height: object, gba: object, handler: object = DEFAULT_HANDLER, data: object = b"",
                    gas_limit: object = 0, expires_at: object = 0) -> bytes:
        """Run ``handler(data)`` at or after block ``height``, priced each block it is due by the Gas Bidding
        Agent ``gba`` (an actor whose ``get_gas_bid(context)`` returns the bid); every fee comes from this
        actor's balance. ``0`` = protocol default for ``gas_limit`` / ``expires_at``. Returns the timer id."""
        return host_timers.set_timeout(self._open(), height, gba, handler, data, gas_limit, expires_at)

    def cancel_timeout(self, timer_id: object) -> bool:
        """Remove this actor's pending CIP-1 timer: True if removed, False if there is none; another actor's
        halts with ``timer_unauthorized``."""
        return host_timers.cancel_timeout(self._open(), timer_id)


def _verify_secp256k1(public_key: bytes, message: bytes, signature: bytes) -> bool:
    if len(public_key) == ADDRESS_LEN:
        expected = public_key
    else:
        try:
            expected = secp256k1.public_key_to_address(public_key)
        except Exception:  # InvalidKey: not a curve point
            raise host_error("invalid_input", "public key is not a valid secp256k1 point") from None
    try:
        return secp256k1.recover_address(_keccak256(message), signature) == expected
    except Exception:  # InvalidSignature: a well-formed but invalid signature
        return False


def chain_instance_id(chain_id: str) -> bytes:
    """``keccak256("cowboy/chain-instance/" ‖ chain_id)``: 32 bytes naming this chain in ``context()``."""
    return _keccak256(b"cowboy/chain-instance/" + chain_id.encode("utf-8"))
