"""Consensus records: round seeds under ``C/s/ ‖ epoch_be8 ‖ view_be8``, finalization certificates under
``C/f/ ‖ height_be8`` (cowboy_node/consensus/records.py module docstring), and next_certified."""

from __future__ import annotations

import hashlib

from cowboy_node.consensus.records import ConsensusRecords, drop_proposal_op, finalization_op, seed_op
from cowboy_node.consensus.simplex.types import Finalization, Notarization, Proposal, decode_message
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Round

SEED = bytes(range(48))


def _cert(view: int, cls: type = Finalization) -> Finalization:
    p = Proposal(Round(0, view), view - 1, hashlib.sha256(b"p%d" % view).digest(),
                 hashlib.sha256(b"b%d" % view).digest())
    return cls(p, bytes([view]) * 48, bytes([view + 1]) * 48)  # type: ignore[no-any-return]


def test_seed_key_is_prefix_then_big_endian_epoch_and_view() -> None:
    key, value = seed_op(Round(1, 0x0203), SEED)
    # "C/s/" = 43 2f 73 2f; epoch 1 and view 0x0203 as 8-byte big-endian integers.
    assert key == bytes.fromhex("432f732f" "0000000000000001" "0000000000000203")
    assert value == SEED


def test_finalization_key_is_prefix_then_big_endian_height_and_value_decodes_to_the_certificate() -> None:
    cert = _cert(7)
    key, value = finalization_op(0x0102030405, cert)
    # "C/f/" = 43 2f 66 2f; height as an 8-byte big-endian integer.
    assert key == bytes.fromhex("432f662f" "0000000102030405")
    assert value is not None and decode_message(value) == cert


def test_put_seed_is_persisted_and_read_back_by_a_fresh_reader() -> None:
    store = MemoryStore()
    ConsensusRecords(store).put_seed(Round(0, 9), SEED)
    assert store.get(bytes.fromhex("432f732f" "0000000000000000" "0000000000000009")) == SEED
    fresh = ConsensusRecords(store)
    assert fresh.seed(Round(0, 9)) == SEED
    assert fresh.seed(Round(0, 8)) is None
    assert fresh.seed(Round(1, 9)) is None


def test_seed_written_through_a_commit_batch_is_visible_to_the_reader() -> None:
    store = MemoryStore()
    records = ConsensusRecords(store)
    assert records.seed(Round(0, 3)) is None
    store.write_batch([seed_op(Round(0, 3), SEED)])
    assert records.seed(Round(0, 3)) == SEED


def test_finalization_reads_the_stored_certificate_of_that_height_only() -> None:
    store = MemoryStore()
    cert = _cert(4)
    store.write_batch([finalization_op(3, cert)])
    records = ConsensusRecords(store)
    assert records.finalization(3) == cert
    assert records.finalization(2) is None
    assert records.finalization(4) is None


def test_next_certified_returns_the_lowest_certified_height_in_the_closed_range() -> None:
    store = MemoryStore()
    c3, c5, c300 = _cert(3), _cert(5), _cert(9)
    store.write_batch([finalization_op(3, c3), finalization_op(5, c5), finalization_op(300, c300)])
    r = ConsensusRecords(store)
    assert r.next_certified(1, 10) == (3, c3)
    assert r.next_certified(3, 3) == (3, c3)  # both ends inclusive
    assert r.next_certified(4, 10) == (5, c5)
    assert r.next_certified(4, 5) == (5, c5)
    assert r.next_certified(4, 4) is None  # 5 is beyond up_to
    assert r.next_certified(6, 299) is None
    assert r.next_certified(6, 300) == (300, c300)  # ordering is numeric (big-endian keys), not textual
    assert r.next_certified(301, 10**6) is None


def test_next_certified_skips_a_record_that_is_not_a_finalization() -> None:
    store = MemoryStore()
    c6 = _cert(6)
    store.write_batch([finalization_op(4, _cert(4, Notarization)), finalization_op(6, c6)])
    r = ConsensusRecords(store)
    assert r.finalization(4) is None
    assert r.next_certified(4, 10) == (6, c6)


def test_kept_proposals_live_under_their_key_until_dropped() -> None:
    store = MemoryStore()
    records = ConsensusRecords(store)
    digest = bytes(range(32))
    records.put_proposal(digest, b"block-bytes")
    assert store.get(b"C/p/" + digest) == b"block-bytes"  # 432f702f ‖ block hash
    assert records.proposals() == [b"block-bytes"]
    store.write_batch([drop_proposal_op(digest)])
    assert records.proposals() == [] and store.get(b"C/p/" + digest) is None
