"""PendingSelectionV1 record and its storage keys (CIP-11 §9.2 "Pending-selection storage"), with goldens."""

from __future__ import annotations

import pytest

from cowboy_node.execution.jobs.pending import (
    PendingSelectionV1,
    order_due,
    parse_pending_due_key,
    pending_by_job_key,
    pending_due_round_index_key,
    pending_due_round_prefix,
)
from cowboy_protocol.codec import CodecError, encode
from cowboy_protocol.types.validation_errors import DecodeError

JOB = bytes([0x22]) * 32
ROOT = bytes([0x44]) * 32
SUBMITTER = bytes([0x55]) * 20
NS_HEX = b"actor/".hex() + "00" * 19 + "02" + b"/kv/system:".hex()


def record(**kw: object) -> PendingSelectionV1:
    base: dict[str, object] = dict(job_id=JOB, submitted_at=500, submit_epoch=0, submit_view=500, seed_epoch=0,
                                   seed_view=503, candidates_snapshot_root=ROOT, runners=3, submitter=SUBMITTER,
                                   job_kind=1)
    base.update(kw)
    return PendingSelectionV1(**base)  # type: ignore[arg-type]


GOLDEN = (
    "ab"                        # map(11)
    "0001"                      # 0: version 1
    "015820" + "22" * 32 +      # 1: job_id bytes(32)
    "021901f4"                  # 2: submitted_at 500
    "0300"                      # 3: submit_epoch 0
    "041901f4"                  # 4: submit_view 500
    "0500"                      # 5: seed_epoch 0
    "061901f7"                  # 6: seed_view 503
    "075820" + "44" * 32 +      # 7: candidates_snapshot_root bytes(32)
    "0803"                      # 8: runners 3
    "0954" + "55" * 20 +        # 9: submitter bytes(20)
    "0a01"                      # 10: job_kind 0x01 (http)
)


def test_pending_record_golden_bytes_and_round_trip() -> None:
    r = record()
    assert r.encode().hex() == GOLDEN
    assert PendingSelectionV1.decode(bytes.fromhex(GOLDEN)) == r


def test_pending_storage_keys_golden() -> None:
    assert pending_by_job_key(JOB).hex() == NS_HEX + b"pending/".hex() + "22" * 32
    due = (NS_HEX + b"pending_due/".hex() + "0000000000000000" + "00000000000001f7" + "00000000000001f4"
           + "22" * 32)
    assert pending_due_round_index_key(0, 503, 500, JOB).hex() == due
    assert record().due_key().hex() == due
    assert pending_due_round_prefix(0, 503).hex() == due[:-(64 + 16)]
    assert parse_pending_due_key(bytes.fromhex(due)) == (0, 503, 500, JOB)


def test_due_index_keys_sort_by_round_then_submitted_at_then_job_id() -> None:
    keys = [pending_due_round_index_key(e, v, s, j) for e, v, s, j in [
        (1, 0, 0, bytes(32)), (0, 2, 1, bytes(32)), (0, 1, 9, bytes(32)), (0, 1, 3, b"\xff" * 32),
        (0, 1, 3, b"\x01" * 32), (0, 1, 256, bytes(32))]]
    parsed = [parse_pending_due_key(k) for k in sorted(keys)]
    assert parsed == sorted(parsed)  # byte order of the keys = numeric order of the fields
    assert [p[:3] for p in parsed] == [(0, 1, 3), (0, 1, 3), (0, 1, 9), (0, 1, 256), (0, 2, 1), (1, 0, 0)]


def test_order_due_is_ascending_submitted_at_then_job_id_bytes() -> None:
    a = record(submitted_at=7, job_id=b"\x02" + bytes(31))
    b = record(submitted_at=5, job_id=b"\xff" * 32)
    c = record(submitted_at=7, job_id=b"\x01" + b"\xff" * 31)
    d = record(submitted_at=5, job_id=b"\x00" * 32)
    for inp in ([a, b, c, d], [d, c, b, a], [c, a, d, b]):
        assert order_due(inp) == [d, b, c, a]


@pytest.mark.parametrize(("key", "value"), [
    (0, 2), (1, b"short"), (2, -1), (6, 2**64), (7, bytes(31)), (8, 1), (8, 0), (9, bytes(21)), (10, 0x06),
    (10, True),
])
def test_pending_decode_rejects_bad_fields(key: int, value: object) -> None:
    m = record().to_cbor()
    m[key] = value
    with pytest.raises(DecodeError):
        PendingSelectionV1.from_cbor(m)


def test_pending_decode_rejects_missing_and_extra_keys_and_non_canonical_bytes() -> None:
    m = record().to_cbor()
    del m[10]
    with pytest.raises(DecodeError):
        PendingSelectionV1.from_cbor(m)
    with pytest.raises(DecodeError):
        PendingSelectionV1.from_cbor({**record().to_cbor(), 11: 0})
    # submitted_at 500 in a non-shortest form (5-byte uint32 head) is not canonical
    bad = bytes.fromhex(GOLDEN.replace("021901f4", "021a000001f4", 1))
    with pytest.raises(CodecError, match="non_shortest"):
        PendingSelectionV1.decode(bad)
    assert encode(record().to_cbor()) == bytes.fromhex(GOLDEN)


def test_constructing_an_invalid_record_fails() -> None:
    with pytest.raises(DecodeError):
        record(runners=1)
    with pytest.raises(ValueError):
        pending_by_job_key(bytes(31))
