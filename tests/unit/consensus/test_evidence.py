"""Consensus evidence: the record's golden bytes, the bounded durable store, and the node serving it."""

from __future__ import annotations

from cowboy_node.consensus.evidence import Evidence, EvidenceStore
from cowboy_node.consensus.simplex.types import Notarize, Proposal, encode_message
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Round


def _vote(tag: int) -> Notarize:
    p = Proposal(Round(0, 7), 6, bytes([9]) * 32, bytes([tag]) * 32)
    return Notarize(p, 2, bytes([tag]) * 48, bytes([0xAA]) * 48)


def test_golden_bytes_of_a_record_without_votes() -> None:
    e = Evidence(3, Round(0, 7), "bad", 1000)
    # map(5) {0: 3, 1: [0, 7], 2: "bad", 3: 1000, 4: []} — written out by hand (RFC 8949 §3).
    golden = bytes.fromhex("a5" "00" "03" "01" "82" "00" "07" "02" "63" "626164" "03" "1903e8" "04" "80")
    assert e.encode() == golden
    assert Evidence.decode(golden) == e


def test_conflicting_votes_round_trip_and_are_served_as_message_bytes() -> None:
    e = Evidence(2, Round(0, 7), "conflicting notarize votes", 5, (_vote(1), _vote(2)))
    assert Evidence.decode(e.encode()) == e
    doc = e.to_json(4)
    assert doc["seq"] == 4 and doc["view"] == 7 and doc["signer"] == 2
    assert doc["votes"] == ["0x" + encode_message(_vote(1)).hex(), "0x" + encode_message(_vote(2)).hex()]


def test_the_store_keeps_the_newest_records_and_survives_a_restart() -> None:
    store = MemoryStore()
    ev = EvidenceStore(store, keep=3)
    for i in range(5):
        assert ev.add(Evidence(i, Round(0, i + 1), "bad", i)) == i
    assert ev.count == 3
    assert [(seq, e.signer) for seq, e in ev.latest(10)] == [(2, 2), (3, 3), (4, 4)]
    assert [seq for seq, _ in ev.latest(2)] == [3, 4]
    again = EvidenceStore(store, keep=3)  # a restarted node: same records, numbering goes on
    assert again.count == 3 and [seq for seq, _ in again.latest(10)] == [2, 3, 4]
    assert again.add(Evidence(9, Round(0, 9), "bad", 9)) == 5
    assert [seq for seq, _ in again.latest(10)] == [3, 4, 5]


def test_the_service_records_each_fault_once_with_its_votes() -> None:
    from cowboy_node.consensus.simplex.engine import Faulty
    from tests.unit.node_harness import make_node

    node = make_node()
    try:
        fault = Faulty(0, Round(0, 7), "conflicting notarize votes", (_vote(1), _vote(2)))
        node.consensus.voter.act([fault, fault])  # the same fault again (a peer repeating itself) is not re-written
        node.consensus.voter.act([Faulty(0, Round(0, 8), "conflicting notarize votes", (_vote(1), _vote(2)))])
        records = node.consensus.evidence.latest(10)
        assert [e.round.view for _, e in records] == [7, 8]
        assert records[0][1].votes == (_vote(1), _vote(2))
        assert node.metrics.consensus_faults.labels(reason="equivocation")._value.get() == 3
    finally:
        node.close()


def test_a_damaged_record_is_skipped_not_fatal() -> None:
    import pytest

    from cowboy_protocol.types.validation_errors import DecodeError

    with pytest.raises(DecodeError):
        Evidence.decode(b"\x58")
    store = MemoryStore()
    ev = EvidenceStore(store)
    ev.add(Evidence(1, Round(0, 1), "bad", 1))
    store.write_batch([(b"C/e/" + (1).to_bytes(8, "big"), b"\x58")], sync=False)
    assert [seq for seq, _ in EvidenceStore(store).latest(10)] == [0]
