"""Checks of a snapshot before anything of it is installed: the manifest against genesis and the finalized
header it names, each chunk against the manifest's slots (so against that state root), each on its own.

Refusal codes (``SnapshotError.code``): ``wrong_chain`` (another chain id or genesis), ``bad_block``,
``bad_certificate`` (not a Finalization of that block, or its signatures do not verify under the genesis group key),
``root_mismatch`` (the slots do not give the header's state root), ``chunk_digest`` (a chunk's bytes are not the ones
listed), ``bad_chunk`` (malformed, out of order, an entry outside the chunk's slots, or a derived key, which no snapshot
carries), ``slot_mismatch`` (a slot's entries do not give the listed slot: the chunk is not the state of that root);
at install, ``bad_state`` (a verified timer record does not decode, so its derived keys cannot be rebuilt).
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.chain.genesis import Genesis
from cowboy_node.consensus.simplex.scheme import Scheme
from cowboy_node.consensus.simplex.types import Finalization, decode_message, finalize_message, seed_message
from cowboy_node.snapshot.manifest import Manifest, SnapshotError, decode_chunk
from cowboy_node.state.slots import EMPTY_SLOT, root_from_slots, slot_of_leaves
from cowboy_node.state.tree import keccak256, new_hasher
from cowboy_node.types.block import Block
from cowboy_protocol.types.validation_errors import DecodeError


@dataclass(frozen=True, slots=True)
class VerifiedManifest:
    """A manifest whose block is final and whose slots give that block's state root."""

    manifest: Manifest
    """The manifest."""
    block: Block
    """Its block, decoded."""
    certificate: Finalization
    """Its finalization certificate, decoded and verified."""


def verify_manifest(m: Manifest, genesis: Genesis, scheme: Scheme) -> VerifiedManifest:
    """Check ``m`` against this chain; raises :class:`SnapshotError`."""
    if m.chain_id != genesis.chain_id or m.genesis_hash != genesis.hash():
        raise SnapshotError("wrong_chain", f"snapshot of chain {m.chain_id!r} (genesis 0x{m.genesis_hash.hex()[:16]}…)"
                                           f", not {genesis.chain_id!r} (genesis 0x{genesis.hash().hex()[:16]}…)")
    try:
        block = Block.decode(m.block)
        cert = decode_message(m.finalization)
    except DecodeError as e:
        raise SnapshotError("bad_block", str(e)) from None
    h = block.header
    if h.height != m.height or h.chain_id != genesis.chain_id or m.height < 1:
        raise SnapshotError("bad_block", f"block at height {h.height} of {h.chain_id!r}, manifest height {m.height}")
    if not isinstance(cert, Finalization) or cert.proposal.payload != block.hash() or cert.proposal.round != h.round:
        raise SnapshotError("bad_certificate", "not a finalization of the snapshot's block")
    p = cert.proposal
    if not scheme.verify_certificate(finalize_message(p), cert.signature) or \
            not scheme.verify_certificate(seed_message(p.round), cert.seed):
        raise SnapshotError("bad_certificate", "the finalization does not verify under the genesis group key")
    if root_from_slots(m.slots) != h.state_root:
        raise SnapshotError("root_mismatch", f"the manifest's slots do not give block {h.height}'s state root "
                                             f"0x{h.state_root.hex()[:16]}…")
    return VerifiedManifest(m, block, cert)


def check_digest(m: Manifest, index: int, raw: bytes) -> None:
    """That ``raw`` is the chunk ``index`` the manifest lists (size and keccak256); ``chunk_digest`` if not."""
    info = m.chunks[index]
    if len(raw) != info.size or keccak256(raw) != info.digest:
        raise SnapshotError("chunk_digest", f"chunk {index} is not the one the manifest lists")


def verify_chunk(m: Manifest, index: int, raw: bytes) -> list[tuple[bytes, bytes]]:
    """The entries of chunk ``index`` of the (verified) manifest ``m`` after checking them; :class:`SnapshotError`."""
    check_digest(m, index, raw)
    info = m.chunks[index]
    entries = decode_chunk(raw)
    h = new_hasher()
    by_slot: dict[int, list[tuple[bytes, bytes]]] = {}
    last_kh = b""
    for k, v in entries:
        kh = h(k)
        if kh <= last_kh:
            raise SnapshotError("bad_chunk", f"chunk {index}: entries not in ascending key-hash order")
        last_kh = kh
        s = kh[0]  # slot_index
        if not info.first_slot <= s <= info.last_slot:
            raise SnapshotError("bad_chunk", f"chunk {index}: an entry of slot {s} outside "
                                             f"{info.first_slot}..{info.last_slot}")
        by_slot.setdefault(s, []).append((kh, h(b"\x00" + kh + h(v))))  # (key hash, leaf hash), ascending
    for s in range(info.first_slot, info.last_slot + 1):
        got = slot_of_leaves(by_slot[s]) if s in by_slot else EMPTY_SLOT
        if got != m.slots[s]:
            raise SnapshotError("slot_mismatch", f"chunk {index}: slot {s} does not match the manifest (state root)")
    return entries
