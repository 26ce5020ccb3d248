"""The heartbeat shortcuts change no byte and no verdict (CIP-11 §6.3, §12.1, §12.6).

Covers: per-connection preimage caches (a context never shares a prefix with another connection), the prepared
Ed25519 validator key, secp256k1 checks by recovery (the recovery id is still checked), and the direct heartbeat
encoder/decoder against the generic strict codec. Expected hex is hand-assembled from the layouts.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.crypto import ed25519, secp256k1
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.enums import FrameType, Role
from cowboy_protocol.transport.frames import Frame, HeartbeatPing, HeartbeatPong, decode_payload, encode_frame
from cowboy_protocol.transport.framing import FrameDecoder
from cowboy_protocol.transport.preimages import (
    ConnectionContext,
    RunnerKey,
    ValidatorKey,
    connection_id,
    heartbeat_ping_digest,
    heartbeat_pong_digest,
    sign_frame,
    sign_heartbeat_pong,
    verify_frame,
    verify_heartbeat_ping,
    verify_signature,
)
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, RemoteProtocolError, SignatureError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.types.validation_errors import DecodeError

RUNNER = RunnerKey(b"\x01" * 32)
OTHER_RUNNER = RunnerKey(b"\x03" * 32)
VALIDATOR = ValidatorKey(b"\x02" * 32)
VSH = b"\x44" * 32
CB1, CB2 = b"\x55" * 32, b"\x56" * 32
RPK_HEX = "01031b84c5567b126440995d3ed5aaba0565d71e1834604819ff9c17f5e9d5dd078f"
VPK_HEX = "028139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394"
HEARTBEAT = b"cowboy-cip11-heartbeat-v1".hex()
N = secp256k1.N


def _ctx(binding: bytes, runner: RunnerKey = RUNNER, epoch: int = 3) -> ConnectionContext:
    return ConnectionContext("cowboy-devnet", 0x0100, runner.pubkey, VALIDATOR.pubkey, epoch, VSH, binding)


def _cid(binding: bytes) -> str:
    """connection_id of RUNNER/VALIDATOR, epoch 3, VSH over ``binding``, hashed from the hand-assembled layout."""
    return keccak256(bytes.fromhex(b"cowboy-cip11-connection-v1".hex() + binding.hex() + RPK_HEX + VPK_HEX
                                   + "0000000000000003" + "44" * 32)).hex()


# --- per-connection caches ------------------------------------------------------------------------------------

def test_connection_id_golden_value_is_unchanged_by_the_cache() -> None:
    # Pinned in test_transport_preimages.py for the same context.
    assert _ctx(CB1).connection_id.hex() == "b5cb240df490194aa782a5ecd6dd499aacf17a0600347ad23eb98dff5ea4a254"


def test_two_connections_never_share_a_heartbeat_prefix() -> None:
    a, b = _ctx(CB1), _ctx(CB2)
    assert a.connection_id.hex() == _cid(CB1) and b.connection_id.hex() == _cid(CB2)
    assert a.connection_id != b.connection_id
    for ctx, binding in ((a, CB1), (b, CB2)):  # each digest hashes its own connection's id
        ping = bytes.fromhex(HEARTBEAT + "0101" + _cid(binding) + "10" + "0000000000000007" + "0000000000000064")
        pong = bytes.fromhex(HEARTBEAT + "0202" + _cid(binding) + "11" + "0000000000000007" + "01"
                             + "0000000000000064")
        assert heartbeat_ping_digest(ctx, 7, 100) == keccak256(ping)
        assert heartbeat_pong_digest(ctx, 7, True, 100) == keccak256(pong)
    assert heartbeat_ping_digest(a, 7, 100) != heartbeat_ping_digest(b, 7, 100)


def test_a_context_derived_with_replace_gets_its_own_connection_id() -> None:
    a = _ctx(CB1)
    for changed in (replace(a, channel_binding=CB2), replace(a, subset_epoch=4),
                    replace(a, runner_pubkey=OTHER_RUNNER.pubkey), replace(a, validator_set_hash=b"\x45" * 32)):
        assert changed.connection_id == connection_id(changed.channel_binding, changed.runner_pubkey,
                                                      changed.validator_pubkey, changed.subset_epoch,
                                                      changed.validator_set_hash)
        assert changed.connection_id != a.connection_id
        assert heartbeat_ping_digest(changed, 1, 1) != heartbeat_ping_digest(a, 1, 1)
        assert heartbeat_pong_digest(changed, 1, False, 1) != heartbeat_pong_digest(a, 1, False, 1)
    assert replace(a, channel_binding=CB1) == a  # the cached fields take no part in equality


def test_ping_signed_on_one_connection_is_rejected_on_another() -> None:
    a, b = _ctx(CB1), _ctx(CB2)
    ping = sign_frame(a, RUNNER, HeartbeatPing(3, 9, bytes(65)))
    verify_frame(a, ping, Role.RUNNER)
    with pytest.raises(SignatureError):
        verify_frame(b, ping, Role.RUNNER)


# --- prepared validator key ----------------------------------------------------------------------------------

def test_prepared_validator_key_signs_like_the_crypto_module() -> None:
    for seed in (b"\x02" * 32, b"\x09" * 32):
        key = ValidatorKey(seed)
        for msg in (b"\x00" * 32, keccak256(b"pong")):
            assert key.sign(msg) == ed25519.sign(seed, msg)
        assert key.pubkey == PubKey.validator(ed25519.public_key_from_seed(seed))
    assert ValidatorKey(b"\x02" * 32).sign(b"m" * 32) != ValidatorKey(b"\x09" * 32).sign(b"m" * 32)


def test_validator_key_cache_takes_no_part_in_equality() -> None:
    used, fresh = ValidatorKey(b"\x07" * 32), ValidatorKey(b"\x07" * 32)
    used.sign(b"\x01" * 32)
    assert used == fresh and hash(used) == hash(fresh)
    assert used != ValidatorKey(b"\x08" * 32)
    assert "SigningKey" not in repr(used)


def test_validator_key_with_a_bad_seed_fails_on_use() -> None:
    with pytest.raises(ValueError):
        ValidatorKey(b"\x01" * 31).sign(b"\x00" * 32)


# --- secp256k1 by recovery -----------------------------------------------------------------------------------

def test_runner_signature_with_the_other_recovery_id_is_rejected() -> None:
    # A plain ECDSA verify against the known key ignores v and would accept this; recovery must not.
    digest = keccak256(b"ping")
    sig = RUNNER.sign(digest)
    verify_signature(Role.RUNNER, RUNNER.pubkey, digest, sig)
    flipped = sig[:64] + bytes([sig[64] ^ 1])
    with pytest.raises(SignatureError) as info:
        verify_signature(Role.RUNNER, RUNNER.pubkey, digest, flipped)
    assert info.value.code == "bad_signature"


def test_runner_signature_in_high_s_form_is_rejected() -> None:
    digest = keccak256(b"ping")
    sig = RUNNER.sign(digest)
    s = int.from_bytes(sig[32:64], "big")
    high = sig[:32] + (N - s).to_bytes(32, "big") + bytes([sig[64] ^ 1])  # the same point, mirrored s
    with pytest.raises(SignatureError) as info:
        verify_signature(Role.RUNNER, RUNNER.pubkey, digest, high)
    assert info.value.code == "bad_signature"


def test_runner_signature_by_another_key_is_rejected() -> None:
    digest = keccak256(b"ping")
    with pytest.raises(SignatureError) as info:
        verify_signature(Role.RUNNER, RUNNER.pubkey, digest, OTHER_RUNNER.sign(digest))
    assert info.value.code == "bad_signature"


# --- direct heartbeat encoding / decoding --------------------------------------------------------------------

SIG65, SIG64 = b"\xaa" * 65, b"\xbb" * 64
INT_HEADS = [  # every canonical unsigned-integer head width, hand-written
    (0, "00"), (23, "17"), (24, "1818"), (255, "18ff"), (256, "190100"), (65535, "19ffff"), (65536, "1a00010000"),
    (2**32 - 1, "1affffffff"), (2**32, "1b0000000100000000"), (2**64 - 1, "1bffffffffffffffff"),
]


@pytest.mark.parametrize(("value", "head"), INT_HEADS)
def test_heartbeat_golden_bytes_for_every_integer_width(value: int, head: str) -> None:
    ping_payload = "a3" + "00" + head + "01" + head + "02" + "5841" + "aa" * 65
    ping_wire = bytes.fromhex(f"{1 + len(ping_payload) // 2:08x}" + "10" + ping_payload)
    assert encode_frame(HeartbeatPing(value, value, SIG65)) == ping_wire
    assert decode_payload(FrameType.HEARTBEAT_PING, ping_wire[5:]) == HeartbeatPing(value, value, SIG65)
    pong_payload = "a4" + "00" + head + "01" + "f5" + "02" + head + "03" + "5840" + "bb" * 64
    pong_wire = bytes.fromhex(f"{1 + len(pong_payload) // 2:08x}" + "11" + pong_payload)
    assert encode_frame(HeartbeatPong(value, True, value, SIG64)) == pong_wire
    assert decode_payload(FrameType.HEARTBEAT_PONG, pong_wire[5:]) == HeartbeatPong(value, True, value, SIG64)


def test_non_canonical_or_mistyped_heartbeats_are_still_rejected() -> None:
    cases = [
        (FrameType.HEARTBEAT_PING, "a3" + "001805" + "0100" + "025841" + "aa" * 65, "malformed_cbor"),  # 5 as 0x1805
        (FrameType.HEARTBEAT_PING, "a3" + "00190017" + "0100" + "025841" + "aa" * 65, "malformed_cbor"),
        (FrameType.HEARTBEAT_PING, "a3" + "0000" + "0100" + "025840" + "aa" * 64, "malformed_body"),  # 64-byte sig
        (FrameType.HEARTBEAT_PING, "a3" + "0000" + "0100" + "025841" + "aa" * 65 + "00", "malformed_cbor"),
        (FrameType.HEARTBEAT_PING, "a3" + "0020" + "0100" + "025841" + "aa" * 65, "malformed_body"),  # nonce -1
        (FrameType.HEARTBEAT_PONG, "a4" + "0000" + "0101" + "0200" + "035840" + "bb" * 64, "malformed_body"),  # 1≠true
        (FrameType.HEARTBEAT_PONG, "a4" + "0000" + "01f5" + "0200" + "035841" + "bb" * 65, "malformed_body"),
        (FrameType.HEARTBEAT_PONG, "a3" + "0000" + "01f5" + "0200", "malformed_body"),  # missing key 3
    ]
    for type_byte, payload, code in cases:
        with pytest.raises(RemoteProtocolError) as info:
            decode_payload(type_byte, bytes.fromhex(payload))
        assert info.value.code == code, payload


def test_invalid_heartbeats_are_refused_by_the_encoder() -> None:
    for frame in (HeartbeatPing(-1, 0, SIG65), HeartbeatPing(2**64, 0, SIG65), HeartbeatPing(0, 0, SIG64),
                  HeartbeatPong(0, 1, 0, SIG64), HeartbeatPong(0, True, 2**64, SIG64),  # type: ignore[arg-type]
                  HeartbeatPong(0, True, 0, SIG65), HeartbeatPing(True, 0, SIG65)):
        with pytest.raises(LocalProtocolError):
            encode_frame(frame)


U64 = st.integers(0, 2**64 - 1)


@settings(max_examples=300, deadline=None)
@given(U64, U64, st.booleans(), st.binary(min_size=64, max_size=64), st.binary(min_size=65, max_size=65))
def test_direct_heartbeat_encoding_equals_the_generic_codec(n: int, h: int, acc: bool, s64: bytes,
                                                            s65: bytes) -> None:
    frames: list[Frame] = [HeartbeatPing(n, h, s65), HeartbeatPong(n, acc, h, s64)]
    for frame in frames:
        wire = encode_frame(frame)
        payload = encode(frame.body())  # the generic encoder, not the shortcut
        assert wire == (1 + len(payload)).to_bytes(4, "big") + bytes([frame.FRAME_TYPE]) + payload
        assert decode_payload(frame.FRAME_TYPE, wire[5:]) == frame


def _generic(type_byte: int, payload: bytes) -> Frame | str:
    cls = HeartbeatPing if type_byte == FrameType.HEARTBEAT_PING else HeartbeatPong
    try:
        return cls.from_body(decode(payload, max_depth=3))
    except (CodecError, DecodeError, RemoteProtocolError) as e:
        return type(e).__name__


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([FrameType.HEARTBEAT_PING, FrameType.HEARTBEAT_PONG]), U64, U64,
       st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3), st.integers(-3, 3))
def test_direct_heartbeat_decoding_agrees_with_the_generic_decoder(type_byte: FrameType, n: int, h: int,
                                                                   flips: list[tuple[int, int]], cut: int) -> None:
    frame: Frame = HeartbeatPing(n, h, SIG65) if type_byte == FrameType.HEARTBEAT_PING else \
        HeartbeatPong(n, bool(h & 1), h, SIG64)
    payload = bytearray(encode(frame.body()))
    for pos, val in flips:
        payload[pos % len(payload)] = val
    data = bytes(payload[:len(payload) + cut] if cut < 0 else payload + bytes(cut))
    expected = _generic(type_byte, data)
    try:
        got: Frame | str = decode_payload(type_byte, data)
    except RemoteProtocolError:
        got = "rejected"
    if isinstance(expected, str):
        assert got == "rejected"
    else:
        assert got == expected


# --- stream decoder shortcut ---------------------------------------------------------------------------------

def test_whole_frames_then_a_partial_one_in_the_same_chunk() -> None:
    frames = [HeartbeatPing(i, 10 + i, SIG65) for i in range(3)]
    data = b"".join(encode_frame(f) for f in frames)
    second = len(encode_frame(frames[0])) * 2
    for split in (second + 2, second + 7, len(data) - 1):  # inside the third prefix, its payload, its last byte
        dec = FrameDecoder()
        assert dec.feed(data[:split]) == frames[:2]
        assert dec.feed(data[split:]) == frames[2:]
        dec.close()


def test_oversized_prefix_after_whole_frames_is_rejected_in_the_same_chunk() -> None:
    dec = FrameDecoder(max_frame_bytes=100)
    with pytest.raises(RemoteProtocolError) as info:
        dec.feed(encode_frame(HeartbeatPing(1, 1, SIG65)) + (101).to_bytes(4, "big"))
    assert info.value.code == "frame_too_large"
    with pytest.raises(RemoteProtocolError):
        dec.feed(b"")  # stays failed


# --- heartbeat-specific sign / verify ------------------------------------------------------------------------

def test_sign_heartbeat_pong_equals_sign_frame_and_refuses_a_foreign_key() -> None:
    ctx = _ctx(CB1)
    for acc in (True, False):
        assert sign_heartbeat_pong(ctx, VALIDATOR, 7, acc, 100) == sign_frame(ctx, VALIDATOR,
                                                                            HeartbeatPong(7, acc, 100, b""))
    for key in (ValidatorKey(b"\x09" * 32), RUNNER):
        with pytest.raises(LocalProtocolError):
            sign_heartbeat_pong(ctx, key, 7, True, 100)


def _signed_ping(ctx: ConnectionContext, key: RunnerKey) -> HeartbeatPing:
    ping = sign_frame(ctx, key, HeartbeatPing(3, 9, bytes(65)))
    assert isinstance(ping, HeartbeatPing)
    return ping


def test_verify_heartbeat_ping_accepts_exactly_what_verify_frame_accepts() -> None:
    a, b = _ctx(CB1), _ctx(CB2)
    ping = _signed_ping(a, RUNNER)
    verify_heartbeat_ping(a, ping)
    for ctx, frame in ((b, ping), (a, replace(ping, nonce=4)), (a, replace(ping, block_height=10)),
                       (a, _signed_ping(_ctx(CB1, OTHER_RUNNER), OTHER_RUNNER))):
        with pytest.raises(SignatureError):
            verify_heartbeat_ping(ctx, frame)
        with pytest.raises(SignatureError):
            verify_frame(ctx, frame, Role.RUNNER)
