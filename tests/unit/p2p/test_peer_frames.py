"""Validator peer layer, sans-I/O: golden bytes (pinned in docs/protocol.md), strict decoding, the framing reader,
the handshake checks with their typed reasons, the token bucket."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cowboy_node.observability.peer_metrics import HANDSHAKE_FAILURE_REASONS
from cowboy_node.p2p.peer_frames import (
    HANDSHAKE_FAILURES,
    KIND_DATA,
    Data,
    FrameReader,
    Goodbye,
    HandshakeError,
    Hello,
    PeerFrameError,
    TokenBucket,
    decode_body,
    encode_frame,
    hello_preimage,
    make_hello,
    verify_hello,
)
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
_BLOCK = re.compile(r"^```p2p-golden ([\w./-]+)\n(.*?)^```", re.M | re.S)

NETWORK_ID = bytes(range(32))
BINDING = bytes(range(0xA0, 0xC0))
SEEDS = [bytes([i]) * 32 for i in range(3)]  # validator i has seed i×32 (0, 1, 2)
KEYS = tuple(ed25519.public_key_from_seed(s) for s in SEEDS)


def _doc_vectors() -> dict[str, bytes]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Validator peer layer"):]
    out: dict[str, bytes] = {}
    for name, body in _BLOCK.findall(section):
        assert name not in out, f"duplicate p2p-golden block {name}"
        out[name] = bytes.fromhex("".join(body.split()))
    return out


SOFTWARE = "cowboy-node/0.1.0"
"""The golden frames' software version (fixed: the real one changes with every release)."""


def _computed_vectors() -> dict[str, bytes]:
    hello = make_hello(ed25519.PreparedSigner(SEEDS[1]), network_id=NETWORK_ID, role=0, index=1, binding=BINDING,
                       software=SOFTWARE)
    ack = make_hello(ed25519.PreparedSigner(SEEDS[2]), network_id=NETWORK_ID, role=1, index=2, binding=BINDING,
                     software=SOFTWARE)
    old = make_hello(ed25519.PreparedSigner(SEEDS[1]), network_id=NETWORK_ID, role=0, index=1, binding=BINDING,
                     software="")
    return {
        "frame/hello_without_software": encode_frame(old),
        "preimage/hello": hello_preimage(NETWORK_ID, 0, 1, BINDING),
        "preimage/hello_ack": hello_preimage(NETWORK_ID, 1, 2, BINDING),
        "frame/hello": encode_frame(hello),
        "frame/hello_ack": encode_frame(ack),
        "frame/data": encode_frame(Data(1, b"block")),
        "frame/goodbye": encode_frame(Goodbye("wrong_network")),
    }


def test_every_peer_frame_and_the_preimage_match_the_golden_bytes_in_docs_protocol_md() -> None:
    assert _doc_vectors() == _computed_vectors()


def test_golden_preimage_is_assembled_exactly_as_documented() -> None:
    expected = b"cowboy-p2p-hello-v1:" + NETWORK_ID + b"\x00" + b"\x00\x01" + BINDING
    assert _doc_vectors()["preimage/hello"] == expected


@pytest.mark.parametrize("name", ["frame/hello", "frame/hello_ack", "frame/hello_without_software", "frame/data",
                                  "frame/goodbye"])
def test_golden_frames_decode_back_to_their_value(name: str) -> None:
    raw = _doc_vectors()[name]
    assert int.from_bytes(raw[:4], "big") == len(raw) - 4
    frame = decode_body(raw[4:])
    assert encode_frame(frame) == raw


def test_golden_signatures_verify_under_the_validator_keys() -> None:
    vec = _doc_vectors()
    hello = decode_body(vec["frame/hello"][4:])
    ack = decode_body(vec["frame/hello_ack"][4:])
    assert verify_hello(hello, role=0, network_id=NETWORK_ID, me=0, validator_keys=KEYS, binding=BINDING,
                        expected_index=None) == 1
    assert verify_hello(ack, role=1, network_id=NETWORK_ID, me=1, validator_keys=KEYS, binding=BINDING,
                        expected_index=2) == 2


def test_handshake_failure_reasons_are_the_metric_labels() -> None:
    assert HANDSHAKE_FAILURES == HANDSHAKE_FAILURE_REASONS


# --- strict decoding ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    b"\xff\x00garbage",                                   # not CBOR
    encode([0, 1]),                                       # not a map
    encode({0: 9}),                                       # unknown kind
    encode({0: KIND_DATA, 1: 0}),                         # missing payload
    encode({0: KIND_DATA, 1: 0, 2: b"x", 3: 1}),          # extra key
    encode({0: KIND_DATA, 1: 256, 2: b"x"}),              # channel out of range
    encode({0: KIND_DATA, 1: 0, 2: "text"}),              # payload not bytes
    encode({0: 0, 1: 1, 2: b"short", 3: 1, 4: bytes(64)}),  # network_id not 32 bytes
    encode({0: 0, 1: 1, 2: bytes(32), 3: 1, 4: bytes(63)}),  # signature not 64 bytes
    encode({0: 3, 1: "x" * 257}),                         # Goodbye reason too long
    bytes.fromhex("a3") + bytes.fromhex("1800") + bytes.fromhex("02010a0241aa"),  # non-shortest key 0
    encode({0: KIND_DATA, 1: 0, 2: b"x"}) + b"\x00",      # trailing byte
    encode({0: KIND_DATA, 1: {0: 1}, 2: b"x"}),           # nested map where an int belongs
], ids=lambda b: b.hex()[:24])
def test_decoder_refuses_any_body_that_is_not_a_canonical_frame(body: bytes) -> None:
    with pytest.raises(PeerFrameError) as e:
        decode_body(body)
    assert e.value.code == "bad_frame"


# --- framing reader ----------------------------------------------------------------------------------------------


def test_reader_reassembles_frames_split_at_every_byte() -> None:
    stream = encode_frame(Data(0, b"a" * 300)) + encode_frame(Data(3, b"")) + encode_frame(Goodbye("bye"))
    reader = FrameReader(max_body=1000)
    bodies: list[bytes] = []
    for i in range(len(stream)):
        bodies += reader.feed(stream[i:i + 1])
    assert [decode_body(b) for b in bodies] == [Data(0, b"a" * 300), Data(3, b""), Goodbye("bye")]
    assert reader.buffered == 0
    assert FrameReader(max_body=1000).feed(stream) == bodies


def test_reader_refuses_an_oversized_length_from_its_prefix_alone() -> None:
    reader = FrameReader(max_body=1024 + 64)
    assert reader.feed((1024 + 64).to_bytes(4, "big")[:3]) == []
    assert reader.error is None
    ok = encode_frame(Data(0, b"fine"))
    reader = FrameReader(max_body=1024 + 64)
    assert reader.feed(ok + (1024 + 65).to_bytes(4, "big")) == [ok[4:]]  # what came before is still delivered
    assert reader.error is not None and reader.error.code == "frame_too_large"
    assert reader.feed(b"x" * 100) == [] and reader.buffered == 0  # nothing after the bad prefix is kept
    reader = FrameReader(max_body=1024)
    assert reader.feed(b"\x00\x00\x00\x00") == []
    assert reader.error is not None and reader.error.code == "bad_frame"


def test_reader_accepts_a_frame_of_exactly_the_cap() -> None:
    body = b"\x00" * 100
    assert FrameReader(max_body=100).feed(len(body).to_bytes(4, "big") + body) == [body]


# --- handshake checks --------------------------------------------------------------------------------------------


def _hello(seed: bytes, *, index: int, role: int = 0, network_id: bytes = NETWORK_ID,
           binding: bytes = BINDING) -> Hello:
    return make_hello(ed25519.PreparedSigner(seed), network_id=network_id, role=role, index=index, binding=binding)


def _reason(frame: Hello | Data, *, role: int = 0, me: int = 0, expected: int | None = None) -> str:
    with pytest.raises(HandshakeError) as e:
        verify_hello(frame, role=role, network_id=NETWORK_ID, me=me, validator_keys=KEYS, binding=BINDING,
                     expected_index=expected)
    return e.value.reason


def test_hello_checks_refuse_with_the_named_reason() -> None:
    assert _reason(_hello(SEEDS[1], index=1, network_id=bytes(32))) == "wrong_network"
    assert _reason(_hello(SEEDS[1], index=7)) == "unknown_validator"
    assert _reason(_hello(SEEDS[0], index=0)) == "unexpected_identity"  # our own index
    assert _reason(_hello(SEEDS[2], index=2, role=1), role=1, expected=1) == "unexpected_identity"  # not who we dialed
    assert _reason(_hello(b"\x09" * 32, index=1)) == "bad_signature"  # an impostor key for index 1
    assert _reason(_hello(SEEDS[1], index=1, binding=bytes(32))) == "bad_signature"  # another TLS channel
    assert _reason(_hello(SEEDS[1], index=1, role=1)) == "bad_frame"  # a HelloAck where a Hello belongs
    assert _reason(Data(0, b"x")) == "bad_frame"  # Data before the handshake
    v2 = Hello(role=0, network_id=NETWORK_ID, index=1, signature=_hello(SEEDS[1], index=1).signature, version=2)
    assert _reason(v2) == "incompatible_version"


def test_a_hello_of_another_protocol_version_is_refused_by_name_whatever_its_other_keys() -> None:
    future = encode({0: 0, 1: 2, 2: NETWORK_ID, 3: 1, 4: bytes(64), 5: "cowboy-node/9.0.0", 6: b"new field"})
    frame = decode_body(future)
    assert isinstance(frame, Hello) and frame.version == 2 and frame.software == "cowboy-node/9.0.0"
    with pytest.raises(HandshakeError) as e:
        verify_hello(frame, role=0, network_id=NETWORK_ID, me=0, validator_keys=KEYS, binding=BINDING,
                     expected_index=None)
    assert e.value.reason == "incompatible_version" and "cowboy-node/9.0.0" in e.value.detail
    v0 = decode_body(encode({0: 1, 1: 0, 2: NETWORK_ID, 3: 2, 4: bytes(64)}))
    assert _reason(v0, role=1) == "incompatible_version"


def test_hello_carries_the_software_version_and_one_without_it_is_still_accepted() -> None:
    from cowboy_node.p2p.peer_frames import SOFTWARE_VERSION

    sent = decode_body(encode_frame(_hello(SEEDS[1], index=1))[4:])
    assert isinstance(sent, Hello) and sent.software == SOFTWARE_VERSION and SOFTWARE_VERSION.startswith("cowboy-node/")
    old = decode_body(_doc_vectors()["frame/hello_without_software"][4:])
    assert isinstance(old, Hello) and old.software == ""
    assert verify_hello(old, role=0, network_id=NETWORK_ID, me=0, validator_keys=KEYS, binding=BINDING,
                        expected_index=None) == 1


def test_hello_signed_for_the_other_role_does_not_verify() -> None:
    hello = _hello(SEEDS[1], index=1, role=0)
    as_ack = Hello(role=1, network_id=NETWORK_ID, index=1, signature=hello.signature)
    assert _reason(as_ack, role=1, expected=1) == "bad_signature"


# --- token bucket ------------------------------------------------------------------------------------------------


def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    bucket = TokenBucket(rate=10.0, burst=20.0, now=100.0)
    assert sum(bucket.take(1.0, 100.0) for _ in range(50)) == 20
    assert sum(bucket.take(1.0, 100.5) for _ in range(50)) == 5
    assert not bucket.take(30.0, 1000.0)  # never more than the burst, however long it waited
    assert bucket.take(20.0, 1000.0)
