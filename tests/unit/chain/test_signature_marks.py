"""Admission records a transaction's signature mark only once its signature check passed and it was pooled; the
marks are bounded (``chain/signature_marks.py``, ``chain/admission.py``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_node.chain.admission import admit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig, MempoolError
from cowboy_node.chain.signature_marks import SignatureMarks
from cowboy_node.chain.signature_pool import Prepared, prepare_one
from cowboy_node.execution.validity_errors import TxInvalid
from cowboy_protocol.types.validation_errors import ValidationError
from tests.helpers import ALICE, ALICE_SK, BOB, BOB_SK, transfer


def test_an_admitted_transaction_is_marked_by_its_full_body_hash(chain: Chain) -> None:
    pool = Mempool(MempoolConfig())
    tx = transfer(ALICE_SK, 0, BOB, 1)
    admit(tx.to_bytes(), chain, pool)
    assert pool.signature_marks.checked(tx.tx_hash())
    assert len(pool.signature_marks) == 1


def test_an_admission_through_a_worker_result_is_marked(chain: Chain) -> None:
    pool = Mempool(MempoolConfig())
    raw = transfer(ALICE_SK, 0, BOB, 1).to_bytes()
    prepared = prepare_one(raw)
    assert prepared is not None
    admit(raw, chain, pool, prepared=prepared)
    assert pool.signature_marks.checked(prepared.tx.tx_hash())


def _bad_sig(raw_sig: bytes) -> bytes:
    return raw_sig[:10] + bytes([raw_sig[10] ^ 1]) + raw_sig[11:]


@pytest.mark.parametrize("case", ["bad_signature", "other_key", "insufficient_funds", "wrong_chain_id",
                                  "already_known", "replacement_underpriced"])
def test_a_refused_submission_leaves_no_mark(chain: Chain, case: str) -> None:
    pool = Mempool(MempoolConfig())
    good = transfer(ALICE_SK, 0, BOB, 1)
    if case == "bad_signature":
        tx = replace(good, signature=_bad_sig(good.signature), _body=None)
    elif case == "other_key":  # claims ALICE, signed by BOB
        tx = replace(replace(good, sender=BOB, signature=b"", _body=None).signed(BOB_SK), sender=ALICE, _body=None)
    elif case == "insufficient_funds":
        tx = transfer(BOB_SK, 0, ALICE, 1)  # BOB holds nothing
    elif case == "wrong_chain_id":
        tx = replace(good, chain_id="other", signature=b"", _body=None).signed(ALICE_SK)
    elif case == "already_known":
        admit(good.to_bytes(), chain, pool)
        pool.signature_marks = SignatureMarks(4)  # forget the first admission's mark
        tx = good
    else:  # same sender and nonce as a pooled one, fees not bumped: the pool refuses it after the signature check
        admit(good.to_bytes(), chain, pool)
        tx = transfer(ALICE_SK, 0, BOB, 2)
    before = len(pool.signature_marks)
    with pytest.raises((TxInvalid, MempoolError, ValidationError)) as e:
        admit(tx.to_bytes(), chain, pool)
    assert e.value.code == ("bad_signature" if case == "other_key" else case)
    assert not pool.signature_marks.checked(tx.tx_hash())
    assert len(pool.signature_marks) == before


def test_a_worker_result_naming_a_recovery_error_leaves_no_mark(chain: Chain) -> None:
    pool = Mempool(MempoolConfig())
    good = transfer(ALICE_SK, 0, BOB, 1)
    raw = good.to_bytes()
    prepared = Prepared(good, good.tx_hash(), ("bad_signature", "signature invalid: forged"))
    with pytest.raises(TxInvalid):
        admit(raw, chain, pool, prepared=prepared)
    wrong_signer = Prepared(good, good.tx_hash(), BOB)
    with pytest.raises(TxInvalid):
        admit(raw, chain, pool, prepared=wrong_signer)
    assert len(pool.signature_marks) == 0 and len(pool) == 0


def test_marks_are_bounded_and_forget_the_oldest_first() -> None:
    marks = SignatureMarks(3)
    for i in range(5):
        marks.record(bytes([i]) * 32)
    assert len(marks) == 3
    assert [marks.checked(bytes([i]) * 32) for i in range(5)] == [False, False, True, True, True]
    marks.record(bytes([2]) * 32)  # recorded again: now the newest
    marks.record(bytes([5]) * 32)
    assert [marks.checked(bytes([i]) * 32) for i in range(6)] == [False, False, True, False, True, True]
    assert len(SignatureMarks(0)) == 0
    with pytest.raises(ValueError):
        SignatureMarks(-1)


def test_the_mempool_holds_twice_its_capacity_in_marks(chain: Chain) -> None:
    pool = Mempool(MempoolConfig(max_txs=2))
    assert pool.signature_marks.capacity == 4
    txs = [transfer(ALICE_SK, 0, BOB, 1 + i, tip=1_000 * 2 ** i, max_fee=10**6 * 2 ** i) for i in range(6)]
    for tx in txs:  # each replaces the last (fees doubled): six admissions, one pooled transaction
        admit(tx.to_bytes(), chain, pool)
    assert len(pool) == 1 and len(pool.signature_marks) == 4
    assert [pool.signature_marks.checked(t.tx_hash()) for t in txs] == [False, False, True, True, True, True]
