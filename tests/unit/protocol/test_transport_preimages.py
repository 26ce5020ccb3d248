"""CIP-11 §12.6 signature domains: hand-assembled preimages, pinned digests, sign/verify and every mismatch."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.enums import CancelReason, GoodbyeReason, RejectReason, Role
from cowboy_protocol.transport.frames import (
    AckStatus,
    BackpressureSignal,
    CapabilityDelta,
    Goodbye,
    HeartbeatPing,
    HeartbeatPong,
    JobAck,
    JobCancel,
)
from cowboy_protocol.transport.preimages import (
    ConnectionContext,
    RunnerKey,
    ValidatorKey,
    ack_digest,
    assignment_hash,
    cancel_digest,
    canonical_frame_body,
    control_digest,
    goodbye_digest,
    heartbeat_ping_digest,
    heartbeat_pong_digest,
    hello_ack_digest,
    make_assignment,
    presence_receipt_digest,
    reason_or_empty,
    retry_after_blocks_or_zero,
    sign_frame,
    sign_hello_ack,
    validator_set_hash,
    verify_assignment,
    verify_frame,
    verify_hello_ack,
    verify_signature,
)
from cowboy_protocol.transport.protocol_errors import LocalProtocolError, SignatureError
from cowboy_protocol.transport.pubkeys import PubKey

RUNNER = RunnerKey(b"\x01" * 32)
VALIDATOR = ValidatorKey(b"\x02" * 32)
OTHER_RUNNER = RunnerKey(b"\x03" * 32)
OTHER_VALIDATOR = ValidatorKey(b"\x04" * 32)
RPK_HEX = "01031b84c5567b126440995d3ed5aaba0565d71e1834604819ff9c17f5e9d5dd078f"
VPK_HEX = "028139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394"
CHAIN_HEX = "6d636f77626f792d6465766e6574"  # CBOR text "cowboy-devnet"
EPOCH_HEX = "0000000000000003"
VSH, CB, NONCE, JOB, AH, SPEC_HASH = (bytes([b]) * 32 for b in (0x44, 0x55, 0x66, 0xAB, 0xEF, 0xCD))
CTX = ConnectionContext("cowboy-devnet", 0x0100, RUNNER.pubkey, VALIDATOR.pubkey, 3, VSH, CB)


def h(*parts: str) -> bytes:
    """Preimage bytes from hex fragments (ASCII domains given as text via .encode().hex())."""
    return bytes.fromhex("".join(parts))


def d(domain: str) -> str:
    return domain.encode().hex()


CID_PREIMAGE = h(d("cowboy-cip11-connection-v1"), "55" * 32, RPK_HEX, VPK_HEX, EPOCH_HEX, "44" * 32)
CID = keccak256(CID_PREIMAGE).hex()


def test_fixed_test_keys_match_the_hex_used_below() -> None:
    assert RUNNER.pubkey.to_bytes().hex() == RPK_HEX
    assert VALIDATOR.pubkey.to_bytes().hex() == VPK_HEX


# (name, digest computed by the code, hand-assembled preimage)
def _cases() -> list[tuple[str, bytes, bytes]]:
    return [
        ("connection_id", CTX.connection_id, CID_PREIMAGE),
        ("hello_ack_by_validator", hello_ack_digest(CTX, Role.VALIDATOR, NONCE),
         h(d("cowboy-cip11-hello-v1"), "0202", CHAIN_HEX, "0100", "01", RPK_HEX, "02", VPK_HEX, EPOCH_HEX,
           "44" * 32, "66" * 32, "55" * 32)),
        ("hello_ack_by_runner", hello_ack_digest(CTX, Role.RUNNER, NONCE),
         h(d("cowboy-cip11-hello-v1"), "0101", CHAIN_HEX, "0100", "01", RPK_HEX, "02", VPK_HEX, EPOCH_HEX,
           "44" * 32, "66" * 32, "55" * 32)),
        ("heartbeat_ping", heartbeat_ping_digest(CTX, 7, 300),
         h(d("cowboy-cip11-heartbeat-v1"), "0101", CID, "10", "0000000000000007", "000000000000012c")),
        ("heartbeat_pong", heartbeat_pong_digest(CTX, 7, True, 301),
         h(d("cowboy-cip11-heartbeat-v1"), "0202", CID, "11", "0000000000000007", "01", "000000000000012d")),
        ("control_backpressure", control_digest(CTX, BackpressureSignal(False, 9, b"\xaa" * 65)),
         h(d("cowboy-cip11-control-v1"), "0101", CID, "12", "a200f40109")),
        ("assignment_hash", assignment_hash("cowboy-devnet", JOB, SPEC_HASH, 100, 150, RUNNER.pubkey),
         h(d("cowboy-cip11-assignment-v1"), "0202", CHAIN_HEX, "ab" * 32, "cd" * 32, "0000000000000064",
           "0000000000000096", RPK_HEX)),
        ("ack_accepted", ack_digest(CTX, JOB, AH, AckStatus.accepted()),
         h(d("cowboy-cip11-ack-v1"), "0101", RPK_HEX, VPK_HEX, "ab" * 32, "ef" * 32, "0100", "60")),
        ("ack_reject_none_text", ack_digest(CTX, JOB, AH, AckStatus.reject(RejectReason.AT_CAPACITY)),
         h(d("cowboy-cip11-ack-v1"), "0101", RPK_HEX, VPK_HEX, "ab" * 32, "ef" * 32, "0302", "60")),
        ("ack_reject_text", ack_digest(CTX, JOB, AH, AckStatus.reject(RejectReason.AT_CAPACITY, "busy")),
         h(d("cowboy-cip11-ack-v1"), "0101", RPK_HEX, VPK_HEX, "ab" * 32, "ef" * 32, "0302", "6462757379")),
        ("cancel", cancel_digest(CTX, JOB, AH, CancelReason.JOB_SETTLED),
         h(d("cowboy-cip11-cancel-v1"), "0202", RPK_HEX, VPK_HEX, "ab" * 32, "ef" * 32, "02")),
        ("goodbye_none", goodbye_digest(CTX, Role.RUNNER, GoodbyeReason.SHUTDOWN, None, None),
         h(d("cowboy-cip11-goodbye-v1"), "0101", CID, "0c", "60", "0000000000000000")),
        ("goodbye_detail", goodbye_digest(CTX, Role.VALIDATOR, GoodbyeReason.RATE_LIMITED, "x", 5),
         h(d("cowboy-cip11-goodbye-v1"), "0202", CID, "09", "6178", "0000000000000005")),
        ("presence_receipt", presence_receipt_digest("cowboy-devnet", RUNNER.pubkey, VALIDATOR.pubkey, 3, VSH,
                                                     500, 7, True),
         h(d("cowboy-cip11-presence-receipt-v1"), "0202", CHAIN_HEX, RPK_HEX, VPK_HEX, EPOCH_HEX, "44" * 32,
           "00000000000001f4", "0000000000000007", "01")),
    ]


# keccak256 of each hand-assembled preimage, computed once and pinned.
GOLDEN_DIGESTS: dict[str, str] = {
    "connection_id": "b5cb240df490194aa782a5ecd6dd499aacf17a0600347ad23eb98dff5ea4a254",
    "hello_ack_by_validator": "41b602fd2aa6dc162be7ef03179a0e9ae251e397a817961aeda26f69e35da6f0",
    "hello_ack_by_runner": "e9a1eab13009ea63cb80ef7333cf9a90660835d913bd7b0c031e1759bbbf94d7",
    "heartbeat_ping": "7602e5dd2f1f8944456dd7d0e8fd1b57588abdd1cfe38c11b3f782296cce4ecc",
    "heartbeat_pong": "52f147948c9976ed63c0b4e501310f5e44348c00fd21493077c60645dc856383",
    "control_backpressure": "7b50bd5c9b4a3fbf3cdb777ac2a80c67208144736ef50a110d9c4ac213184d4b",
    "assignment_hash": "95b0bc5cc7d03a848926b3aa5f247140fb5062cefbc3d4e0e39666c8d54eabfa",
    "ack_accepted": "2174bf6727650fc7d2d405f587e4eb150ead46a6cdec9fbf7b359bafdfb06a4f",
    "ack_reject_none_text": "2515fea7896084abd614cc076b25a35f9c2a040b7bc1fd64de250563aace8819",
    "ack_reject_text": "a364f25f369b8ff2425fc44bf5417987497f0cee04994c46e2fdd5c87b91f887",
    "cancel": "42207cba1d45bc6e513349bcac4ffe868c0a8f5c483cc7ba960a6332a2f769a8",
    "goodbye_none": "73cdb143f1202243130c4f642b95cddfbefe67328e7af9aea5fe9f9305df6b46",
    "goodbye_detail": "e4a61311410f5d923ea170e036d75ba14d741d1ff10e7cb683fc8de98200f8d8",
    "presence_receipt": "27c1d0ebec1934353b8ba99f19f122bc350e4b1a271945056d0087d10db8f46f",
}


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_preimage_digest_matches_hand_assembled_layout(case: tuple[str, bytes, bytes]) -> None:
    name, digest, preimage = case
    assert digest == keccak256(preimage)
    assert digest.hex() == GOLDEN_DIGESTS[name]




def test_none_collapses_to_cbor_empty_text_0x60_and_zero() -> None:
    assert reason_or_empty(None) == reason_or_empty("") == b"\x60"
    assert reason_or_empty("busy") == b"\x64busy"
    assert retry_after_blocks_or_zero(None) == retry_after_blocks_or_zero(0) == bytes(8)
    assert goodbye_digest(CTX, Role.RUNNER, GoodbyeReason.SHUTDOWN, None, None) == \
        goodbye_digest(CTX, Role.RUNNER, GoodbyeReason.SHUTDOWN, "", 0)
    none_text = ack_digest(CTX, JOB, AH, AckStatus.reject(RejectReason.INTERNAL, None))
    assert none_text == ack_digest(CTX, JOB, AH, AckStatus.reject(RejectReason.INTERNAL, ""))
    assert none_text != ack_digest(CTX, JOB, AH, AckStatus.reject(RejectReason.INTERNAL, " "))


def test_canonical_frame_body_omits_the_signature_key_entirely() -> None:
    frame = BackpressureSignal(False, 9, b"\xaa" * 65)
    assert canonical_frame_body(frame) == bytes.fromhex("a200f40109")
    assert canonical_frame_body(replace(frame, signed=b"\x00" * 65)) == canonical_frame_body(frame)


def test_validator_set_hash_is_keccak_of_ordered_raw_keys() -> None:
    k1, k2 = VALIDATOR.pubkey.key, OTHER_VALIDATOR.pubkey.key
    assert validator_set_hash([k1, k2]) == keccak256(k1 + k2)
    assert validator_set_hash([k1, k2]) != validator_set_hash([k2, k1])
    with pytest.raises(LocalProtocolError):
        validator_set_hash([VALIDATOR.pubkey.to_bytes()])  # tagged (33-byte) keys are not snapshot keys


SIGNED_FRAMES = [
    HeartbeatPing(0, 10, b"\x00" * 65),
    HeartbeatPong(0, True, 10, b"\x00" * 64),
    BackpressureSignal(True, 10, b"\x00" * 65),
    CapabilityDelta(("llm",), (), (), (b"\x01" * 32,), 10, b"\x00" * 65),
    JobAck(JOB, AH, AckStatus.reject(RejectReason.DRAINING, "bye"), b"\x00" * 65),
    JobCancel(JOB, AH, CancelReason.EXPIRED, b"\x00" * 64),
]


def _signer_of(frame: object) -> RunnerKey | ValidatorKey:
    return VALIDATOR if isinstance(frame, (HeartbeatPong, JobCancel)) else RUNNER


@pytest.mark.parametrize("frame", SIGNED_FRAMES, ids=lambda f: type(f).__name__)
def test_signed_frame_round_trip_and_rejections(frame: HeartbeatPing) -> None:
    key = _signer_of(frame)
    signed = sign_frame(CTX, key, frame)
    verify_frame(CTX, signed, key.role)
    other_conn = replace(CTX, channel_binding=b"\x56" * 32)
    if not isinstance(frame, (JobAck, JobCancel)):  # connection-bound: no replay on another connection
        with pytest.raises(SignatureError):
            verify_frame(other_conn, signed, key.role)
    wrong_role = Role.VALIDATOR if key.role is Role.RUNNER else Role.RUNNER
    with pytest.raises(SignatureError) as info:
        verify_frame(CTX, signed, wrong_role)
    assert info.value.code == "role_mismatch"
    assert frame.SIGNATURE_FIELD is not None
    sig = getattr(signed, frame.SIGNATURE_FIELD)
    tampered = replace(signed, **{frame.SIGNATURE_FIELD: sig[:10] + bytes([sig[10] ^ 1]) + sig[11:]})
    with pytest.raises(SignatureError):
        verify_frame(CTX, tampered, key.role)
    with pytest.raises(LocalProtocolError):
        sign_frame(CTX, OTHER_RUNNER if key.role is Role.RUNNER else OTHER_VALIDATOR, frame)


def test_goodbye_signed_by_either_role_and_unsigned_is_rejected_after_auth() -> None:
    bye = Goodbye(GoodbyeReason.IDLE_TIMEOUT, None, 3, None)
    for key in (RUNNER, VALIDATOR):
        verify_frame(CTX, sign_frame(CTX, key, bye), key.role)
    with pytest.raises(SignatureError) as info:
        verify_frame(CTX, bye, Role.RUNNER)
    assert info.value.code == "signature_missing"
    signed = sign_frame(CTX, RUNNER, bye)
    with pytest.raises(SignatureError):  # detail is covered: None and "x" differ
        verify_frame(CTX, replace(signed, detail="x"), Role.RUNNER)


def test_verify_signature_rejects_every_role_scheme_and_length_mismatch() -> None:
    digest = keccak256(b"m")
    r_sig, v_sig = RUNNER.sign(digest), VALIDATOR.sign(digest)
    verify_signature(Role.RUNNER, RUNNER.pubkey, digest, r_sig)
    verify_signature(Role.VALIDATOR, VALIDATOR.pubkey, digest, v_sig)
    cases = [
        (Role.RUNNER, VALIDATOR.pubkey, v_sig, "role_scheme_mismatch"),  # runner role, Ed25519 key
        (Role.VALIDATOR, RUNNER.pubkey, r_sig, "role_scheme_mismatch"),  # validator role, secp256k1 key
        (Role.RUNNER, RUNNER.pubkey, v_sig, "signature_length"),  # 64-byte sig for secp256k1
        (Role.VALIDATOR, VALIDATOR.pubkey, r_sig, "signature_length"),  # 65-byte sig for Ed25519
        (Role.RUNNER, RUNNER.pubkey, r_sig[:64] + b"\x05", "bad_signature"),  # invalid recovery id
        (Role.RUNNER, OTHER_RUNNER.pubkey, r_sig, "bad_signature"),  # recovers to another address
        (Role.VALIDATOR, OTHER_VALIDATOR.pubkey, v_sig, "bad_signature"),
        (Role.RUNNER, RUNNER.pubkey, None, "signature_missing"),
    ]
    for role, key, sig, code in cases:
        with pytest.raises(SignatureError) as info:
            verify_signature(role, key, digest, sig)
        assert info.value.code == code, (role, key, code)
        assert info.value.reason is GoodbyeReason.AUTH_FAILED
    with pytest.raises(SignatureError) as info:
        PubKey.from_bytes(b"\x02" + RUNNER.pubkey.key)  # Ed25519 tag on a 33-byte key
    assert info.value.code == "pubkey_length"


def test_hello_ack_binds_challenge_and_channel_but_not_block_height() -> None:
    ack = sign_hello_ack(CTX, VALIDATOR, NONCE, block_height=10)
    verify_hello_ack(CTX, ack, Role.VALIDATOR, NONCE)
    verify_hello_ack(CTX, replace(ack, block_height=999), Role.VALIDATOR, NONCE)  # advisory only
    for ctx, nonce in ((CTX, b"\x67" * 32), (replace(CTX, channel_binding=b"\x56" * 32), NONCE),
                       (replace(CTX, chain_id="other"), NONCE), (replace(CTX, subset_epoch=4), NONCE),
                       (replace(CTX, validator_set_hash=b"\x45" * 32), NONCE), (replace(CTX, version=0x0101), NONCE)):
        with pytest.raises(SignatureError):
            verify_hello_ack(ctx, ack, Role.VALIDATOR, nonce)
    with pytest.raises(SignatureError) as info:
        verify_hello_ack(replace(CTX, validator_pubkey=OTHER_VALIDATOR.pubkey), ack, Role.VALIDATOR, NONCE)
    assert info.value.code == "identity_mismatch"
    runner_ack = sign_hello_ack(CTX, RUNNER, b"\x77" * 32, block_height=0)
    verify_hello_ack(CTX, runner_ack, Role.RUNNER, b"\x77" * 32)
    with pytest.raises(SignatureError):  # role is part of the signed bytes
        verify_signature(Role.RUNNER, RUNNER.pubkey, hello_ack_digest(CTX, Role.VALIDATOR, b"\x77" * 32),
                         runner_ack.signed_challenge)


def test_assignment_verification_and_byte_identical_hash_across_validators() -> None:
    spec = bytes.fromhex("a10000")
    frame = make_assignment("cowboy-devnet", VALIDATOR, JOB, spec, 100, 150, RUNNER.pubkey)
    assert frame.job_spec_hash == keccak256(spec)
    snapshot = [VALIDATOR.pubkey.key, OTHER_VALIDATOR.pubkey.key]
    verify_assignment(CTX, frame, snapshot)
    other = make_assignment("cowboy-devnet", OTHER_VALIDATOR, JOB, spec, 100, 150, RUNNER.pubkey)
    assert other.assignment_hash == frame.assignment_hash  # §10.1 byte-identical fields
    assert other.validator_signed != frame.validator_signed
    bad = [
        (replace(CTX, chain_id="other-chain"), frame, "assignment_hash_mismatch"),  # connection chain_id
        (CTX, replace(frame, job_spec=bytes.fromhex("a10001")), "job_spec_hash_mismatch"),
        (CTX, replace(frame, deadline_block=151), "assignment_hash_mismatch"),
        (replace(CTX, runner_pubkey=OTHER_RUNNER.pubkey), frame, "not_our_assignment"),
        (CTX, other, "unknown_validator"),  # not this connection's validator
        (CTX, replace(frame, validator_signed=other.validator_signed), "bad_signature"),
    ]
    for ctx, f, code in bad:
        with pytest.raises(SignatureError) as info:
            verify_assignment(ctx, f, snapshot)
        assert info.value.code == code
    with pytest.raises(SignatureError) as info:
        verify_assignment(CTX, frame, [OTHER_VALIDATOR.pubkey.key])
    assert info.value.code == "unknown_validator"
