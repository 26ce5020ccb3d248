"""A snapshot of a state with live timers: it carries the committed keys only, and the install rebuilds the derived
timer indexes (``state/derived.py``) so the joined store is the source's byte for byte. A data directory whose state
tree commits to those indexes (written by a version before they left it) is refused at open."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.chain.chain import Chain, ChainError
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.snapshot.manifest import decode_chunk
from cowboy_node.state import world as world_module
from cowboy_node.state.derived import is_derived
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_protocol.types.instructions import CallActor, DeployActor
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_SK, make_tx
from tests.unit.execution.timers.timer_mixed_scenario import MAX_FEE, SOURCE, TX_CELLS, TX_CYCLES, _entry
from tests.unit.node.sync_chain import NET, build_chain
from tests.unit.storage.test_snapshot import _install, _state, snapshot_of

ACTOR = derive_actor_address(ALICE, b"t1", SOURCE)


def _txs(height: int) -> list[Transaction]:
    """Block 1 deploys the arming actor; blocks 2 and 3 schedule 20 timers each, due long after the chain's head."""
    def tx(nonce: int, ins: object) -> Transaction:
        return make_tx(ALICE_SK, nonce, ins, chain_id=NET.genesis.chain_id, cycles_limit=TX_CYCLES,  # type: ignore[arg-type]
                       cells_limit=TX_CELLS, max_fee=MAX_FEE, tip=0)
    if height == 1:
        return [tx(0, DeployActor(source=SOURCE, salt=b"t1", init_handler="", init_payload=b""))]
    if height in (2, 3):
        spec = b"".join(_entry(100 + i, b"\x00" + bytes([height, i]), alice_pays=True) for i in range(20))
        return [tx(height - 1, CallActor(actor=ACTOR, handler="arm", payload=spec))]
    return []


def _derived(store: LevelDBStore) -> dict[bytes, bytes]:
    return {k: v for k, v in store.iterate(b"s/timer/") if is_derived(k[2:])}


def test_a_snapshot_with_live_timers_installs_their_indexes(tmp_path: Path) -> None:
    chain, _ = build_chain(4, store=LevelDBStore(tmp_path / "src"), txs=_txs)
    assert len(_derived(chain.store)) == 80  # type: ignore[arg-type]  # 40 timers: a pointer and an actor entry each
    snap = snapshot_of(chain, tmp_path / "snapshots")
    keys = [k for p in sorted(snap.glob("chunk-*.cbor")) for k, _ in decode_chunk(p.read_bytes())]
    assert keys and not any(is_derived(k) for k in keys)  # committed keys only
    assert any(k.startswith(b"timer/h/") for k in keys)
    done = _install(snap, tmp_path / "data")
    assert done.derived == 80  # type: ignore[attr-defined]
    store = LevelDBStore(tmp_path / "data")
    try:
        assert _state(store) == _state(chain.store)  # type: ignore[arg-type]  # the indexes included
        assert Chain(store, NET.genesis).head.hash() == chain.head.hash()
    finally:
        store.close()


def test_a_data_directory_whose_tree_commits_to_the_timer_indexes_is_refused(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:  # what a version before the change wrote: every timer key in the tree
        m.setattr(world_module, "DERIVED_PREFIXES", ())
        old, _ = build_chain(3, store=LevelDBStore(tmp_path / "old"), txs=_txs)
    with pytest.raises(ChainError, match="timer/a/"):
        Chain(old.store, NET.genesis)
    new, _ = build_chain(3, store=LevelDBStore(tmp_path / "new"), txs=_txs)  # control: this version's directory
    assert Chain(new.store, NET.genesis).height == 3


def test_a_chunk_carrying_a_derived_key_is_refused_as_malformed(tmp_path: Path) -> None:
    """Even listed in a manifest: a server cannot plant an index entry that no verified record implies."""
    from dataclasses import replace

    from cowboy_node.snapshot.create import MANIFEST_FILE, chunk_file
    from cowboy_node.snapshot.manifest import ChunkInfo, SnapshotError, decode_manifest, encode_chunk, encode_manifest
    from cowboy_node.state.tree import keccak256

    chain, _ = build_chain(3, store=LevelDBStore(tmp_path / "src"), txs=_txs)
    snap = snapshot_of(chain, tmp_path / "snapshots")
    m = decode_manifest((snap / MANIFEST_FILE).read_bytes())
    i, info = next((j, c) for j, c in enumerate(m.chunks) if c.size > 10)
    planted = next(k for k in (b"timer/t/" + n.to_bytes(32, "big") for n in range(10_000))
                   if info.first_slot <= keccak256(k)[0] <= info.last_slot)
    entries = sorted([*decode_chunk((snap / chunk_file(i)).read_bytes()), (planted, bytes(16))],
                     key=lambda kv: keccak256(kv[0]))
    raw = encode_chunk(entries)
    chunks = list(m.chunks)
    chunks[i] = ChunkInfo(info.first_slot, info.last_slot, len(raw), keccak256(raw))
    with pytest.raises(SnapshotError) as e:
        _install(snap, tmp_path / "data", manifest=encode_manifest(replace(m, chunks=tuple(chunks))),
                 chunks={i: raw})
    assert e.value.code == "bad_chunk" and "derived" in str(e.value)
