"""CIP-11 §12.1/§12.2 frames: golden bytes for every frame type and strict decoding.

The expected hex below was assembled by hand from the layout in docs/protocol.md §8
(``u32_be(1 + len(payload)) ‖ type ‖ canonical CBOR map``), fragment by fragment.
"""

from __future__ import annotations

import pytest

from cowboy_protocol.codec import encode
from cowboy_protocol.transport.enums import CancelReason, FrameType, GoodbyeReason, RejectReason, Role
from cowboy_protocol.transport.frames import (
    FRAME_CLASSES,
    MAX_FRAME_BYTES,
    PROTOCOL_VERSION,
    AckStatus,
    BackpressureSignal,
    CapabilityDelta,
    Frame,
    Goodbye,
    HeartbeatPing,
    HeartbeatPong,
    Hello,
    HelloAck,
    JobAck,
    JobAssignment,
    JobCancel,
    JobProgress,
    JobResult,
    JobResultCommit,
    PresenceReceiptFrame,
    PresenceReceiptRequest,
    check_version,
    encode_frame,
)
from cowboy_protocol.transport.framing import decode_frame
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, RemoteProtocolError, SignatureError
from cowboy_protocol.transport.pubkeys import PubKey

# Fixed keys: secp256k1 secret 0x01*32 and Ed25519 seed 0x02*32.
RUNNER_KEY = bytes.fromhex("031b84c5567b126440995d3ed5aaba0565d71e1834604819ff9c17f5e9d5dd078f")
VALIDATOR_KEY = bytes.fromhex("8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394")
RPK = PubKey.runner(RUNNER_KEY)
VPK = PubKey.validator(VALIDATOR_KEY)
RPK_CBOR = "5822" + "01" + RUNNER_KEY.hex()  # bytes(34): scheme 0x01 ‖ key
VPK_CBOR = "5821" + "02" + VALIDATOR_KEY.hex()  # bytes(33): scheme 0x02 ‖ key
SIG65, SIG65_CBOR = b"\xaa" * 65, "5841" + "aa" * 65
SIG64, SIG64_CBOR = b"\xbb" * 64, "5840" + "bb" * 64
JOB, JOB_CBOR = b"\xab" * 32, "5820" + "ab" * 32
AH, AH_CBOR = b"\xef" * 32, "5820" + "ef" * 32
TX = bytes.fromhex("00000003a10000")  # u32_be(3) ‖ CBOR {0: 0}


def _golden(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts))


GOLDEN: list[tuple[str, Frame, bytes]] = [
    ("hello", Hello(PROTOCOL_VERSION, "cowboy-devnet", Role.RUNNER, RPK, 0, b"\x11" * 32, b"\x22" * 32, 7), _golden(
        "00000086", "01", "a8", "00190100", "016d636f77626f792d6465766e6574", "0201", "03", RPK_CBOR, "0400",
        "055820" + "11" * 32, "065820" + "22" * 32, "0707")),
    ("hello_ack", HelloAck(Role.VALIDATOR, VPK, 1000, SIG64), _golden(
        "0000006f", "02", "a4", "0002", "01", VPK_CBOR, "021903e8", "03", SIG64_CBOR)),
    ("heartbeat_ping", HeartbeatPing(5, 1_000_000, SIG65), _golden(
        "0000004e", "10", "a3", "0005", "011a000f4240", "02", SIG65_CBOR)),
    ("heartbeat_pong", HeartbeatPong(5, False, 24, SIG64), _golden(
        "0000004c", "11", "a4", "0005", "01f4", "021818", "03", SIG64_CBOR)),
    ("backpressure", BackpressureSignal(True, 0, SIG65), _golden(
        "0000004a", "12", "a3", "00f5", "0100", "02", SIG65_CBOR)),
    ("capability_delta", CapabilityDelta(("http", "llm"), (), (b"\x33" * 32,), (), 23, SIG65), _golden(
        "0000007b", "13", "a6", "00826468747470636c6c6d", "0180", "02815820" + "33" * 32, "0380", "0417",
        "05", SIG65_CBOR)),
    ("presence_receipt_request", PresenceReceiptRequest(True), _golden("00000004", "14", "a1", "00f5")),
    ("presence_receipt", PresenceReceiptFrame(RPK, VPK, 2, b"\x11" * 32, 24, 5, True, SIG64), _golden(
        "000000ba", "15", "a8", "00", RPK_CBOR, "01", VPK_CBOR, "0202", "035820" + "11" * 32, "041818", "0505",
        "06f5", "07", SIG64_CBOR)),
    ("job_assignment", JobAssignment(JOB, b"\xa1\x00\x00", b"\xcd" * 32, 100, AH, 65536, RPK, VPK, SIG64), _golden(
        "00000105", "20", "a9", "00", JOB_CBOR, "0143a10000", "025820" + "cd" * 32, "031864",
        "04", AH_CBOR, "051a00010000", "06", RPK_CBOR, "07", VPK_CBOR, "08", SIG64_CBOR)),
    ("job_ack_accepted", JobAck(JOB, AH, AckStatus.accepted(), SIG65), _golden(
        "00000090", "21", "a4", "00", JOB_CBOR, "01", AH_CBOR, "02a10001", "03", SIG65_CBOR)),
    ("job_ack_duplicate", JobAck(JOB, AH, AckStatus.duplicate(), SIG65), _golden(
        "00000090", "21", "a4", "00", JOB_CBOR, "01", AH_CBOR, "02a10002", "03", SIG65_CBOR)),
    ("job_ack_reject_null_text", JobAck(JOB, AH, AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT), SIG65),
     _golden("00000094", "21", "a4", "00", JOB_CBOR, "01", AH_CBOR, "02a30003010102f6",
             "03", SIG65_CBOR)),
    ("job_ack_reject_text", JobAck(JOB, AH, AckStatus.reject(RejectReason.AT_CAPACITY, "busy"), SIG65), _golden(
        "00000098", "21", "a4", "00", JOB_CBOR, "01", AH_CBOR, "02a300030102026462757379", "03", SIG65_CBOR)),
    ("job_progress_null", JobProgress(JOB, 500, None), _golden(
        "0000002b", "22", "a3", "00", JOB_CBOR, "011901f4", "02f6")),
    ("job_progress_text", JobProgress(JOB, 500, "half"), _golden(
        "0000002f", "22", "a3", "00", JOB_CBOR, "011901f4", "026468616c66")),
    ("job_result", JobResult(JOB, TX), _golden("0000002e", "23", "a2", "00", JOB_CBOR, "014700000003a10000")),
    ("job_cancel", JobCancel(JOB, AH, CancelReason.RESELECTED, SIG64), _golden(
        "0000008d", "24", "a4", "00", JOB_CBOR, "01", AH_CBOR, "0201", "03", SIG64_CBOR)),
    ("job_result_commit", JobResultCommit(JOB, TX), _golden(
        "0000002e", "25", "a2", "00", JOB_CBOR, "014700000003a10000")),
    ("goodbye_unsigned", Goodbye(GoodbyeReason.SHUTDOWN, None, None, None), _golden(
        "0000000a", "f0", "a4", "000c", "01f6", "02f6", "03f6")),
    ("goodbye_signed", Goodbye(GoodbyeReason.WRONG_CHAIN, "chain mismatch", 10, SIG64), _golden(
        "00000059", "f0", "a4", "0003", "016e636861696e206d69736d61746368", "020a", "03", SIG64_CBOR)),
]


@pytest.mark.parametrize(("name", "frame", "wire"), GOLDEN, ids=[g[0] for g in GOLDEN])
def test_frame_golden_bytes_encode_and_decode(name: str, frame: Frame, wire: bytes) -> None:
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4  # the hand-written prefix is self-consistent
    assert encode_frame(frame) == wire
    assert decode_frame(wire) == frame


def test_every_frame_type_has_a_golden_vector() -> None:
    covered = {type(f).FRAME_TYPE for _, f, _ in GOLDEN}
    assert covered == set(FRAME_CLASSES) == set(FrameType)


def test_frame_type_byte_follows_the_length_prefix() -> None:
    for _, frame, wire in GOLDEN:
        assert wire[4] == frame.FRAME_TYPE


def _payload(frame: Frame) -> bytes:
    return encode_frame(frame)[5:]


def _wire(type_byte: int, payload: bytes) -> bytes:
    return (1 + len(payload)).to_bytes(4, "big") + bytes([type_byte]) + payload


def _rejects(wire: bytes, code: str) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        decode_frame(wire)
    assert info.value.code == code, info.value
    return info.value


def test_unknown_frame_type_is_a_protocol_error() -> None:
    err = _rejects(_wire(0x03, _payload(GOLDEN[0][1])), "unknown_frame_type")
    assert err.reason is GoodbyeReason.PROTOCOL_ERROR


def test_body_with_extra_key_is_rejected() -> None:
    body = Goodbye(GoodbyeReason.SHUTDOWN, None, None, None).body()
    body[4] = 0
    _rejects(_wire(0xF0, encode(body)), "malformed_body")


def test_body_with_missing_key_is_rejected() -> None:
    body = JobResult(JOB, TX).body()
    del body[1]
    _rejects(_wire(0x23, encode(body)), "malformed_body")


def test_body_with_boolean_key_instead_of_integer_is_rejected() -> None:
    # CBOR false compares equal to 0 in Python; the body must still use integer keys.
    _rejects(_wire(0xF0, encode({False: 12, 1: None, 2: None, 3: None})), "malformed_body")


@pytest.mark.parametrize(("type_byte", "body"), [
    (0xF0, {0: "shutdown", 1: None, 2: None, 3: None}),  # enum as text
    (0xF0, {0: 0x7F, 1: None, 2: None, 3: None}),  # unknown GoodbyeReason
    (0x11, {0: 5, 1: 1, 2: 24, 3: SIG64}),  # accepting_new as integer, not bool
    (0x10, {0: -1, 1: 0, 2: SIG65}),  # negative nonce
    (0x10, {0: 1, 1: 0, 2: SIG64}),  # runner signature must be 65 bytes
    (0x23, {0: JOB, 1: bytes.fromhex("00000004a10000")}),  # tx_bytes prefix does not match its body
    (0x23, {0: JOB[:31], 1: TX}),  # job_id not 32 bytes
    (0x13, {0: ["llm", "http"], 1: [], 2: [], 3: [], 4: 0, 5: SIG65}),  # capability list not ascending
    (0x13, {0: ["llm", "llm"], 1: [], 2: [], 3: [], 4: 0, 5: SIG65}),  # duplicate capability
    (0x21, {0: JOB, 1: AH, 2: {0: 1, 1: 1}, 3: SIG65}),  # Accepted with a reject reason
    (0x21, {0: JOB, 1: AH, 2: {0: 3, 1: 1}, 3: SIG65}),  # Reject without its text key
    (0x22, {0: JOB, 1: 1001, 2: None}),  # permille above 1000
])
def test_body_with_wrong_type_or_value_is_rejected(type_byte: int, body: dict[int, object]) -> None:
    _rejects(_wire(type_byte, encode(body)), "malformed_body")


def test_non_canonical_cbor_payload_is_rejected() -> None:
    canonical = _payload(Goodbye(GoodbyeReason.SHUTDOWN, None, None, None))
    assert canonical == bytes.fromhex("a4000c01f602f603f6")
    _rejects(_wire(0xF0, bytes.fromhex("a400180c01f602f603f6")), "malformed_cbor")  # 12 in a non-shortest head
    _rejects(_wire(0xF0, bytes.fromhex("a401f6000c02f603f6")), "malformed_cbor")  # keys out of order
    _rejects(_wire(0xF0, bytes.fromhex("bf000c01f602f603f6ff")), "malformed_cbor")  # indefinite-length map
    _rejects(_wire(0xF0, canonical + b"\x00"), "malformed_cbor")  # trailing byte inside the frame


def test_scheme_or_role_mismatch_in_a_frame_is_fatal_auth_failure() -> None:
    hello = Hello(PROTOCOL_VERSION, "c", Role.RUNNER, RPK, 0, b"\x11" * 32, b"\x22" * 32, 0).body()
    hello[3] = VPK.to_bytes()  # runner role with an Ed25519 key
    err = _rejects(_wire(0x01, encode(hello)), "role_scheme_mismatch")
    assert err.reason is GoodbyeReason.AUTH_FAILED
    body = JobAssignment(JOB, b"", b"\xcd" * 32, 1, AH, 2, RPK, VPK, SIG64).body()
    body[6], body[7] = VPK.to_bytes(), RPK.to_bytes()  # swapped keys
    _rejects(_wire(0x20, encode(body)), "role_scheme_mismatch")
    body[6], body[7] = b"\x03" + RUNNER_KEY, VPK.to_bytes()  # unknown scheme id
    _rejects(_wire(0x20, encode(body)), "pubkey_scheme")
    body[6] = b"\x01" + RUNNER_KEY[:32]  # secp256k1 key one byte short
    _rejects(_wire(0x20, encode(body)), "pubkey_length")
    ack = HelloAck(Role.VALIDATOR, VPK, 0, SIG64).body()
    ack[3] = SIG65  # validator with a 65-byte signature
    _rejects(_wire(0x02, encode(ack)), "malformed_body")


def test_version_major_mismatch_is_unsupported_version() -> None:
    check_version(0x0100)
    check_version(0x01FF)  # higher minor is compatible
    for bad in (0x0000, 0x0200, 0xFF00):
        with pytest.raises(RemoteProtocolError) as info:
            check_version(bad)
        assert info.value.reason is GoodbyeReason.UNSUPPORTED_VERSION


def test_encoder_refuses_invalid_or_oversized_frames() -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame(HeartbeatPing(1, 1, SIG64))  # runner signature must be 65 bytes
    with pytest.raises(LocalProtocolError) as info:
        encode_frame(JobResult(JOB, (MAX_FRAME_BYTES).to_bytes(4, "big") + bytes(MAX_FRAME_BYTES)))
    assert info.value.code == "frame_too_large"
    with pytest.raises(SignatureError):
        PubKey.runner(RUNNER_KEY[:32])


def test_largest_allowed_frame_round_trips() -> None:
    overhead = len(encode_frame(JobResult(JOB, bytes.fromhex("00000001ff")))) - 5 - 4
    body_len = MAX_FRAME_BYTES - 1 - overhead - 4 - 3  # 3 more bytes of CBOR head for a long byte string
    frame = JobResult(JOB, body_len.to_bytes(4, "big") + bytes(body_len))
    wire = encode_frame(frame)
    assert int.from_bytes(wire[:4], "big") == MAX_FRAME_BYTES
    assert decode_frame(wire) == frame
