"""Mode A receipts over a session pair (CIP-11 §8.3, docs/protocol.md §8.5): after a PresenceReceiptRequest the
validator answers every ping with a PresenceReceipt next to the pong, bound to the connection and signed for the
chain (so execution can verify it with no connection); the runner verifies it and refuses a foreign one."""

from __future__ import annotations

from dataclasses import replace

from cowboy_protocol.crypto import ed25519
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.frames import HeartbeatPong, PresenceReceiptFrame, PresenceReceiptRequest
from cowboy_protocol.transport.preimages import presence_receipt_digest
from cowboy_protocol.transport.session import PongReceived, PresenceReceiptReceived
from cowboy_protocol.types.presence_instructions import PresenceReceipt
from cowboy_runner.presence_certificates import receipt_of
from tests.unit.protocol.test_transport_session_support import (
    CHAIN,
    EPOCH,
    OTHER_VALIDATOR,
    RUNNER,
    VALIDATOR,
    VSH,
    Pair,
    closed,
    deliver,
)


def _pair() -> Pair:
    p = Pair()
    p.handshake(0.0)
    return p


def test_no_receipt_unless_requested() -> None:
    p = _pair()
    p.r.ping(1.0, 101)
    p.r_to_v(1.0)
    assert [type(f) for f in p.v.take_outbound()] == [HeartbeatPong]


def test_requested_receipts_come_with_every_pong_bound_to_the_connection_and_the_chain() -> None:
    p = _pair()
    p.r.request_presence_receipts()
    assert p.r_to_v(1.0) == []
    assert p.sent_r[-1] == PresenceReceiptRequest(True)
    p.height[0] = 130
    nonce = p.r.ping(2.0, 129)
    p.r_to_v(2.0)
    events = p.v_to_r(2.0)
    assert [type(e) for e in events] == [PongReceived, PresenceReceiptReceived]
    frame = events[1].receipt  # type: ignore[union-attr]
    assert isinstance(frame, PresenceReceiptFrame)
    assert (frame.runner_pubkey, frame.validator_pubkey) == (RUNNER.pubkey, VALIDATOR.pubkey)
    assert (frame.subset_epoch, frame.validator_set_hash) == (EPOCH, VSH)
    assert (frame.block_height, frame.nonce_echo, frame.accepting_new) == (130, nonce, True)  # validator's head
    # chain-verifiable: the on-chain receipt's digest over the chain id verifies under the validator's peer key
    receipt = receipt_of(frame)
    assert isinstance(receipt, PresenceReceipt)
    assert ed25519.verify(VALIDATOR.pubkey.key, receipt.digest(CHAIN), receipt.validator_signed)
    assert not ed25519.verify(VALIDATOR.pubkey.key, receipt.digest("other-chain"), receipt.validator_signed)


def test_backpressured_runner_gets_receipts_saying_so() -> None:
    p = _pair()
    p.r.request_presence_receipts()
    p.r.ping(1.0, 101, accepting_new=False)
    p.r_to_v(1.0)
    events = p.v_to_r(1.0)
    assert events[-1].receipt.accepting_new is False  # type: ignore[union-attr]


def test_request_can_be_withdrawn() -> None:
    p = _pair()
    p.r.request_presence_receipts()
    p.r.request_presence_receipts(False)
    p.r.ping(1.0, 101)
    p.r_to_v(1.0)
    assert [type(f) for f in p.v.take_outbound()] == [HeartbeatPong]


def _forged(p: Pair, **changes: object) -> PresenceReceiptFrame:
    ctx = p.v.context
    assert ctx is not None
    f = PresenceReceiptFrame(ctx.runner_pubkey, ctx.validator_pubkey, EPOCH, VSH, 100, 0, True, b"")
    f = replace(f, **changes)  # type: ignore[arg-type]
    digest = presence_receipt_digest(CHAIN, f.runner_pubkey, f.validator_pubkey, f.subset_epoch,
                                     f.validator_set_hash, f.block_height, f.nonce_echo, f.accepting_new)
    return replace(f, validator_signed=VALIDATOR.sign(digest))


def test_runner_refuses_a_receipt_not_bound_to_the_connection_or_badly_signed() -> None:
    for changes in ({"subset_epoch": 1}, {"validator_set_hash": b"\x00" * 32},
                    {"validator_pubkey": OTHER_VALIDATOR.pubkey}):
        p = _pair()
        c = closed(deliver(p.r, [_forged(p, **changes)], 1.0))
        assert c.reason is GoodbyeReason.AUTH_FAILED
    p = _pair()
    bad = replace(_forged(p), block_height=101)  # signature over height 100
    assert closed(deliver(p.r, [bad], 1.0)).reason is GoodbyeReason.AUTH_FAILED
    p = _pair()
    assert [type(e) for e in deliver(p.r, [_forged(p)], 1.0)] == [PresenceReceiptReceived]
