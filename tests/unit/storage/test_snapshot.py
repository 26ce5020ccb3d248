"""Snapshots (issue 34 §1): taken from a store view, every chunk verified on its own against the finalized state
root, installed atomically into an empty data directory (an interrupted install is never opened and starts over)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.chain.chain import Chain, ChainError
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, marker_path
from cowboy_node.node.devgenesis import NetworkGenesis
from cowboy_node.snapshot.create import MANIFEST_FILE, chunk_file, create_snapshot, list_snapshots, prune_snapshots
from cowboy_node.snapshot.install import install_snapshot
from cowboy_node.snapshot.manifest import SnapshotError, decode_manifest, encode_chunk, encode_manifest
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.state.slots import Slot
from cowboy_node.state.tree import keccak256
from tests.helpers import ALICE_SK, transfer
from tests.unit.node.sync_chain import NET, build_chain, network, scheme


def _recipient(i: int) -> bytes:
    return (0x20_0000 + i).to_bytes(20, "big")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Chain, Path]:
    """A 4-validator chain of 6 certified blocks spreading transfers over 200 accounts, and its snapshot at the head
    in small chunks (several per snapshot)."""
    root = tmp_path_factory.mktemp("snap")
    chain, _ = build_chain(6, store=LevelDBStore(root / "src"),
                           txs=lambda h: [transfer(ALICE_SK, 40 * (h - 1) + i, _recipient(40 * (h - 1) + i), 5)
                                          for i in range(40)])
    return chain, snapshot_of(chain, root / "snapshots")


def snapshot_of(chain: Chain, out_root: Path) -> Path:
    """A snapshot of ``chain``'s head in small chunks (4 KiB: several per snapshot), taken as the node does."""
    view = chain.store.snapshot()
    try:
        return create_snapshot(view, height=chain.height, chain_id=NET.genesis.chain_id,
                               genesis_hash=NET.genesis.hash(), out_root=out_root, chunk_bytes=4096)
    finally:
        view.close()


def _install(snap: Path, data: Path, *, manifest: bytes | None = None, chunks: dict[int, bytes] | None = None,
             after: object = None, genesis: NetworkGenesis = NET) -> object:
    store = LevelDBStore(data)
    try:
        return install_snapshot(store, data, genesis.genesis, scheme(genesis, None),
                                manifest if manifest is not None else (snap / MANIFEST_FILE).read_bytes(),
                                lambda i: (chunks or {}).get(i) or (snap / chunk_file(i)).read_bytes(),
                                after_chunk=after)  # type: ignore[arg-type]
    finally:
        store.close()


def _state(store: LevelDBStore) -> dict[bytes, bytes]:
    return {k: v for prefix in (b"s/", b"n/") for k, v in store.iterate(prefix)}


def test_an_installed_snapshot_is_the_source_state_byte_for_byte(source: tuple[Chain, Path], tmp_path: Path) -> None:
    chain, snap = source
    m = decode_manifest((snap / MANIFEST_FILE).read_bytes())
    assert len(m.chunks) > 3 and m.height == chain.height == 6
    done = _install(snap, tmp_path / "data")
    store = LevelDBStore(tmp_path / "data")
    try:
        assert _state(store) == _state(chain.store)  # type: ignore[arg-type]
        joined = Chain(store, NET.genesis)
        assert joined.height == 6 and joined.head.hash() == chain.head.hash() and joined.earliest_height() == 6
        assert done.entries == m.entries and not done.restarted
    finally:
        store.close()
    assert marker_path(tmp_path / "data" / VOTE_JOURNAL_FILE).exists()  # the double-sign guard will watch


def _tampered_chunk(snap: Path) -> tuple[bytes, dict[int, bytes]]:
    """A chunk with one value changed, and a manifest listing its digest (so only the slot check can catch it)."""
    from cowboy_node.snapshot.manifest import ChunkInfo, decode_chunk

    m = decode_manifest((snap / MANIFEST_FILE).read_bytes())
    i = next(j for j, c in enumerate(m.chunks) if c.size > 10)
    entries = decode_chunk((snap / chunk_file(i)).read_bytes())
    entries[0] = (entries[0][0], entries[0][1] + b"\x00")
    raw = encode_chunk(entries)
    info = m.chunks[i]
    chunks = list(m.chunks)
    chunks[i] = ChunkInfo(info.first_slot, info.last_slot, len(raw), keccak256(raw))
    from dataclasses import replace
    return encode_manifest(replace(m, chunks=tuple(chunks))), {i: raw}


def test_a_chunk_that_is_not_the_state_of_the_root_is_refused_and_nothing_is_opened(
        source: tuple[Chain, Path], tmp_path: Path) -> None:
    _, snap = source
    manifest, chunks = _tampered_chunk(snap)
    with pytest.raises(SnapshotError) as e:
        _install(snap, tmp_path / "data", manifest=manifest, chunks=chunks)
    assert e.value.code == "slot_mismatch"
    store = LevelDBStore(tmp_path / "data")
    try:
        with pytest.raises(ChainError, match="interrupted"):
            Chain(store, NET.genesis)
    finally:
        store.close()


def test_a_chunk_other_than_the_listed_one_is_refused(source: tuple[Chain, Path], tmp_path: Path) -> None:
    _, snap = source
    with pytest.raises(SnapshotError) as e:
        _install(snap, tmp_path / "data", chunks={1: (snap / chunk_file(2)).read_bytes()})
    assert e.value.code == "chunk_digest"


def test_slots_that_do_not_give_the_finalized_root_are_refused_before_any_write(
        source: tuple[Chain, Path], tmp_path: Path) -> None:
    from dataclasses import replace

    _, snap = source
    m = decode_manifest((snap / MANIFEST_FILE).read_bytes())
    slots = list(m.slots)
    slots[7] = Slot(1, b"\x01" * 32)
    with pytest.raises(SnapshotError) as e:
        _install(snap, tmp_path / "data", manifest=encode_manifest(replace(m, slots=tuple(slots))))
    assert e.value.code == "root_mismatch"
    store = LevelDBStore(tmp_path / "data")
    try:
        assert list(store.iterate(b"")) == []
    finally:
        store.close()


def test_a_snapshot_of_another_chain_or_with_a_bad_certificate_is_refused(source: tuple[Chain, Path],
                                                                          tmp_path: Path) -> None:
    from dataclasses import replace

    _, snap = source
    other = network(balances={b"\x05" * 20: 1})
    with pytest.raises(SnapshotError) as e:
        _install(snap, tmp_path / "a", genesis=other)
    assert e.value.code == "wrong_chain"
    from cowboy_node.consensus.records import ConsensusRecords

    m = decode_manifest((snap / MANIFEST_FILE).read_bytes())
    block5_cert = ConsensusRecords(source[0].store).finalization_bytes(5)
    assert block5_cert is not None
    with pytest.raises(SnapshotError) as e:  # a real certificate, of another block of the chain
        _install(snap, tmp_path / "b", manifest=encode_manifest(replace(m, finalization=block5_cert)))
    assert e.value.code == "bad_certificate"


def test_an_interrupted_install_is_never_opened_and_starts_over(source: tuple[Chain, Path], tmp_path: Path) -> None:
    chain, snap = source

    class Crash(Exception):
        pass

    def crash(i: int) -> None:
        if i == 1:
            raise Crash

    with pytest.raises(Crash):
        _install(snap, tmp_path / "data", after=crash)
    store = LevelDBStore(tmp_path / "data")
    try:
        with pytest.raises(ChainError, match="interrupted"):
            Chain(store, NET.genesis)
    finally:
        store.close()
    done = _install(snap, tmp_path / "data")
    assert done.restarted and done.height == 6
    store = LevelDBStore(tmp_path / "data")
    try:
        assert _state(store) == _state(chain.store)  # type: ignore[arg-type]
    finally:
        store.close()


def test_installing_into_a_data_directory_with_a_chain_is_refused(source: tuple[Chain, Path], tmp_path: Path) -> None:
    _, snap = source
    store = LevelDBStore(tmp_path / "data")
    Chain(store, NET.genesis)
    store.close()
    with pytest.raises(SnapshotError) as e:
        _install(snap, tmp_path / "data")
    assert e.value.code == "not_empty"


def test_list_and_keep(source: tuple[Chain, Path], tmp_path: Path) -> None:
    chain, _ = source
    root = tmp_path / "snaps"
    for h in (4, 5, 6):
        view = chain.store.snapshot()
        try:  # a snapshot of the head's state named as height h is not valid, but list/keep only read manifests
            create_snapshot(view, height=h, chain_id=NET.genesis.chain_id, genesis_hash=NET.genesis.hash(),
                            out_root=root)
        finally:
            view.close()
    assert [m.height for m in list_snapshots(root)] == [4, 5, 6]
    assert prune_snapshots(root, keep=2) == [4]
    assert [m.height for m in list_snapshots(root)] == [5, 6]
