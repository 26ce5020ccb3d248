"""Actor address derivation, the ActorRecord encoding, state keys and the code cache."""

from __future__ import annotations

import pytest

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.actor_record import ActorRecord, derive_actor_address
from cowboy_node.execution.actors.codecache import CodeCache
from cowboy_node.execution.pvm import ActorRejected
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.validation_errors import DecodeError

CREATOR = bytes.fromhex("11" * 20)
SALT = bytes([1, 2])
SOURCE = "def f(p):\n    return p\n"


def test_address_is_last_20_bytes_of_keccak_of_creator_salt_source_hash() -> None:
    by_hand = keccak256(CREATOR + SALT + keccak256(SOURCE.encode("utf-8")))[12:]
    assert keccak256(SOURCE.encode()).hex() == "4b1255cee5afa2dbf3e089f9582ba55662d435c72a2d2a911d6c32a4705f9cbb"
    assert by_hand.hex() == "87c9ae61f3efdc1ca5c1ce5c9710b43eff2db6f5"
    assert derive_actor_address(CREATOR, SALT, SOURCE) == by_hand


def test_address_depends_on_every_input() -> None:
    base = derive_actor_address(CREATOR, SALT, SOURCE)
    assert derive_actor_address(bytes(20), SALT, SOURCE) != base
    assert derive_actor_address(CREATOR, b"", SOURCE) != base
    assert derive_actor_address(CREATOR, SALT, SOURCE + " ") != base
    with pytest.raises(ValueError):
        derive_actor_address(b"\x11" * 19, SALT, SOURCE)


def test_record_golden_cbor() -> None:
    h = bytes(range(32))
    rec = ActorRecord(source_hash=h, creator=CREATOR, deployed_at=7, handlers=("a", "bc"), source_len=300)
    expected = (bytes.fromhex("a5" "00" "5820") + h + bytes.fromhex("01" "54") + CREATOR
                + bytes.fromhex("02" "07" "03" "82" "6161" "626263" "04" "19012c"))
    assert rec.encode() == expected
    assert ActorRecord.decode(expected) == rec


_H = bytes.fromhex("00" "5820") + bytes(32)
_C = bytes.fromhex("01" "54") + CREATOR


@pytest.mark.parametrize("raw", [
    bytes.fromhex("a4") + _H + _C + bytes.fromhex("0207" "0380"),  # source_len missing
    bytes.fromhex("a5" "00" "41" "00") + _C + bytes.fromhex("0207" "0380" "0400"),  # short source hash
    bytes.fromhex("a5") + _H + _C + bytes.fromhex("0207" "0301" "0400"),  # handlers not an array
    bytes.fromhex("a5") + _H + _C + bytes.fromhex("0207" "0380" "0420"),  # negative source_len
])
def test_record_decode_is_strict(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        ActorRecord.decode(raw)


def test_state_keys_golden() -> None:
    addr = bytes.fromhex("87c9ae61f3efdc1ca5c1ce5c9710b43eff2db6f5")
    assert store.meta_key(addr) == b"actor/" + addr + b"/meta"
    assert store.meta_key(addr).hex() == "6163746f722f" + addr.hex() + "2f6d657461"
    assert store.kv_key(addr, b"count").hex() == "6163746f722f" + addr.hex() + "2f6b762f" + "636f756e74"
    h = bytes(range(32))
    assert store.code_key(h) == b"code/" + h
    with pytest.raises(ValueError):
        store.meta_key(addr[:19])


def test_code_cache_is_bounded_by_source_bytes() -> None:
    sources = [f"def h{i}(p):\n    return p\n" for i in range(4)]
    size = len(sources[0])
    cache = CodeCache(capacity=100, capacity_bytes=2 * size)
    compiled = [cache.compile(s) for s in sources]
    assert len(cache) == 2 and cache.size_bytes == 2 * size
    assert cache.get(compiled[0].source_hash) is None and cache.get(compiled[3].source_hash) is compiled[3]


def test_code_cache_is_lru_and_returns_the_same_compile() -> None:
    cache = CodeCache(capacity=2)
    a = cache.compile("def a(p):\n    return p\n")
    assert cache.compile("def a(p):\n    return p\n") is a
    cache.compile("def b(p):\n    return p\n")
    cache.get(a.source_hash)  # a becomes most recent
    cache.compile("def c(p):\n    return p\n")  # evicts b
    assert len(cache) == 2
    assert cache.get(a.source_hash) is a
    assert cache.get(keccak256(b"def b(p):\n    return p\n")) is None
    with pytest.raises(ActorRejected):
        cache.compile("def x(p):\n    return p.__class__\n")
    assert len(cache) == 2
