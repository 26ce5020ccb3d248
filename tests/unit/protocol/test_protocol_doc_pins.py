"""Cross-stack pins that can detect drift (CIP-11 §12.1 "cross-stack frame-byte pin tests").

The runner and the node share one encoder (``cowboy_protocol``), so comparing their outputs compares a function
with itself. Instead every golden block of ``docs/protocol.md`` §9 was assembled by hand from the documented
field layouts (literal bytes, pycryptodome keccak — the derivation snippet is in the document) and this test
checks that the protocol package produces, and accepts, exactly those bytes. The inputs below are the ones
the derivation uses (§9.1 of the document).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from cowboy_node.execution.jobs import seeds
from cowboy_node.execution.jobs.pending import PendingSelectionV1
from cowboy_node.execution.jobs.snapshot_root import candidate_leaf, root_of_leaves
from cowboy_node.types.block import ConsumedSeed
from cowboy_node.types.presence import decode_presence, encode_presence
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport import preimages as P
from cowboy_protocol.transport.enums import CancelReason, FrameType, GoodbyeReason, RejectReason, Role
from cowboy_protocol.transport.frames import (
    FRAME_CLASSES,
    HEADER_LEN,
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
    decode_payload,
    encode_frame,
)
from cowboy_protocol.transport.pubkeys import PubKey

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
_BLOCK = re.compile(r"^```golden ([\w./-]+)\n(.*?)^```", re.M | re.S)


def golden_blocks() -> dict[str, bytes]:
    """Every ```golden <name>``` block of docs/protocol.md, hex with whitespace ignored."""
    out: dict[str, bytes] = {}
    for name, body in _BLOCK.findall(DOC.read_text(encoding="utf-8")):
        assert name not in out, f"duplicate golden block {name}"
        out[name] = bytes.fromhex("".join(body.split()))
    return out


GOLDEN = golden_blocks()

# --- the inputs of docs/protocol.md §9.1 -------------------------------------------------------------------
R_PK = PubKey.from_bytes(bytes.fromhex("01" "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"))
V_PK = PubKey.from_bytes(b"\x02" + b"\x11" * 32)
CHAIN = "cowboy-test"
VSH, NONCE, CB, JOB, AH = b"\x22" * 32, b"\x33" * 32, b"\x44" * 32, b"\x55" * 32, b"\x88" * 32
SIG65, SIG64, ENT = b"\x66" * 65, b"\x77" * 64, b"\x99" * 32
SPEC = bytes.fromhex("a10001")
TX = bytes.fromhex("00000001a0")
CTX = P.ConnectionContext(CHAIN, 0x0100, R_PK, V_PK, 0, VSH, CB)
BP = BackpressureSignal(False, 1000, SIG65)
CD = CapabilityDelta(("gpu", "llm"), (), (ENT,), (), 1000, SIG65)

FRAMES: dict[str, Frame] = {
    "frame/Hello": Hello(0x0100, CHAIN, Role.RUNNER, R_PK, 0, VSH, NONCE, 42),
    "frame/HelloAck": HelloAck(Role.VALIDATOR, V_PK, 42, SIG64),
    "frame/HeartbeatPing": HeartbeatPing(7, 1000, SIG65),
    "frame/HeartbeatPong": HeartbeatPong(7, True, 1000, SIG64),
    "frame/BackpressureSignal": BP,
    "frame/CapabilityDelta": CD,
    "frame/PresenceReceiptRequest": PresenceReceiptRequest(True),
    "frame/PresenceReceiptFrame": PresenceReceiptFrame(R_PK, V_PK, 0, VSH, 1000, 7, True, SIG64),
    "frame/JobAssignment": JobAssignment(JOB, SPEC, keccak256(SPEC), 100, AH, 160, R_PK, V_PK, SIG64),
    "frame/JobAck/accepted": JobAck(JOB, AH, AckStatus.accepted(), SIG65),
    "frame/JobAck/duplicate": JobAck(JOB, AH, AckStatus.duplicate(), SIG65),
    "frame/JobAck/reject-text": JobAck(JOB, AH, AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT, "bad hash"),
                                       SIG65),
    "frame/JobAck/reject-null": JobAck(JOB, AH, AckStatus.reject(RejectReason.AT_CAPACITY), SIG65),
    "frame/JobProgress/text": JobProgress(JOB, 500, "half"),
    "frame/JobProgress/null": JobProgress(JOB, 1000, None),
    "frame/JobResult": JobResult(JOB, TX),
    "frame/JobCancel": JobCancel(JOB, AH, CancelReason.RESELECTED, SIG64),
    "frame/JobResultCommit": JobResultCommit(JOB, TX),
    "frame/Goodbye/signed": Goodbye(GoodbyeReason.SHUTDOWN, "bye", 10, SIG64),
    "frame/Goodbye/unsigned": Goodbye(GoodbyeReason.PROTOCOL_ERROR, None, None, None),
}

PREIMAGES: dict[str, Callable[[], bytes]] = {
    "preimage/validator_set_hash": lambda: P.validator_set_hash([b"\x11" * 32, b"\xaa" * 32]),
    "preimage/connection_id": lambda: CTX.connection_id,
    "preimage/hello/runner": lambda: P.hello_ack_digest(CTX, Role.RUNNER, NONCE),
    "preimage/hello/validator": lambda: P.hello_ack_digest(CTX, Role.VALIDATOR, NONCE),
    "preimage/heartbeat/ping": lambda: P.heartbeat_ping_digest(CTX, 7, 1000),
    "preimage/heartbeat/pong": lambda: P.heartbeat_pong_digest(CTX, 7, True, 1000),
    "preimage/control/backpressure": lambda: P.control_digest(CTX, BP),
    "preimage/control/capability_delta": lambda: P.control_digest(CTX, CD),
    "preimage/assignment": lambda: P.assignment_hash(CHAIN, JOB, keccak256(SPEC), 100, 160, R_PK),
    "preimage/ack/accepted": lambda: P.ack_digest(CTX, JOB, AH, AckStatus.accepted()),
    "preimage/ack/reject-text": lambda: P.ack_digest(
        CTX, JOB, AH, AckStatus.reject(RejectReason.UNVERIFIABLE_ASSIGNMENT, "bad hash")),
    "preimage/cancel": lambda: P.cancel_digest(CTX, JOB, AH, CancelReason.RESELECTED),
    "preimage/goodbye/validator-none": lambda: P.goodbye_digest(CTX, Role.VALIDATOR, GoodbyeReason.SHUTDOWN,
                                                                None, None),
    "preimage/goodbye/runner-some": lambda: P.goodbye_digest(CTX, Role.RUNNER, GoodbyeReason.SHUTDOWN, "bye", 10),
    "preimage/presence_receipt": lambda: P.presence_receipt_digest(CHAIN, R_PK, V_PK, 0, VSH, 1000, 7, True),
}

LEAVES = [keccak256(b"leaf" + bytes([i])) for i in range(5)]
PENDING = PendingSelectionV1(job_id=JOB, submitted_at=100, submit_epoch=0, submit_view=100, seed_epoch=0,
                             seed_view=103, candidates_snapshot_root=b"\xcc" * 32, runners=3,
                             submitter=b"\xdd" * 20, job_kind=1)
CONSUMED = (ConsumedSeed(0, 5, b"\xab" * 48), ConsumedSeed(0, 9, b"\xcd" * 48))
BEACON = seeds.beacon_hash_v1(0, 7, b"\xab" * 48)

VALUES: dict[str, Callable[[], bytes]] = {
    "presence/bitmap-0-2-9-of-10": lambda: encode_presence({0, 2, 9}, 10),
    "presence/sparse-1000-of-5000": lambda: encode_presence({1000}, 5000),
    "presence/empty-registry": lambda: encode_presence((), 0),
    "pending/PendingSelectionV1": PENDING.encode,
    "consumed_seeds/ConsumedSeedsV1": lambda: encode([s.to_cbor() for s in CONSUMED]),
    "candidates/empty": lambda: root_of_leaves([]),
    "candidates/root-1": lambda: root_of_leaves(LEAVES[:1]),
    "candidates/root-2": lambda: root_of_leaves(LEAVES[:2]),
    "candidates/root-3": lambda: root_of_leaves(LEAVES[:3]),
    "candidates/root-5": lambda: root_of_leaves(LEAVES[:5]),
    "candidates/leaf": lambda: candidate_leaf(2, b"\xdd" * 20, 10**18, 50 * 10**9, 707106 * 10**12),
    "seed/beacon_hash_v1": lambda: BEACON,
    "seed/select-v3-mode0": lambda: seeds.selection_seed_v3(seeds.MODE_IMMEDIATE, BEACON, JOB, 8),
    "seed/select-v3-mode1": lambda: seeds.selection_seed_v3(seeds.MODE_DELAYED, BEACON, JOB, 8),
    "seed/select-v2": lambda: seeds.selection_seed_v2(BEACON, JOB, 8),
}


def test_every_golden_block_is_checked_and_every_check_has_a_block() -> None:
    assert set(GOLDEN) == set(FRAMES) | set(PREIMAGES) | set(VALUES)


def test_every_frame_type_has_a_pinned_golden_frame() -> None:
    """A new frame class (or §12.2 type) without a ```golden frame/<Name>``` block fails here."""
    pinned = {name.split("/")[1] for name in GOLDEN if name.startswith("frame/")}
    assert {cls.__name__ for cls in FRAME_CLASSES.values()} <= pinned
    assert set(FRAME_CLASSES) == set(FrameType)


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_frame_encodes_to_the_documented_bytes_and_decodes_back(name: str) -> None:
    frame, wire = FRAMES[name], GOLDEN[name]
    assert encode_frame(frame).hex() == wire.hex()
    assert int.from_bytes(wire[:HEADER_LEN], "big") == len(wire) - HEADER_LEN
    assert wire[HEADER_LEN] == frame.FRAME_TYPE
    assert decode_payload(wire[HEADER_LEN], wire[HEADER_LEN + 1:]) == frame


@pytest.mark.parametrize("name", sorted(PREIMAGES))
def test_signature_digest_matches_the_hand_assembled_preimage(name: str) -> None:
    assert PREIMAGES[name]().hex() == GOLDEN[name].hex()


@pytest.mark.parametrize("name", sorted(VALUES))
def test_value_matches_the_documented_bytes(name: str) -> None:
    assert VALUES[name]().hex() == GOLDEN[name].hex()


def test_documented_presence_pending_and_seed_bytes_decode_to_their_values() -> None:
    assert decode_presence(GOLDEN["presence/bitmap-0-2-9-of-10"], 10) == {0, 2, 9}
    assert decode_presence(GOLDEN["presence/sparse-1000-of-5000"], 5000) == {1000}
    assert decode_presence(GOLDEN["presence/empty-registry"], 0) == frozenset()
    assert PendingSelectionV1.decode(GOLDEN["pending/PendingSelectionV1"]) == PENDING
    raw = decode(GOLDEN["consumed_seeds/ConsumedSeedsV1"])
    assert isinstance(raw, list)
    assert tuple(ConsumedSeed.from_cbor(x) for x in raw) == CONSUMED


def test_frame_golden_bytes_include_the_spec_fixture_set() -> None:
    """§12.1: at least Hello, HelloAck, JobAck{Accepted}, JobAck{Reject(UnverifiableAssignment)},
    BackpressureSignal, JobAssignment, JobResultCommit, JobResult, Goodbye; an enum-with-payload
    (AckStatus::Reject) and an optional string encoded once as null and once as text."""
    for required in ("frame/Hello", "frame/HelloAck", "frame/JobAck/accepted", "frame/JobAck/reject-text",
                     "frame/BackpressureSignal", "frame/JobAssignment", "frame/JobResultCommit", "frame/JobResult",
                     "frame/Goodbye/signed"):
        assert required in GOLDEN
    reject = FRAMES["frame/JobAck/reject-text"]
    assert isinstance(reject, JobAck) and reject.status.reject_reason is RejectReason.UNVERIFIABLE_ASSIGNMENT
    assert GOLDEN["frame/JobAck/reject-null"].endswith(b"\xf6\x03\x58\x41" + SIG65)  # reason text null
    assert b"\x68bad hash" in GOLDEN["frame/JobAck/reject-text"]                     # reason text as text
