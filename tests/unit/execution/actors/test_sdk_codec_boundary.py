"""Two canonical CBORs meet at the actor boundary (docs/actors.md "Two canonical CBORs").

Protocol objects use the node's CIP-11 profile (``cowboy_protocol.codec``: keys in bytewise order of their
encodings, -0.0 kept, integers within 64 bits); everything an actor produces or consumes uses the SDK's
``cowboy_sdk.codec`` (keys length-first, -0.0 folded into 0.0, bignums past 64 bits). The goldens below were
worked out by hand from RFC 8949; the differential runs seeded random actor values through both codecs and
through the node paths that carry actor data (runner_job messages in, runner replies out), which must follow
the SDK byte for byte.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from cowboy_sdk import codec as sdk_codec
from cowboy_sdk import runner as sdk_runner

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.jobs import sdk_jobs
from cowboy_protocol import codec as node_codec
from tests.unit.eob_helpers import make_world

ACTOR = b"\x33" * 20
CID = bytes(range(32))
JOB_ID = b"\x44" * 32


# --- goldens (hand-encoded) ---------------------------------------------------------------------------
def test_map_key_order_differs_between_the_profiles() -> None:
    value = {256: 0, -1: 0}
    # key 256 = 19 0100 (3 bytes), key -1 = 20 (1 byte): bytewise 0x19 < 0x20; length-first 1 byte < 3 bytes
    node = bytes.fromhex("a2" "190100" "00" "20" "00")
    sdk = bytes.fromhex("a2" "20" "00" "190100" "00")
    assert node_codec.encode(value) == node and sdk_codec.encode(value) == sdk
    with pytest.raises(node_codec.CodecError) as err:
        node_codec.decode(sdk)
    assert err.value.code == "unsorted_map_keys"
    with pytest.raises(sdk_codec.CodecError):
        sdk_codec.decode(node)


def test_negative_zero_and_bignums_differ() -> None:
    assert node_codec.encode(-0.0) == bytes.fromhex("fb8000000000000000")
    assert sdk_codec.encode(-0.0) == bytes.fromhex("fb0000000000000000")  # folded into 0.0
    # 2**64: tag 2 (c2) over the 9-byte big-endian magnitude 01 00..00; the node profile has no tags
    assert sdk_codec.encode(2**64) == bytes.fromhex("c2" "49" "01" + "00" * 8)
    with pytest.raises(node_codec.CodecError) as err:
        node_codec.encode(2**64)
    assert err.value.code == "int_out_of_range"
    with pytest.raises(node_codec.CodecError) as err:
        node_codec.decode(sdk_codec.encode(2**64))
    assert err.value.code == "tag_not_allowed"


def test_node_encoder_refuses_what_its_decoder_refuses() -> None:
    def nest(n: int, leaf: Any = 0) -> Any:
        v: Any = leaf
        for _ in range(n):
            v = [v]
        return v

    deepest = node_codec.encode(nest(node_codec.cbor.MAX_DEPTH))
    assert deepest == b"\x81" * 64 + b"\x00" and node_codec.decode(deepest) == nest(64)
    for too_deep in (nest(65), {0: nest(64)}, nest(64, leaf=[]), nest(64, leaf={})):  # 65 arrays/maps each
        with pytest.raises(node_codec.CodecError) as err:
            node_codec.encode(too_deep)
        assert err.value.code == "nesting_too_deep"


# --- the differential ---------------------------------------------------------------------------------
def _scalar(rng: random.Random) -> Any:
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice([0, 1, -1, 23, 24, 255, 256, -257, 2**32, 2**63 - 1, -(2**63), 2**64 - 1, -(2**64)])
    if kind == 1:
        return rng.choice([2**64, -(2**64) - 1, 2**100, -(2**200)])  # past 64 bits
    if kind == 2:
        return rng.choice([0.0, -0.0, 1.5, -2.25, 1e300, 0.1])
    if kind == 3:
        return "".join(rng.choice("aé€😀 z") for _ in range(rng.randrange(6)))
    if kind == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(5)))
    if kind == 5:
        return rng.choice([True, False, None])
    return rng.randrange(-1000, 1000)


def _key(rng: random.Random) -> Any:
    return rng.choice([rng.randrange(-300, 300), "k" * rng.randrange(1, 30), rng.choice(["a", "é", "bb", ""])])


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(4) if depth < 4 else 0
    if kind == 1:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 2:
        return {_key(rng): _value(rng, depth + 1) for _ in range(rng.randrange(5))}
    return _scalar(rng)


VALUES = [_value(random.Random(seed)) for seed in range(400)]


def _node_bytes(v: Any) -> bytes | None:
    try:
        return node_codec.encode(v)
    except node_codec.CodecError:
        return None


def test_the_profiles_disagree_on_a_share_of_actor_values() -> None:
    differ = sum(_node_bytes(v) != sdk_codec.encode(v) for v in VALUES)
    # not asserted exactly (a property of the generator); the point is that the difference is real
    assert 0.1 * len(VALUES) < differ < len(VALUES)


@pytest.mark.parametrize("seed", range(0, 400, 4))
def test_runner_job_messages_are_read_with_the_sdk_codec(seed: int) -> None:
    value = VALUES[seed]
    msg = sdk_codec.encode({"kind": "runner_job", "job_type": "mcp",
                            "payload": {"args": [], "kwargs": {"server": "s", "tool": "t", "x": value}},
                            "cid": CID, "reply_handler": "f__resume"})
    job = sdk_jobs.parse_message(msg)
    assert sdk_codec.encode(job.kwargs["x"]) == sdk_codec.encode(value)  # exactly what the SDK sent
    assert (job.job_type, job.cid, job.reply_handler) == ("mcp", CID, "f__resume")


def test_some_runner_job_messages_would_be_refused_by_the_node_profile() -> None:
    refused = 0
    for value in VALUES:
        msg = sdk_codec.encode({"kind": "runner_job", "job_type": "mcp", "cid": CID, "reply_handler": "f__resume",
                                "payload": {"args": [], "kwargs": {"x": value}}})
        try:
            node_codec.decode(msg)
        except node_codec.CodecError:
            refused += 1
    assert refused > 0  # why the bridge must not use the node's strict decoder


def _json_domain(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(5) if depth < 3 else rng.randrange(3)
    if kind == 0:
        return rng.choice([0, -1, 2**53, 2**64 - 1, 2**70, "é😀", "", True, None])
    if kind == 1:
        return rng.choice([1.5, -0.25, 1e300])
    if kind == 2:
        return "".join(rng.choice("ab€") for _ in range(rng.randrange(4)))
    if kind == 3:
        return [_json_domain(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {("k" * rng.randrange(1, 30)): _json_domain(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("seed", range(60))
def test_runner_replies_are_sdk_bytes_the_sdk_reads_back(seed: int) -> None:
    value = _json_domain(random.Random(seed))
    body = json.dumps(value, ensure_ascii=False).encode()
    world = make_world()
    store.set_state(world, ACTOR, sdk_jobs.CONT_KEY_PREFIX + CID, b"\xa0")
    world.set(sdk_jobs.PREFIX + JOB_ID, sdk_jobs.SdkJob(ACTOR, CID, "f__resume", "http").encode())
    callback = node_codec.encode({0: JOB_ID, 1: True, 2: body, 3: "verified", 4: "", 5: CID, 6: None})
    reply = sdk_jobs.reply_for(world, callback, ACTOR)
    assert reply is not None and reply.payload is not None
    expected = {"cid": CID.hex(), "result": value, "reply_handler": "f__resume", "correlation_id": None}
    assert reply.payload == sdk_codec.encode(expected)
    cid, result = sdk_runner._extract_result(reply.payload)  # type: ignore[attr-defined]
    assert (cid, sdk_codec.encode(result)) == (CID, sdk_codec.encode(value))
