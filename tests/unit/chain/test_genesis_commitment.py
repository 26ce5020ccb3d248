"""genesis.json ``threshold.commitment``: the Feldman commitment binds the group key and every validator's share
key; a multi-validator genesis without it, or disagreeing with it, is refused with the key named."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.chain.genesis import parse_genesis, quorum_threshold
from cowboy_node.consensus.beacon import verify_beacon
from cowboy_node.crypto import bls, threshold
from cowboy_node.node.devgenesis import NetworkGenesis, create_genesis, entropy_bytes
from cowboy_node.types.block import Round
from tests.helpers import ALICE, FEE_RECIPIENT, make_dev_genesis

IDENTITY_G2 = "0x" + (bytes([0xC0]) + bytes(95)).hex()
NON_CANONICAL_G2 = "0x" + (bytes([0xC0]) + bytes(94) + b"\x01").hex()  # infinity flag with a non-zero body


@pytest.fixture(scope="module")
def four() -> NetworkGenesis:
    return create_genesis(chain_id="c-4", n_validators=4, fee_recipients=[FEE_RECIPIENT] * 4, balances={ALICE: 10},
                          system_deployers=(ALICE,), genesis_time_ms=1, entropy=bytes(range(entropy_bytes(4))))


def _doc(net: NetworkGenesis) -> dict[str, Any]:
    return json.loads(net.genesis.raw)  # type: ignore[no-any-return]


def _refused(doc: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        parse_genesis(json.dumps(doc).encode(), "/h/genesis.json")
    assert str(e.value).startswith("/h/genesis.json")
    return e.value


def test_quorum_threshold_is_n_minus_floor_n_minus_1_over_3() -> None:
    assert [quorum_threshold(n) for n in (1, 2, 3, 4, 5, 6, 7, 10, 64)] == [1, 2, 3, 3, 4, 5, 5, 7, 43]


def test_a_valid_four_validator_genesis_loads_with_its_commitment(four: NetworkGenesis) -> None:
    g = parse_genesis(four.genesis.raw)
    assert g.threshold == 3 and len(g.commitment) == 3 and g.commitment[0] == g.group_public_key
    assert [v.bls_share_index for v in g.validators] == [1, 2, 3, 4]
    assert g.share_public_keys() == tuple(v.bls_public_key for v in g.validators)
    assert g.share_public_keys() == tuple(threshold.share_public_key(g.commitment, i) for i in (1, 2, 3, 4))
    assert verify_beacon(g.group_public_key, Round(0, 0), g.genesis_beacon)
    assert g.to_json() == _doc(four)  # genesis_document writes the commitment back


def test_every_dealt_key_share_verifies_against_the_commitment(four: NetworkGenesis) -> None:
    g = four.genesis
    for i, key in enumerate(four.validator_keys):
        share = threshold.Share(key.bls_share_index, int.from_bytes(key.bls_secret, "big"))
        assert share.index == i + 1 and threshold.verify_share(g.commitment, share)
    partials = [(k.bls_share_index, threshold.partial_sign(
        threshold.Share(k.bls_share_index, int.from_bytes(k.bls_secret, "big")), b"m")) for k in four.validator_keys]
    sig = threshold.recover(partials[1:], g.threshold, message=b"m",  # any 3 of the 4 sign for the group
                            public_keys=dict(zip((1, 2, 3, 4), g.share_public_keys(), strict=True)))
    assert bls.verify(g.group_public_key, b"m", sig)


def _swap(doc: dict[str, Any], i: int, j: int, key: str) -> None:
    vs = doc["validators"]
    vs[i][key], vs[j][key] = vs[j][key], vs[i][key]


CASES: list[tuple[str, Callable[[dict[str, Any]], object], str, str]] = [
    ("missing commitment", lambda d: d["threshold"].pop("commitment"), "threshold.commitment", "missing"),
    ("commitment too short", lambda d: d["threshold"]["commitment"].pop(), "threshold.commitment",
     "expected 3 points"),
    ("commitment too long", lambda d: d["threshold"]["commitment"].append(d["threshold"]["commitment"][1]),
     "threshold.commitment", "expected 3 points"),
    ("commitment not an array", lambda d: d["threshold"].update(commitment="0x00"), "threshold.commitment",
     "expected an array"),
    ("commitment[0] is not the group key",
     lambda d: d["threshold"].update(group_public_key=d["validators"][0]["bls_public_key"]),
     "threshold.group_public_key", "must equal threshold.commitment[0]"),
    ("a validator's share key does not match",
     lambda d: d["validators"][1].update(bls_public_key=d["validators"][2]["bls_public_key"]),
     "validators[1].bls_public_key", "does not match share 2"),
    ("share indices out of order", lambda d: _swap(d, 0, 1, "bls_share_index"), "validators[0].bls_share_index",
     "expected 1"),
    ("validators reordered (keys and indices travel together)",
     lambda d: d["validators"].__setitem__(slice(0, 2), d["validators"][1::-1]), "validators[0].bls_share_index",
     "expected 1"),
    ("threshold below the quorum", lambda d: d["threshold"].update(threshold=2), "threshold.threshold",
     "must be 3 for 4 validators"),
    ("threshold above n", lambda d: d["threshold"].update(threshold=5), "threshold.threshold", "must be ≤"),
    ("duplicate ed25519 key", lambda d: d["validators"][3].update(
        ed25519_public_key=d["validators"][1]["ed25519_public_key"]), "validators[3].ed25519_public_key",
     "duplicate of validators[1]"),
    ("identity point in the commitment", lambda d: d["threshold"]["commitment"].__setitem__(2, IDENTITY_G2),
     "threshold.commitment[2]", "not a valid G2 point"),
    ("non-canonical point in the commitment",
     lambda d: d["threshold"]["commitment"].__setitem__(1, NON_CANONICAL_G2), "threshold.commitment[1]",
     "not a valid G2 point"),
    ("commitment point of the wrong length", lambda d: d["threshold"]["commitment"].__setitem__(1, "0x1234"),
     "threshold.commitment[1]", "expected 96 bytes"),
    ("identity group key", lambda d: d["threshold"].update(group_public_key=IDENTITY_G2),
     "threshold.group_public_key", "not a valid G2 point"),
    ("unknown key in threshold", lambda d: d["threshold"].update(shares=[]), "threshold", "unknown keys"),
]


@pytest.mark.parametrize("mutate,key,fragment", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_multi_validator_genesis_names_the_key(four: NetworkGenesis, mutate: Callable[[dict[str, Any]], object],
                                                       key: str, fragment: str) -> None:
    doc = _doc(four)
    mutate(doc)
    e = _refused(doc)
    assert e.key == key, str(e)
    assert fragment in str(e)


def test_commitment_of_another_dealing_is_refused(four: NetworkGenesis) -> None:
    other = create_genesis(chain_id="c-4", n_validators=4, fee_recipients=[FEE_RECIPIENT] * 4, balances={},
                           system_deployers=(), genesis_time_ms=1, entropy=bytes(reversed(range(entropy_bytes(4)))))
    doc = _doc(four)
    doc["threshold"]["commitment"] = _doc(other)["threshold"]["commitment"]
    assert _refused(doc).key == "threshold.group_public_key"
    doc["threshold"]["group_public_key"] = _doc(other)["threshold"]["group_public_key"]
    assert _refused(doc).key == "validators[0].bls_public_key"


def test_single_validator_genesis_without_commitment_still_loads() -> None:
    dev = make_dev_genesis()
    doc = json.loads(dev.genesis.raw)
    assert len(doc["threshold"]["commitment"]) == 1  # init writes it now
    doc["threshold"].pop("commitment")  # the format before the commitment existed
    g = parse_genesis(json.dumps(doc).encode())
    assert g.commitment == () and g.threshold == 1
    assert g.share_public_keys() == (g.validators[0].bls_public_key,) == (g.group_public_key,)
    assert "commitment" not in g.to_json()["threshold"]


def test_single_validator_genesis_without_commitment_needs_share_key_equal_to_group_key() -> None:
    doc = json.loads(make_dev_genesis().genesis.raw)
    doc["threshold"].pop("commitment")
    doc["validators"][0]["bls_public_key"] = "0x" + bls.public_key(7).hex()  # a valid point, not the group key
    assert _refused(doc).key == "validators[0].bls_public_key"


def test_dev_genesis_writes_a_one_point_commitment_equal_to_the_group_key() -> None:
    g = make_dev_genesis().genesis
    assert g.commitment == (g.group_public_key,)
    assert g.share_public_keys() == (g.group_public_key,)
