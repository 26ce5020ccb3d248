"""Validators announce their runner-facing QUIC endpoints to each other (golden bytes, acceptance rules), and a
runner plans its Sub(R) sessions from what ``GET /validators`` lists."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from cowboy_node.p2p.endpoint_gossip import (
    ENDPOINT_DOMAIN,
    EndpointAnnouncement,
    EndpointBook,
    EndpointRefused,
    make_endpoint_announcement,
)
from cowboy_protocol.crypto import ed25519
from cowboy_runner.sessions_plan import discovered_endpoints, discovered_rpc_urls

GENESIS = bytes([0x47]) * 32
SEEDS = [bytes([i + 1]) * 32 for i in range(4)]
KEYS = tuple(ed25519.public_key_from_seed(s) for s in SEEDS)


def test_golden_bytes() -> None:
    a = make_endpoint_announcement(SEEDS[1], GENESIS, "10.0.0.2:4433", 7, rpc="http://10.0.0.2:4000")
    # {0: K, 1: "10.0.0.2:4433" (text 13), 2: "http://10.0.0.2:4000" (text 20), 3: 7}
    fields = (bytes.fromhex("a4" "00" "5820") + KEYS[1] + bytes.fromhex("01" "6d") + b"10.0.0.2:4433"
              + bytes.fromhex("02" "74") + b"http://10.0.0.2:4000" + b"\x03\x07")
    assert a.preimage(GENESIS) == ENDPOINT_DOMAIN + GENESIS + fields
    assert a.encode() == b"\xa5" + fields[1:] + bytes.fromhex("04" "5840") + a.signature
    Ed25519PublicKey.from_public_bytes(KEYS[1]).verify(a.signature, a.preimage(GENESIS))
    assert EndpointAnnouncement.decode(a.encode()) == a
    book = EndpointBook(GENESIS, KEYS, KEYS[0])
    book.receive(1, a.encode())
    assert (book.endpoint(KEYS[1]), book.rpc_url(KEYS[1])) == ("10.0.0.2:4433", "http://10.0.0.2:4000")


def test_newest_accepted_endpoint_wins() -> None:
    book = EndpointBook(GENESIS, KEYS, KEYS[0])
    assert book.endpoint(KEYS[1]) is None
    book.receive(1, make_endpoint_announcement(SEEDS[1], GENESIS, "10.0.0.2:4433", 7).encode())
    book.receive(1, make_endpoint_announcement(SEEDS[1], GENESIS, "[::1]:5000", 8).encode())
    assert book.endpoint(KEYS[1]) == "[::1]:5000"


@pytest.mark.parametrize(("sender", "data", "reason"), [
    (1, b"\x00", "malformed"),
    (1, make_endpoint_announcement(SEEDS[1], GENESIS, "no-port", 9).encode(), "malformed"),
    (1, make_endpoint_announcement(SEEDS[1], GENESIS, "a b:1", 9).encode(), "malformed"),
    (1, make_endpoint_announcement(SEEDS[1], GENESIS, "10.0.0.9:1", 9, rpc="ftp://x:1").encode(), "malformed"),
    (1, make_endpoint_announcement(SEEDS[1], GENESIS, "10.0.0.9:1", 9, rpc="http://x:1/p?q").encode(), "malformed"),
    (0, make_endpoint_announcement(SEEDS[0], GENESIS, "10.0.0.1:1", 9).encode(), "not_a_validator"),
    (2, make_endpoint_announcement(SEEDS[1], GENESIS, "10.0.0.9:1", 9).encode(), "wrong_sender"),
    (1, make_endpoint_announcement(SEEDS[1], bytes(32), "10.0.0.9:1", 9).encode(), "bad_signature"),
    (1, make_endpoint_announcement(SEEDS[1], GENESIS, "10.0.0.9:1", 5).encode(), "stale"),
])
def test_refusals_keep_the_last_good_endpoint(sender: int, data: bytes, reason: str) -> None:
    book = EndpointBook(GENESIS, KEYS, KEYS[0])
    book.receive(1, make_endpoint_announcement(SEEDS[1], GENESIS, "10.0.0.2:4433", 5).encode())
    with pytest.raises(EndpointRefused) as e:
        book.receive(sender, data)
    assert e.value.reason == reason
    assert book.endpoint(KEYS[1]) == "10.0.0.2:4433"


def test_the_runner_reads_endpoints_from_get_validators_and_skips_bad_entries() -> None:
    doc = {"validators": [
        {"ed25519_public_key": "0x" + KEYS[0].hex(), "quic_endpoint": "127.0.0.1:4433"},
        {"ed25519_public_key": "0x" + KEYS[1].hex(), "quic_endpoint": None},          # not announced yet
        {"ed25519_public_key": "0x" + KEYS[2].hex(), "quic_endpoint": "[::1]:5000"},
        {"ed25519_public_key": "0x" + KEYS[3].hex(), "quic_endpoint": "nonsense"},
        {"ed25519_public_key": "0x12", "quic_endpoint": "127.0.0.1:1"},
    ]}
    found, problems = discovered_endpoints(doc)
    assert found == {KEYS[0]: ("127.0.0.1", 4433), KEYS[2]: ("::1", 5000)}
    assert len(problems) == 2
    assert discovered_endpoints(None) == ({}, ())
    doc["validators"][0]["rpc_url"] = "http://127.0.0.1:4000"
    doc["validators"][2]["rpc_url"] = None
    assert discovered_rpc_urls(doc) == ["http://127.0.0.1:4000"] and discovered_rpc_urls(None) == []
