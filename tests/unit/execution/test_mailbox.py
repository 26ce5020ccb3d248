"""Mailbox store: key layout, entry encoding, deliver_id layouts, idempotent materialisation, enqueue."""

from __future__ import annotations

import pytest
from Crypto.Hash import keccak

from cowboy_node.execution import mailbox
from cowboy_node.execution.mailbox import KIND_MESSAGE, KIND_TIMER, MailboxEntry
from cowboy_protocol.types.validation_errors import DecodeError
from tests.unit.eob_helpers import ACTOR, OTHER, ROOT, make_ctx, make_world


def _k(data: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=data).digest()


def _entry(did: bytes = bytes([0xDD]) * 32, kind: int = KIND_MESSAGE) -> MailboxEntry:
    return MailboxEntry(deliver_id=did, kind=kind, sender=bytes([0x11]) * 20, target=bytes([0x22]) * 20,
                        handler="handle_message", payload=b"hi", gas_limit=550_000, fee_payer=bytes([0x22]) * 20,
                        height=7, timer_id=None)


def test_key_layout_is_the_documented_one() -> None:
    assert mailbox.entry_key(258) == b"mbox/e/" + bytes.fromhex("0000000000000102")
    assert mailbox.id_key(bytes([0xDD]) * 32) == b"mbox/d/" + bytes([0xDD]) * 32
    assert mailbox.KEY_SEQ == b"mbox/seq" and mailbox.KEY_HEAD == b"mbox/head"


def test_entry_encoding_golden_bytes() -> None:
    expected = (bytes.fromhex("aa 00 5820") + bytes([0xDD]) * 32 + bytes.fromhex("01 00 02 54") + bytes([0x11]) * 20
                + bytes.fromhex("03 54") + bytes([0x22]) * 20 + bytes.fromhex("04 6e") + b"handle_message"
                + bytes.fromhex("05 42 6869 06 1a00086470 07 54") + bytes([0x22]) * 20 + bytes.fromhex("08 07 09 f6"))
    assert _entry().encode() == expected
    assert MailboxEntry.decode(expected) == _entry()


def test_entry_decode_is_strict() -> None:
    raw = bytearray(_entry().encode())
    raw[raw.index(bytes.fromhex("01 00"), 30) + 1] = 0x05  # kind 5
    with pytest.raises(DecodeError):
        MailboxEntry.decode(bytes(raw))


def test_timer_deliver_id_preimage_layout() -> None:
    tid = bytes([0x22]) * 32
    pre = bytes.fromhex("0000000000000064") + ROOT + tid + bytes.fromhex("00000003")
    assert mailbox.timer_deliver_id(100, ROOT, tid, 3) == _k(pre)
    assert mailbox.timer_deliver_id(100, ROOT, tid, 3).hex() == (
        "afcc38b4cdfd9ccb9857d7cf30371903211b5f97b47998e88d1e97b628dae49a")
    with pytest.raises(ValueError):
        mailbox.timer_deliver_id(100, b"short", tid, 0)
    with pytest.raises(ValueError):
        mailbox.timer_deliver_id(100, ROOT, tid, 1 << 32)


def test_message_deliver_id_preimage_layout() -> None:
    pre = b"cowboy/mailbox/message/v1" + bytes.fromhex("0000000000000007") + ROOT + bytes.fromhex("0000000000000002")
    assert mailbox.message_deliver_id(7, ROOT, 2) == _k(pre)
    assert mailbox.message_deliver_id(7, ROOT, 2).hex() == (
        "2fc8a53f7032fb44f7b417f124b4c5d3b54bef5a685b8feae67235528ed57899")


def test_materialize_is_idempotent_on_deliver_id() -> None:
    world = make_world()
    e = _entry(kind=KIND_TIMER)
    assert mailbox.materialize(world, e) == 0
    before = world.changes()
    assert mailbox.materialize(world, e) == 0
    assert world.changes() == before
    assert [s for s, _ in mailbox.pending(world)] == [0]
    assert mailbox.materialize(world, _entry(bytes([0xEE]) * 32)) == 1


def test_enqueue_assigns_monotonic_deliver_seq_and_snapshots_the_message() -> None:
    world = make_world()
    ctx = make_ctx(9)
    assert mailbox.enqueue(world, ctx, sender=ACTOR, target=OTHER, payload=b"a") == 0
    assert mailbox.enqueue(world, ctx, sender=ACTOR, target=OTHER, payload=b"a") == 1
    entries = list(mailbox.pending(world))
    assert [s for s, _ in entries] == [0, 1]
    e = entries[0][1]
    assert (e.kind, e.sender, e.target, e.handler, e.payload, e.fee_payer, e.height, e.timer_id) == (
        KIND_MESSAGE, ACTOR, OTHER, "handle_message", b"a", OTHER, 9, None)
    assert e.gas_limit == 550_000
    assert e.deliver_id == mailbox.message_deliver_id(9, ROOT, 0) != entries[1][1].deliver_id
    assert world.get(mailbox.KEY_SEQ) == bytes.fromhex("02")


def test_enqueue_in_a_reverted_checkpoint_leaves_nothing() -> None:
    world = make_world()
    cp = world.checkpoint()
    mailbox.enqueue(world, make_ctx(1), sender=ACTOR, target=OTHER, payload=b"x")
    world.revert(cp)
    assert list(mailbox.pending(world)) == [] and mailbox.next_seq(world) == 0


def test_enqueue_rejects_bad_addresses() -> None:
    with pytest.raises(ValueError):
        mailbox.enqueue(make_world(), make_ctx(1), sender=b"x", target=OTHER, payload=b"")
