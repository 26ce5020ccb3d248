"""``GET /validators`` and ``GET /consensus/evidence`` against a real node (docs/api.md)."""

from __future__ import annotations

from cowboy_node.consensus.evidence import Evidence
from cowboy_node.types.block import Round
from cowboy_protocol.transport.preimages import validator_set_hash
from tests.unit.node_harness import expect_error, expect_ok, make_node, read_only_client


async def test_validators_lists_the_snapshot_from_state() -> None:
    node = make_node()
    try:
        async with read_only_client(node) as c:
            assert (await expect_ok(await c.get("/validators")))["validators"][0]["quic_endpoint"] is None
    finally:
        node.close()
    node = make_node(quic_advertise="127.0.0.1:4433")  # what start-up gives when the transport runs
    try:
        async with read_only_client(node) as c:
            doc = await expect_ok(await c.get("/validators"))
        g = node.chain.genesis
        keys = [v.ed25519_public_key for v in g.validators]
        assert doc["subset_epoch"] == 0
        assert doc["validator_set_hash"] == "0x" + validator_set_hash(keys).hex()
        assert [v["ed25519_public_key"] for v in doc["validators"]] == ["0x" + k.hex() for k in keys]
        assert doc["validators"][0]["self"] is True and doc["validators"][0]["index"] == 0
        assert doc["validators"][0]["quic_endpoint"] == "127.0.0.1:4433"
        assert doc["validators"][0]["bls_public_key"] == "0x" + g.validators[0].bls_public_key.hex()
    finally:
        node.close()


async def test_evidence_is_served_newest_last_and_limits_are_checked() -> None:
    node = make_node()
    try:
        for view in (3, 4, 5):
            node.consensus.evidence.add(Evidence(0, Round(0, view), "bad notarize signature", view))
        async with read_only_client(node) as c:
            doc = await expect_ok(await c.get("/consensus/evidence?limit=2"))
            assert doc["count"] == 3 and [e["view"] for e in doc["evidence"]] == [4, 5]
            assert doc["evidence"][0]["reason"] == "bad notarize signature"
            await expect_error(await c.get("/consensus/evidence?limit=0"), 400, "invalid_limit")
            await expect_error(await c.get("/consensus/evidence?limit=x"), 400, "invalid_limit")
            status = await expect_ok(await c.get("/status"))
            assert status["consensus"]["evidence"] == 3
    finally:
        node.close()
