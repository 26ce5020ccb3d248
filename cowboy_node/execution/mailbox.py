"""The Mailbox: the consensus queue of entries End of Block executes (seeds/000 §10, seeds/001 §9–§10).

Two producers append entries: the ``send_message`` host call (a message for
``target.handle_message``) and, under the Globalbox timer policy, DeliverTimers
(a materialised timer fire). ExecuteMailbox runs pending entries in increasing
``deliver_seq`` — a global counter that only grows, across blocks — under a
per-block budget; what it does not reach stays for the next block.

State layout (docs/timers.md §13)::

    mbox/e/<deliver_seq u64 BE>  -> MailboxEntry (canonical CBOR)   pending entries, in execution order
    mbox/d/<deliver_id 32>       -> CBOR uint deliver_seq            dedup index of pending entries
    mbox/seq                     -> CBOR uint                        next deliver_seq (absent = 0)
    mbox/head                    -> CBOR uint                        no pending entry below this seq (absent = 0)

Materialising an entry whose ``deliver_id`` is already pending returns the
existing ``deliver_seq`` and writes nothing (idempotence, seeds/000 §10.2).
Everything goes through the :class:`WorldState` journal, so an enqueue made by
a transaction that reverts leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.system_state import JOB_DISPATCHER as JOB_CALLBACK_SENDER
from cowboy_node.execution.system_state import get_timer_config
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import ADDRESS_LEN, U32_MAX, expect_bytes, expect_map, expect_text, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

PREFIX = b"mbox/"
"""Namespace of all Mailbox state."""
ENTRY_PREFIX = b"mbox/e/"
"""``mbox/e/<deliver_seq 8 BE>`` -> :class:`MailboxEntry`."""
ID_PREFIX = b"mbox/d/"
"""``mbox/d/<deliver_id>`` -> CBOR uint deliver_seq (pending entries only)."""
KEY_SEQ = b"mbox/seq"
"""Next ``deliver_seq`` (absent = 0)."""
KEY_HEAD = b"mbox/head"
"""Lowest ``deliver_seq`` that may still be pending (absent = 0); keeps scans off deleted keys."""

KIND_MESSAGE = 0
"""Entry made by ``send_message``: runs ``target.handle_message(payload)``."""
KIND_TIMER = 1
"""Entry made by DeliverTimers under the Globalbox policy: one timer fire."""
KIND_JOB_CALLBACK = 2
"""Entry made by ResolveOffchain: a finished job's callback ``target.<handler>(payload)``, paid by the target."""
JOB_CALLBACK_DOMAIN = b"cowboy/mailbox/job-callback/v1"
"""Domain tag of a job-callback entry's ``deliver_id`` preimage."""

MESSAGE_HANDLER = "handle_message"
"""Handler a message entry runs (the SDK's ``@actor`` dispatcher name)."""
MESSAGE_DOMAIN = b"cowboy/mailbox/message/v1"
"""Domain tag of a message entry's ``deliver_id`` preimage (timer ids have no tag: see :func:`timer_deliver_id`)."""


@dataclass(frozen=True, slots=True)
class MailboxEntry:
    """One pending Mailbox entry, canonical CBOR ``{0: deliver_id, …, 9: timer_id}``."""

    deliver_id: bytes
    """32-byte identity of the entry (dedup key)."""
    kind: int
    """:data:`KIND_MESSAGE` or :data:`KIND_TIMER`."""
    sender: bytes
    """Sending actor (messages) or the timer's actor (timer fires)."""
    target: bytes
    """Actor whose handler runs."""
    handler: str
    """Handler to run (timer fires: before the ``_handler`` routing, which happens at execution)."""
    payload: bytes
    """Payload snapshot."""
    gas_limit: int
    """Cycle limit of the run (snapshot at materialisation)."""
    fee_payer: bytes
    """Account pre-charged for the run at execution (messages: the target; timers: the timer's fee payer)."""
    height: int
    """Height of the block that materialised the entry."""
    timer_id: bytes | None
    """Timer id (timer fires), None for messages."""

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode({0: self.deliver_id, 1: self.kind, 2: self.sender, 3: self.target, 4: self.handler,
                       5: self.payload, 6: self.gas_limit, 7: self.fee_payer, 8: self.height, 9: self.timer_id})

    @classmethod
    def decode(cls, raw: bytes) -> MailboxEntry:
        """Strict decode."""
        m = expect_map(decode(raw), frozenset(range(10)), "mailbox_entry")
        kind = expect_uint(m[1], "mailbox_entry.kind")
        if kind not in (KIND_MESSAGE, KIND_TIMER, KIND_JOB_CALLBACK):
            raise DecodeError(f"mailbox_entry.kind {kind} is unknown", field="mailbox_entry.kind")
        tid = m[9]
        return cls(
            deliver_id=expect_bytes(m[0], "mailbox_entry.deliver_id", 32),
            kind=kind,
            sender=expect_bytes(m[2], "mailbox_entry.sender", ADDRESS_LEN),
            target=expect_bytes(m[3], "mailbox_entry.target", ADDRESS_LEN),
            handler=expect_text(m[4], "mailbox_entry.handler"),
            payload=expect_bytes(m[5], "mailbox_entry.payload"),
            gas_limit=expect_uint(m[6], "mailbox_entry.gas_limit"),
            fee_payer=expect_bytes(m[7], "mailbox_entry.fee_payer", ADDRESS_LEN),
            height=expect_uint(m[8], "mailbox_entry.height"),
            timer_id=None if tid is None else expect_bytes(tid, "mailbox_entry.timer_id", max_len=256),
        )


# -- keys and ids ---------------------------------------------------------------------------------

def entry_key(deliver_seq: int) -> bytes:
    """State key of a pending entry."""
    return ENTRY_PREFIX + deliver_seq.to_bytes(8, "big")


def id_key(deliver_id: bytes) -> bytes:
    """State key of a pending entry's dedup index."""
    return ID_PREFIX + deliver_id


def timer_deliver_id(height: int, parent_state_root: bytes, timer_id: bytes, fire_seq: int) -> bytes:
    """``deliver_id = keccak256(h u64 BE ‖ parent_state_root 32 ‖ timer_id ‖ fire_seq u32 BE)`` (seeds/000 §10.1).

    The fields around ``timer_id`` have fixed widths, so the preimage is unambiguous
    without a length prefix.
    """
    if len(parent_state_root) != 32 or not 0 <= fire_seq <= U32_MAX:
        raise ValueError("parent_state_root must be 32 bytes and fire_seq a u32")
    return keccak256(height.to_bytes(8, "big") + parent_state_root + timer_id + fire_seq.to_bytes(4, "big"))


def message_deliver_id(height: int, parent_state_root: bytes, deliver_seq: int) -> bytes:
    """``keccak256("cowboy/mailbox/message/v1" ‖ h u64 BE ‖ parent_state_root ‖ deliver_seq u64 BE)``.

    A message has no timer id; its ``deliver_seq`` is unique, and the domain tag keeps
    message ids apart from timer ids.
    """
    return keccak256(MESSAGE_DOMAIN + height.to_bytes(8, "big") + parent_state_root + deliver_seq.to_bytes(8, "big"))


# -- reads ----------------------------------------------------------------------------------------

def _get_uint(world: WorldState, key: bytes, name: str) -> int:
    raw = world.get(key)
    return 0 if raw is None else expect_uint(decode(raw), name)


def next_seq(world: WorldState) -> int:
    """The ``deliver_seq`` the next entry gets."""
    return _get_uint(world, KEY_SEQ, "mbox_seq")


def head(world: WorldState) -> int:
    """No pending entry has a ``deliver_seq`` below this."""
    return _get_uint(world, KEY_HEAD, "mbox_head")


def set_head(world: WorldState, deliver_seq: int) -> None:
    """Move the scan start (caller keeps the invariant: no pending entry below it)."""
    world.set(KEY_HEAD, encode(deliver_seq))


def pending(world: WorldState) -> Iterator[tuple[int, MailboxEntry]]:
    """Pending entries ``(deliver_seq, entry)`` in execution order."""
    for key, raw in world.iterate(ENTRY_PREFIX, start=entry_key(head(world))):
        yield int.from_bytes(key[len(ENTRY_PREFIX):], "big"), MailboxEntry.decode(raw)


def find(world: WorldState, deliver_id: bytes) -> int | None:
    """``deliver_seq`` of the pending entry with ``deliver_id``, or None."""
    raw = world.get(id_key(deliver_id))
    return None if raw is None else expect_uint(decode(raw), "mbox_id")


# -- writes ---------------------------------------------------------------------------------------

def materialize(world: WorldState, entry_for_seq: MailboxEntry) -> int:
    """Append ``entry_for_seq`` unless its ``deliver_id`` is already pending; returns its ``deliver_seq``."""
    existing = find(world, entry_for_seq.deliver_id)
    if existing is not None:
        return existing
    seq = next_seq(world)
    world.set(entry_key(seq), entry_for_seq.encode())
    world.set(id_key(entry_for_seq.deliver_id), encode(seq))
    world.set(KEY_SEQ, encode(seq + 1))
    return seq


def remove(world: WorldState, deliver_seq: int, entry: MailboxEntry) -> None:
    """Delete a pending entry and its dedup index (after it ran or was dropped)."""
    world.delete(entry_key(deliver_seq))
    world.delete(id_key(entry.deliver_id))


def enqueue(world: WorldState, ctx: BlockContext, *, sender: bytes, target: bytes, payload: bytes) -> int:
    """Queue a ``send_message``: ``target.handle_message(payload)`` runs in a later ExecuteMailbox.

    Returns the entry's ``deliver_seq``. The run's cycle limit is
    ``TimerConfig.max_cycles_per_fire`` at enqueue time and its fee is pre-charged
    from the **target** when it runs (docs/timers.md §13: who pays). The host call
    has already charged the sender's transaction for the send.
    """
    if len(sender) != ADDRESS_LEN or len(target) != ADDRESS_LEN or not isinstance(payload, bytes):
        raise ValueError("sender and target must be 20-byte addresses and payload bytes")
    seq = next_seq(world)
    did = message_deliver_id(ctx.env.height, ctx.env.parent_state_root, seq)
    entry = MailboxEntry(deliver_id=did, kind=KIND_MESSAGE, sender=sender, target=target, handler=MESSAGE_HANDLER,
                         payload=payload, gas_limit=get_timer_config(world).max_cycles_per_fire, fee_payer=target,
                         height=ctx.env.height, timer_id=None)
    return materialize(world, entry)


def enqueue_job_callback(world: WorldState, ctx: BlockContext, *, job_id: bytes, target: bytes, handler: str,
                         payload: bytes) -> int:
    """Queue a finished job's callback (ResolveOffchain); idempotent per (job, block) through ``deliver_id``."""
    did = keccak256(JOB_CALLBACK_DOMAIN + ctx.env.height.to_bytes(8, "big") + job_id)
    entry = MailboxEntry(deliver_id=did, kind=KIND_JOB_CALLBACK, sender=JOB_CALLBACK_SENDER, target=target,
                         handler=handler, payload=payload,
                         gas_limit=get_timer_config(world).max_cycles_per_fire, fee_payer=target,
                         height=ctx.env.height, timer_id=None)
    return materialize(world, entry)
