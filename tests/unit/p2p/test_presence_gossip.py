"""Mode-B presence gossip (CIP-11 §8.2): golden bytes, the acceptance rules, expiry and the proposer's union."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from cowboy_node.p2p.presence_gossip import (
    GOSSIP_TTL_BLOCKS,
    MAX_HEIGHT_AHEAD,
    PRESENCE_DOMAIN,
    GossipRefused,
    PresenceAnnouncement,
    PresenceGossip,
    make_announcement,
)
from cowboy_protocol.crypto import ed25519

GENESIS = bytes([0x47]) * 32
SEEDS = [bytes([i + 1]) * 32 for i in range(4)]
KEYS = tuple(ed25519.public_key_from_seed(s) for s in SEEDS)


def _book(refused: list[str] | None = None) -> PresenceGossip:
    return PresenceGossip(GENESIS, KEYS, KEYS[0], on_refused=(refused.append if refused is not None else None))


def _ann(who: int, height: int, present: set[int], basis: int = 16, genesis: bytes = GENESIS) -> bytes:
    return make_announcement(SEEDS[who], genesis, height, basis, frozenset(present)).encode()


def test_golden_bytes_and_a_signature_another_library_verifies() -> None:
    a = make_announcement(SEEDS[1], GENESIS, 5, 16, frozenset({0, 9}))
    # PresenceInputV1 over 16 runners: bitmap (2 + 2 bytes) beats sparse (2 + 4 + 8): 01 00 | 01 02.
    presence = bytes.fromhex("0100" "0102")
    fields = (bytes.fromhex("a4" "00" "5820") + KEYS[1] + bytes.fromhex("01" "05" "02" "10" "03" "44") + presence)
    assert a.presence == presence
    assert a.preimage(GENESIS) == PRESENCE_DOMAIN + GENESIS + fields
    assert a.encode() == bytes.fromhex("a5") + fields[1:] + bytes.fromhex("04" "5840") + a.signature
    # pyca/cryptography (OpenSSL), not the node's PyNaCl, checks the signature over the preimage.
    Ed25519PublicKey.from_public_bytes(KEYS[1]).verify(a.signature, a.preimage(GENESIS))
    assert Ed25519PrivateKey.from_private_bytes(SEEDS[1]).sign(a.preimage(GENESIS)) == a.signature
    assert PresenceAnnouncement.decode(a.encode()) == a


def test_accepted_announcements_are_unioned_until_they_expire() -> None:
    book = _book()
    book.receive(1, _ann(1, 10, {1, 3}), head_height=10)
    book.receive(2, _ann(2, 11, {3, 7, 15}), head_height=10)
    assert book.union(10, registry_size=16) == {1, 3, 7, 15}
    assert book.union(10, registry_size=8) == {1, 3, 7}  # cut to the parent's registry basis
    assert book.union(10 + GOSSIP_TTL_BLOCKS, 16) == {1, 3, 7, 15}
    assert book.union(11 + GOSSIP_TTL_BLOCKS, 16) == {3, 7, 15}  # validator 1's is too old now
    assert book.union(12 + GOSSIP_TTL_BLOCKS, 16) == frozenset()
    book.receive(1, _ann(1, 12, set()), head_height=12)  # a newer, empty view replaces the old one
    assert book.union(12, 16) == {3, 7, 15}


@pytest.mark.parametrize(("sender", "data", "reason"), [
    (1, b"\xa0", "malformed"),
    (1, _ann(1, 10, {20}, basis=21)[:-3], "malformed"),
    (1, make_announcement(SEEDS[1], GENESIS, 10, 21, frozenset({20})).encode().replace(b"\x15", b"\x14", 1),
     "malformed"),                                                        # registry_size 20: bit 20 beyond it
    (0, _ann(0, 10, {1}), "not_a_validator"),                           # our own key echoed back
    (2, _ann(1, 10, {1}), "wrong_sender"),                              # validator 1's, sent by validator 2
    (1, _ann(1, 10, {1}, genesis=bytes(32)), "bad_signature"),          # signed for another chain
    (1, _ann(1, 10 + 1 + MAX_HEIGHT_AHEAD, {1}), "from_the_future"),
])
def test_refused_announcements_change_nothing(sender: int, data: bytes, reason: str) -> None:
    refused: list[str] = []
    book = _book(refused)
    book.receive(3, _ann(3, 9, {2}), head_height=10)
    with pytest.raises(GossipRefused) as e:
        book.receive(sender, data, head_height=10)
    assert e.value.reason == reason and refused == [reason]
    assert book.union(10, 64) == {2}


def test_a_stranger_is_not_a_validator() -> None:
    stranger = bytes([9]) * 32
    a = make_announcement(stranger, GENESIS, 10, 4, frozenset({1})).encode()
    with pytest.raises(GossipRefused) as e:
        _book().receive(1, a, head_height=10)
    assert e.value.reason == "not_a_validator"


def test_replays_and_older_announcements_are_stale() -> None:
    book = _book()
    first = _ann(1, 10, {1})
    book.receive(1, first, head_height=10)
    for data in (first, _ann(1, 9, {1, 2})):
        with pytest.raises(GossipRefused) as e:
            book.receive(1, data, head_height=10)
        assert e.value.reason == "stale"
    assert book.union(10, 16) == {1}


def test_a_tampered_presence_set_does_not_verify() -> None:
    a = make_announcement(SEEDS[1], GENESIS, 10, 16, frozenset({1}))
    forged = PresenceAnnouncement(a.validator_pubkey, a.height, a.registry_size, bytes.fromhex("0100" "0302"),
                                  a.signature)
    with pytest.raises(GossipRefused) as e:
        _book().receive(1, forged.encode(), head_height=10)
    assert e.value.reason == "bad_signature"
