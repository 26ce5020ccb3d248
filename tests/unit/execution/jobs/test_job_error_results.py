"""Error results (docs/jobs.md "Error results", docs/verification.md §5.7): the envelope's golden bytes, the
verifier's vote rules per mode, and settlement on a real chain — failed with ``runner_error:<code>``, full
refund, no reputation cost or unhealthy mark for the error runner (unlike a timeout), the callback's payload,
for M == 1 and M == 3."""

from __future__ import annotations

import pytest

from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.actors.actor_state import get_state
from cowboy_node.execution.jobs.checks import Check
from cowboy_node.execution.jobs.job_record import JobStatus
from cowboy_node.execution.jobs.verification import (
    MODE_DETERMINISTIC,
    MODE_ECONOMIC_BOND,
    MODE_MAJORITY_VOTE,
    MODE_NONE,
    MODE_STRUCTURED_MATCH,
    Reveal,
    VerificationParams,
    verify,
)
from cowboy_node.execution.runners.registry_state import get_runner
from cowboy_node.execution.system_state import JOB_DISPATCHER, get_account
from cowboy_protocol.codec import decode
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.jobs.error_result import (
    ERROR_RESULT_MAGIC,
    ErrorResult,
    decode_error_result,
    error_result_for,
    is_error_result,
)
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.validation_errors import DecodeError
from tests.helpers import ALICE, ALICE_SK
from tests.unit.execution.jobs.test_jobs_e2e import CALLBACK_ACTOR, RUNNER_SKS, RUNNERS, Net, _net, _request

A, B, C = b"\x0a" * 20, b"\x0b" * 20, b"\x0c" * 20
HTTP_500 = ErrorResult("http_status", "HTTP 500 from example.com").encode()
TIMEOUT = ErrorResult("timeout", "execution exceeded 60 s").encode()
START_REP = 50 * 10**9

# -- the envelope --------------------------------------------------------------------------------------------


GOLDEN_HTTP_500 = bytes.fromhex(
    "00636f77626f792d6a6f622d6572726f722d763100"  # 00 "cowboy-job-error-v1" 00
    "a2"  # map(2)
    "00" "6b" "687474705f737461747573"  # 0: "http_status"
    "01" "78" "19" "48545450203530302066726f6d206578616d706c652e636f6d")  # 1: "HTTP 500 from example.com"
GOLDEN_EMPTY_DETAIL = bytes.fromhex("00636f77626f792d6a6f622d6572726f722d763100" "a2" "00" "67" "74696d656f7574"
                                    "01" "60")  # {0: "timeout", 1: ""}


def test_error_result_envelope_matches_golden_bytes() -> None:
    assert ERROR_RESULT_MAGIC == b"\x00cowboy-job-error-v1\x00"
    assert HTTP_500 == GOLDEN_HTTP_500
    assert ErrorResult("timeout").encode() == GOLDEN_EMPTY_DETAIL
    assert decode_error_result(GOLDEN_HTTP_500) == ErrorResult("http_status", "HTTP 500 from example.com")
    assert decode_error_result(b'{"error": "http_status"}') is None  # an ordinary (JSON) result
    assert is_error_result(GOLDEN_EMPTY_DETAIL) and not is_error_result(b"")


@pytest.mark.parametrize("raw", [
    ERROR_RESULT_MAGIC,  # nothing after the magic
    ERROR_RESULT_MAGIC + bytes.fromhex("a1006474696d65"),  # no detail
    ERROR_RESULT_MAGIC + bytes.fromhex("a2006474696d650160") + b"\x00",  # trailing byte
    ERROR_RESULT_MAGIC + bytes.fromhex("a20164746f6f6f0060"),  # keys out of order (non-canonical)
    ERROR_RESULT_MAGIC + bytes.fromhex("a200644849474801" "60"),  # code "HIGH": not snake_case
    ERROR_RESULT_MAGIC + bytes.fromhex("a2000101" "60"),  # code not text
], ids=["empty", "missing_detail", "trailing", "unsorted", "bad_code", "code_type"])
def test_malformed_envelopes_are_refused(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_error_result(raw)


def test_error_result_for_bounds_the_detail_and_falls_back_to_internal() -> None:
    long = decode_error_result(error_result_for("http_status", "é" * 400))
    assert long is not None and len(long.detail.encode()) <= 512 and set(long.detail) == {"é"}
    assert decode_error_result(error_result_for("Not A Code", "x")) == ErrorResult("internal", "x")


# -- verify(): an error result is one vote -------------------------------------------------------------------


def _p(mode: int, runners: int, threshold: int, checks: tuple[Check, ...] = ()) -> VerificationParams:
    return VerificationParams(mode=mode, runners=runners, threshold=threshold, checks=checks)


@pytest.mark.parametrize("mode", [MODE_NONE, MODE_ECONOMIC_BOND])
def test_single_runner_error_fails_with_the_reason_and_no_outlier(mode: int) -> None:
    v = verify(_p(mode, 1, 1), (Reveal(A, HTTP_500, 0),))
    assert (v.ok, v.result, v.matching, v.outliers) == (False, None, (), ())
    assert (v.reason, v.error) == ("runner_error:http_status", HTTP_500)


def test_majority_of_errors_fails_with_the_majority_reason_and_the_result_runner_is_the_outlier() -> None:
    v = verify(_p(MODE_MAJORITY_VOTE, 3, 2), (Reveal(A, b"X", 0), Reveal(B, HTTP_500, 0), Reveal(C, HTTP_500, 0)))
    assert (v.ok, v.reason, v.error, v.outliers) == (False, "runner_error:http_status", HTTP_500, (A,))


def test_a_minority_error_cannot_force_failure_it_is_an_outlier() -> None:
    v = verify(_p(MODE_MAJORITY_VOTE, 3, 2), (Reveal(A, HTTP_500, 0), Reveal(B, b"X", 0), Reveal(C, b"X", 0)))
    assert (v.ok, v.result, v.matching, v.outliers, v.error) == (True, b"X", (B, C), (A,), None)


def test_errors_with_different_codes_do_not_agree() -> None:
    v = verify(_p(MODE_MAJORITY_VOTE, 3, 2), (Reveal(A, HTTP_500, 0), Reveal(B, TIMEOUT, 0), Reveal(C, b"X", 0)))
    assert (v.ok, v.reason, v.outliers, v.error) == (False, "below_threshold", (), None)  # re-selected, no blame


def test_structured_match_clusters_errors_by_code() -> None:
    checks = (Check(kind=2, fields=("p",)),)
    reveals = (Reveal(A, b'{"p": 1}', 0), Reveal(B, TIMEOUT, 0), Reveal(C, TIMEOUT, 0))
    v = verify(_p(MODE_STRUCTURED_MATCH, 3, 2, checks), reveals)
    assert (v.ok, v.reason, v.outliers) == (False, "runner_error:timeout", (A,))
    reveals = (Reveal(A, b'{"p": 1}', 0), Reveal(B, TIMEOUT, 0), Reveal(C, b'{"p": 1, "q": 2}', 0))
    v = verify(_p(MODE_STRUCTURED_MATCH, 3, 2, checks), reveals)
    assert (v.ok, v.matching, v.outliers) == (True, (A, C), (B,))


def test_deterministic_error_majority_fails_and_a_minority_error_is_an_outlier() -> None:
    v = verify(_p(MODE_DETERMINISTIC, 3, 2), (Reveal(A, HTTP_500, 0), Reveal(B, b"X", 0), Reveal(C, HTTP_500, 0)))
    assert (v.ok, v.reason, v.outliers) == (False, "runner_error:http_status", (B,))
    v = verify(_p(MODE_DETERMINISTIC, 3, 2), (Reveal(A, HTTP_500, 0), Reveal(B, b"X", 0), Reveal(C, b"X", 0)))
    assert (v.ok, v.matching, v.outliers) == (True, (B, C), (A,))


def test_malformed_envelope_is_rejected_and_penalised() -> None:
    bad = ERROR_RESULT_MAGIC + b"junk"
    v = verify(_p(MODE_NONE, 1, 1), (Reveal(A, bad, 0),))
    assert (v.ok, v.reason, v.outliers, v.error) == (False, "error_result_invalid", (A,), None)


# -- settlement on a chain -----------------------------------------------------------------------------------


def _sk(runner: bytes) -> bytes:
    return RUNNER_SKS[RUNNERS.index(runner)]


def _rep(net: Net, runner: bytes) -> int:
    rec = get_runner(net.chain.world(), runner)
    assert rec is not None
    return rec.reputation_x1e9


def test_single_runner_error_result_settles_failed_refunds_and_calls_back_without_penalty() -> None:
    net = _net()
    actor = derive_actor_address(ALICE, b"", CALLBACK_ACTOR)
    submit = net.tx(ALICE_SK, _request(actor))
    p = net.block([submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    escrow = net.job(job_id).escrow
    [runner] = net.job(job_id).committee
    alice_before = get_account(net.chain.world(), ALICE).balance
    runner_before = get_account(net.chain.world(), runner).balance
    p = net.block([net.tx(_sk(runner), JobResultSubmit(job_id, HTTP_500, b"", 0))])
    assert p.result.receipts[0].error_code is None, p.result.receipts[0]
    done = net.job(job_id)
    assert (done.status, done.reason, done.outcome) == (JobStatus.FAILED, "runner_error:http_status", HTTP_500)
    assert done.attempt == 0 and done.finished_at == p.block.header.height  # at once, never re-selected
    assert p.result.jobs_finished == [job_id]
    world = net.chain.world()
    assert get_account(world, JOB_DISPATCHER).balance == 0
    assert get_account(world, ALICE).balance == alice_before + escrow  # the whole escrow back
    fee = int(p.result.receipts[0].fee_paid)
    assert get_account(world, runner).balance == runner_before - fee  # not paid
    r = get_runner(world, runner)
    assert r is not None and r.reputation_x1e9 == START_REP and r.active_jobs == 0
    assert r.health.name == "HEALTHY"  # an honest error is not a no-show
    last = get_state(world, actor, b"last")
    assert last is not None
    cb = decode(last)
    assert isinstance(cb, dict)
    assert (cb[0], cb[1], cb[2], cb[3], cb[4]) == (job_id, False, HTTP_500, "runner_error:http_status", "c-1")


def test_an_error_costs_less_than_a_timeout() -> None:
    net = _net()
    submit = net.tx(ALICE_SK, _request(timeout_blocks=10))
    net.block([submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    first = net.job(job_id)
    [silent] = first.committee
    while net.chain.height <= first.deadline_block:
        net.block([])
    assert net.job(job_id).attempt == 1  # timed out and re-selected
    assert _rep(net, silent) == START_REP - 5 * 10**9  # the timeout penalty
    [erring] = net.job(job_id).committee
    net.block([net.tx(_sk(erring), JobResultSubmit(job_id, TIMEOUT, b"", 0))])
    assert _rep(net, erring) == START_REP and net.job(job_id).reason == "runner_error:timeout"


def _three_runner_job(net: Net) -> bytes:
    submit = net.tx(ALICE_SK, _request(verification={"mode": "majority_vote", "runners": 3, "threshold": 2},
                                       timeout_blocks=10))
    net.block([submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    while net.job(job_id).status == JobStatus.PENDING_SELECTION:
        net.block([])
    return job_id


def _commit_reveal(net: Net, job_id: bytes, results: dict[bytes, bytes]) -> None:
    net.block([net.tx(_sk(r), JobResultCommit(job_id, result_commitment(job_id, r, res, b"salt")))
               for r, res in results.items()])
    while net.chain.height < net.job(job_id).commit_end:
        net.block([])
    p = net.block([net.tx(_sk(r), JobResultSubmit(job_id, res, b"salt", 0)) for r, res in results.items()])
    assert all(x.error_code is None for x in p.result.receipts), [x.error_code for x in p.result.receipts]


def test_three_runners_majority_of_errors_fails_with_refund_and_the_result_runner_is_an_outlier() -> None:
    net = _net()
    job_id = _three_runner_job(net)
    committee = net.job(job_id).committee
    alice_before = get_account(net.chain.world(), ALICE).balance
    escrow = net.job(job_id).escrow
    lone, *erring = committee
    _commit_reveal(net, job_id, {lone: b'{"v": 1}', erring[0]: HTTP_500, erring[1]: HTTP_500})
    done = net.job(job_id)
    assert (done.status, done.reason, done.attempt) == (JobStatus.FAILED, "runner_error:http_status", 0)
    assert done.outcome == HTTP_500
    assert get_account(net.chain.world(), ALICE).balance == alice_before + escrow
    assert get_account(net.chain.world(), JOB_DISPATCHER).balance == 0
    assert [_rep(net, r) for r in erring] == [START_REP, START_REP]
    assert _rep(net, lone) == START_REP - 20 * 10**9  # outvoted


def test_three_runners_one_error_is_an_outlier_and_the_job_completes() -> None:
    net = _net()
    job_id = _three_runner_job(net)
    erring, *agreeing = net.job(job_id).committee
    _commit_reveal(net, job_id, {erring: HTTP_500, agreeing[0]: b"A", agreeing[1]: b"A"})
    done = net.job(job_id)
    assert (done.status, done.outcome) == (JobStatus.COMPLETED, b"A")
    assert _rep(net, erring) == START_REP - 20 * 10**9
    assert [_rep(net, r) for r in agreeing] == [START_REP + 10**9] * 2
