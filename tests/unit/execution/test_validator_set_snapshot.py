"""``ValidatorSetSnapshot(0)`` (CIP-11 §5.4) is anchored in the genesis state: the genesis validators' Ed25519
peer keys, in participant order, under a fixed key with golden bytes, part of the genesis state root."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.genesis import apply_genesis
from cowboy_node.execution.validator_set import (
    decode_snapshot,
    encode_snapshot,
    get_snapshot,
    snapshot_key,
)
from cowboy_node.node.testnet import create_testnet
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_protocol.codec import encode
from cowboy_protocol.transport.preimages import validator_set_hash
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, TimerConfig
from cowboy_protocol.types.validation_errors import DecodeError


def test_golden_bytes_and_key() -> None:
    snap = EpochSnapshot(0, (bytes([1]) * 32, bytes([2]) * 32))
    # map(2) {0: 0, 1: array(2) [bstr(32) 01.., bstr(32) 02..]} — written out by hand from RFC 8949.
    golden = bytes.fromhex("a2" "00" "00" "01" "82" "5820" + "01" * 32 + "5820" + "02" * 32)
    assert encode_snapshot(snap) == golden
    assert decode_snapshot(golden) == snap
    assert snapshot_key(0) == b"sys/validator_set/" + bytes(8)
    assert snapshot_key(258) == b"sys/validator_set/" + bytes([0, 0, 0, 0, 0, 0, 1, 2])


@pytest.mark.parametrize("doc", [
    {0: 0},                                              # peer_pubkeys missing
    {0: 0, 1: [bytes(32)], 2: 1},                       # unknown key
    {0: 0, 1: [bytes(31)]},                             # short key
    {0: 0, 1: []},                                      # empty set
    {0: 0, 1: [bytes(32), bytes(32)]},                  # a validator twice
    {0: 0, 1: bytes(32)},                               # not an array
    {0: -1, 1: [bytes(32)]},                            # negative epoch
])
def test_malformed_snapshots_are_refused(doc: dict[int, object]) -> None:
    with pytest.raises(DecodeError):
        decode_snapshot(encode(doc))


def test_genesis_state_holds_the_ordered_validator_keys(tmp_path: Path) -> None:
    layout = create_testnet(tmp_path / "net", 4, base_port=0, entropy=b"snapshot-test-entropy-0123456789ab")
    chain = Chain(MemoryStore(), layout.genesis)
    snap = get_snapshot(chain.world(), 0)
    keys = tuple(v.ed25519_public_key for v in layout.genesis.validators)
    assert snap is not None and snap.epoch == 0 and snap.validators == keys
    assert snap.set_hash == validator_set_hash(keys)
    assert get_snapshot(chain.world(), 1) is None


def test_the_snapshot_is_part_of_the_genesis_state_root() -> None:
    def root(peer_keys: tuple[bytes, ...]) -> bytes:
        store = MemoryStore()
        world = WorldState(store, StateTree(store, b"n/"), data_prefix=b"s/")
        apply_genesis(world, chain_id="c", balances={}, system_deployers=(), basefee=BasefeeConfig(),
                      timer=TimerConfig(), limits=ChainLimits(), flags=Cip11Flags(), validator_peer_keys=peer_keys)
        return world.prepare_commit()[0]

    a, b = bytes([1]) * 32, bytes([2]) * 32
    assert root((a, b)) != root(())
    assert root((a, b)) != root((b, a))  # the order is part of the snapshot


def test_bytes_that_are_not_cbor_are_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode_snapshot(b"\x58")
